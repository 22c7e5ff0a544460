"""The command line's grammar: spmd's subcommands and their options (``spmd.cli`` runs them)."""

from __future__ import annotations

import argparse

from ..core.config import COMM_BACKENDS
from ..core.version import __version__

CAPTURE = {
    "type": int,
    "metavar": "STEPS",
    "help": "workload torch: after the timed repeats, STEPS more steps under torch.profiler on every rank, read "
    "kernel by kernel into the report (why each rank's step took what it took; the traces kept beside it); "
    "same as -o capture.steps=STEPS",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spmd", description="SPMD work on GPUs/CPUs under MPI, measured.")
    parser.add_argument("--version", action="version", version=f"spmd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_config(p):
        p.add_argument("config", help="YAML config (see docs/configs.md)")
        p.add_argument(
            "-o",
            "--override",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a config key, e.g. -o repeats=3 -o params.ddof=1 (repeatable)",
        )
        return p

    run = with_config(sub.add_parser("run", help="run a workload under mpiexec/srun and write report.json"))
    run.add_argument("--out", metavar="DIR", help="output folder (default: the config's output)")
    run.add_argument("-q", "--quiet", action="store_true", help="print nothing on success, no progress lines")
    run.add_argument(
        "--progress",
        action="store_true",
        help="a line on stderr after each repeat also when stderr is not a terminal (a batch job's "
        "log; on a terminal they are shown anyway)",
    )
    run.add_argument(
        "--trace",
        metavar="FILE.json",
        help="also write a Chrome trace of every phase of every repeat of every rank on one clock "
        "(open it in Perfetto or chrome://tracing)",
    )
    run.add_argument(
        "--nvtx",
        action="store_true",
        help="NVTX ranges for every repeat and phase, for Nsight Systems (on by itself under a profiler)",
    )
    run.add_argument("--capture", **CAPTURE)
    run.set_defaults(command_name="run")

    scale = with_config(
        sub.add_parser("scale", help="strong/weak scaling sweep in one launch: scaling.json, .md, .html and plots")
    )
    scale.add_argument(
        "--ranks", metavar="N,N,...", help="group sizes to run (default: 1, 2, 4, ... and the launch size)"
    )
    scale.add_argument(
        "--mode",
        choices=("strong", "weak", "both"),
        default="strong",
        help="strong: fixed global problem; weak: fixed problem per rank (default strong)",
    )
    scale.add_argument(
        "--batches",
        metavar="B,B,...",
        help="also a batch sweep (workloads with params.batch: torch, train): each per-GPU batch on 1 "
        "rank and on the most ranks, the batch x GPUs table and where more GPUs pay off",
    )
    scale.add_argument("--out", metavar="DIR", help="output folder (default: <config output>/scaling)")
    scale.add_argument(
        "--probe-max-bytes",
        type=_byte_size,
        default=16 << 20,
        metavar="SIZE",
        help="time the workload's collectives up to SIZE per rank for the comm model "
        "(default 16M; 0 = fit to the workload's own comm phases)",
    )
    scale.add_argument(
        "--compare-comm",
        choices=("all", "none"),
        default="all",
        help="on GPUs, also time the workload's own collectives on every backend that can run "
        "(nccl, mpi, mpi-cuda), so the findings name the fastest (default all)",
    )
    scale.add_argument(
        "--trace",
        metavar="DIR",
        help="a Chrome trace of each run of the sweep, DIR/<series>-<ranks>.json (Perfetto opens them)",
    )
    scale.add_argument(
        "--nvtx", action="store_true", help="NVTX ranges for every repeat and phase (on by itself under a profiler)"
    )
    scale.add_argument("-q", "--quiet", action="store_true", help="no progress lines or summary")
    scale.add_argument(
        "--progress",
        action="store_true",
        help="lines on stderr as each size starts and after each repeat also when stderr is not a "
        "terminal (on a terminal they are shown anyway)",
    )
    scale.add_argument("--capture", **CAPTURE)
    scale.set_defaults(command_name="scale")

    report = sub.add_parser("report", help="compare or re-render written reports (no MPI launch needed)")
    rsub = report.add_subparsers(dest="report_command", required=True)
    cmp = rsub.add_parser("compare", help="per size and phase change between two report.json/scaling.json")
    cmp.add_argument("old", help="the earlier report.json or scaling.json")
    cmp.add_argument("new", help="the later one, of the same kind")
    cmp.add_argument(
        "--fail-above", type=float, metavar="PCT", help="exit 1 when a phase got slower by more than PCT percent"
    )
    cmp.add_argument(
        "--min-seconds",
        type=float,
        default=1e-4,
        metavar="S",
        help="phases under S seconds in both reports never fail (noise; default 1e-4)",
    )
    cmp.set_defaults(command_name="report_compare")
    merge = rsub.add_parser(
        "merge",
        help="combine the report.json of separate jobs (one per node count) into "
        "one scaling report, as spmd scale writes it",
    )
    merge.add_argument("reports", nargs="+", metavar="REPORT", help="report.json files (or folders holding one)")
    merge.add_argument("--out", metavar="DIR", required=True, help="output folder")
    merge.add_argument("-q", "--quiet", action="store_true", help="no summary")
    merge.set_defaults(command_name="report_merge")
    render = rsub.add_parser(
        "render",
        help="rewrite scaling.md, scaling.html and the plots from scaling.json, or report.html from a report.json",
    )
    render.add_argument(
        "scaling",
        metavar="JSON",
        help="a scaling.json (spmd scale or spmd report merge wrote it) or a report.json (spmd run)",
    )
    render.add_argument("--out", metavar="DIR", help="output folder (default: the folder of JSON)")
    render.add_argument(
        "--reanalyse", action="store_true", help="recompute figures, model and advice from the stored runs first"
    )
    render.set_defaults(command_name="report_render")

    pred = sub.add_parser(
        "predict",
        help="a sweep's model on machines it did not run on: more GPUs, more nodes, other links (no MPI launch)",
    )
    pred.add_argument("scaling", metavar="SCALING_JSON", help="the scaling.json of a sweep (spmd scale wrote it)")
    pred.add_argument(
        "--target",
        action="append",
        metavar="TARGET",
        help="a machine: a YAML file or key=value,... (keys gpus_per_node, nodes, links, intra, inter, nics, name; "
        "docs/scaling.md); repeat for several",
    )
    pred.add_argument(
        "--measured",
        action="append",
        metavar="REPORT",
        help="a report.json (or a sweep's scaling.json) measured on the target: the prediction beside it, with "
        "its error (repeatable)",
    )
    pred.add_argument(
        "--out",
        metavar="DIR",
        help="where the report with its 'on other machines' goes (default: the folder of SCALING_JSON)",
    )
    pred.add_argument("-q", "--quiet", action="store_true", help="no table")
    pred.set_defaults(command_name="predict")

    bench = sub.add_parser("bench", help="benchmarks under mpiexec: bench comm, bench io")
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    comm = bsub.add_parser("comm", help="collectives over nccl / mpi / mpi-cuda, checked, in nccl-tests' units")
    comm.add_argument(
        "--op",
        choices=("allreduce", "allgather", "gather", "reduce_scatter", "bcast", "sendrecv"),
        default="allreduce",
        help="the collective to time (default allreduce)",
    )
    comm.add_argument(
        "--backend",
        choices=(*COMM_BACKENDS, "all", "auto"),
        default="auto",
        help="all: every backend that can run here, side by side (default auto)",
    )
    comm.add_argument(
        "--device",
        choices=("auto", "gpu", "cpu"),
        default="auto",
        help="where the buffers live: auto = a GPU per rank when there are enough (default auto)",
    )
    comm.add_argument(
        "--min-bytes",
        type=_byte_size,
        default=8,
        metavar="SIZE",
        help="smallest message per rank, e.g. 8, 4K, 1M (default 8)",
    )
    comm.add_argument(
        "--max-bytes", type=_byte_size, default=64 << 20, metavar="SIZE", help="largest message per rank (default 64M)"
    )
    comm.add_argument("--factor", type=int, default=2, help="each size is the last times this (default 2)")
    comm.add_argument(
        "--dtype",
        choices=("float32", "float64", "int32"),
        default="float32",
        help="element type of the messages (default float32)",
    )
    comm.add_argument("--iters", type=int, default=20, help="timed calls per size; the median is reported (default 20)")
    comm.add_argument("--warmup", type=int, default=5, help="untimed calls per size before them (default 5)")
    comm.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    comm.add_argument(
        "--links",
        action="store_true",
        help="measure the machine's links for spmd predict: the allreduce, the allgather and a ring shift "
        "(sendrecv) inside each node and over every rank (--json FILE is the target's `links`)",
    )
    comm.add_argument(
        "--read-bytes",
        type=_byte_size,
        default=256 << 20,
        metavar="SIZE",
        help="with --links: each rank's file for the node's host-read ceiling, read from the page cache alone and "
        "all at once (default 256M; 0: not measured)",
    )
    comm.set_defaults(command_name="bench_comm")
    bio = with_config(
        bsub.add_parser(
            "io", help="each rank's read of the config's input by every engine, against plain pread and copy limits"
        )
    )
    bio.add_argument("--rounds", type=int, default=5, help="timed rounds per way, after one untimed (default 5)")
    bio.add_argument(
        "--cold",
        action="store_true",
        help="drop the files' cached pages before each timed read (posix_fadvise; default: page cache)",
    )
    bio.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    bio.set_defaults(command_name="bench_io")

    topo = sub.add_parser("topo", help="GPUs of each node, their links, peer access, measured copy speeds")
    topo.add_argument(
        "--bytes", type=_byte_size, default=256 << 20, metavar="SIZE", help="bytes per bandwidth copy (default 256M)"
    )
    topo.add_argument(
        "--iters", type=int, default=10, help="timed copies per pair; the median is reported (default 10)"
    )
    topo.add_argument("--json", metavar="PATH", help="write the measurements as JSON")
    topo.add_argument("--png", metavar="PATH", help="write the P2P bandwidth heat map (rank 0's node)")
    topo.set_defaults(command_name="topo")

    info = sub.add_parser("info", help="versions, CUDA-aware MPI or not, rank -> host -> GPU map, SLURM")
    info.add_argument("--json", metavar="PATH", help="also write it as JSON")
    info.set_defaults(command_name="info")

    gen = with_config(sub.add_parser("generate", help="write the input files a config names"))
    gen.add_argument("--force", action="store_true", help="rewrite files spmd generated that are already up to date")
    gen.add_argument(
        "--skip-user-files",
        action="store_true",
        help="leave files spmd did not generate as they are (they are read as they are) instead of "
        "refusing them: a job script's generate step",
    )
    gen.set_defaults(command_name="generate")

    job = with_config(
        sub.add_parser(
            "jobscript", help="sbatch files of a strong/weak series across node counts, and submit.sh (no MPI)"
        )
    )
    job.add_argument("--nodes", required=True, metavar="N,N,...", help="node counts, e.g. 1,2,4")
    job.add_argument("--gpus-per-node", type=int, required=True, metavar="G", help="GPUs per node (0: a CPU series)")
    job.add_argument("--tasks-per-node", type=int, metavar="T", help="ranks per node (default: one per GPU)")
    job.add_argument(
        "--mode",
        choices=("strong", "weak", "both"),
        default="both",
        help="strong: the config's problem at every node count; weak: it grows with the nodes; both: the "
        "two series, whose run at the smallest node count is one job (default both)",
    )
    job.add_argument("--partition", help="#SBATCH --partition of every job (default: the cluster's)")
    job.add_argument("--account", help="#SBATCH --account of every job (default: none given)")
    job.add_argument("--time", default="00:30:00", help="each run's time limit (default 00:30:00)")
    job.add_argument(
        "--cpu-partition",
        metavar="PARTITION",
        help="#SBATCH --partition of the generate and merge jobs, which use one CPU and no GPU (default: --partition)",
    )
    job.add_argument(
        "--cpu-time", default="00:10:00", help="the generate and merge jobs' time limit (default 00:10:00)"
    )
    job.add_argument(
        "--mpi",
        default="auto",
        metavar="PLUGIN",
        help="srun's --mpi plugin (a name `srun --mpi=list` shows: pmix, pmi2, ...); auto: chosen when each job "
        "starts from what its srun offers and the MPI library the ranks load (Open MPI 5 speaks only PMIx; "
        "MPICH PMI-2), and said in its log (default auto)",
    )
    job.add_argument(
        "--spmd",
        metavar="COMMAND",
        help="how the jobs call spmd (default: this Python with -m spmd, so a virtual environment's "
        "spmd is the one the jobs run)",
    )
    job.add_argument(
        "--cpus-per-task",
        type=int,
        metavar="C",
        help="CPUs of each rank, for its reader threads and BLAS (default: a rank's share of a node's CPUs, as "
        "sinfo says, or the config's io.threads where smaller; the scripts say which)",
    )
    job.add_argument(
        "--prologue",
        action="append",
        default=[],
        metavar="FILE",
        help="shell lines every job runs first, e.g. module load ... (repeatable)",
    )
    job.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a variable every job exports, e.g. NCCL_DEBUG=WARN or OMP_NUM_THREADS=4 (repeatable)",
    )
    job.add_argument("--out", metavar="DIR", help="output folder (default: <config output>/jobs)")
    job.set_defaults(command_name="jobscript")

    srun_mpi = sub.add_parser(
        "srun-mpi",
        help="the srun --mpi plugin this node's srun and MPI library call for, and why (the job scripts of "
        "spmd jobscript run it; starts no MPI)",
    )
    srun_mpi.set_defaults(command_name="srun_mpi")
    return parser


def _byte_size(text: str) -> int:
    from ..core.units import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
