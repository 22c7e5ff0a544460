"""spmd's benchmarks: one runner over suites of cases, each case measured beside its ceiling in the same run, raw
results per machine kind, and the documents' figures rendered from them.

    python -m bench list                              # the suites and their cases
    python -m bench run SUITE [SUITE...] --out DIR    # gpu = every suite that needs a GPU
    python -m bench report [--check]                  # docs/benchmarks.md and README's results from docs/results

A run writes DIR/SUITE/records.jsonl and DIR/SUITE/manifest.json; results kept for the documents live in
docs/results/<machine-kind>/<suite>/ (copy DIR's suite folders there). See docs/architecture.md.
"""
