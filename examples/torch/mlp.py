"""Two MLPs in PyTorch, the sizes of the classic report of two GPUs behind a PCIe host bridge training slower than
one: 844-256-128-64-10 (258,122 parameters) and 4812-1024-1024-512-512-256-10 (6,899,466 parameters), ReLU
between layers.

spmd calls ``build(params)`` on every rank; ``params["options"]`` holds the config's ``params.options``.
"""

import torch

WIDTHS = {"medium": (844, 256, 128, 64, 10), "large": (4812, 1024, 1024, 512, 512, 256, 10)}


def build(params):
    widths = WIDTHS[params["options"].get("size", "medium")]
    layers = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)
