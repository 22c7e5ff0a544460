"""Measurement code shared by the benchmarks and by ``spmd scale``'s model."""
