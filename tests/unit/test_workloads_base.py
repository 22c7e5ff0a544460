"""checked_problem: what a workload's problem() may return, as the scaling model reads it."""

import numpy as np
import pytest

from spmd.core.errors import UserCodeError
from spmd.workloads.base import checked_problem


@pytest.mark.parametrize(
    "problem",
    [
        {},
        {"bytes": 0},
        {"bytes": np.int64(10), "comm": []},
        {
            "bytes": 1 << 40,
            "comm": [
                {"op": "allreduce", "bytes": 8},
                {"op": "bcast", "bytes": 3, "calls": 4, "growth": 0.0, "ranks_power": -1.0},
            ],
        },
        {"bytes": 64, "comm": [], "sliced": {"bytes": 32, "parts": 3}},
        {"bytes": 64, "sliced": {"bytes": np.float64(0.0), "parts": np.int64(1)}},
    ],
)
def test_what_the_model_reads_passes_unchanged(problem):
    assert checked_problem(problem, "W") is problem


@pytest.mark.parametrize(
    "problem, says",
    [
        (None, "returned NoneType: expected a dict"),
        ({"size": 3}, "keys ['size']"),
        ({"bytes": -1}, "bytes = -1"),
        ({"bytes": float("nan")}, "bytes = nan"),
        ({"bytes": True}, "bytes = True"),
        ({"comm": {"op": "allreduce"}}, "comm = dict"),
        ({"comm": [{"op": "alltoall", "bytes": 8}]}, "comm[0] = {'op': 'alltoall'"),
        ({"comm": [{"op": "allreduce"}]}, "comm[0] = {'op': 'allreduce'}"),
        ({"comm": [{"op": "allreduce", "bytes": "8"}]}, "comm[0]"),
        ({"comm": [{"op": "allreduce", "bytes": 8, "times": 2}]}, "optional keys are calls"),
        ({"comm": [{"op": "allreduce", "bytes": 8, "calls": -1}]}, "optional keys are calls"),
        ({"comm": [{"op": "allreduce", "bytes": 8, "growth": "fast"}]}, "optional keys are calls"),
        ({"sliced": 32}, "sliced = 32: expected {'bytes'"),
        ({"sliced": {"bytes": 32}}, "sliced = {'bytes': 32}"),
        ({"sliced": {"bytes": -1, "parts": 2}}, "sliced = {'bytes': -1"),
        ({"sliced": {"bytes": 32, "parts": 0}}, "'parts': an integer >= 1"),
        ({"sliced": {"bytes": 32, "parts": 1.5}}, "'parts': an integer >= 1"),
        ({"sliced": {"bytes": 32, "parts": True}}, "'parts': an integer >= 1"),
        ({"sliced": {"bytes": 32, "parts": 2, "over": 1}}, "sliced = "),
    ],
)
def test_anything_else_is_the_plugins_mistake_named(problem, says):
    with pytest.raises(UserCodeError, match=r"^W\.problem\(\) returned ") as caught:
        checked_problem(problem, "W")
    assert says in str(caught.value)
