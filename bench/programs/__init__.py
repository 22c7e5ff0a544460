"""Programs the suites launch (under MPI where they need ranks), each also a script a person can run."""
