"""Gradient buckets: planning them over the flat gradient buffer, and reducing them.

A bucket is a contiguous slice of the flat gradient buffer (model.Layout puts the layers in the
order backward computes their weight gradients, so backward fills the buffer front to back).
Layers are packed into a bucket until the next one would exceed the cap; a layer larger than
the cap is cut into cap-sized pieces, so every bucket respects the cap. A bucket is ready once
the last layer it touches in the buffer has its gradient: that is when its allreduce may start.

With ``split`` (params.split_gradients), a layer larger than the cap is cut at whole rows of its W instead, and
backward computes that layer's weight gradient one piece of rows at a time (``row_blocks``): each piece's
allreduce starts once its rows are done, while the next piece is computed. This is for the first layer, whose
gradient backward produces last (in its default order): unsplit, its allreduce can only follow backward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...core import faults
from ...core import xp as xpmod
from .layout import ALIGN, Layout


@dataclass(frozen=True)
class Bucket:
    """Elements [start, stop) of the flat gradient buffer, ready after piece ``part`` of the rows of layer
    ``ready_after`` (part 0: the whole layer, unless the layer is computed in row blocks)."""

    start: int
    stop: int
    ready_after: int
    part: int = 0

    @property
    def size(self) -> int:
        return self.stop - self.start


def plan_buckets(layout: Layout, cap_bytes: int, itemsize: int, split: bool = False) -> list[Bucket]:
    """Cut the flat buffer (padding included) into buckets of at most ``cap_bytes``
    (rounded down to whole 64-element blocks, at least one block); with ``split``, a layer larger than the cap
    is cut at whole rows (pieces of at most the cap where one row block fits in it)."""
    cap = max(ALIGN, cap_bytes // itemsize // ALIGN * ALIGN)
    order = sorted(layout.segments, key=lambda s: s.start)  # the order backward fills them
    ends = [s.start for s in order[1:]] + [layout.size]  # each segment with its padding
    buckets, start, ready = [], 0, (None, 0)
    for seg, end in zip(order, ends):
        if end - start > cap and seg.start > start:  # this layer does not fit: close the bucket
            buckets.append(Bucket(start, seg.start, *ready))
            start = seg.start
        if split and end - start > cap:  # pieces of whole rows, each computed and reduced on its own
            cuts = _row_cuts(seg, cap)
            for part, stop in enumerate(cuts):
                buckets.append(Bucket(start, stop, seg.layer, part))
                start = stop
            ready = (seg.layer, len(cuts))  # the last rows (and the biases) stay open
            continue
        while end - start > cap:  # a layer larger than the cap: cap-sized pieces
            buckets.append(Bucket(start, start + cap, seg.layer))
            start += cap
        ready = (seg.layer, 0)
    if start < layout.size:
        buckets.append(Bucket(start, layout.size, *ready))
    return buckets


def _row_cuts(seg, cap: int) -> list[int]:
    """Element offsets inside layer ``seg``'s W where its row pieces end, the last piece left out (it runs on
    to the end of the segment): pieces of as many whole rows as fit in ``cap``, a multiple of the rows that
    keep each cut on a 64-element boundary (NCCL and cuBLAS like aligned pointers)."""
    step = ALIGN // math.gcd(seg.pitch, ALIGN)  # rows per aligned boundary
    rows = max(step, cap // seg.pitch // step * step)
    return [seg.start + r * seg.pitch for r in range(rows, seg.fan_out, rows)]


def row_blocks(layout: Layout, buckets: list[Bucket]) -> dict[int, list[tuple[int, int]]]:
    """{layer: [(first row, stop row), ...]} of every layer whose W a ``plan_buckets(split=True)`` cut at rows
    (there, every bucket that ends inside a W ends at a row cut): backward computes that layer's weight gradient
    block by block, in this order, calling ``layer_done(layer, part)`` after block ``part``."""
    blocks: dict[int, list[tuple[int, int]]] = {}
    for seg in layout.segments:
        cuts = sorted(b.stop - seg.start for b in buckets if seg.start < b.stop < seg.weight_stop)
        if cuts:
            assert all(c % seg.pitch == 0 for c in cuts), "a split plan cuts W at whole rows"
            bounds = [0, *(c // seg.pitch for c in cuts), seg.fan_out]
            blocks[seg.layer] = list(zip(bounds, bounds[1:]))
    return blocks


class GradientExchange:
    """Sums each bucket of the gradient buffer over all ranks, in place.

    With ``overlap`` on a GPU (NCCL), a bucket's allreduce is queued on a high-priority
    communication stream as soon as backward has produced it, and the compute stream waits
    for all of them only before the optimizer. Without overlap (or with host-staged MPI on a
    GPU) every bucket is reduced after backward.
    """

    def __init__(self, comm, grads, buckets: list[Bucket], overlap: bool):
        self.comm = comm
        self.buckets = buckets
        self.views = [grads[b.start : b.stop] for b in buckets]
        self.by_layer: dict[tuple[int, int], list[int]] = {}
        for i, b in enumerate(buckets):
            self.by_layer.setdefault((b.ready_after, b.part), []).append(i)
        device = xpmod.is_device_array(grads)
        # Host-staged MPI synchronizes the device in every call: nothing could overlap, and inside
        # backward it would only stall it, so on a GPU only a communicator that queues its calls on
        # a stream (NCCL) reduces during backward. On the CPU the blocking calls run where they are
        # launched (their order is then tested there).
        self.overlap = overlap and (not device or comm.queues_on_stream)
        self.asynchronous = self.overlap and device
        if self.asynchronous:
            cupy = xpmod.cupy
            # High priority: NCCL's kernels need SMs while backward's GEMMs hold them (at normal priority
            # they wait for the GEMMs and nothing is hidden).
            self.stream = cupy.cuda.Stream(non_blocking=True, priority=-100)
            self._ready = [cupy.cuda.Event(disable_timing=True) for _ in buckets]
            self._done = [cupy.cuda.Event(disable_timing=True) for _ in buckets]

    def layer_done(self, layer: int, marks=None, part: int = 0) -> None:
        """Backward has produced layer ``layer``'s gradient (piece ``part`` of its rows, where it is computed in
        row blocks): start the buckets it completes."""
        if not self.overlap:
            return
        for i in self.by_layer.get((layer, part), ()):
            self._reduce(i, marks)

    def finish(self, marks=None, update=None) -> tuple[int, int] | None:
        """After backward: reduce what is left (everything without overlap), and make the
        current stream wait for every bucket. With ``update(bucket)`` (asynchronous only), the current stream
        runs it for each bucket but the last as soon as that bucket is reduced, while the next are; returns the
        last bucket's [start, stop), which the caller updates (None: nothing was updated here)."""
        if not self.overlap:
            for i in range(len(self.buckets)):
                self._reduce(i, marks)
        if not self.asynchronous:
            return None
        current = xpmod.cupy.cuda.get_current_stream()
        for i, done in enumerate(self._done):  # their allreduces run in this order on one stream
            current.wait_event(done)
            if update is not None and i < len(self._done) - 1:
                update(self.buckets[i])
        if update is None:
            return None
        return self.buckets[-1].start, self.buckets[-1].stop

    def _reduce(self, i: int, marks) -> None:
        view = self.views[i]
        faults.at("comm")
        if not self.asynchronous:
            if marks is not None:
                marks.comm_start(i)
            self.comm.allreduce(view, out=view)
            if marks is not None:
                marks.comm_end(i)
            return
        self._ready[i].record()
        self.stream.wait_event(self._ready[i])
        with self.stream:
            if marks is not None:
                marks.comm_start(i)
            self.comm.allreduce(view, out=view)
            if marks is not None:
                marks.comm_end(i)
            self._done[i].record(self.stream)
