#!/usr/bin/env bash
# spmd bench io on this machine's CPU (no GPU), 3 runs each of: 1 and 2 ranks, page cache and cold, a 160 MB
# float32 reduce input written by spmd generate. JSON per run into DIR (docs/results/io-cpu).
#   MPI=mpiexec bash bench/io_cpu.sh DIR
set -euo pipefail
DIR=${1:-bench-out/io-cpu}
MPI=${MPI:-mpiexec}
mkdir -p "$DIR"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
sed "s#path: data/reduce.h5#path: $W/x.h5#" inputs/reduce.yaml > "$W/io.yaml"
python3 -m spmd generate "$W/io.yaml" -o generate.shape=[40000000] > /dev/null
for run in 1 2 3; do
  for ranks in 1 2; do
    for cache in warm cold; do
      $MPI -n $ranks python3 -m spmd bench io "$W/io.yaml" -o device=cpu --rounds 5 \
        $([[ $cache == cold ]] && echo --cold) --json "$DIR/bench-io-$ranks-$cache-run$run.json" > /dev/null
    done
  done
done
nproc > "$DIR/cpus.txt"
