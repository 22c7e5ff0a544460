"""``spmd bench comm`` and ``spmd bench io``: collectives and reads measured, checked, tabled."""

from __future__ import annotations

from ..core.config import COMM_BACKENDS
from ..core.files import require_replaceable_paths


def cmd_bench_comm(args) -> int:
    from ..core.errors import ConfigError, VerificationError
    from ..core.files import write_json_atomic
    from ..core.runtime import Context
    from ..measure.comm import bench_comm, bench_links, format_links, format_tables, size_series

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
        ctx.bind_device(args.device)
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
