#!/usr/bin/env bash
# A 2-GPU train step and a reduce repeat on one clock (spmd run --trace), with NVTX ranges (--nvtx), and the train
# run under nsys where it is installed (its NVTX summary per rank as CSV). What docs/results/h200x2/trace holds.
# Usage: bash bench/tools/traces.sh OUTDIR   (SPMD_MPIEXEC: the launcher, e.g. "mpirun --allow-run-as-root")
set -u
T=$1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$T"
read -r -a LAUNCH <<< "${SPMD_MPIEXEC:-mpiexec}"
cat > "$W/train.yaml" <<YAML
workload: train
device: gpu
warmup: 1
repeats: 3
input: {path: '$W/train.h5', dataset: data}
generate: {shape: [65536, 844], dtype: float32, seed: 17}
params: {model: medium, batch: 256, steps: 20, optimizer: adam}
output: '$W/train-out'
YAML
cat > "$W/reduce.yaml" <<YAML
workload: reduce
device: gpu
warmup: 1
repeats: 5
input: {path: '$W/reduce.h5', dataset: x}
generate: {shape: [268435456], dtype: float32, seed: 3}
output: '$W/reduce-out'
YAML
for w in train reduce; do
  timeout 120 python3 -m spmd generate "$W/$w.yaml" > /dev/null
  timeout 150 "${LAUNCH[@]}" -n 2 python3 -m spmd run "$W/$w.yaml" --trace "$T/$w-2gpu.trace.json" --nvtx -q
  echo "$w rc=$?"
  cp "$W/$w-out/report.json" "$T/$w-2gpu-report.json"
done
if command -v nsys > /dev/null; then
  nsys --version
  timeout 150 "${LAUNCH[@]}" -n 2 nsys profile -t cuda,nvtx -o "$W/train-nsys-rank%q{OMPI_COMM_WORLD_RANK}" \
    --force-overwrite true python3 -m spmd run "$W/train.yaml" -q
  for f in "$W"/train-nsys-rank*.nsys-rep; do
    nsys stats -q --report nvtx_sum --format csv "$f" > "$T/$(basename "${f%.nsys-rep}")-nvtx.csv"
  done
else
  echo "nsys: not installed on this machine" | tee "$T/nsys.txt"
fi
ls -la "$T"
