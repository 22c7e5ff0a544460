"""What a run reports: report.json (build, schema, summary), where each rank's time went (breakdown), the
profiler's window and what it found (capture), the stdout table, report.html and its drawings (html, svg), the
Chrome trace, PNG figures and topo's heat map, and ``spmd report compare``."""
