"""Forward and backward of the MLP over preallocated buffers, for one micro-batch.

Layer l computes z = x W^T (GEMM) and, on hidden layers, x' = dropout(relu(z + b)) in place;
the last layer's bias goes into the fused softmax cross-entropy, which also writes the
gradient of the logits, already divided by the global batch: summing over micro-batches
(GEMMs with beta = 1) and over ranks (the allreduce) then gives the mean gradient, so no
separate averaging pass runs. Backward per layer: dW = dZ^T X, db = column sums of dZ,
dX = dZ W, then the ReLU/dropout mask in place (a kept unit is one whose output is > 0).
Without dropout the ops may fuse: bias + ReLU into the forward GEMM, db into the dW GEMM (lt.py).

A gradient is defined piece by piece: a unit whose pre-activation is within rounding of 0 can
be on in float32 and off in float64. One such unit of one sample moves layer 0's gradient of a
4096-sample batch by 5e-4 of its norm (the `large` model), past any fair float32 tolerance. So a
float64 reference of a float32 run takes the run's own sides of the kinks (``relu_sides``) and
differentiates the same piece in float64.
"""

from __future__ import annotations

import numpy as np

from ...core import xp as xpmod
from .ops import BF16, dropout_salt


class Network:
    """The buffers of one micro-batch of ``rows`` samples, and the passes over them.

    Attributes:
        x, y: the micro-batch (rows x inputs, rows as far apart as layer 0's W rows, and int32 labels).
        acts: each layer's output (after ReLU/dropout on hidden layers; logits without bias last).
        deltas: gradient w.r.t. each hidden layer's output, then of its pre-activation.
        dlogits: gradient of the loss w.r.t. the logits.
        arena: the one byte buffer acts, deltas and dlogits are views of (so one L2 window can cover them).
        row_blocks: {layer: [(first row, stop row), ...]}: layers whose weight gradient backward computes block
            by block (params.split_gradients), so each block's allreduce can start before the next is done.
        loss_sum, correct: per-row running sums of the loss and of right answers.
    """

    def __init__(self, layout, ops, rows: int, keep: float = 1.0, seed: int = 0, rank: int = 0):
        xp, dtype, storage = ops.xp, ops.dtype, ops.storage  # storage: the GEMMs' operand type (bf16: uint16)
        self.layout, self.ops, self.rows = layout, ops, rows
        self.keep, self.seed, self.rank = keep, seed, rank
        widths = layout.widths
        # rows as far apart as layer 0's W rows (model.row_elements): the GEMMs' operands start rows on 16 bytes
        self.x = xp.zeros((rows, layout.segments[0].pitch), storage)[:, : widths[0]]
        self.y = xp.zeros(rows, np.int32)
        # the logits stay in dtype: the softmax and the loss are computed at full precision
        shapes = [((rows, w), storage) for w in widths[1:-1]] + [((rows, widths[-1]), dtype)]  # acts
        shapes += [((rows, w), storage) for w in widths[1:-1]] + [((rows, widths[-1]), storage)]  # deltas, dlogits
        self.arena, views = _arena(xp, shapes)
        hidden = len(widths) - 2
        self.acts, self.deltas, self.dlogits = views[: hidden + 1], views[hidden + 1 : -1], views[-1]
        self.loss_sum = xp.zeros(rows, np.float64)
        self.correct = xp.zeros(rows, np.int32)
        self.row_blocks: dict[int, list[tuple[int, int]]] = {}  # layers whose dW is computed in row blocks

    def forward(self, w, counters, micro: int, scale: float) -> None:
        """Logits of ``self.x`` with parameters ``w``, the loss, and the logits' gradient."""
        ops, layout = self.ops, self.layout
        last = layout.layers - 1
        inp = self.x
        for layer in range(layout.layers):
            if layer < last and self.keep == 1:  # bias + ReLU in the GEMM's epilogue where the ops can
                ops.linear_relu(inp, layout.weight(w, layer), layout.bias(w, layer), self.acts[layer])
            else:
                ops.gemm(inp, layout.weight(w, layer), self.acts[layer], trans_b=True)
                if layer < last:
                    ops.act_forward(
                        self.acts[layer],
                        layout.bias(w, layer),
                        self.keep,
                        self.seed,
                        dropout_salt(layer, micro, self.rank),
                        counters,
                    )
            inp = self.acts[layer]
        ops.softmax_xent(
            self.acts[last], layout.bias(w, last), self.y, scale, self.dlogits, self.loss_sum, self.correct
        )

    def backward(self, w, g, accumulate: bool, layer_done=None, sides=None, params_done=None) -> None:
        """Gradients into ``g`` (added to it when ``accumulate``); ``layer_done(layer, part)`` is
        called as soon as each layer's gradient is complete, or each block of its rows where ``row_blocks``
        (buckets.row_blocks) cuts it. ``sides``: each hidden layer's units to treat as on (nonzero = on), in
        place of this pass's own outputs. ``params_done(layer)`` is called once the pass neither reads layer
        ``layer``'s parameters nor writes its gradient again: its update may start (params.update_in_backward).

        The order follows the layout (``layout.inputs_first``): layer by layer from the last (its weight
        gradient, then the gradient it passes down), or every passed-down gradient first and then the weight
        gradients from layer 0 up, so the first layer's (the largest, in a funnel-shaped MLP) is done earliest.
        The same GEMMs either way: only their order differs."""
        layout = self.layout
        done = params_done or (lambda layer: None)
        if not layout.inputs_first:
            for layer in reversed(range(layout.layers)):
                self._weight_gradient(layer, g, accumulate, layer_done)
                if layer > 0:
                    self._pass_down(layer, w, sides)  # the last read of this layer's W
                done(layer)
            return
        for layer in reversed(range(1, layout.layers)):
            self._pass_down(layer, w, sides)
        for layer in range(layout.layers):
            self._weight_gradient(layer, g, accumulate, layer_done)
            done(layer)

    def _delta(self, layer: int):
        """The loss's gradient w.r.t. layer ``layer``'s pre-activation (once backward has reached it)."""
        return self.dlogits if layer == self.layout.layers - 1 else self.deltas[layer]

    def _weight_gradient(self, layer: int, g, accumulate: bool, layer_done) -> None:
        layout, delta = self.layout, self._delta(layer)
        inp = self.x if layer == 0 else self.acts[layer - 1]
        dw, db = layout.weight(g, layer), layout.bias(g, layer)
        # rows [r0, r1) of dW and db come from columns [r0, r1) of delta alone
        for part, (r0, r1) in enumerate(self.row_blocks.get(layer, [(0, dw.shape[0])])):
            self.ops.weight_gradient(delta[:, r0:r1], inp, dw[r0:r1], db[r0:r1], accumulate)
            if layer_done is not None:
                layer_done(layer, part)

    def _pass_down(self, layer: int, w, sides) -> None:
        """The gradient w.r.t. layer ``layer - 1``'s pre-activation, from layer ``layer``'s."""
        below = self.deltas[layer - 1]
        self.ops.gemm(self._delta(layer), self.layout.weight(w, layer), below)
        on = self.acts[layer - 1] if sides is None else sides[layer - 1]
        self.ops.act_backward(below, on, self.keep)


