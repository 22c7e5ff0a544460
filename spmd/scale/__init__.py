"""Scaling: the sweep (``spmd scale``, ``spmd report merge``), its models, the decision and advice on it, the
rendered report, ``spmd predict`` and ``spmd jobscript``."""
