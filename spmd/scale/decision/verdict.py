"""The verdict: one line rendered from the decision (decision.decide), never deciding again. The host (or a GPU another
process used) comes first where it was busy, with the fix; then the answer (or why there is none and the run that
would settle it), what pays off, what limits it, and what links the strong series to the batch sweep where they
answer differently.
"""

from __future__ import annotations

from ...core.host import DEVICE_FIX, HOST_FIX
from ...core.units import fmt_seconds
from .decide import FASTER, SLOWER
from .flags import LITTLE


def verdict(decision: dict) -> str:
    """The verdict line of a sweep."""
    parts = []
    if decision["host"]["busy"]:
        parts.append(host_words(decision["host"]))
    lead = decision["lead"]
    if lead is None:
        parts.append(
            f"no trustworthy answer: {suspect_words(decision)}; the run that would settle it: {decision['settle']}"
        )
    else:
        parts.append(answer_words(decision))
        if decision.get("pay_off"):
            parts.append(pay_off_words(decision))
        if decision.get("limit"):
            parts.append(limit_words(decision["limit"], decision["training"], decision["units"]))
        if decision.get("link"):
            parts.append(link_words(decision))
        if decision["suspect"]:
            parts.append(f"left out: {suspect_words(decision)}")
    return "Verdict: " + "; ".join(parts) + "."


def host_words(host: dict) -> str:
    """The busy host or device, once per host, with the fix."""
    said, devices = [], []
    for name, entry in sorted(host["hosts"].items()):
        for bus in sorted({bus for bus, _ in entry.get("devices") or []}):
            runs = sum(b == bus for b, _ in entry["devices"])
            devices.append(f"another process ran on the GPU at {bus} of {name} in {runs} of {host['runs']} run(s)")
        if entry["others"]:
            lo, hi = min(entry["others"]), max(entry["others"])
            span = f"{lo:.0%}" if f"{lo:.0%}" == f"{hi:.0%}" else f"{lo:.0%}-{hi:.0%}"
            said.append(
                f"other processes on {name} took {span} of the CPU time its ranks could use in "
                f"{len(entry['others'])} of {host['runs']} run(s)"
            )
        if entry["threads"]:
            threads, ranks, cpus = max(entry["threads"])
            said.append(
                f"{name} ran up to {threads} compute threads over {ranks} rank(s) on {cpus} CPU(s) in "
                f"{len(entry['threads'])} of {host['runs']} run(s)"
            )
    threads = host.get("threads") or {}
    chosen = f" (each rank ran {threads['per_rank']} compute thread(s): {threads['how']})" if threads else ""
    out = []
    if said:
        out.append(
            "busy host: " + "; ".join(said) + f": the timings hold that contention, not only the work{chosen}; "
            f"fix: {HOST_FIX}"
        )
    if devices:
        out.append("busy device: " + "; ".join(devices) + f": its kernels waited for the other's; fix: {DEVICE_FIX}")
    return "; ".join(out)


def suspect_words(decision: dict) -> str:
    """How many points are suspect and why, by kind (each reason's first words)."""
    kinds: dict[str, int] = {}
    for s in decision["suspect"]:
        # each kind once a point, in its reasons' order: a set's order moves with the process's string hashing, and
        # a sweep's verdict must read the same when predict derives it again in another process
        for kind in dict.fromkeys(_kind(why) for why in s["reasons"]):
            kinds[kind] = kinds.get(kind, 0) + 1
    if not kinds:
        return "no run of several ranks to compare"
    points = len(decision["suspect"])
    why = ", ".join(f"{kind}: {count}" for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]))
    return f"{points} suspect point(s) ({why})"


def _kind(reason: str) -> str:
    """A suspect reason's kind: its words before the first colon, a run's label ('1 rank: ...') aside."""
    head, _, rest = reason.partition(": ")
    if head.endswith(("rank", "ranks")) and rest:
        head = rest.partition(": ")[0]
    return head


def _where(point: dict) -> str:
    if point["mode"] == "batch":
        return f"batch {point['batch']} at {point['ranks']} and 1 rank(s)"
    return f"{point['mode']} at {point['ranks']} rank(s)"


def one_of(units: str) -> str:
    return "one GPU" if units == "GPUs" else "one rank"


