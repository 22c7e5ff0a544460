"""Foundations every layer above may use: the run's context, config, errors, files, watchdog, timers, units."""
