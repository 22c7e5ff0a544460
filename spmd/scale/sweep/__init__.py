"""Running a sweep (``spmd scale``), calibrating it, and its runs turned into scaling.json."""
