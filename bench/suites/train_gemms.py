"""The train suite's GEMM case: train's GEMMs, one step's worth, through spmd's cuBLASLt plans
(spmd/workloads/train/lt.py: the heuristic's candidates timed, bias + ReLU and the bias gradient fused) against
nvmath-python's stateful Matmul (cuBLASLt too, planned with the same epilogues and autotuned), the same operands and
stream. Each side's sequence (every layer's forward GEMM, weight gradient and input gradient) is captured into one CUDA
graph, as train's step is, and the graph timed; where nvmath cannot be captured, both sides are timed launched from
Python and the record says so. The decision of docs/architecture.md ("kept and not taken") reads these figures. In bf16
(the train suite's bf16 shapes) spmd's sequence alone is timed: what the GEMMs leave of a bf16 step, the bound its
target is read against."""

from __future__ import annotations

import contextlib

import numpy as np

from ..ceilings import median_seconds
from ..records import Measure

REPS = 20  # the sequence, this many times per graph: a graph launch is then a small share


def _layers(widths, batch, cupy, precision: str = "fp32", aligned: bool = True):
    """One step's operands per layer, typed and laid out as train's are: in bf16 the GEMMs' operands (inputs,
    weights and biases, hidden outputs, gradients passed down) are bfloat16 bits, the logits and the weight and bias
    gradients float32; the first layer's input rows and every weight's rows start on 16 bytes (model.row_elements:
    views of wider arrays). ``aligned`` False: those rows back to back, as train laid them out before."""
    from spmd.workloads.train.layout import row_elements
    from spmd.workloads.train.ops import bf16_bits

    rng = np.random.default_rng(7)
    last = len(widths) - 2
    itemsize = 4 if precision == "fp32" else 2

    def make(*shape, full=False, wide=False):
        pitch = row_elements(shape[-1], itemsize) if aligned else shape[-1]
        stored = (*shape[:-1], pitch) if wide else shape
        values = rng.standard_normal(stored, dtype=np.float32) * 0.1
        array = cupy.asarray(values if full or precision == "fp32" else bf16_bits(values))
        return array[..., : shape[-1]]

    def zeros(*shape, full=False):
        return cupy.zeros(shape, np.float32 if full or precision == "fp32" else np.uint16)

    layers = []
    for i, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(
            {
                "x": make(batch, n_in, wide=i == 0),
                "w": make(n_out, n_in, wide=True),
                "bias": make(n_out),
                "out": zeros(batch, n_out, full=i == last),
                "delta": make(batch, n_out),
                "dw": zeros(n_out, n_in, full=True),
                "db": zeros(n_out, full=True),
                "dx": zeros(batch, n_in),
            }
        )
    return layers


def _spmd_step(ops, layers):
    def step():
        for i, layer in enumerate(layers):
            if i < len(layers) - 1:
                ops.linear_relu(layer["x"], layer["w"], layer["bias"], layer["out"])
            else:
                ops.gemm(layer["x"], layer["w"], layer["out"], trans_b=True)
        for i, layer in reversed(list(enumerate(layers))):
            ops.weight_gradient(layer["delta"], layer["x"], layer["dw"], layer["db"], accumulate=False)
            if i:
                ops.gemm(layer["delta"], layer["w"], layer["dx"])

    return step


def _nvmath_step(layers, stream):
    """The same GEMMs as nvmath Matmul objects, in the column-major form cuBLASLt's bias epilogues want (the bias
    runs along the result's rows): out^T = W x^T (+bias, ReLU); dW^T = x^T delta (bias gradient of delta's
    columns); dx^T = W^T delta^T. Results written in place into the same arrays spmd writes."""
    from nvmath.linalg.advanced import Matmul, MatmulEpilog

    plans = []

    def plan(a, b, c, epilog=None, bias=None):
        mm = Matmul(a, b, c=c, beta=0.0, options={"inplace": True}, stream=stream)
        inputs = {"bias": bias} if bias is not None else None
        mm.plan(epilog=epilog, epilog_inputs=inputs, stream=stream)
        mm.autotune(iterations=10, stream=stream)
        plans.append(mm)
        return mm

    forward, backward = [], []
    for i, layer in enumerate(layers):
        x, w, out = layer["x"], layer["w"], layer["out"]
        hidden = i < len(layers) - 1
        forward.append(
            plan(w, x.T, out.T, MatmulEpilog.RELU_BIAS if hidden else None, layer["bias"] if hidden else None)
        )
    for i, layer in reversed(list(enumerate(layers))):
        backward.append(plan(layer["x"].T, layer["delta"], layer["dw"].T, MatmulEpilog.BGRADB))
        if i:
            backward.append(plan(layer["w"].T, layer["delta"].T, layer["dx"].T))

    def step():
        for mm in forward + backward:
            mm.execute(stream=stream)

    return step, plans


