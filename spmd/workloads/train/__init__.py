"""Workload ``train``: data-parallel MLP training with bucketed, overlapped gradient allreduce."""

from .workload import TrainParams, TrainWorkload

__all__ = ["TrainParams", "TrainWorkload"]
