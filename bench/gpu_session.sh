#!/usr/bin/env bash
# Calls on the 2 x H200 machine (each within the 10-minute limit of one call):
#   bash bench/gpu_session.sh tests   GPU + CPU tests
#   bash bench/gpu_session.sh scale   spmd scale sweeps of reduce (bench/scale_gpu.sh)
#   bash bench/gpu_session.sh bench   the reduce kernel and run benchmarks (bench/reduce_gpu.sh)
#   bash bench/gpu_session.sh comm    spmd bench comm / topo / info + PyTorch reference (bench/comm_gpu.sh)
#   bash bench/gpu_session.sh workloads  matmul + stencil with their ceilings (bench/workloads_gpu.sh)
#   bash bench/gpu_session.sh train   the train table, spmd against PyTorch DDP (bench/train_gpu.sh)
#   PARTS=comm,reduce bash bench/gpu_session.sh multi   scaling on all 4 or 8 GPUs (bench/multi_gpu.sh)
#   bash bench/gpu_session.sh scale+tests   both in one call (the machine is released when idle)
#   bash bench/gpu_session.sh io      the input path: engines and reduce's repeat (bench/io_gpu.sh)
#   bash bench/gpu_session.sh torch2  train against PyTorch eager / graph / compile, plain and DDP, 1 and 2 GPUs
#                                     (bench/train_two_gpu.sh)
#   PARTS=io,corrupt,plugins bash bench/gpu_session.sh multi   issue 26's input path, faults and plug-ins
#   bash bench/gpu_session.sh ncclenv  `large` 512 on 1 and 2 GPUs under NCCL settings (bench/train_nccl_env.sh)
#   bash bench/gpu_session.sh mapped   file to GPU straight from the page cache (mmap + cudaHostRegister) against
#                                     pread into pinned memory, 1 and 2 ranks at once (bench/mapped_h2d.py)
#   bash bench/gpu_session.sh iomapped reduce strong + weak at 1 and 2 GPUs, io.engine mapped against direct, 3 runs
#                                     each, and bench io (bench/io_mapped_gpu.sh)
#   bash bench/gpu_session.sh profile  host time of the plug-in sum on 2 GPUs (bench/host_profile.py) beside
#                                      the same calls by hand (bench/inline_sum.py)
#   bash bench/gpu_session.sh cudampi  build a CUDA-aware Open MPI, then mpi-cuda's tests and benchmarks
#                                      (bench/cuda-mpi/build.sh, bench/cuda_mpi_gpu.sh; carry .cuda-mpi too)
#   MODE may combine parts with '+': e.g. comm+tests
# The checkout is the working directory; .wheels (git-ignored, carried) holds pytest-mpi and,
# for machines without them, matplotlib and nvidia-ml-py wheels. Results go under $OUT.
set -uo pipefail
MODE=${1:-tests}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/spmd-session}
mkdir -p "$OUT"
WHEELS=(.wheels/pytest_mpi-*.whl)
python3 -c "import matplotlib" 2>/dev/null || WHEELS+=($(ls .wheels/plot/*.whl | grep -v nvidia_ml))
python3 -c "import pynvml" 2>/dev/null || WHEELS+=(.wheels/plot/nvidia_ml_py-*.whl)
python3 -c "import scipy" 2>/dev/null || WHEELS+=(.wheels/scipy-*.whl)  # the stencil tests' reference
python3 -c "import hypothesis" 2>/dev/null || WHEELS+=(.wheels/hypothesis-*.whl .wheels/sortedcontainers-*.whl)
# KvikIO (io.engine: kvikio) for the input path's calls: its wheels in .wheels/kvikio (cufile found by path)
python3 -c "import kvikio" 2>/dev/null || WHEELS+=($(ls .wheels/kvikio/*.whl 2>/dev/null))
python3 -m pip install -q --no-deps --target /tmp/site "${WHEELS[@]}"
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export PYTHONPATH=/tmp/site:$PWD
export MPI="mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE=0 -x TORCH_SYMM_MEM_DISABLE_MULTICAST=1 -x NVSHMEM_DISABLE_NVLS=1 -x PYTHONPATH -x PYTHONUNBUFFERED"
export SPMD_MPIEXEC="$MPI"
{ nvidia-smi; nvidia-smi topo -m; python3 -c "import cupy, numpy, h5py, mpi4py; from cupy.cuda import nccl; \
from mpi4py import MPI; print('cupy', cupy.__version__, 'nccl', nccl.get_version(), 'numpy', numpy.__version__, \
'h5py', h5py.__version__, 'mpi4py', mpi4py.__version__, MPI.Get_library_version().splitlines()[0])"; } > "$OUT/env.txt" 2>&1
step() {
  local name=$1; shift
  local t0=$SECONDS
  "$@" > "$OUT/$name.log" 2>&1
  echo "== $name: rc=$? in $((SECONDS - t0)) s: $(grep -E 'passed|failed|error' "$OUT/$name.log" | tail -1)"
}
if [[ "$MODE" == *comm* ]]; then
  step comm timeout "${COMM_TIMEOUT:-300}" bash bench/comm_gpu.sh /tmp/spmd-comm
  tar -czf "$OUT/comm-results.tar.gz" -C /tmp spmd-comm 2>/dev/null
  cat /tmp/spmd-comm/summary.md
fi
if [[ "$MODE" == *scale* ]]; then
  step scale timeout "${SCALE_TIMEOUT:-560}" bash bench/scale_gpu.sh /tmp/spmd-scale/results
  tar -czf "$OUT/scale-results.tar.gz" -C /tmp/spmd-scale results 2>/dev/null
  grep -h -A12 "^findings" "$OUT/scale.log"
fi
if [[ "$MODE" == *workloads* ]]; then
  step workloads timeout "${WORKLOADS_TIMEOUT:-560}" bash bench/workloads_gpu.sh /tmp/spmd-wl/results
  tar -czf "$OUT/workloads-results.tar.gz" -C /tmp/spmd-wl results 2>/dev/null
  cat /tmp/spmd-wl/results/summary.md
  tail -5 "$OUT/workloads.log"
fi
if [[ "$MODE" == *train* ]]; then
  step train timeout "${TRAIN_TIMEOUT:-560}" bash bench/train_gpu.sh /tmp/spmd-train/results
  tar -czf "$OUT/train-results.tar.gz" -C /tmp/spmd-train results 2>/dev/null
  cat /tmp/spmd-train/results/summary.md
  tail -5 "$OUT/train.log"
fi
if [[ "+$MODE+" == *+io+* ]]; then
  # issue 24: the input path on one GPU (bench/io_gpu.sh: bench io and reduce's repeat, h5py against direct)
  step io timeout "${IO_TIMEOUT:-560}" bash bench/io_gpu.sh /tmp/spmd-io/results
  tar -czf "$OUT/io-results.tar.gz" -C /tmp/spmd-io results 2>/dev/null
  cat /tmp/spmd-io/results/summary.md
fi
if [[ "$MODE" == *torch2* ]]; then
  step torch2 timeout "${TORCH2_TIMEOUT:-560}" bash bench/train_two_gpu.sh /tmp/spmd-torch2/results
  tar -czf "$OUT/torch2-results.tar.gz" -C /tmp/spmd-torch2 results 2>/dev/null
  cat "$OUT/torch2.log" /tmp/spmd-torch2/results/summary.md
fi
if [[ "$MODE" == *iomapped* ]]; then
  step iomapped timeout "${IOMAPPED_TIMEOUT:-560}" bash bench/io_mapped_gpu.sh /tmp/spmd-iomapped/results
  tar --exclude "*.h5" -czf "$OUT/iomapped-results.tar.gz" -C /tmp/spmd-iomapped results 2>/dev/null
  cat "$OUT/iomapped.log" /tmp/spmd-iomapped/results/io-summary.md
fi
if [[ "+$MODE+" == *+mapped+* ]]; then
  mkdir -p /tmp/spmd-mapped
  step mapped timeout "${MAPPED_TIMEOUT:-150}" $MPI -n 2 python3 bench/mapped_h2d.py /tmp/spmd-mapped "${MAPPED_GIB:-4}"
  cat "$OUT/mapped.log"
fi
if [[ "$MODE" == *ncclenv* ]]; then
  step ncclenv timeout "${NCCLENV_TIMEOUT:-560}" bash bench/train_nccl_env.sh /tmp/spmd-ncclenv/results
  tar -czf "$OUT/ncclenv-results.tar.gz" -C /tmp/spmd-ncclenv results 2>/dev/null
  cat "$OUT/ncclenv.log"
fi
if [[ "$MODE" == *profile* ]]; then
  python3 -m spmd generate bench/plugin-sum.yaml > /dev/null
  step host-profile timeout 200 $MPI -n 2 python3 bench/host_profile.py bench/plugin-sum.yaml -o repeats=200
  step inline-sum timeout 100 $MPI -n 2 python3 bench/inline_sum.py bench/plugin-sum.yaml
  step inline-sum-idle timeout 100 $MPI -n 2 python3 bench/inline_sum.py bench/plugin-sum.yaml --idle
  head -60 "$OUT/host-profile.log"; cat "$OUT/inline-sum.log" "$OUT/inline-sum-idle.log"
fi
if [[ "$MODE" == *multi* ]]; then
  bash bench/multi_gpu.sh /tmp/spmd-multi/results
  tar --exclude "*.h5" -czf "$OUT/multi-results.tar.gz" -C /tmp/spmd-multi results 2>/dev/null
fi
if [[ "$MODE" == *cudampi* ]]; then
  # A CUDA-aware Open MPI built here from Debian's source (.cuda-mpi, carried; fetch.sh made it),
  # then mpi-cuda against it. A warm machine keeps the build of the previous call (env.sh is
  # written last), so a second call goes straight to the tests; CUDA_MPI_PARTS picks the parts.
  PREFIX=${CUDA_MPI_PREFIX:-/tmp/cuda-mpi}
  if [[ ! -f $PREFIX/env.sh ]]; then
    step cuda-mpi-build timeout "${BUILD_TIMEOUT:-570}" bash bench/cuda-mpi/build.sh .cuda-mpi "$PREFIX"
    cat "$OUT/cuda-mpi-build.log"
  fi
  if [[ -f $PREFIX/env.sh ]]; then
    bash bench/cuda_mpi_gpu.sh "$PREFIX" /tmp/spmd-cudampi/results
    cp "$PREFIX"/build-times.txt /tmp/spmd-cudampi/results/ 2>/dev/null
    tar --exclude "*.h5" -czf "$OUT/cudampi-results-${CUDA_MPI_PARTS:-all}.tar.gz" -C /tmp/spmd-cudampi results 2>/dev/null
  fi
fi
if [[ "$MODE" == *tests ]]; then
  # SERIAL_TESTS / MPI_TESTS narrow a call to some files (default: all of them); MPI_RANKS the rank
  # counts of the MPI tests (default 2; on one GPU, 1 runs the GPU cases, which skip at 2 ranks)
  step tests-serial timeout "${TESTS_TIMEOUT:-480}" python3 -m pytest -q -rs -p no:cacheprovider ${SERIAL_TESTS:-tests/unit tests/cli tests/gpu} --gpu
  for n in ${MPI_RANKS:-2}; do
    step tests-mpi$n timeout "${MPI_TIMEOUT:-200}" $MPI -n $n python3 -m pytest -q -rs -p no:cacheprovider --with-mpi ${MPI_TESTS:-tests/mpi} --gpu
  done
fi
[[ "$MODE" != *bench* ]] && exit 0
step kernel timeout 200 python3 bench/fused_kernel.py
step bench timeout 900 bash bench/reduce_gpu.sh /tmp/spmd-bench/results
cp /tmp/spmd-bench/results/summary.md "$OUT/" 2>/dev/null
tar -czf "$OUT/bench-reports.tar.gz" -C /tmp/spmd-bench results 2>/dev/null
cat "$OUT/kernel.log" "$OUT/summary.md" 2>/dev/null
