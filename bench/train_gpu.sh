#!/usr/bin/env bash
# The train table on 1 and 2 GPUs into DIR: spmd (graph, eager, no overlap), PyTorch DDP, and on one GPU
# PyTorch eager, whole-step CUDA graph and torch.compile (bench/train_torch.py) in the same call.
#   MPI="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0" bash bench/train_gpu.sh DIR
set -uo pipefail
DIR=${1:-bench-out/train}
MPI=${MPI:-mpiexec}
MODELS=${MODELS:-medium,large}
mkdir -p "$DIR"
python3 -m spmd generate inputs/train.yaml
python3 -m spmd generate inputs/train-large.yaml
$MPI -n 2 python3 bench/train_sweep.py --models "$MODELS" --steps "${STEPS:-200}" > "$DIR/train-spmd.jsonl"
$MPI -n 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29512 python3 bench/train_ddp.py > "$DIR/train-ddp.jsonl"
PYTHONPATH=bench:${PYTHONPATH:-} python3 bench/train_torch.py --steps "${STEPS:-200}" > "$DIR/train-torch.jsonl"
python3 bench/summarize_train.py "$DIR" > "$DIR/summary.md"
