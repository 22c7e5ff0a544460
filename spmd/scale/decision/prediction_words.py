"""``spmd predict``'s words: each target's predicted rows under what the sweep decided and what every row assumes,
the break-even (GPUs or ranks, per-GPU batch or bytes per rank), and the runs measured there beside them."""

from __future__ import annotations

from ...core.units import fmt_bytes, fmt_seconds
from .flags import beyond_ideal


def format_prediction(scaling: dict) -> str:
    """The predictions as plain text: one block per target, each under what the sweep decided and what every
    row assumes."""
    lines = []
    for p in scaling.get("other_machines") or []:
        t = p["target"]
        lines.append(f"on {t['name']} ({t['gpus_per_node']} a node):")
        lines += [f"  priced from: {words}" for words in input_words(t)]
        sweep = p.get("sweep") or {}
        if sweep.get("verdict"):
            lines.append(f"  the sweep: {sweep['verdict']}")
        if sweep.get("suspect"):
            lines.append(
                f"  the sweep had {len(sweep['suspect'])} suspect point(s): the fit left them out; the prediction "
                f"rests on the rest"
            )
        lines += [f"  assumes: {a}" for a in p.get("assumes") or []]
        training = scaling.get("training")
        for row in p["rows"]:
            low, high = row["interval"]
            sp = ""
            if row["speedup"] is not None:
                flag = " (beyond ideal)" if beyond_ideal(row["speedup"], row["ranks"], row["ranks"]) else ""
                sp = f"  speedup {row['speedup']:.2f}x{speedup_span(row)}{flag}, efficiency {row['efficiency']:.0%}"
            unit = "GPU" if scaling.get("device") == "gpu" else "rank"
            batch = f", per-{unit} batch {row['batch_per_rank']}" if training and row.get("batch_per_rank") else ""
            lines.append(
                f"  {row['mode']:>6} {row['ranks']:>5} ranks on {row['nodes']} node(s){batch}: "
                f"{fmt_seconds(row['predicted_s'])} [{fmt_seconds(low)}, {fmt_seconds(high)}]{sp}"
            )
        for e in p["break_even"]:
            lines.append(f"  break-even at {e['ranks']} ranks: {break_even_words(e, scaling.get('device'))}")
        for c in p.get("checked") or []:
            lines.append(
                f"  measured {c['mode']} at {c['ranks']} ranks: {fmt_seconds(c['measured_s'])}, predicted "
                f"{fmt_seconds(c['predicted_s'])} ({c['error']:+.1%}; furthest off: {c.get('worst_phase', '-')})"
                + (
                    f"; speedup {c['measured_speedup']:.2f}x against its sweep's one rank ({c['speedup_error']:+.1%})"
                    if "speedup_error" in c
                    else ""
                )
            )
        lines += [f"  note: {n}" for n in p["notes"]]
    return "\n".join(lines)


def input_words(target: dict) -> list[str]:
    """What a target's collectives are priced from, a line per level: a preset (looked up: what NCCL reaches on such a
    link), figures given in the target, links measured with the target's own ranks a node (a measurement there), or
    links measured on fewer ranks or nodes and carried to the target's by the ring's steps and bytes; and where the
    host's reads were measured."""
    g, nodes = target["gpus_per_node"], target.get("nodes") or [1]
    out = []
    for level, link in (("inside a node", target.get("intra")), ("between nodes", target.get("inter"))):
        if not link:
            continue
        source = link["source"]
        if source.startswith("preset "):
            out.append(f"{level}: {source.split(':')[0]} (looked up: published figures)")
            continue
        if not link.get("curve_ranks"):
            out.append(f"{level}: figures {source}")
            continue
        ranks, per_node = link["curve_ranks"], link["curve_per_node"]
        if level == "inside a node":
            carried = [] if ranks == g else [f"{g} a node"]
            where = f"{ranks} rank(s) a node"
        else:
            across = [n for n in nodes if n > 1]
            if not across:  # a target of one node never crosses between nodes
                continue
            measured = ranks // per_node
            carried = [f"{n} node(s) of {g}" for n in across if per_node != g or n != measured]
            where = f"{measured} node(s) of {per_node} rank(s)"
        there = "the target's own, a measurement there" if not carried else f"carried to {', '.join(carried)}"
        out.append(f"{level}: links measured on {where} ({there})")
    if target.get("host_read") and target.get("host_read_source"):
        out.append(f"the host's reads: measured by {target['host_read_source']}")
    return out


def speedup_span(row: dict) -> str:
    """' [1.70x, 1.90x]': a predicted row's speedup interval (one launch's runs against each other), '' where the row
    has none (a file of an older spmd); an open upper end 'and up'."""
    span = row.get("speedup_interval")
    if not span:
        return ""
    return f" [{span[0]:.2f}x, {f'{span[1]:.2f}x' if span[1] is not None else 'and up'}]"


def break_even_words(entry: dict, device: str | None = None) -> str:
    """A break-even row in words: per-GPU batch for training, bytes per rank otherwise; GPUs or ranks by device."""
    one = "one GPU" if device == "gpu" else "one rank"
    unit = "GPU" if device == "gpu" else "rank"
    if entry["status"] == "undecided":
        return f"not decided ({entry.get('why', 'the rows and the break-even disagree')}, within the model's misfit)"
    if "batch" in entry:
        if entry["status"] == "always":
            return f"faster than {one} at any per-{unit} batch"
        if entry["status"] == "never":
            return f"never faster than {one} at a per-{unit} batch up to 2^20"
        return f"faster than {one} from a per-{unit} batch of {entry['batch']}"
    if entry["status"] == "always":
        return f"faster than {one} at any size"
    if entry["status"] == "never":
        return f"never faster than {one}"
    return f"faster than {one} above {fmt_bytes(entry['bytes_per_rank'])} per rank"
