"""Where one DDP step's time goes, from marks taken while it runs.

Marks of a step with k micro-batches: ``s`` (start), ``d{j}`` (batch j on the device), ``a{j}`` (DDP's forward
called), ``m{j}`` (the user's module's forward begins, once DDP has broadcast the buffers), ``f{j}`` (its forward and
loss), ``b{j}`` (its backward returned) and ``o`` (after the optimizer). For each gradient bucket there are two more.
``comm_start`` is the moment DDP handed it to the allreduce, on the compute stream, once every gradient in it was
computed; ``comm_end`` is the moment the allreduce ended, on the stream the result lands on. CUDA events on a GPU
(resolved after the window), perf_counter on a CPU; on a GPU each mark's perf_counter too (``host_phases``).

Phases:
data = sum(d_j - start of j); comm_buffers = sum(m_j - a_j), DDP's broadcast of rank 0's buffers before each
forward (BatchNorm's statistics), where a rank that arrives early waits for the last (0 where no ``m`` mark was
taken, as in a compiled forward); comm_syncbn = the SyncBatchNorm layers' forwards, each gathering every rank's
batch statistics (there a rank that arrives early waits for the last: marked around each layer, present only in a
model that has them); forward = sum(f_j - d_j) - comm_buffers - comm_syncbn; the last backward's compute ends at the
last bucket's start, and what follows until ``b{k-1}`` is comm_exposed; comm_overlapped = the union of the
allreduces' intervals minus comm_exposed; backward = the rest of sum(b_j - f_j); optimizer = o - b{k-1};
step = o - s.

On a GPU a phase's span is the device's: its kernels, or where the device ran out of queued work, the host issuing
them. ``host_phases`` are the host's own seconds in data, forward (with the buffers' broadcast, without the
SyncBatchNorm layers', whose host reads the gathered counts back and so waits there for the last rank), backward
(with the exposed allreduce) and optimizer: a rank whose device span is long while its host took no longer than the
others' was fed late, not slower (breakdown's own excess). SyncBatchNorm's backward allreduce stays inside backward.
"""

from __future__ import annotations

import time

from ...core.spans import length, union

PHASES = (
    "data",
    "comm_buffers",
    "comm_syncbn",
    "forward",
    "backward",
    "comm_exposed",
    "comm_overlapped",
    "optimizer",
    "step",
)


