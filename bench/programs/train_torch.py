"""PyTorch at every batch of the train table, in its standard setups, for spmd to be compared with the strongest
of them: eager; the whole step (batch gather, forward, loss, backward, SGD update) captured in
one CUDA graph as PyTorch's documentation shows ("whole network capture"); torch.compile of the model (default
mode); and torch.compile with mode="reduce-overhead" (its own CUDA graphs); the graphed step again with TF32
GEMMs and under autocast to bfloat16 (against spmd's ``params.precision``: tf32, bf16).

Launched on N > 1 ranks (mpirun, one GPU each), every setup wraps the model in DistributedDataParallel (25 MB
buckets, as bench/train_ddp.py), the per-GPU batch fixed: for the graphed step as PyTorch's CUDA-graph notes ask,
DDP is built on a side stream and runs 11 eager steps before the capture, which then holds the gradient
all-reduces too; torch.compile compiles the DDP model (dynamo splits it at the buckets).

Same MLPs, batch, SGD with momentum 0.9 and data resident on the GPU as bench/train_ddp.py. One JSON line per
(model, batch, variant): the median of ``--runs`` timed runs of ``--steps`` steps (each after 20 warm-up steps,
on one compiled or captured setup), with every run's samples/s; a
setup that fails on this machine is a line with its error instead.

    python bench/programs/train_torch.py [--steps 200] [--runs 3] > train-torch.jsonl
    mpirun -n 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29515 \
        python bench/programs/train_torch.py --variants torch-graph
"""

import argparse
import contextlib
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist
from torch import nn
from train_ddp import MODELS, mlp, timed


def setup(widths, batch, steps, device, ddp=False, rows=16384):
    torch.manual_seed(0)
    model = mlp(widths).to(device)
    if ddp:  # built on a side stream: its buffers then belong to no stream a CUDA graph capture would see
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index], bucket_cap_mb=25)
        torch.cuda.current_stream().wait_stream(side)
    x = torch.randn(rows, widths[0], device=device)
    y = torch.randint(0, widths[-1], (rows,), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    idx = torch.randint(0, rows, (steps + 20, batch), device=device)
    return model, x, y, opt, idx


def eager_step(model, x, y, opt, loss_fn, amp=contextlib.nullcontext):
    def step(i_batch):
        opt.zero_grad(set_to_none=True)
        with amp():
            loss = loss_fn(model(x[i_batch]), y[i_batch])
        loss.backward()
        opt.step()

    return step


def graphed_step(model, x, y, opt, loss_fn, idx, amp=contextlib.nullcontext):
    """The whole step in one CUDA graph: warm-up on a side stream (11 steps: DDP asks for at least 11 before a
    capture), then capture with a static index tensor (the batch gather is in the graph, as spmd's is); each
    step copies its indices in and replays."""
    static_idx = idx[0].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(11):
            opt.zero_grad(set_to_none=True)
            with amp():
                loss = loss_fn(model(x[idx[i]]), y[idx[i]])
            loss.backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        with amp():
            loss = loss_fn(model(x[static_idx]), y[static_idx])
        loss.backward()
        opt.step()

    def step(i_batch):
        static_idx.copy_(i_batch)
        graph.replay()

    return step


def variant_step(variant, widths, batch, steps, device, ddp=False):
    """The step of ``variant``; a "-tf32" suffix lets cuBLAS use TF32 tensor cores for float32 GEMMs, "-bf16"
    runs forward and loss under autocast to bfloat16 (PyTorch's mixed precision; its cache off, as CUDA graph
    capture requires)."""
    torch.backends.cuda.matmul.allow_tf32 = variant.endswith("-tf32")
    amp = contextlib.nullcontext
    if variant.endswith("-bf16"):

        def amp():
            return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)

    variant = variant.removesuffix("-tf32").removesuffix("-bf16")
    model, x, y, opt, idx = setup(widths, batch, steps, device, ddp)
    loss_fn = nn.CrossEntropyLoss()
    torch._dynamo.reset()  # each compiled setup starts afresh, never from the recompile limit of earlier ones
    if variant == "torch-eager":
        return eager_step(model, x, y, opt, loss_fn, amp), idx
    if variant == "torch-graph":
        return graphed_step(model, x, y, opt, loss_fn, idx, amp), idx
    if variant == "torch-compile":
        return eager_step(torch.compile(model), x, y, opt, loss_fn), idx
    if variant == "torch-compile-graphs":
        return eager_step(torch.compile(model, mode="reduce-overhead"), x, y, opt, loss_fn), idx
    raise ValueError(variant)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--variants",
        default="torch-eager,torch-graph,torch-compile,torch-compile-graphs,torch-graph-tf32,torch-graph-bf16",
    )
    parser.add_argument("--models", default=",".join(MODELS), help="models of the table (default all)")
    parser.add_argument("--batches", default=None, help="only these batch sizes, e.g. 16,512 (default all)")
    args = parser.parse_args()
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", 0)))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", 1)))
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", rank))
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    if size > 1:
        dist.init_process_group("nccl", rank=rank, world_size=size, device_id=device)
    for name, (widths, batches) in MODELS.items():
        if name not in args.models.split(","):
            continue
        for batch in batches:
            if args.batches and str(batch) not in args.batches.split(","):
                continue
            for variant in args.variants.split(","):
                line = {
                    "model": name,
                    "batch": batch,
                    "gpus": size,
                    "variant": variant,
                    "torch": torch.__version__,
                    **({"ddp": True} if size > 1 else {}),
                }
                try:
                    # built once (compiled, captured), then timed --runs times, each after its own warm-up
                    step, idx = variant_step(variant, widths, batch, args.steps, device, ddp=size > 1)
                    seconds = [timed(step, idx, args.steps) for _ in range(args.runs)]
                    t = statistics.median(seconds)
                    # samples/s of all GPUs together (each takes its own batch), as spmd reports it
                    line.update(
                        samples_per_s=batch * size * args.steps / t,
                        step_ms=t / args.steps * 1e3,
                        runs_samples_per_s=[batch * size * args.steps / s for s in seconds],
                    )
                except Exception as exc:  # a setup this machine cannot run: said, not hidden
                    line.update(error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                if rank == 0:
                    print(json.dumps(line), flush=True)
    if size > 1:
        # every line is out; a process group that captured collectives in CUDA graphs can hang in its teardown
        # (it did on 2 H200s, until the launch's time limit), so leave without it
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
