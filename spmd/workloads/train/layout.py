"""The MLP's shape and where its parameters live.

All parameters of one model sit in one flat buffer, layer after layer in the order backward
produces their gradients (last layer first; first layer first with ``inputs_first``, where backward computes
every passed-down gradient before the weight gradients), each layer as ``W`` (out x in, row-major) then
``b`` (out). The gradients have the same layout in a second buffer, so a gradient bucket is a
slice of it (a view, never a copy). Each layer's segment starts on a 64-element boundary
(256 B in float32): NCCL and cuBLAS like aligned pointers, and the padding stays zero.

Each row of a ``W`` starts on ``ROW_BYTES`` in the GEMMs' operand type (``row_elements``): tensor-core GEMMs
want every row of an operand on 16 bytes. A bfloat16 row of 844 or 4812 values is not (their float32 rows
are), and misaligned rows make the bf16 GEMMs far slower (the train suite's GEMM case measures both). The gap
after a row is padding too: zero in the
parameters, their gradients and the optimizer's state, so every update leaves it zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.errors import ConfigError

PRESETS: dict[str, tuple[int, ...]] = {
    "medium": (844, 256, 128, 64, 10),  # 258,122 parameters
    "large": (4812, 1024, 1024, 512, 512, 256, 10),  # 6,899,466 parameters
}
ALIGN = 64  # elements
ROW_BYTES = 16  # where each row of a GEMM operand starts (the first layer's inputs and every W)


def _aligned(n: int) -> int:
    """``n`` rounded up to a whole ALIGN elements."""
    return -(-n // ALIGN) * ALIGN


def row_elements(width: int, itemsize: int) -> int:
    """Elements from one row to the next of a row of ``width`` elements of ``itemsize`` bytes: ``width``
    rounded up to a whole number of ROW_BYTES."""
    per = max(1, ROW_BYTES // itemsize)
    return -(-width // per) * per


def model_widths(model) -> tuple[int, ...]:
    """Layer widths (input, hidden..., classes) of a preset name or an explicit list."""
    if isinstance(model, str):
        if model not in PRESETS:
            raise ConfigError(
                f"params.model: unknown preset {model!r} (one of {', '.join(PRESETS)}, or a list of layer widths)"
            )
        return PRESETS[model]
    widths = tuple(model)
    if len(widths) < 2 or any(int(w) != w or w < 1 for w in widths):
        raise ConfigError(f"params.model: a list of at least 2 positive widths (input ... classes), got {list(widths)}")
    if widths[-1] < 2:
        raise ConfigError("params.model: the last width is the number of classes; it must be at least 2")
    return tuple(int(w) for w in widths)


@dataclass(frozen=True)
class Segment:
    """Where layer ``layer`` (0 = first in forward order) lives in the flat buffer."""

    layer: int
    fan_in: int
    fan_out: int
    start: int  # first element of W
    pitch: int  # elements from one row of W to the next (fan_in and the row's padding)

    @property
    def weight_stop(self) -> int:
        return self.start + self.pitch * self.fan_out

    @property
    def stop(self) -> int:  # one past the bias
        return self.weight_stop + self.fan_out


class Layout:
    """Offsets of every layer's W and b in the flat parameter (and gradient) buffer.

    Attributes:
        widths: input, hidden..., classes.
        segments: one per layer, in forward order (``segments[0]`` is the first layer).
        size: elements of the flat buffer, padding included.
        parameters: real parameters (no padding).
        inputs_first: backward's order (params.backward_order: inputs_first): weight gradients from layer 0 up,
            so the buffer holds layer 0 first; else the last layer first.
        operand_itemsize: bytes of the GEMMs' operand type (2 under precision bf16), which sets each W row's
            pitch (``row_elements``); None lays the rows out back to back.
    """

    def __init__(self, widths: tuple[int, ...], inputs_first: bool = False, operand_itemsize: int | None = None):
        self.widths = tuple(widths)
        self.inputs_first = inputs_first
        layers = len(widths) - 1
        segments = [None] * layers
        offset = 0
        for layer in range(layers) if inputs_first else reversed(range(layers)):  # the order backward fills them
            pitch = row_elements(widths[layer], operand_itemsize) if operand_itemsize else widths[layer]
            seg = Segment(layer, widths[layer], widths[layer + 1], offset, pitch)
            segments[layer] = seg
            offset = _aligned(seg.stop)
        self.segments: list[Segment] = segments
        self.size = offset
        self.parameters = sum(s.fan_out * (s.fan_in + 1) for s in segments)

    @property
    def layers(self) -> int:
        return len(self.segments)

    def weight(self, flat, layer: int):
        """View of layer ``layer``'s W (fan_out x fan_in, rows ``pitch`` elements apart) in ``flat``."""
        s = self.segments[layer]
        return flat[s.start : s.weight_stop].reshape(s.fan_out, s.pitch)[:, : s.fan_in]

    def bias(self, flat, layer: int):
        """View of layer ``layer``'s b (fan_out) in ``flat``."""
        s = self.segments[layer]
        return flat[s.weight_stop : s.stop]

    def initial(self, seed: int, dtype) -> np.ndarray:
        """Host parameters as PyTorch's nn.Linear draws them: U(-1/sqrt(in), 1/sqrt(in))."""
        flat = np.zeros(self.size, dtype=dtype)
        rng = np.random.default_rng([seed, 0x4D4C50])
        for s in self.segments:  # forward order, so the draw does not depend on the layout
            bound = 1.0 / np.sqrt(s.fan_in)
            self.weight(flat, s.layer)[...] = rng.uniform(-bound, bound, (s.fan_out, s.fan_in))
            self.bias(flat, s.layer)[...] = rng.uniform(-bound, bound, s.fan_out)
        return flat

    def span(self, layer: int) -> tuple[int, int]:
        """[start, stop) of layer ``layer``'s parameters and the padding after them (to the next 64-element
        boundary): an elementwise pass over it (an optimizer's) sees whole aligned blocks, the padding zero."""
        s = self.segments[layer]
        return s.start, _aligned(s.stop)

    def parts(self, flat) -> list:
        """Views of the real parameters of ``flat``, without padding: each layer's W (2-D) then b, layer 0 first."""
        return [part for layer in range(self.layers) for part in (self.weight(flat, layer), self.bias(flat, layer))]

    def real(self, flat) -> list:
        """``parts`` flattened, for reading (a padded W's rows come as a copy)."""
        return [part.ravel() for part in self.parts(flat)]

    def describe(self) -> str:
        return "-".join(map(str, self.widths))


def held_out_sums(xp, layout, w, x, y) -> tuple[float, float]:
    """Summed cross-entropy loss and correct predictions of the MLP with flat parameters ``w`` on rows ``x``
    (labels ``y``), in float64 logits, plain array code, 4096 rows at a time."""
    loss = correct = 0.0
    for start in range(0, len(x), 4096):
        h = xp.asarray(x[start : start + 4096])
        labels = xp.asarray(y[start : start + 4096])
        for layer in range(layout.layers):
            h = h @ layout.weight(w, layer).T + layout.bias(w, layer)
            if layer < layout.layers - 1:
                h = xp.maximum(h, 0)
        h = h.astype(xp.float64)
        top = h.max(axis=1, keepdims=True)
        logsum = xp.log(xp.exp(h - top).sum(axis=1)) + top[:, 0]
        loss += float((logsum - h[xp.arange(len(labels)), labels]).sum())
        correct += float((h.argmax(axis=1) == labels).sum())
    return loss, correct
