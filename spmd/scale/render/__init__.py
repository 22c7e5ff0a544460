"""scaling.md, .html, .csv and the plots, rendered from a scaling.json."""
