#!/usr/bin/env bash
# One GPU call for workload torch: its GPU tests, then bench/torch_overhead.py (spmd against plain DDP).
#   bash bench/torch_gpu.sh        (on the device machine; results under $OUT)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/spmd-torch}
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --target /tmp/site .wheels/pytest_mpi-*.whl $(python3 -c "import hypothesis" 2>/dev/null || echo .wheels/hypothesis-*.whl .wheels/sortedcontainers-*.whl)
export PYTHONPATH=/tmp/site:$PWD
export SPMD_MPIEXEC="mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE=0 -x PYTHONPATH -x PYTHONUNBUFFERED"
{ nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"; } > "$OUT/env.txt" 2>&1
t0=$SECONDS
timeout ${TESTS_TIMEOUT:-330} python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_torch_gpu.py --gpu > "$OUT/tests.log" 2>&1
echo "tests rc=$? in $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
tail -5 "$OUT/tests.log"
t0=$SECONDS
timeout ${BENCH_TIMEOUT:-240} python3 bench/torch_overhead.py --out "$OUT/torch-overhead" --size large --batch 256 --runs 5 --windows 4 --steps 40 > "$OUT/overhead.log" 2>&1
echo "overhead rc=$? in $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
tail -8 "$OUT/overhead.log"
