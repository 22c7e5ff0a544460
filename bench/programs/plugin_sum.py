"""reduce's sum as a plug-in (``@spmd.map_reduce``): what bench/programs/inline_sum.py writes by hand.

the plugins suite runs it (bench/suites/plugins.py) beside bench/programs/inline_sum.py
"""

import spmd


@spmd.map_reduce(combine="sum")
def total(block, xp, params):
    return xp.sum(block, dtype=xp.float64)
