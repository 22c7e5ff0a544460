export PYTHONPATH=$PWD
CUDA_LAUNCH_BLOCKING=1 timeout 200 python3 bench/train_ops.py --models medium,large --batches 16,32,8 > $OUT/ops.jsonl 2> $OUT/ops.err; echo rc=$?
grep -v "^\s*$" $OUT/ops.err | tail -25
