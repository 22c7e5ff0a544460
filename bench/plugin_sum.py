"""reduce's sum as a plug-in (``@spmd.map_reduce``): what ``bench/inline_sum.py`` writes by hand.

spmd run bench/plugin-sum.yaml   # then: python3 bench/inline_sum.py bench/plugin-sum.yaml
"""

import spmd


@spmd.map_reduce(combine="sum")
def total(block, xp, params):
    return xp.sum(block, dtype=xp.float64)
