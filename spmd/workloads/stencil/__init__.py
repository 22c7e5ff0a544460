"""Workload ``stencil``: a 2-D field filtered with halo exchange, on a fused CUDA kernel or array code."""
