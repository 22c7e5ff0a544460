"""``spmd bench comm`` and ``spmd bench io``: collectives and reads measured, checked, tabled."""

from __future__ import annotations

from ..core.config import COMM_BACKENDS
from ..core.files import require_replaceable_paths
from .arguments import byte_size, with_config


def add_parser(sub) -> None:
    """``spmd bench``'s subcommands and their flags."""
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
        type=byte_size,
        default=8,
        metavar="SIZE",
        help="smallest message per rank, e.g. 8, 4K, 1M (default 8)",
    )
    comm.add_argument(
        "--max-bytes", type=byte_size, default=64 << 20, metavar="SIZE", help="largest message per rank (default 64M)"
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
        "(sendrecv) inside each node and over every rank, and on CPUs what a node's ranks at once cost each "
        "other's compute (--json FILE is the target's `links`)",
    )
    comm.add_argument(
        "--read-bytes",
        type=byte_size,
        default=256 << 20,
        metavar="SIZE",
        help="with --links or --host-read: each rank's file for the node's host-read ceiling, read from the page "
        "cache alone and all at once (default 256M; 0: not measured)",
    )
    comm.add_argument(
        "--host-read",
        action="store_true",
        help="measure only the host's shared read ceiling, --read-bytes a rank (--json FILE is a target's `host_read` "
        "beside preset links); its ranks may share a GPU, so a one-GPU machine measures as many readers as a target "
        "puts on a host",
    )
    comm.set_defaults(handler=cmd_bench_comm)
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
    bio.set_defaults(handler=cmd_bench_io)


def cmd_bench_comm(args) -> int:
    from ..core.errors import ConfigError, VerificationError
    from ..core.files import write_json_atomic
    from ..core.runtime import Context
    from ..measure.comm import bench_comm, bench_links, format_links, format_tables, size_series
    from ..measure.io import bench_host_read, format_host_read_bench

    def check():
        if args.iters < 1 or args.warmup < 0:
            raise ConfigError("--iters must be >= 1 and --warmup >= 0")
        try:
            return size_series(args.min_bytes, args.max_bytes, args.factor)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    with Context(watchdog=True) as ctx:
        size_list = ctx.agree(check)
        ctx.agree(require_replaceable_paths, args.json, root_only=True)
        if args.host_read:  # the host's reads alone: no collective, so ranks may share a GPU
            ctx.agree(check_host_read, args)
            ctx.bind_device(args.device, allow_shared_gpu=True)
            result = bench_host_read(ctx, args.read_bytes)
            if ctx.rank == 0:
                print(format_host_read_bench(result), end="", flush=True)
            if args.json:
                ctx.agree(lambda: write_json_atomic(args.json, result), root_only=True)
            return 0
        # collectives need a GPU a rank; the host's reads do not
        ctx.bind_device(args.device, otherwise="measure the host's reads alone with spmd bench comm --host-read")
        if args.links:  # the links a prediction for this machine needs (spmd predict's target key links)
            if args.backend == "all":
                raise ctx.collective_error(ConfigError, 0, "--links measures one backend: name it or leave auto")
            result = bench_links(ctx, args.backend, size_list, args.dtype, args.iters, args.warmup, args.read_bytes)
            if ctx.rank == 0:
                print(format_links(result), end="", flush=True)
            if args.json:
                ctx.agree(lambda: write_json_atomic(args.json, result), root_only=True)
            if result["wrong"]:
                raise ctx.collective_error(VerificationError, 0, f"{result['wrong']} element(s) wrong in allreduce")
            return 0
        backends = list(COMM_BACKENDS) if args.backend == "all" else [args.backend]
        result = bench_comm(
            ctx, args.op, backends, size_list, args.dtype, args.iters, args.warmup, explicit=args.backend != "all"
        )
        result["nodes"] = ctx.layout()
        if ctx.rank == 0:
            print(format_tables(result), end="", flush=True)
        if args.json:
            ctx.agree(lambda: write_json_atomic(args.json, result), root_only=True)
        if result["wrong"]:
            raise ctx.collective_error(
                VerificationError, 0, f"{result['wrong']} element(s) wrong in {args.op} results (see #wrong)"
            )
    return 0


def check_host_read(args) -> None:
    """--host-read measures reads alone: not beside --links (whose file holds them already), not of 0 bytes."""
    from ..core.errors import ConfigError

    if args.links:
        raise ConfigError("--host-read: --links measures the host's reads too; name one of them")
    if args.read_bytes <= 0:
        raise ConfigError("--host-read: --read-bytes must be at least 1 byte a rank")


def cmd_bench_io(args) -> int:
    from ..core.errors import ConfigError
    from ..core.files import write_json_atomic
    from ..core.runtime import Context
    from ..io.hdf5 import expand_shards, plan_rank_input
    from ..measure.io import bench_io, format_io
    from ..workloads.registry import agree_on_config
    from ..workloads.rows import NUMBERS

    with Context(watchdog=True) as ctx:
        cfg = agree_on_config(ctx, args.config, args.override)
        if args.rounds < 1:
            raise ctx.collective_error(ConfigError, 0, f"--rounds: at least 1, got {args.rounds}")
        ctx.agree(require_replaceable_paths, args.json, root_only=True)
        ctx.bind_device(cfg.device, cfg.allow_shared_gpu)
        shards = ctx.agree(expand_shards, cfg.input.shards, root_only=True) if cfg.input.shards is not None else None
        plan = ctx.agree(plan_rank_input, cfg.input, shards, ctx.rank, ctx.size, NUMBERS, (1, 2))
        result = bench_io(ctx, plan, cfg.io, args.rounds, args.cold)
        if ctx.rank == 0:
            print(format_io(result), end="", flush=True)
        if args.json:
            ctx.agree(lambda: write_json_atomic(args.json, result), root_only=True)
    return 0
