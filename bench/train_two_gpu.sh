#!/usr/bin/env bash
# Issue 26, item 1: spmd's train against PyTorch's standard setups on 1 and 2 GPUs of one machine, at every batch
# of the study's table, in one call: spmd's graphed steps (float32) 3 runs, each measuring 1 and 2 GPUs in one
# launch (each figure the median of 5 windows of 200 steps; SPMD_VARIANTS: train_sweep's variants, default graph); PyTorch eager / whole-step CUDA graph /
# torch.compile on 1 GPU, and the same three under DistributedDataParallel on 2 GPUs, one launch per setup (a
# setup that hangs or fails costs only its own lines), each built once and timed 3 times. Summary:
# bench/summarize_train.py DIR (margins against the strongest setup at each GPU count, speedups). DDP runs under the
# NCCL_GRAPH_MIXING_SUPPORT spmd uses (0 unless set: spmd/comm/nccl.py), so a captured step costs both the same.
#   MPI="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0" bash bench/train_two_gpu.sh DIR
set -uo pipefail
DIR=${1:-bench-out/train-two}
MPI=${MPI:-mpiexec}
STEPS=${STEPS:-200}
VARIANTS=${VARIANTS:-torch-eager torch-graph torch-compile}
mkdir -p "$DIR"
export PYTHONPATH=$PWD/bench:${PYTHONPATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$DIR/gpu.txt"
python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__)" >> "$DIR/gpu.txt"
python3 -m spmd generate inputs/train.yaml > /dev/null
python3 -m spmd generate inputs/train-large.yaml > /dev/null
for run in 1 2 3; do
  t0=$SECONDS
  timeout -k 5 "${SPMD_LIMIT:-150}" $MPI -n 2 python3 bench/train_sweep.py --ranks 1,2 --variants "${SPMD_VARIANTS:-graph}" \
    --steps "$STEPS" > "$DIR/train-spmd-run$run.jsonl" 2> "$DIR/train-spmd-run$run.err"
  echo "spmd run $run: rc=$? in $((SECONDS - t0)) s"
done
t0=$SECONDS
timeout -k 5 "${TORCH1_LIMIT:-150}" python3 bench/train_torch.py --steps "$STEPS" --runs 3 \
  --variants "${VARIANTS// /,}" > "$DIR/train-torch-1gpu.jsonl" 2> "$DIR/train-torch-1gpu.err"
echo "PyTorch, 1 GPU: rc=$? in $((SECONDS - t0)) s"
port=29521
for variant in $VARIANTS; do
  t0=$SECONDS
  timeout -k 5 "${TORCH2_LIMIT:-100}" $MPI -n 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$((port++)) \
    -x NCCL_GRAPH_MIXING_SUPPORT="${NCCL_GRAPH_MIXING_SUPPORT:-0}" \
    python3 bench/train_torch.py --steps "$STEPS" --runs 3 --variants "$variant" \
    > "$DIR/train-torch-2gpu-$variant.jsonl" 2> "$DIR/train-torch-2gpu-$variant.err"
  echo "PyTorch DDP $variant, 2 GPUs: rc=$? in $((SECONDS - t0)) s"
done
python3 bench/summarize_train.py "$DIR" > "$DIR/summary.md"