def _timed(step, stream, capture: bool) -> float:
    """Seconds per step: a graph of REPS steps replayed (capture), or REPS steps launched from Python."""
    import cupy

    if capture:
        with stream:
            stream.begin_capture(cupy.cuda.runtime.streamCaptureModeRelaxed)
            try:
                for _ in range(REPS):
                    step()
            finally:
                graph = stream.end_capture()
        run = lambda: graph.launch(stream)  # noqa: E731
    else:

        def run():
            for _ in range(REPS):
                step()

    with stream:
        seconds = median_seconds(run, repeats=15)
    cupy.cuda.Device().synchronize()
    return seconds / REPS


def step_gemms(env) -> list[Measure]:
    """fp32: spmd's plans against nvmath-python's at the smallest and largest batches of each model; bf16 (where spmd's
    train in bf16 is measured): spmd's plans alone, the bound of that step."""
    table = {"medium": (16,)} if env.quick else {"medium": (16, 1024), "large": (8, 512)}
    out = []
    for model, batches in table.items():
        for batch in batches:
            out += _fp32_against_nvmath(model, batch)
    if env.gpus and not env.quick:
        for model, batch in (("medium", 1024), ("large", 512)):  # the train suite's bf16 case
            out += _bf16_alone(model, batch)
    return out


def _planned(model: str, batch: int, precision: str, aligned: bool = True):
    """The layers of ``model`` at ``batch`` (see _layers for ``aligned``) and spmd's GEMM sequence over them,
    planned and run once."""
    import cupy

    from spmd.workloads.train.layout import PRESETS
    from spmd.workloads.train.ops import make_ops

    layers = _layers(PRESETS[model], batch, cupy, precision, aligned)
    stream = cupy.cuda.Stream(non_blocking=True)
    ops = make_ops("gpu", np.float32, None if precision == "fp32" else precision, max_rows=batch)
    ops.bind(stream)
    with stream:
        mine = _spmd_step(ops, layers)
        mine()  # plans and tunes outside the capture
    return layers, stream, mine


def _bf16_alone(model: str, batch: int) -> list[Measure]:
    """spmd's bf16 GEMMs as train lays out their operands (rows on 16 bytes), and with the first layer's rows back
    to back as before: a bfloat16 row of 844 or 4812 values is not a whole number of 16 bytes, which tensor-core
    kernels want of a leading dimension (float32 rows of those widths are)."""
    from spmd.workloads.train.layout import PRESETS, row_elements

    case = f"train GEMMs of one step: {model} batch {batch}, bf16"
    out = []
    for aligned in (True, False):
        if not aligned and row_elements(PRESETS[model][0], 2) == PRESETS[model][0]:
            continue
        layers, stream, mine = _planned(model, batch, "bf16", aligned)
        stream.synchronize()
        ld = layers[0]["x"].strides[0] // layers[0]["x"].itemsize
        out.append(
            Measure(
                case,
                "spmd cuBLASLt plans (lt.py)" if aligned else f"the same, first layer's rows back to back ({ld} apart)",
                _timed(mine, stream, capture=True) * 1e6,
                "time per step's GEMMs",
                "us",
                "result" if aligned else "peer",
                better="lower",
                params={"captured": True, "leading_dimension": ld},
            )
        )
    return out


def _fp32_against_nvmath(model: str, batch: int) -> list[Measure]:
    layers, stream, mine = _planned(model, batch, "fp32")
    with stream:
        theirs, plans = _nvmath_step(layers, stream)
        theirs()
    stream.synchronize()
    try:
        t_nvmath = _timed(theirs, stream, capture=True)
        captured = True
    except Exception as exc:  # noqa: BLE001 - nvmath refusing a capture is itself the finding
        captured = False
        why = f"{type(exc).__name__}: {exc}"[:300]
        t_nvmath = _timed(theirs, stream, capture=False)
    t_spmd = _timed(mine, stream, capture=captured)
    params = {"captured": captured} | ({} if captured else {"capture_failed": why})
    case = f"train GEMMs of one step: {model} batch {batch}, fp32"
    out = [
        Measure(
            case,
            "spmd cuBLASLt plans (lt.py)",
            t_spmd * 1e6,
            "time per step's GEMMs",
            "us",
            better="lower",
            params=params,
        ),
        Measure(
            case,
            "nvmath-python Matmul (autotuned)",
            t_nvmath * 1e6,
            "time per step's GEMMs",
            "us",
            "peer",
            better="lower",
            params=params,
        ),
    ]
    for mm in plans:  # a Matmul whose last execute was captured cannot wait on it: freeing may refuse
        with contextlib.suppress(Exception):
            mm.free()
    return out
