"""Workload ``train``: data-parallel MLP training with bucketed, overlapped gradient allreduce."""
