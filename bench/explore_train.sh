set -u
export PYTHONPATH=$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
M="mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE=0 -x PYTHONPATH -x PYTHONUNBUFFERED"
D=$OUT/t; mkdir -p $D
{ nvidia-smi --query-gpu=name,driver_version --format=csv; which nsys ncu; python3 -c "import torch;print(torch.__version__, torch.backends.cuda.preferred_blas_library())"; python3 -c "import cupy;cupy.ones(1);from spmd.libraries import loaded_libraries as l;print(l('libcublas'))"; } > $D/env.txt 2>&1
timeout 120 python3 bench/train_ops.py > $D/train-ops.jsonl 2> $D/train-ops.err
PYTHONPATH=bench:$PWD timeout 120 python3 bench/train_kernels.py --models medium,large --batches 8,16,32 > $D/kernels.txt 2>&1
python3 -m spmd generate inputs/train.yaml > /dev/null; python3 -m spmd generate inputs/train-large.yaml >/dev/null
timeout 200 $M -n 1 python3 bench/train_sweep.py --ranks 1 --variants graph --steps 200 > $D/train-spmd.jsonl 2> $D/train-spmd.err
PYTHONPATH=bench:$PWD timeout 250 python3 bench/train_torch.py --steps 200 > $D/train-torch.jsonl 2> $D/train-torch.err
python3 bench/summarize_train.py $D > $D/summary.md 2>&1
cd $OUT && tar czf t.tgz t