def answer_words(decision: dict) -> str:
    """The lead point with its interval, its flag where beyond ideal, and what its interval says."""
    lead, units = decision["lead"], decision["units"]
    lo, hi = lead["interval"]
    flag = "; beyond ideal" if lead.get("flags") else ""
    base = one_of(units) if lead.get("base_ranks", 1) == 1 else f"{lead['base_ranks']} ranks"
    ratio = f"{lead['speedup']:.2f}x {base}'s, interval {lo:.2f}x-{hi:.2f}x{flag}"
    n = lead["ranks"]
    if decision["training"] and lead.get("samples_per_s") is not None:
        head = (
            f"on this machine, {n} {units} give {lead['samples_per_s']:,.0f} samples/s at per-{units[:-1]} batch "
            f"{lead['batch']} ({ratio})"
        )
    else:
        head = f"on this machine, {n} {units} take {fmt_seconds(lead['time']).strip()} a repeat ({ratio})"
    if decision["outcome"] == FASTER:
        return head + f": {n} {units} are faster than {base} here"
    if decision["outcome"] == SLOWER:
        return head + f": {n} {units} are slower than {base} here"
    return head + f": no measurable difference from {base} here"


def pay_off_words(decision: dict) -> str:
    """Where N pay off, measured and (from a model that meets its own points) predicted."""
    return pay_off_text(
        decision["pay_off"], decision.get("batch_model") or {}, decision["units"], decision["lead"]["ranks"]
    )


def pay_off_text(pay: dict, state: dict, units: str, n: int) -> str:
    """Where ``n`` ``units`` pay off (decide.pay_off), in one sentence that cannot contradict itself."""
    unit = units[:-1]
    measured = (
        f"measured from per-{unit} batch {pay['measured_batch']}"
        if pay["measured_batch"]
        else "measured at no trustworthy batch of " + ", ".join(map(str, pay["measured_over"]))
    )
    if not state.get("fitted"):
        predicted = "not predicted (no step model: too few trustworthy batches)"
    elif not state["trusted"]:
        worst = max(state["misses"], key=lambda m: abs(m["error"]))
        predicted = (
            f"not predicted (the step model misses its own points, by {worst['error']:+.0%} at batch {worst['batch']})"
        )
    elif pay["predicted_batch"]:
        predicted = f"predicted from per-{unit} batch {pay['predicted_batch']}"
        if pay["measured_batch"] and pay["predicted_batch"] > pay["measured_batch"]:
            predicted += f" (the measurement at {pay['measured_batch']} says earlier: the model is off there)"
    else:
        predicted = f"predicted at no per-{unit} batch up to 2^20 (the allreduce outweighs what {n} {units} save)"
    return f"{n} {units} pay off {measured}; {predicted}"


PART_WORDS = {
    "allreduce": "the allreduce of the gradients left exposed",
    "buffers": "DDP's broadcast of the buffers before each forward (with the wait there for the last rank)",
    "syncbn": "SyncBatchNorm's gathers of the batch statistics in forward (with the wait there for the last rank)",
    "host": "the host (the GPU waited for launches)",
    "data": "the data phase",
    "compute": "the step's own compute",
    "comm": "the collectives",
}


def limit_words(lim: dict, training: bool, units: str) -> str:
    """What limits it: the largest part with its numbers, and the communication's share beside it; "little" only
    below LITTLE of the step."""
    whole = "step" if training else "repeat"
    name = PART_WORDS.get(lim["part"], lim["part"]) if training else f"its {lim['part']} phase"
    out = (
        f"what limits it: {name} ({fmt_seconds(lim['seconds']).strip()} of a {fmt_seconds(lim['whole_s']).strip()} "
        f"{whole}, {lim['share']:.0%})"
    )
    comm = "allreduce" if training else "comm"
    if lim["part"] != comm and comm in lim["parts"]:
        share = lim["comm_share"]
        little = ": little" if share < LITTLE else ""
        label = "the exposed allreduce" if training else "the collectives"
        out += f", {label} {fmt_seconds(lim['parts'][comm]).strip()} ({share:.0%} of it{little})"
    return out


def link_words(decision: dict) -> str:
    """The strong series and the batch sweep, linked where they answer differently."""
    link, units = decision["link"], decision["units"]
    unit = units[:-1]
    where = f"from per-{unit} batch {link['measured_batch']}" if link.get("measured_batch") else "at no measured batch"
    said = {FASTER: "was faster than one", SLOWER: "was slower than one"}.get(
        link["strong_outcome"], "made no measurable difference"
    )
    return (
        f"the strong series kept its global batch: at {link['strong_ranks']} {units} each ran per-{unit} batch "
        f"{link['strong_batch']} and {said}, where the batch sweep pays off {where}"
    )
