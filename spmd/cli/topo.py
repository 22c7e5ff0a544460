"""``spmd topo``: each node's GPU links and copy speeds, a table and a heat map."""

from __future__ import annotations

import sys

from ..core.errors import one_line
from ..core.files import require_replaceable_paths
from .arguments import byte_size


def add_parser(sub) -> None:
    """``spmd topo``'s flags."""
    topo = sub.add_parser("topo", help="GPUs of each node, their links, peer access, measured copy speeds")
    topo.add_argument(
        "--bytes", type=byte_size, default=256 << 20, metavar="SIZE", help="bytes per bandwidth copy (default 256M)"
    )
    topo.add_argument(
        "--iters", type=int, default=10, help="timed copies per pair; the median is reported (default 10)"
    )
    topo.add_argument("--json", metavar="PATH", help="write the measurements as JSON")
    topo.add_argument("--png", metavar="PATH", help="write the P2P bandwidth heat map (rank 0's node)")
    topo.set_defaults(handler=cmd_topo)


def cmd_topo(args) -> int:
    from ..core.files import write_bytes_atomic, write_json_atomic
    from ..core.runtime import Context
    from ..measure.copies import format_topology, measure_topology
    from ..report.heatmap import heatmap_png
    from ..report.png import NO_MATPLOTLIB

    with Context(watchdog=True) as ctx:
        ctx.agree(require_replaceable_paths, args.json, args.png, root_only=True)
        # One rank per node measures its node (NVML and CUDA see all of the node's GPUs).
        mine = (ctx.host, measure_topology(args.bytes, args.iters)) if ctx.local_rank == 0 else None
        nodes = [n for n in ctx.comm.gather(mine, root=0) or [] if n]
        if ctx.rank == 0:
            print("\n".join(format_topology(host, topo) for host, topo in nodes), end="", flush=True)

        def write():
            if args.json:
                write_json_atomic(args.json, {"nodes": {host: topo for host, topo in nodes}})
            png = heatmap_png(*nodes[0]) if args.png else None
            if png:
                write_bytes_atomic(args.png, png)
            elif args.png:
                host, topo = nodes[0]
                why = f"{host} has no GPU (run it where the GPUs are)" if not topo["gpus"] else NO_MATPLOTLIB
                print(f"spmd: note: no heat map written to {one_line(args.png)}: {why}", file=sys.stderr, flush=True)

        ctx.agree(write, root_only=True)
    return 0
