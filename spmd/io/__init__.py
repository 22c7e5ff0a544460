"""HDF5 input: split planning, per-rank reading, generation."""
