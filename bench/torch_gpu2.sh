#!/usr/bin/env bash
# The second half of bench/torch_gpu.sh when one call cannot hold both: the OOM test, then the overhead runs.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/spmd-torch}
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --target /tmp/site .wheels/pytest_mpi-*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD
export SPMD_MPIEXEC="mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE=0 -x PYTHONPATH -x PYTHONUNBUFFERED"
timeout 120 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_torch_gpu.py --gpu -k "memory" > "$OUT/tests-oom.log" 2>&1
echo "oom test rc=$?" | tee -a "$OUT/summary.txt"
timeout ${BENCH_TIMEOUT:-420} python3 bench/torch_overhead.py --out "$OUT/torch-overhead" --size large --batch 256 --runs 5 \
  --windows 4 --steps 40 --variants ddp,ddp-no-phases,compile,ddp-graph > "$OUT/overhead.log" 2>&1
echo "overhead rc=$?" | tee -a "$OUT/summary.txt"
