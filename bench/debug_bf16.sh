#!/usr/bin/env bash
# One GPU: train's GPU tests (bf16 included) and a bf16 sweep point, before the measurement call.
export PYTHONPATH=/tmp/site:$PWD NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-deps --target /tmp/site .wheels/pytest_mpi-*.whl 2>/dev/null
timeout 200 python3 -m pytest -q -rs -x -p no:cacheprovider --gpu tests/gpu/test_train_gpu.py > $OUT/tests.log 2>&1; echo "tests rc=$?"; tail -30 $OUT/tests.log
python3 -m spmd generate inputs/train.yaml > /dev/null
timeout 120 mpirun --allow-run-as-root -n 1 -x PYTHONPATH python3 bench/train_sweep.py --ranks 1 --models medium --variants graph-bf16,graph --steps 100 2>&1 | cut -c1-400
timeout 60 python3 bench/train_ops.py --models medium --batches 16 --precision bf16 2>/dev/null | grep -v gemm | cut -c1-200