ARENA_ALIGN = 256  # bytes: each array of the arena starts where cuBLAS and vector loads like it


def _arena(xp, shapes):
    """One zeroed byte buffer and a view of it for each (shape, dtype), each starting on ARENA_ALIGN bytes."""
    sizes = [-(-int(np.prod(shape)) * np.dtype(dtype).itemsize // ARENA_ALIGN) * ARENA_ALIGN for shape, dtype in shapes]
    arena = xp.zeros(sum(sizes), np.uint8)
    views, offset = [], 0
    for (shape, dtype), size in zip(shapes, sizes):
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        views.append(arena[offset : offset + nbytes].view(dtype).reshape(shape))
        offset += size
    return arena, views


def _forward_passes(layout, ops, w, batches, scale: float, step: int, keep: float, seed: int, rank: int):
    """One Network over host batches [(x, y), ...] at optimizer step ``step``: yields (micro, net)
    after each micro-batch's forward pass."""
    xp = ops.xp
    net = Network(layout, ops, batches[0][0].shape[0], keep, seed, rank)
    counters = xp.asarray(np.array([0, step], dtype=np.int64))
    for micro, (x, y) in enumerate(batches):
        net.x[...] = ops.stage(x)
        net.y[...] = xp.asarray(y, dtype=np.int32)
        net.forward(w, counters, micro, scale)
        yield micro, net


def local_gradient(
    layout, ops, w, batches, scale: float, step: int, keep: float = 1.0, seed: int = 0, rank: int = 0, sides=None
):
    """This rank's gradient (summed over its micro-batches, each scaled by ``scale``) for
    host batches [(x, y), ...] at optimizer step ``step``: the reference and the tests' entry.
    ``sides`` (``relu_sides`` of another run) makes the backward pass take that run's sides of
    the ReLU kinks.

    Returns:
        (gradient in the flat layout, loss summed over the rows, hidden units whose own side
        differs from ``sides``: 0 without them).
    """
    xp = ops.xp
    g = xp.zeros(layout.size, ops.dtype)
    differ = 0
    for micro, net in _forward_passes(layout, ops, w, batches, scale, step, keep, seed, rank):
        on = None
        if sides is not None:
            on = [xp.asarray(side, dtype=ops.dtype) for side in sides[micro]]
            differ += sum(int(((a > 0) != (side > 0)).sum()) for a, side in zip(net.acts[:-1], on))
        net.backward(w, g, accumulate=micro > 0, sides=on)
    return g, float(net.loss_sum.sum()), differ


def relu_sides(layout, ops, w, batches, step: int, keep: float = 1.0, seed: int = 0, rank: int = 0):
    """Which hidden units the forward pass of ``ops`` leaves on (output > 0), per micro-batch:
    [[host bool array per hidden layer], ...]. With the trainer's own ops and parameters this is
    the side of every ReLU kink that the run's rounding took (the same GEMMs, shapes, kernels)."""
    return [
        [xpmod.to_host(_positive(a)) for a in net.acts[:-1]]
        for _, net in _forward_passes(layout, ops, w, batches, 1.0, step, keep, seed, rank)
    ]


def _positive(a):
    """a > 0, for bfloat16 bit patterns too (sign bit clear, not zero)."""
    return (a != 0) & (a < 0x8000) if a.dtype == BF16 else a > 0
