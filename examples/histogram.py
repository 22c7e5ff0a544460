"""An energy histogram over detector events: spmd's one-function form (``@spmd.map_reduce``).

Every rank counts the events of its rows into the same bins; the counts are summed over the ranks.

    spmd generate examples/histogram.yaml && mpiexec -n 2 spmd run examples/histogram.yaml
"""

import spmd


def summary(counts, params):
    """Derived numbers for report.json: events counted, the fullest bin's range."""
    width = (params["hi"] - params["lo"]) / params["bins"]
    peak = int(counts.argmax())
    return {"events": float(counts.sum()), "peak_bin": [params["lo"] + peak * width, params["lo"] + (peak + 1) * width]}


@spmd.map_reduce(combine="sum", finish=summary)
def energy_histogram(block, xp, params):
    counts, _ = xp.histogram(block, bins=params["bins"], range=(params["lo"], params["hi"]))
    return counts.astype(xp.float64)
