#!/usr/bin/env bash
# Issue 23's GPU calls on a one-GPU machine (.wheels carried), results tarred under $OUT:
#   bash bench/gpu_issue23.sh train     spmd's train against PyTorch's setups (bench/train_one_gpu.sh)
#   bash bench/gpu_issue23.sh verify    corrupt faults on every workload, verify: full's cost, tests/gpu
set -uo pipefail
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --target /tmp/site .wheels/pytest_mpi-*.whl \
  $(python3 -c "import hypothesis" 2>/dev/null || echo .wheels/hypothesis-*.whl .wheels/sortedcontainers-*.whl) 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD
export MPI="mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE=0 -x PYTHONPATH -x PYTHONUNBUFFERED"
export SPMD_MPIEXEC="$MPI"
R=/tmp/issue23; mkdir -p $R
if [[ "$1" == train ]]; then
  bash bench/train_one_gpu.sh $R/train-one; cat $R/train-one/summary.md
  tar -czf "$OUT/train-one.tgz" -C $R train-one
fi
if [[ "$1" == verify ]]; then
  timeout 200 bash bench/corrupt_gpu.sh $R/corrupt; cat $R/corrupt/corrupt.md
  timeout 240 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu --gpu > $R/corrupt/tests-gpu.log 2>&1
  echo "tests/gpu rc=$?: $(tail -1 $R/corrupt/tests-gpu.log)"
  tar -czf "$OUT/corrupt.tgz" -C $R corrupt
fi
if [[ "$1" == recheck ]]; then
  bash bench/train_recheck.sh $R/recheck; cat $R/recheck/*
  tar -czf "$OUT/recheck.tgz" -C $R recheck
fi
