#!/bin/bash
# by turns: the tree before a12d66e, the same with glibc's thresholds fixed, and a12d66e's tree
set -u
OUT=$1
. /work/main/.venv/bin/activate && cd /tmp
export RANKS=2 QUICK=1 SPMD_MPIEXEC=/work/main/.venv/bin/mpiexec
for turn in 1 2 3; do
  PYTHONPATH=/tmp/oldtree TURN0=$((turn - 1)) bash /work/main/bench/tools/halves_design.sh $OUT/before 1
  PYTHONPATH=/tmp/oldtree MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=68719476736 TURN0=$((turn - 1)) bash /work/main/bench/tools/halves_design.sh $OUT/before-fixed-malloc 1
  PYTHONPATH=/work/main TURN0=$((turn - 1)) bash /work/main/bench/tools/halves_design.sh $OUT/after 1
done
