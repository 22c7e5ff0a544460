#!/usr/bin/env bash
# Everything for one call on the 2 x H200 machine: GPU tests, then the reduce benchmark.
# Usage there (the checkout is the working directory; .wheels carries pytest-mpi):
#   bash bench/gpu_session.sh [all|tests]   -> results under $OUT (at most 8 files come back)
set -uo pipefail
MODE=${1:-all}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/spmd-session}
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --target /tmp/site .wheels/pytest_mpi-*.whl
export PYTHONPATH=/tmp/site:$PWD
export MPI="mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE=0 -x TORCH_SYMM_MEM_DISABLE_MULTICAST=1 -x NVSHMEM_DISABLE_NVLS=1 -x PYTHONPATH -x PYTHONUNBUFFERED"
export SPMD_MPIEXEC="$MPI"
{ nvidia-smi; nvidia-smi topo -m; python3 -c "import cupy, numpy, h5py, mpi4py; from mpi4py import MPI; \
print("cupy", cupy.__version__, "nccl", __import__("cupy.cuda.nccl").cuda.nccl.get_version(), 'numpy', numpy.__version__, \
'h5py', h5py.__version__, 'mpi4py', mpi4py.__version__, MPI.Get_library_version().splitlines()[0])"; } > "$OUT/env.txt" 2>&1
step() {
  local name=$1; shift
  local t0=$SECONDS
  "$@" > "$OUT/$name.log" 2>&1
  echo "== $name: rc=$? in $((SECONDS - t0)) s: $(grep -E 'passed|failed|error' "$OUT/$name.log" | tail -1)"
}
step tests-serial timeout 420 python3 -m pytest -q -p no:cacheprovider tests/unit tests/cli tests/gpu --gpu
step tests-mpi2 timeout 420 $MPI -n 2 python3 -m pytest -q -p no:cacheprovider --with-mpi tests/mpi --gpu
[ "$MODE" = tests ] && exit 0
step kernel timeout 200 python3 bench/fused_kernel.py
step bench timeout 900 bash bench/reduce_gpu.sh /tmp/spmd-bench/results
cp /tmp/spmd-bench/results/summary.md "$OUT/" 2>/dev/null
tar -czf "$OUT/bench-reports.tar.gz" -C /tmp/spmd-bench results 2>/dev/null
cat "$OUT/kernel.log" "$OUT/summary.md" 2>/dev/null
