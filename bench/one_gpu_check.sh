#!/usr/bin/env bash
# One call on a one-GPU machine (nvidia-h100-x1 / nvidia-h200), .wheels carried: tests/gpu, every example
# config through mpirun on the GPU, a checkpoint and its resume, and Ctrl-C under Open MPI's mpirun.
# Logs under $OUT. Used when no machine of two GPUs is lent (docs/benchmarks.md).
set -u
export PYTHONPATH=/tmp/site:$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --target /tmp/site .wheels/pytest_mpi-*.whl $(python3 -c "import hypothesis" 2>/dev/null || echo .wheels/hypothesis-*.whl .wheels/sortedcontainers-*.whl) 2>/dev/null
M="mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE=0 -x PYTHONPATH -x PYTHONUNBUFFERED"
export SPMD_MPIEXEC="$M"
timeout 200 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu --gpu > $OUT/tests-gpu.log 2>&1; echo "tests/gpu rc=$?: $(tail -1 $OUT/tests-gpu.log)"
for c in reduce reduce-columns matmul matmul-summa stencil stencil-blocks train; do
  python3 -m spmd generate inputs/$c.yaml > /dev/null && $M -n 1 python3 -m spmd run inputs/$c.yaml --out /tmp/r/$c -q
  echo "$c rc=$? $(python3 -c "import json;r=json.load(open('/tmp/r/$c/report.json'));print(r['device'],r['comm'],r['verified'],r['result'].get('method', r['result'].get('graph','')))")"
done 2>&1 | tee $OUT/runs.log
$M -n 1 python3 -m spmd run inputs/train.yaml -o repeats=1 -o params.checkpoint.path=/tmp/c.h5 --out /tmp/r/c1 -q; echo "checkpoint rc=$?"
$M -n 1 python3 -m spmd run inputs/train.yaml -o repeats=3 -o params.resume=/tmp/c.h5 -o params.checkpoint.path=/tmp/c2.h5 --out /tmp/r/c2 -q; echo "resume rc=$? $(python3 -c "import json;r=json.load(open('/tmp/r/c2/report.json'));print(r['result']['resumed_from_step'], r['result']['steps'], r['verified'])")"
$M -n 1 python3 -m spmd run inputs/train.yaml -o repeats=400 -o params.checkpoint.path=/tmp/c3.h5 --out /tmp/r/c3 -q > $OUT/ctrlc.log 2>&1 & P=$!
sleep 15; kill -INT $P; T0=$SECONDS; wait $P; echo "ctrl-c (Open MPI mpirun) rc=$? in $((SECONDS-T0)) s; checkpoint: $(ls /tmp/c3.h5 2>&1)"; tail -5 $OUT/ctrlc.log
