#!/usr/bin/env bash
# The mpi-cuda backend on 2 GPUs against a real CUDA-aware MPI (issue 10), after
# bench/cuda-mpi/build.sh built one into PREFIX. Called by bench/gpu_session.sh (mode cudampi)
# with MPI (the system mpirun line) and OUT set; writes logs and results under RESULTS.
#   bash bench/cuda_mpi_gpu.sh PREFIX RESULTS
set -uo pipefail
PREFIX=$1 RESULTS=$2
mkdir -p "$RESULTS"
step() {
  local name=$1; shift
  local t0=$SECONDS
  "$@" > "$RESULTS/$name.log" 2>&1
  echo "== $name: rc=$? in $((SECONDS - t0)) s: $(grep -E 'passed|failed|error' "$RESULTS/$name.log" | tail -1)"
}
PARTS=${CUDA_MPI_PARTS:-refuse,info,tests,bench,scale}

if [[ $PARTS == *refuse* ]]; then  # the system Open MPI: every mpi-cuda job refused cleanly
  step refuse-system-mpi timeout 300 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_cuda_mpi.py --gpu
fi

# From here on, the CUDA-aware Open MPI and the mpi4py built against it.
source "$PREFIX/env.sh"
CUDA_MPI="$PREFIX/bin/mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE=0 -x TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
 -x NVSHMEM_DISABLE_NVLS=1 -x PYTHONPATH -x PYTHONUNBUFFERED -x LD_LIBRARY_PATH -x PATH"
export SPMD_MPIEXEC="$CUDA_MPI"
if [[ $PARTS == *info* ]]; then
  { "$PREFIX/bin/ompi_info" --parsable --all | grep -E "mpi_built_with_cuda_support:value|^ompi:version:full"
    $CUDA_MPI -n 2 python3 -m spmd info; } > "$RESULTS/info.txt" 2>&1
  cat "$RESULTS/info.txt"
fi
if [[ $PARTS == *tests* ]]; then
  step tests-cuda-mpi timeout 300 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_cuda_mpi.py --gpu --cuda-mpi
  step tests-mpi-cuda-mpi timeout 300 $CUDA_MPI -n 2 python3 -m pytest -q -p no:cacheprovider --with-mpi \
    ${CUDA_MPI_TESTS:-tests/mpi/test_communicators.py tests/mpi/test_reduce.py tests/mpi/test_stencil.py} --gpu --cuda-mpi
fi
if [[ $PARTS == *bench* ]]; then
  # NCCL, host-staged MPI and CUDA-aware MPI side by side, 8 B .. 256 MiB (x4)
  for op in allreduce allgather bcast sendrecv; do
    step "comm-$op" timeout 240 $CUDA_MPI -n 2 python3 -m spmd bench comm --op $op --backend all --min-bytes 8 \
      --max-bytes 256M --factor 4 --iters 10 --warmup 3 --json "$RESULTS/comm-$op.json"
    cp "$RESULTS/comm-$op.log" "$RESULTS/comm-$op.txt"
  done
  # Open MPI's own choices: which BTL carried the device buffers (smcuda = CUDA IPC)
  step btl-smcuda-only timeout 120 $CUDA_MPI --mca btl smcuda,self -n 2 python3 -m spmd bench comm --op sendrecv \
    --backend mpi-cuda --min-bytes 1M --max-bytes 256M --factor 16 --iters 10 --json "$RESULTS/sendrecv-smcuda.json"
  step btl-no-ipc timeout 120 $CUDA_MPI --mca btl_smcuda_use_cuda_ipc 0 -n 2 python3 -m spmd bench comm --op sendrecv \
    --backend mpi-cuda --min-bytes 1M --max-bytes 256M --factor 16 --iters 10 --json "$RESULTS/sendrecv-no-ipc.json"
fi
if [[ $PARTS == *scale* ]]; then  # the findings name the fastest communicator for each workload's own sizes
  data=/tmp/spmd-cudampi-data
  cat > "$RESULTS/reduce.yaml" <<YAML
workload: reduce
device: gpu
repeats: 5
input: {path: $data/x.h5, dataset: x}
generate: {shape: [67108864], dtype: float32, seed: 3}
output: $RESULTS/scale-reduce
YAML
  cat > "$RESULTS/stencil.yaml" <<YAML
workload: stencil
device: gpu
repeats: 3
input: {path: $data/field.h5, dataset: field}
generate: {shape: [8192, 8192], dtype: float32, seed: 3}
params: {kernel: laplacian, boundary: reflect, iterations: 20}
output: $RESULTS/scale-stencil
YAML
  cat > "$RESULTS/matmul.yaml" <<YAML
workload: matmul
device: gpu
repeats: 3
input: {path: $data/A.h5, dataset: A}
generate: {shape: [8192, 8192], dtype: float32, seed: 1}
params:
  b: {path: $data/B.h5, dataset: B, generate: {shape: [8192, 8192], dtype: float32, seed: 2}}
  gather: none
  b_source: allgather
output: $RESULTS/scale-matmul
YAML
  for wl in reduce stencil matmul; do
    step "scale-$wl" timeout 200 $CUDA_MPI -n 2 python3 -m spmd scale "$RESULTS/$wl.yaml" --ranks 1,2 \
      --probe-max-bytes 0
    grep -A30 "^findings" "$RESULTS/scale-$wl.log" | grep -i "communicator"
  done
fi
