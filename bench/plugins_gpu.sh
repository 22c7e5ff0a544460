#!/usr/bin/env bash
# Plug-ins on one GPU into DIR (docs/benchmarks.md, "Plug-ins"), with the HBM ceiling measured in the same call:
# the three examples at GPU sizes, 3 runs each, and "no hidden cost": reduce's sum as a plug-in
# (bench/plugin-sum.yaml through spmd run) against the same calls written by hand (bench/inline_sum.py),
# 3 runs each, alternating; the file reads underneath (bench/read_paths.py) and the k-means step's parts
# (bench/kmeans_step.py). Summary: python3 bench/summarize_plugins.py DIR.
#   MPI="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0" bash bench/plugins_gpu.sh DIR
set -uo pipefail
DIR=${1:-bench-out/plugins}
MPI=${MPI:-mpiexec}
mkdir -p "$DIR"
python3 bench/hbm_ceiling.py > "$DIR/hbm_ceiling.json"
python3 bench/kmeans_step.py > "$DIR/kmeans_step.json"
declare -A SIZE=([histogram]="[134217728]" [kmeans]="[4194304,2]" [pca]="[8388608,16]")
for name in histogram kmeans pca; do
  over="-o generate.shape=${SIZE[$name]} -o repeats=10"
  python3 -m spmd generate examples/$name.yaml $over > /dev/null
  for run in 1 2 3; do
    $MPI -n 1 python3 -m spmd run examples/$name.yaml $over --out "$DIR/$name-$run" -q
    echo "$name run $run rc=$?"
  done
done
python3 -m spmd generate bench/plugin-sum.yaml > /dev/null
for run in 1 2 3; do
  $MPI -n 1 python3 -m spmd run bench/plugin-sum.yaml --out "$DIR/plugin-sum-$run" -q; echo "plugin-sum run $run rc=$?"
  $MPI -n 1 python3 bench/inline_sum.py bench/plugin-sum.yaml > "$DIR/inline-sum-$run.json"; echo "inline-sum run $run rc=$?"
done
python3 bench/read_paths.py data/bench/plugin-sum.h5 x > "$DIR/read_paths.json"
python3 bench/summarize_plugins.py "$DIR" > "$DIR/summary.md"
