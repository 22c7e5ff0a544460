"""Workload ``matmul``: C = A @ B, rows or SUMMA, verified without forming A @ B again."""
