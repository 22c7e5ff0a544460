"""The profiler's capture of a few steps, one component: its window (``window``), the files it keeps and what
the job reads of it (``component``), and its analysis, one rank's steps (``kernels``) and the ranks' together
(``causes``). spmd.job enters it; a workload only runs its steps inside the window."""
