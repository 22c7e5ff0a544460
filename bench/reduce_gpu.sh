#!/usr/bin/env bash
# reduce on 1 and 2 GPUs at 4 GiB per GPU, plus the HBM ceiling, into DIR (default bench-out).
#   MPI="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0" bash bench/reduce_gpu.sh DIR
set -euo pipefail
DIR=${1:-bench-out}
MPI=${MPI:-mpiexec}
CFG=bench/reduce-weak.yaml
SHARD0=/tmp/spmd-bench/part-000.h5
mkdir -p "$DIR"
python3 bench/hbm_ceiling.py | tee "$DIR/ceiling.json"
time $MPI -n 2 python3 -m spmd generate $CFG
run() { name=$1; n=$2; shift 2; $MPI -n "$n" python3 -m spmd run $CFG --out "$DIR/$name" "$@"; }
run 1gpu-fused 1 -o input.shards=$SHARD0
run 2gpu-nccl  2
run 2gpu-mpi   2 -o comm=mpi
run 1gpu-xp    1 -o input.shards=$SHARD0 -o params.method=xp
python3 bench/summarize_reduce.py "$DIR" | tee "$DIR/summary.md"
