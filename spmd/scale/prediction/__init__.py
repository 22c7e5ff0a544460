"""``spmd predict``: a sweep's model on another machine (its target, links and presets)."""
