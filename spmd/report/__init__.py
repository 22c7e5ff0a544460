"""report.json: timings summarized across ranks, the document itself, the stdout table, comparisons."""
