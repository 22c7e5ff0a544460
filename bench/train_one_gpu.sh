#!/usr/bin/env bash
# spmd's train against PyTorch's standard setups on one GPU, at every batch of the study's table, in one call
# (issue 23): spmd's graph steps (float32, TF32 and bf16) run 3 times (each run the median of 5 windows of 200 steps),
# PyTorch eager / whole-step CUDA graph / torch.compile / compile reduce-overhead / graph with TF32 / graph under
# bf16 autocast (each built once, timed 3 times), the per-primitive table with cuBLASLt's tuning (bench/train_ops.py), the summary.
#   MPI="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0" bash bench/train_one_gpu.sh DIR
set -uo pipefail
DIR=${1:-bench-out/train-one}
MPI=${MPI:-mpiexec}
mkdir -p "$DIR"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$DIR/gpu.txt"
python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__)" >> "$DIR/gpu.txt"
python3 -m spmd generate inputs/train.yaml > /dev/null
python3 -m spmd generate inputs/train-large.yaml > /dev/null
for run in 1 2 3; do
  $MPI -n 1 python3 bench/train_sweep.py --ranks 1 --variants graph,graph-tf32,graph-bf16 --steps 200 \
    > "$DIR/train-spmd-run$run.jsonl" 2> "$DIR/train-spmd-run$run.err"
done
PYTHONPATH=bench:${PYTHONPATH:-} python3 bench/train_torch.py --steps 200 --runs 3 > "$DIR/train-torch.jsonl" 2> "$DIR/train-torch.err"
for run in 1 2 3; do python3 bench/train_ops.py --models medium,large --batches 16,32,8 > "$DIR/train-ops-run$run.jsonl"; done

python3 bench/train_ops.py --models medium,large --batches 16,1024,8,512 --precision bf16 > "$DIR/train-ops-bf16.jsonl"
python3 bench/summarize_train.py "$DIR" > "$DIR/summary.md"
