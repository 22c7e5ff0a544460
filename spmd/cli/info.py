"""``spmd info``: the software, the MPI's CUDA-awareness, the launch's rank -> host -> GPU map, SLURM."""

from __future__ import annotations

import os
import platform

from ..core.version import __version__

# imported where used: parsing ``spmd report``'s arguments builds this command's parser too, and loads no MPI


def add_parser(sub) -> None:
    """``spmd info``'s flags."""
    info = sub.add_parser("info", help="versions, CUDA-aware MPI or not, rank -> host -> GPU map, SLURM")
    info.add_argument("--json", metavar="PATH", help="also write it as JSON")
    info.set_defaults(handler=cmd_info)


def versions() -> dict:
    """Versions of everything spmd runs on (None for what is absent)."""
    import h5py
    import mpi4py
    import numpy
    import yaml
    from mpi4py import MPI

    from ..comm.nccl import nccl_module
    from ..core import xp as xpmod
    from ..core.launch import mpi_library

    out = {
        "spmd": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "h5py": h5py.__version__,
        "hdf5": h5py.version.hdf5_version,
        "pyyaml": yaml.__version__,
        "mpi4py": mpi4py.__version__,
        "mpi_library": mpi_library(),
        "mpi_standard": "{}.{}".format(*MPI.Get_version()),
        "cupy": None,
        "cuda_runtime": None,
        "cuda_driver": None,
        "nccl": None,
        "nvidia_ml_py": None,
    }
    if xpmod.cupy is not None:
        out["cupy"] = xpmod.cupy.__version__
        try:
            out["cuda_runtime"] = _cuda_version(xpmod.cupy.cuda.runtime.runtimeGetVersion())
            out["cuda_driver"] = _cuda_version(xpmod.cupy.cuda.runtime.driverGetVersion())
        except Exception as exc:  # no driver: CuPy raises CUDARuntimeError
            out["cuda_driver"] = f"unavailable ({exc})"
        nccl = nccl_module()
        if nccl is not None:
            v = nccl.get_version()
            out["nccl"] = f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else str(v)
    try:
        from importlib.metadata import version

        out["nvidia_ml_py"] = version("nvidia-ml-py")
    except Exception:  # not installed
        pass
    return out


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


def rank_entry(ctx) -> dict:
    """This rank: host, node-local rank, and the GPU spmd would bind (node-local rank modulo GPUs)."""
    from ..core import xp as xpmod

    count = xpmod.gpu_count()
    entry = {
        "rank": ctx.rank,
        "host": ctx.host,
        "local_rank": ctx.local_rank,
        "gpu": None,
        "gpu_name": None,
        "pci_bus_id": None,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    if count:
        gpu = ctx.local_rank % count
        entry.update(gpu=gpu, gpu_name=xpmod.device_name(gpu), pci_bus_id=xpmod.device_pci_bus_id(gpu))
    return entry


def gather_info(ctx) -> dict | None:
    """Everything ``spmd info`` shows, on rank 0 (None elsewhere). Collective."""
    from ..comm.mpi_cuda import cuda_aware_mpi
    from ..core import xp as xpmod
    from ..core.launch import compare_views, slurm_environment, slurm_record

    ranks = ctx.comm.gather(rank_entry(ctx), root=0)
    if ctx.rank != 0:
        return None
    aware, how = cuda_aware_mpi()
    gpus = xpmod.gpu_count()
    slurm = slurm_record()
    nodes = len({r["host"] for r in ranks})
    return {
        "versions": versions(),
        "cuda_aware_mpi": aware,
        "cuda_aware_how": how,
        "gpus_visible": gpus,
        "ranks": ranks,
        "mpi_nodes": nodes,
        "slurm": slurm_environment(),
        "slurm_job": slurm,
        "warnings": compare_views(nodes, len(ranks), slurm),
    }


def format_info(info: dict) -> str:
    v = info["versions"]
    width = max(map(len, v))
    lines = ["spmd info", ""] + [f"  {k:<{width}}  {'-' if val is None else val}" for k, val in v.items()]
    lines += ["", f"CUDA-aware MPI: {'yes' if info['cuda_aware_mpi'] else 'no'} ({info['cuda_aware_how']})"]
    if info["gpus_visible"]:
        lines.append(f"GPUs visible to rank 0: {info['gpus_visible']}")
    else:
        why = "CuPy is not installed" if v["cupy"] is None else "CuPy sees no CUDA device"
        lines.append(f"GPUs: none visible ({why}); spmd runs on the CPU with NumPy")
    lines += [
        "",
        f"{'rank':>5}  {'host':<20} {'local':>5}  {'gpu':>3}  {'name':<20} {'pci bus id':<14} CUDA_VISIBLE_DEVICES",
    ]
    for r in info["ranks"]:
        gpu = "-" if r["gpu"] is None else str(r["gpu"])
        lines.append(
            f"{r['rank']:>5}  {r['host']:<20} {r['local_rank']:>5}  {gpu:>3}  {r['gpu_name'] or 'cpu':<20} "
            f"{r['pci_bus_id'] or '-':<14} {r['cuda_visible_devices'] or '-'}"
        )
    lines.append("")
    per_node: dict[str, int] = {}
    for r in info["ranks"]:
        per_node[r["host"]] = per_node.get(r["host"], 0) + 1
    lines.append(
        f"MPI view: {len(info['ranks'])} rank(s) on {info['mpi_nodes']} node(s): "
        + ", ".join(f"{h} x{n}" for h, n in per_node.items())
    )
    job = info.get("slurm_job")
    if job:
        lines.append(
            f"SLURM view: job {job['job_id']}"
            + (f" ({job['job_name']})" if job.get("job_name") else "")
            + f", partition {job.get('partition', '-')}, nodes {job.get('nodelist', '-')}"
            + f" ({job.get('nodes', '?')}), tasks {job.get('ntasks', '?')}"
            + f", tasks per node {job.get('tasks_per_node', '-')}, GPUs on node {job.get('gpus_on_node', '-')}"
        )
        lines += [f"  {k}={val}" for k, val in info["slurm"].items()]
    elif info["slurm"]:
        lines += ["SLURM:"] + [f"  {k}={val}" for k, val in info["slurm"].items()]
    else:
        lines.append("SLURM view: not inside a SLURM job")
    lines += [f"warning: {w}" for w in info.get("warnings", [])]
    return "\n".join(lines) + "\n"


def cmd_info(args) -> int:
    from ..core.files import require_replaceable_paths, write_json_atomic
    from ..core.runtime import Context

    with Context(watchdog=True) as ctx:
        ctx.agree(require_replaceable_paths, args.json, root_only=True)
        info = gather_info(ctx)
        if ctx.rank == 0:
            print(format_info(info), end="", flush=True)
        if args.json:
            ctx.agree(lambda: write_json_atomic(args.json, info), root_only=True)
    return 0
