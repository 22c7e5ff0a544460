#!/usr/bin/env bash
# Silent data corruption on the GPU (issue 23): every workload with one element of its computed output times 1.01
# (SPMD_FAULT kind=corrupt, 2 seeds) must exit 3 with no report; and matmul's verify: full (every element
# recomputed in float64 on the GPU) timed against its GEMM at 8192^3, float32 and float64. One GPU, one rank;
# RANKS=2 runs the faults on 2 ranks (rank 0 corrupts, NCCL between GPUs), VERIFY_FULL=0 leaves out the timing.
#   MPI="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0" bash bench/corrupt_gpu.sh DIR
set -uo pipefail
DIR=${1:-bench-out/corrupt}
MPI=${MPI:-mpiexec}
DEVICE=${DEVICE:-gpu}
RANKS=${RANKS:-1}
mkdir -p "$DIR"
N=${N:-8192}
W=/tmp/spmd-corrupt; rm -rf $W; mkdir -p $W
BIG="-o generate.shape=[$N,$N] -o params.b.generate.shape=[$N,$N] -o params.gather=none -o params.save=null"
declare -A CASES=(
  [reduce-full]="inputs/reduce.yaml -o verify=full"
  [reduce-attrs]="inputs/reduce.yaml -o verify=attrs"
  [matmul-float32-full]="inputs/matmul.yaml -o verify=full"
  [matmul-float64-full]="inputs/matmul.yaml -o verify=full -o generate.dtype=float64 -o params.b.generate.dtype=float64"
  [stencil]="inputs/stencil.yaml"
  [train]="inputs/train.yaml -o repeats=2 -o params.checkpoint=null"
  [histogram]="examples/histogram.yaml"
)
echo "| case | seed | exit | seconds | report | message |" > "$DIR/corrupt.md"
echo "|---|---|---|---|---|---|" >> "$DIR/corrupt.md"
for name in $(echo "${!CASES[@]}" | tr ' ' '\n' | sort); do
  set -- ${CASES[$name]}
  config=$1; shift
  python3 -m spmd generate "$config" "$@" > /dev/null 2>&1
  for seed in 0 7; do
    t0=$(date +%s.%N)
    SPMD_FAULT="rank=0,phase=compute,kind=corrupt" SPMD_FAULT_SEED=$seed $MPI -n "$RANKS" \
      python3 -m spmd run "$config" "$@" -o device=$DEVICE --out "$W/$name-$seed" > "$W/$name-$seed.log" 2>&1
    rc=$?
    secs=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
    report=$([[ -e $W/$name-$seed/report.json ]] && echo written || echo none)
    msg=$({ grep -m1 "spmd: error" "$W/$name-$seed.log" || grep -m1 "spmd: " "$W/$name-$seed.log"; } | sed 's/|/\\|/g' | cut -c1-220)
    echo "| $name | $seed | $rc | $secs | $report | $msg |" >> "$DIR/corrupt.md"
  done
done
[[ ${VERIFY_FULL:-1} == 0 ]] && exit 0
# verify: full against the GEMM, 3 runs each
for dtype in float32 float64; do
  python3 -m spmd generate inputs/matmul.yaml $BIG -o generate.dtype=$dtype -o params.b.generate.dtype=$dtype \
    -o input.path=$W/A-$dtype.h5 -o params.b.path=$W/B-$dtype.h5 > /dev/null
  for run in 1 2 3; do
    $MPI -n 1 python3 -m spmd run inputs/matmul.yaml $BIG -o generate.dtype=$dtype -o params.b.generate.dtype=$dtype \
      -o input.path=$W/A-$dtype.h5 -o params.b.path=$W/B-$dtype.h5 -o verify=full -o device=$DEVICE -o repeats=3 \
      --out "$W/verify-$dtype-$run" -q > /dev/null 2>&1
    cp "$W/verify-$dtype-$run/report.json" "$DIR/verify-full-$dtype-$run.json"
  done
done
