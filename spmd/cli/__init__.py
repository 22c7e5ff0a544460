"""The ``spmd`` command: one module per command group; ``main`` parses and dispatches."""
