"""How a step computes, the same in the run and in verification's recomputations: the optimizer, autocast, the
precision, deterministic kernels for the checked steps, each micro-batch's random seed and its inputs' preparation.
"""

from __future__ import annotations

import contextlib
import warnings


def make_optimizer(torch, cfg, parameters, capturable: bool = False):
    """torch.optim's optimizer that ``params.optimizer`` names (capturable under a CUDA graph)."""
    if cfg.name == "sgd":
        return torch.optim.SGD(parameters, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    cls = torch.optim.Adam if cfg.name == "adam" else torch.optim.AdamW
    extra = {"capturable": True} if capturable else {}
    return cls(parameters, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay, **extra)


def micro_seed(seed: int, step: int, rank: int, micro: int) -> int:
    """The RNG seed of one micro-batch's forward (dropout's masks): the same in the run and the reference."""
    return ((seed * 1_000_003 + step) * 65_537 + rank * 257 + micro) % (2**63 - 1)


@contextlib.contextmanager
def deterministic(torch, gpu: bool):
    """On a GPU, PyTorch's deterministic kernels (cuDNN's, cuBLAS's fixed workspace, SDPA's math backend) for the
    checked steps, so run and reference compute a micro-batch's gradient bit for bit alike; a CPU's already are."""
    if not gpu:
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        with sdpa_kernel([SDPBackend.MATH]), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an op without a deterministic kernel: its noise is measured instead
            yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn


def autocast(torch, precision: str, gpu: bool):
    """bf16: autocast to bfloat16 around forward and loss; otherwise nothing."""
    if precision != "bf16":
        return contextlib.nullcontext()
    return torch.autocast("cuda" if gpu else "cpu", dtype=torch.bfloat16)


def set_precision(torch, precision: str) -> None:
    """TF32 in matmuls and convolutions only under precision tf32 (fp32 means fp32)."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def model_input(x, input_dtype, transform):
    """Floating inputs in the model's dtype (integer inputs, tokens, as they are), then the user's transform."""
    if x.is_floating_point() and x.dtype != input_dtype:
        x = x.to(input_dtype)
    return transform(x) if transform is not None else x


def state_tensors(module) -> list:
    """Parameters then buffers, in a fixed order."""
    return [*module.parameters(), *module.buffers()]
