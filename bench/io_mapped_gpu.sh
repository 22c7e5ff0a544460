#!/usr/bin/env bash
# Issue 26's input-path target (reduce's whole-repeat weak efficiency at 2 GPUs >= 95%) with io.engine mapped
# (io.mapped: the file's pages locked at set-up, each read one DMA from the page cache) against direct, into DIR:
# spmd scale strong + weak of reduce (4 GiB; weak 4 GiB per GPU) at 1 and N GPUs, 3 runs per engine, alternating;
# spmd bench io at 1 and N ranks (4 GiB per rank) with the mapped rows beside their limits; the GPU io tests.
#   MPI="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0 ..." bash bench/io_mapped_gpu.sh DIR
set -uo pipefail
DIR=${1:-bench-out/io-mapped}
MPI=${MPI:-mpiexec}
N=$(nvidia-smi -L | wc -l)
RANKS=$(python3 -c "print(','.join(str(1 << k) for k in range(($N).bit_length()) if 1 << k <= $N))")
IO=/tmp/spmd-mapped/io
declare -A ENGINE_RUNS=([direct]=${DIRECT_RUNS:-99})  # fewer runs of direct where time is short
mkdir -p "$DIR"
step() {  # name, max seconds, command...
  local name=$1 limit=$2 t0=$SECONDS; shift 2
  timeout -k 5 "$limit" "$@" > "$DIR/$name.log" 2>&1
  echo "== $name: rc=$? in $((SECONDS - t0)) s: $(grep -E 'passed|failed|error|findings' "$DIR/$name.log" | tail -1)"
}
step tests-io 120 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_io_gpu.py --gpu
for run in $(seq "${RUNS:-3}"); do
  for engine in ${ENGINES:-mapped direct}; do
    (( run > ${ENGINE_RUNS[$engine]:-99} )) && continue
    step io-reduce-$engine-run$run 150 $MPI -n "$N" python3 -m spmd scale bench/reduce-scale.yaml --mode both \
      --ranks "$RANKS" -o io.engine=$engine -o repeats=5 -o generate.shards="$N" -o "input.shards=$IO/reduce/part-*.h5" \
      -o output=$IO/reduce/out --out "$DIR/io-reduce-$engine-run$run" --probe-max-bytes 0 --compare-comm none
  done
done
step bench-io-1 90 $MPI -n 1 python3 -m spmd bench io bench/reduce-scale.yaml -o "input.shards=$IO/reduce/part-*.h5" \
  --rounds 3 --json "$DIR/bench-io-1.json"
step bench-io-$N 90 $MPI -n "$N" python3 -m spmd bench io bench/reduce-scale.yaml \
  -o "input.shards=$IO/reduce/weak-x$N/part-*.h5" --rounds 3 --json "$DIR/bench-io-$N.json"
python3 bench/summarize_io.py --scaling "$DIR" > "$DIR/io-summary.md" 2>&1
