"""spmd train at the per-GPU batch sizes of its table, 1 GPU against 2, 4, ... up to the launch size
(per-GPU batch fixed),
with the step captured in a CUDA graph and without; one JSON line per run on stdout.

    mpirun -n 2 python bench/programs/train_sweep.py [--steps 100] [--models medium,large] > train-spmd.jsonl
"""

import argparse
import json

from spmd.core.runtime import Context
from spmd.scale.sweep.run import run_scale
from spmd.workloads.registry import load_job_config

TABLE = {
    "medium": ("inputs/train.yaml", (16, 32, 64, 128, 1024)),
    "large": ("inputs/train-large.yaml", (8, 16, 32, 64, 512)),
}


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--models", default="medium,large")
    parser.add_argument("--variants", default="graph,eager,no-overlap")
    parser.add_argument("--ranks", default=None, help="GPU counts (default 1, 2, 4, ... up to the launch size)")
    parser.add_argument("--batches", default=None, help="only these batch sizes of the table, e.g. 512")
    return parser.parse_args()


def main(args):
    ctx = Context()
    ranks = (
        [int(n) for n in args.ranks.split(",")]
        if args.ranks
        else [1 << k for k in range(ctx.size.bit_length()) if 1 << k <= ctx.size]
    )
    # auto: a graph that cannot be captured falls back to eager steps (the line says "graph": false)
    variants = {
        "graph": ["params.graph=auto"],
        "eager": ["params.graph=false"],
        "graph-nophases": ["params.graph=auto", "params.phases=false"],
        "graph-tf32": ["params.graph=auto", "params.precision=tf32"],
        "graph-bf16": ["params.graph=auto", "params.precision=bf16"],
        "no-overlap": ["params.graph=auto", "params.overlap=false"],
        # the first layer's gradient in two row blocks of ~10 MiB, each reduced as soon as it is computed
        "graph-split": ["params.graph=auto", "params.split_gradients=true", "params.bucket_mb=10"],
        "graph-perbucket": ["params.graph=auto", "params.update_per_bucket=true"],
        # one rank: each layer's update on a second stream once backward is done with it; with inputs_first, layer
        # 0 (most of `large`'s parameters) is done first, so its update runs beside the other weight gradients
        "graph-inbackward": ["params.graph=auto", "params.update_in_backward=true"],
        "graph-inputs-first-inbackward": [
            "params.graph=auto",
            "params.backward_order=inputs_first",
            "params.update_in_backward=true",
        ],
        # every passed-down gradient first, then the weight gradients from layer 0 up: layer 0's 19.7 MB
        # (a bucket of its own at 20 MiB) reduced beside the other layers' weight gradients
        "graph-inputs-first": ["params.graph=auto", "params.backward_order=inputs_first", "params.bucket_mb=20"],
        "graph-inputs-first-perbucket": [
            "params.graph=auto",
            "params.backward_order=inputs_first",
            "params.bucket_mb=20",
            "params.update_per_bucket=true",
        ],
        # and layer 0's weight gradient in two row blocks, the first reduced while the second is computed
        "graph-inputs-first-split": [
            "params.graph=auto",
            "params.backward_order=inputs_first",
            "params.bucket_mb=10",
            "params.split_gradients=true",
        ],
        "graph-inputs-first-split-perbucket": [
            "params.graph=auto",
            "params.backward_order=inputs_first",
            "params.bucket_mb=10",
            "params.split_gradients=true",
            "params.update_per_bucket=true",
        ],
        "graph-perbucket-split": [
            "params.graph=auto",
            "params.update_per_bucket=true",
            "params.split_gradients=true",
            "params.bucket_mb=10",
        ],
    }
    for model in args.models.split(","):
        config, batches = TABLE[model]
        for batch in batches:
            if args.batches and str(batch) not in args.batches.split(","):
                continue
            for variant in args.variants.split(","):
                if variant == "no-overlap" and batch != batches[-1]:
                    continue  # overlap matters where the gradients are large next to the step
                overrides = [
                    f"params.batch={batch}",
                    f"params.steps={args.steps}",
                    "params.optimizer=sgd",
                    "params.lr=0.01",
                    "params.momentum=0.9",
                    "params.checkpoint=null",
                    "warmup=1",
                    "repeats=5",
                    *variants[variant],
                ]
                cfg = ctx.agree(load_job_config, config, overrides)
                scaling = run_scale(ctx, cfg, ranks, ["weak"], probe_max_bytes=0, progress=False)
                if ctx.rank == 0:
                    for run in scaling["runs"]:
                        r = run["report"]
                        print(
                            json.dumps(
                                {
                                    "model": model,
                                    "batch": batch,
                                    "variant": variant,
                                    "gpus": run["ranks"],
                                    **r["metrics"],
                                    "graph": r["result"]["graph"],
                                    "buckets": r["result"]["buckets"],
                                    "gradient_error": max(r["verification"]["gradient_relative_error"]),
                                    "loss": r["result"]["loss_per_window"][-1],
                                    "timeline_us": r["result"].get("step_timeline_us"),
                                    "l2_window": r["result"].get("l2_window"),
                                }
                            ),
                            flush=True,
                        )
    ctx.close()


if __name__ == "__main__":
    options = arguments()  # --help and bad options end here, before any rank waits in a collective
    try:
        main(options)
    except BaseException:  # never leave the other rank waiting in a collective
        import sys
        import traceback

        from mpi4py import MPI

        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
