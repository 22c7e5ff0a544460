#!/usr/bin/env bash
# Issue 24's targets on one GPU, into DIR: a 4 GiB float32 dataset, chunked (spmd generate) and contiguous
# (a copy), from the page cache: spmd bench io 3 times each (every engine against one pread, N-thread preads and
# pinned/pageable copies), then reduce's whole repeat with io.engine h5py and direct, 3 runs each; summary by
# bench/summarize_io.py.   SIZE (elements) and DEVICE shrink it for a dry run on a CPU.
#   MPI="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0" bash bench/io_gpu.sh DIR
set -euo pipefail
DIR=${1:-bench-out/io-gpu}
MPI=${MPI:-mpiexec}
SIZE=${SIZE:-1073741824}
DEVICE=${DEVICE:-gpu}
W=${W:-/tmp/spmd-io}
mkdir -p "$DIR" "$W"
CFG=bench/io-4gib.yaml
O=(-o "generate.shape=[$SIZE]" -o "device=$DEVICE" -o "output=$W/out")
python3 -m spmd generate $CFG "${O[@]}" -o input.path=$W/chunked.h5 > /dev/null
python3 - "$W" <<'PY'
import sys, h5py
w = sys.argv[1]
with h5py.File(f"{w}/chunked.h5") as src, h5py.File(f"{w}/contiguous.h5", "w") as dst:
    x = src["x"]
    out = dst.create_dataset("x", shape=x.shape, dtype=x.dtype)  # no chunks: contiguous
    step = 1 << 26
    for start in range(0, x.shape[0], step):
        out[start:start + step] = x[start:start + step]
    for key, value in x.attrs.items():
        out.attrs[key] = value
PY
for layout in contiguous chunked; do
  for run in 1 2 3; do
    $MPI -n 1 python3 -m spmd bench io $CFG "${O[@]}" -o input.path=$W/$layout.h5 --rounds 5 \
      --json "$DIR/bench-io-$layout-run$run.json" > "$DIR/bench-io-$layout-run$run.txt"
  done
done
for run in 1 2 3; do
  for engine in h5py direct; do
    $MPI -n 1 python3 -m spmd run $CFG "${O[@]}" -o input.path=$W/contiguous.h5 -o io.engine=$engine \
      --out "$W/out-$engine-$run" -q
    cp "$W/out-$engine-$run/report.json" "$DIR/reduce-$engine-run$run.json"
  done
done
python3 bench/summarize_io.py "$DIR" > "$DIR/summary.md"
