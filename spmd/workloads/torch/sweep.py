"""What a sweep's torch runs share in one process (``TorchWorkload.sweep_session``): PyTorch imported, the GPU's
context made and the user's model built on every rank at once, the build reused by each run whose params agree on
what it read (``user_model.reused_builds``), and torch.distributed joined once, a group for each size
(``dist.sweep_groups``)."""

from __future__ import annotations

import contextlib

from . import dist
from .user_model import build_model, reused_builds


@contextlib.contextmanager
def session(ctx, cfg, sizes: list[int]):
    """Entered by every rank of the launch (``ctx``) at once. A cold GPT-2 124M start took about 20 s, 8-13 of them
    importing transformers: warmed here, a rank joining only a later size no longer loads alone while the others
    wait. Warming never fails the sweep (the first run meets a failure again and names it); the groups are joined
    only where every rank warmed."""
    gpu = ctx.planned_gpu(cfg.device)
    with reused_builds(ctx.local_size):
        warmed = False
        with contextlib.suppress(Exception):
            torch = dist.import_torch()
            if gpu is not None:
                torch.cuda.set_device(gpu)
                torch.zeros(1, device="cuda")
            build_model(torch, cfg.params)
            warmed = True
        if not all(ctx.comm.allgather(warmed)):
            yield
            return
        with dist.sweep_groups(ctx, gpu, cfg.timeout_s, sizes, graph=cfg.params.strategy == "ddp-graph"):
            yield
