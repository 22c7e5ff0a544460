#!/usr/bin/env bash
# Is a slow point the GPU? `large` at batch 512 (float32) three times, spmd and PyTorch's graphed step
# alternating, with the SM clock, power, temperature and throttle reasons read before each run. Into DIR.
#   MPI="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0" bash bench/train_recheck.sh DIR
set -uo pipefail
DIR=${1:-bench-out/train-recheck}
MPI=${MPI:-mpiexec}
mkdir -p "$DIR"
python3 -m spmd generate inputs/train-large.yaml > /dev/null
Q="timestamp,clocks.sm,clocks.max.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"
for run in 1 2 3; do
  echo "spmd $run $(nvidia-smi --query-gpu=$Q --format=csv,noheader)" >> "$DIR/gpu-state.txt"
  $MPI -n 1 python3 -m spmd run inputs/train-large.yaml -o params.batch=512 -o params.steps=200 -o params.optimizer=sgd \
    -o params.lr=0.01 -o params.momentum=0.9 -o params.checkpoint=null -o warmup=1 -o repeats=5 \
    --out "/tmp/recheck-$run" -q > /dev/null 2>&1
  python3 -c "import json; r=json.load(open('/tmp/recheck-$run/report.json')); print(json.dumps({'side': 'spmd', 'run': $run, 'samples_per_s': r['metrics']['samples_per_s']}))" >> "$DIR/recheck.jsonl"
  echo "torch $run $(nvidia-smi --query-gpu=$Q --format=csv,noheader)" >> "$DIR/gpu-state.txt"
  PYTHONPATH=bench:${PYTHONPATH:-} python3 - >> "$DIR/recheck.jsonl" <<PY
import json, torch
from train_ddp import MODELS, timed
from train_torch import variant_step
torch.cuda.set_device(0)
step, idx = variant_step("torch-graph", MODELS["large"][0], 512, 200, torch.device("cuda", 0))
print(json.dumps({"side": "torch-graph", "run": $run, "samples_per_s": 512 * 200 / timed(step, idx, 200)}))
PY
done
echo "end $(nvidia-smi --query-gpu=$Q --format=csv,noheader)" >> "$DIR/gpu-state.txt"
