"""Workload ``reduce``: statistics of a 1-D array or of each column of a 2-D one."""
