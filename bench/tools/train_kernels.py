"""Which CUDA kernels one training step runs, spmd's and PyTorch's, and how long each takes: the step run
eagerly ``--steps`` times under torch.profiler (CUPTI sees CuPy's kernels too). A table per (side, model,
batch) on stdout.

    python -m bench.tools.train_kernels [--models medium] [--batches 16,32]
"""

from bench.usage import answer_help

answer_help(
    __doc__, "python -m bench.tools.train_kernels [--models medium] [--batches 16,32] (a GPU, CuPy, PyTorch)"
)  # before the libraries a machine may lack

import argparse

import cupy
import numpy as np
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from bench.programs.train_ddp import MODELS, mlp
from bench.tools.train_ops import build_step


def spmd_step(model, batch):
    _, named = build_step(model, batch, None, np.random.default_rng(0))

    def step():
        for _, fn in named:
            fn()

    return step


def torch_step(model, batch):
    widths = MODELS[model][0]
    net = mlp(widths).cuda()
    x = torch.randn(4096, widths[0], device="cuda")
    y = torch.randint(0, widths[-1], (4096,), device="cuda")
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    idx = torch.randint(0, 4096, (batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(net(x[idx]), y[idx]).backward()
        opt.step()

    return step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="medium")
    parser.add_argument("--batches", default="16,32")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    for model in args.models.split(","):
        for batch in map(int, args.batches.split(",")):
            for side, make in (("spmd", spmd_step), ("torch", torch_step)):
                step = make(model, batch)
                for _ in range(5):
                    step()
                torch.cuda.synchronize()
                cupy.cuda.Device().synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(args.steps):
                        step()
                    torch.cuda.synchronize()
                    cupy.cuda.Device().synchronize()
                print(f"\n## {side} {model} batch {batch}: kernels of {args.steps} eager steps")
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=90))


if __name__ == "__main__":
    main()
