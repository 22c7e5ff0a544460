"""Model files the benchmark suites hand to workload torch (``params.model: bench/models/FILE.py:NAME``)."""
