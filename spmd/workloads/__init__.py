"""Workloads: the interface (base), the registry (config name -> class), one package per workload."""
