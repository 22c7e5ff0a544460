"""``spmd scale`` and ``spmd report merge``: sweeps, figures, the fitted model, advice, the rendered report."""
