"""spmd predict's words (spmd/scale/decision/prediction_words.py): what each target's collectives are priced from."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spmd.scale.decision.prediction_words import format_prediction, input_words


def measured(ranks: int, per_node: int) -> dict:
    return {"source": "measured", "curve_ranks": ranks, "curve_per_node": per_node}


@given(g=st.integers(1, 16), r=st.integers(2, 16))
def test_links_inside_a_node_are_a_measurement_there_only_on_the_targets_own_ranks_a_node(g, r):
    (words,) = input_words({"gpus_per_node": g, "nodes": [1], "intra": measured(r, r), "inter": None})
    assert words.startswith(f"inside a node: links measured on {r} rank(s) a node")
    assert ("a measurement there" in words) == (r == g) and ("carried" in words) == (r != g)


@given(g=st.integers(1, 8), per=st.integers(1, 8), measured_nodes=st.integers(2, 8), nodes=st.sets(st.integers(1, 16)))
def test_links_between_nodes_name_every_node_count_they_are_carried_to(g, per, measured_nodes, nodes):
    target = {"gpus_per_node": g, "nodes": sorted(nodes | {1}), "intra": None}
    target["inter"] = measured(per * measured_nodes, per)
    words = input_words(target)
    across = sorted(n for n in nodes if n > 1)
    if not across:  # one node crosses no boundary
        assert words == []
        return
    (line,) = words
    carried = [n for n in across if per != g or n != measured_nodes]
    assert ("a measurement there" in line) == (not carried)
    assert all(f"{n} node(s) of {g}" in line for n in carried)


def test_presets_and_given_figures_say_so_and_the_plain_text_names_them():
    preset = {"source": "preset ib-ndr x 8: InfiniBand NDR (IBTA)", "latency_s": 2.7e-6, "busbw_Bps": 4e11}
    given_ = {"source": "given in the target", "latency_s": 1e-6, "busbw_Bps": 1e11}
    target = {"name": "t", "gpus_per_node": 8, "nodes": [1, 2], "intra": given_, "inter": preset}
    assert input_words(target) == [
        "inside a node: figures given in the target",
        "between nodes: preset ib-ndr x 8 (looked up: published figures)",
    ]
    text = format_prediction({"other_machines": [{"target": target, "rows": [], "break_even": [], "notes": []}]})
    assert "priced from: between nodes: preset ib-ndr x 8 (looked up: published figures)" in text
