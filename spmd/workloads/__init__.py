"""Workloads: the interface (base), the registry (config name -> class), the plug-in forms (api, plugins), a
rank's input rows (rows), one package per workload and the parts the two training workloads share (training)."""
