#!/usr/bin/env bash
# Exploring train on one GPU (issue 23): the primitives of a step (bench/train_ops.py, with cuBLASLt's tuning
# table), train's GPU tests, and spmd's graph steps at every batch of the table. Into $OUT/t (tarred).
set -u
export PYTHONPATH=/tmp/site:$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --target /tmp/site .wheels/pytest_mpi-*.whl 2>/dev/null
M="mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE=0 -x PYTHONPATH -x PYTHONUNBUFFERED"
D=$OUT/t; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version --format=csv > $D/env.txt 2>&1
timeout 150 python3 -m pytest -q -rs -p no:cacheprovider --gpu tests/gpu/test_train_gpu.py > $D/tests.log 2>&1; echo "tests rc=$? $(tail -1 $D/tests.log)"
timeout 150 python3 bench/train_ops.py ${OPS_ARGS:-} > $D/train-ops.jsonl 2> $D/train-ops.err; echo "ops rc=$?"
python3 -m spmd generate inputs/train.yaml > /dev/null; python3 -m spmd generate inputs/train-large.yaml >/dev/null
timeout 200 $M -n 1 python3 bench/train_sweep.py --ranks 1 --variants graph --steps 200 > $D/train-spmd.jsonl 2> $D/train-spmd.err; echo "sweep rc=$?"
cd $OUT && tar czf t.tgz t
