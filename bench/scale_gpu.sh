#!/usr/bin/env bash
# spmd scale of reduce on 1 and 2 GPUs into DIR: strong + weak with NCCL at 4 GiB, strong with
# host-staged MPI at 4 GiB, and strong + weak with NCCL at 1 MiB (where a second GPU cannot pay).
#   MPI="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0" bash bench/scale_gpu.sh DIR
set -euo pipefail
DIR=${1:-bench-out/scale}
MPI=${MPI:-mpiexec}
CFG=bench/reduce-scale.yaml
mkdir -p "$DIR"
$MPI -n 2 python3 -m spmd scale $CFG --mode both --out "$DIR/nccl-4GiB" --probe-max-bytes 64M
$MPI -n 2 python3 -m spmd scale $CFG --mode strong -o comm=mpi --out "$DIR/mpi-4GiB" --probe-max-bytes 64M
$MPI -n 2 python3 -m spmd scale $CFG --mode both -o 'generate.shape=[262144]' -o repeats=20 \
  -o 'input.shards=/tmp/spmd-scale-small/part-*.h5' --out "$DIR/nccl-1MiB" --probe-max-bytes 64M
