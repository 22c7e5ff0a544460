#!/usr/bin/env bash
# spmd bench comm / topo / info on the GPU machine, with PyTorch's all_reduce as the reference, into DIR.
#   MPI="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0" bash bench/comm_gpu.sh DIR
set -uo pipefail
DIR=${1:-bench-out/comm}
MPI=${MPI:-mpiexec}
mkdir -p "$DIR"
$MPI -n 2 python3 -m spmd info --json "$DIR/info.json" > "$DIR/info.txt" 2>&1
python3 -m spmd topo --json "$DIR/topo.json" --png "$DIR/topo.png" > "$DIR/topo.txt" 2>&1
$MPI -n 2 python3 bench/nccl_overhead.py > "$DIR/nccl-overhead.txt" 2>&1
$MPI -n 2 python3 -m spmd bench comm --op allreduce --backend nccl --min-bytes 8 --max-bytes 1G \
  --json "$DIR/spmd-allreduce-nccl.json" > "$DIR/spmd-allreduce-nccl.txt" 2>&1
$MPI -n 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29511 python3 bench/torch_allreduce.py --min-bytes 8 \
  --max-bytes 1073741824 --json "$DIR/torch-allreduce.json" > "$DIR/torch-allreduce.txt" 2>&1
for op in allreduce allgather reduce_scatter bcast sendrecv; do
  $MPI -n 2 python3 -m spmd bench comm --op $op --backend all --min-bytes 8 --max-bytes 64M --iters 10 \
    --warmup 2 --json "$DIR/all-$op.json" > "$DIR/all-$op.txt" 2>&1
done
python3 bench/summarize_comm.py "$DIR" | tee "$DIR/summary.md"
cat "$DIR/nccl-overhead.txt"