class StepMarks:
    """The marks of one step (reused window after window)."""

    def __init__(self, torch, gpu: bool, micro: int, syncbn: bool = False):
        self.torch, self.gpu, self.micro = torch, gpu, micro
        self.syncbn = syncbn  # the model has SyncBatchNorm layers, marked around their forwards
        self.events: dict[str, object] = {}  # mark name -> CUDA event
        self.bucket_events: dict[str, object] = {}
        self.t: dict[str, float] = {}
        self.spans: dict[int, list] = {}  # bucket index -> [start, end] (events or seconds)
        self.layers: list[list] = []  # each SyncBatchNorm forward: [start, end] (events or seconds)
        self.layers_host: list[list[float]] = []  # the same, the host's perf_counter

    def _event(self, name: str, pool: dict | None = None):
        pool = self.events if pool is None else pool
        event = pool.get(name)
        if event is None:
            event = pool[name] = self.torch.cuda.Event(enable_timing=True)
        return event

    def mark(self, name: str) -> None:
        if self.gpu:
            self._event(name).record()
        self.t[name] = time.perf_counter()

    def comm_start(self, bucket: int) -> None:
        if self.gpu:
            event = self._event(f"c{bucket}", self.bucket_events)
            event.record()
            self.spans[bucket] = [event, None]
        else:
            self.spans[bucket] = [time.perf_counter(), None]

    def comm_end(self, bucket: int) -> None:
        """Called in the allreduce's completion callback (on a GPU: with the result's stream current)."""
        if self.gpu:
            event = self._event(f"e{bucket}", self.bucket_events)
            event.record()
            self.spans[bucket][1] = event
        else:
            self.spans[bucket][1] = time.perf_counter()

    def syncbn_begins(self) -> None:
        """A SyncBatchNorm layer's forward begins (its forward pre-hook)."""
        k = len(self.layers)
        start = self._event(f"y{k}", self.bucket_events) if self.gpu else None
        if start is not None:
            start.record()
        now = time.perf_counter()
        self.layers.append([start if start is not None else now, None])
        self.layers_host.append([now, now])

    def syncbn_ends(self) -> None:
        """The layer's forward returned (its forward hook)."""
        if not self.layers or self.layers[-1][1] is not None:
            return
        k = len(self.layers) - 1
        end = self._event(f"z{k}", self.bucket_events) if self.gpu else None
        if end is not None:
            end.record()
        now = time.perf_counter()
        self.layers[-1][1] = end if end is not None else now
        self.layers_host[-1][1] = now

    def reset(self) -> None:
        self.spans = {}
        self.layers, self.layers_host = [], []

    def _times(self) -> tuple[dict[str, float], list[tuple[float, float]]]:
        """Marks and bucket spans in seconds from ``s`` (the device synchronized by the caller)."""
        marks = self._relative(self.events.items() if self.gpu else self.t.items())
        return marks, sorted(self._spans(self.spans.values()))

    def _relative(self, pairs) -> dict[str, float]:
        if self.gpu:
            start = self.events["s"]
            return {name: start.elapsed_time(e) / 1e3 for name, e in pairs}
        return {name: v - self.t["s"] for name, v in pairs}

    def _spans(self, pairs) -> list[tuple[float, float]]:
        """[start, end] pairs (events or seconds) as seconds from ``s``, those not ended left out."""
        ended = [(a, b) for a, b in pairs if b is not None]
        if self.gpu:
            start = self.events["s"]
            return [(start.elapsed_time(a) / 1e3, start.elapsed_time(b) / 1e3) for a, b in ended]
        return [(a - self.t["s"], b - self.t["s"]) for a, b in ended]

    def _layers(self) -> float:
        """Seconds in the SyncBatchNorm layers' forwards (the device's, on a GPU)."""
        return sum(b - a for a, b in self._spans(self.layers))

    def phases(self) -> dict[str, float]:
        marks, spans = self._times()
        k = self.micro
        data = forward = backward = buffers = 0.0
        for j in range(k):
            begin = marks["s"] if j == 0 else marks[f"b{j - 1}"]
            data += marks[f"d{j}"] - begin
            forward += marks[f"f{j}"] - marks[f"d{j}"]
            backward += marks[f"b{j}"] - marks[f"f{j}"]
            buffers += _broadcast(marks, j)
        exposed = 0.0
        if spans:
            compute_done = max(a for a, _ in spans)
            exposed = max(0.0, marks[f"b{k - 1}"] - max(compute_done, marks[f"f{k - 1}"]))
        overlapped = length(union(spans))  # allreduces queued behind each other count once
        layers = self._layers() if self.syncbn else 0.0
        out = {
            "data": data,
            "comm_buffers": buffers,
            "forward": max(0.0, forward - buffers - layers),
            "backward": max(0.0, backward - exposed),
            "comm_exposed": exposed,
            "comm_overlapped": max(0.0, overlapped - exposed),
            "optimizer": marks["o"] - marks[f"b{k - 1}"],
            "step": marks["o"],
        }
        if self.syncbn:
            out["comm_syncbn"] = layers
        return out

    def host_phases(self) -> dict[str, float]:
        """The host's seconds in each phase of the step (on a CPU the same as ``phases``' own parts)."""
        s, k = self.t["s"], self.micro
        data = forward = backward = 0.0
        for j in range(k):
            begin = s if j == 0 else self.t[f"b{j - 1}"]
            data += self.t[f"d{j}"] - begin
            forward += self.t[f"f{j}"] - self.t[f"d{j}"]
            backward += self.t[f"b{j}"] - self.t[f"f{j}"]
        if self.syncbn:  # the layers' host waits for the gathered counts: not its own work
            forward -= sum(b - a for a, b in self.layers_host)
        return {"data": data, "forward": forward, "backward": backward, "optimizer": self.t["o"] - self.t[f"b{k - 1}"]}

    def drawn(self) -> list[tuple[str, str, float, float]]:
        """The step's phases and its buckets' allreduces as (name, track, start, end), seconds from ``s``."""
        marks, buckets = self._times()
        compute = "gpu" if self.gpu else "host"
        out = []
        for j in range(self.micro):
            begin = marks["s"] if j == 0 else marks[f"b{j - 1}"]
            out += [
                ("data", compute, begin, marks[f"d{j}"]),
                ("forward", compute, marks[f"d{j}"], marks[f"f{j}"]),
                ("backward", compute, marks[f"f{j}"], marks[f"b{j}"]),
            ]
            if _broadcast(marks, j) > 0:
                out.append(
                    ("buffers broadcast", "gpu comm stream" if self.gpu else "comm", marks[f"a{j}"], marks[f"m{j}"])
                )
        out += [("allreduce", "gpu comm stream" if self.gpu else "comm", a, b) for a, b in buckets]
        out += [("SyncBatchNorm gather", compute, a, b) for a, b in (self._spans(self.layers) if self.syncbn else [])]
        out.append(("optimizer", compute, marks[f"b{self.micro - 1}"], marks["o"]))
        return out

    def start_handle(self):
        """The raw CUDA event of mark ``s`` (GPU; None where PyTorch does not expose it), for placing the step on
        the repeat's timeline."""
        return getattr(self.events["s"], "cuda_event", None)

    def phases_graph(self) -> float:
        """A replayed graph's step: ``o - s``."""
        marks, _ = self._times()
        return marks["o"]

    def timeline(self) -> dict:
        """This step's marks and allreduce spans in microseconds from its start (report.json)."""
        marks, spans = self._times()
        return {
            "marks": {name: round(v * 1e6, 1) for name, v in sorted(marks.items(), key=lambda kv: kv[1])},
            "allreduce": [[round(a * 1e6, 1), round(b * 1e6, 1)] for a, b in spans],
        }


def _broadcast(marks: dict[str, float], j: int) -> float:
    """Seconds from DDP's forward called to the module's forward begun (its buffers broadcast), 0 without marks."""
    if f"m{j}" not in marks or f"a{j}" not in marks:
        return 0.0
    return max(0.0, marks[f"m{j}"] - marks[f"a{j}"])
