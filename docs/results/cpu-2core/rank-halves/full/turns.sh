#!/bin/bash
set -u
OUT=$1
. /work/main/.venv/bin/activate && cd /tmp
export RANKS=2 SPMD_MPIEXEC=/work/main/.venv/bin/mpiexec
for turn in 1 2; do
  PYTHONPATH=/tmp/oldtree TURN0=$((turn - 1)) bash /work/main/bench/tools/halves_design.sh $OUT/before 1
  PYTHONPATH=/work/main TURN0=$((turn - 1)) bash /work/main/bench/tools/halves_design.sh $OUT/after 1
done
