#!/usr/bin/env bash
# Why the upper half of a CPU launch's ranks ran slower in the CPU rounds' strong series (docs/validation.md, fifth CPU
# round): the fifth round's strong stencil and MLP at RANKS ranks on one node, by turns, placed four ways.
#   free      no binding, as the rounds ran (spmd run)
#   scale     no binding, inside spmd scale --mode strong (the rounds' own sweep, its sizes up to RANKS)
#   pinned    local rank r on CPUs [r*k, r*k + k), k = the node's CPUs / RANKS
#   reversed  local rank r on the CPUs pinned gives rank RANKS - 1 - r
# A slow half that follows the CPUs is the machine's; one that stays with the ranks is the work's or the data's.
# Each launch's report.json lands in OUTDIR as VARIANT-WORKLOAD-TURN.json, with lscpu; then
#   python -m bench.tools.rank_halves --reports OUTDIR
# Usage: bash bench/tools/halves_design.sh OUTDIR [TURNS]   (SPMD_MPIEXEC: the launcher; RANKS: 8; QUICK=1: small;
# TURN0: added to each file's turn, so that several calls by turns write into one folder)
set -u
T=$1
TURNS=${2:-3}
TURN0=${TURN0:-0}
RANKS=${RANKS:-8}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$T"
read -r -a LAUNCH <<< "${SPMD_MPIEXEC:-mpiexec}"
CPUS=$(nproc)
PER=$((CPUS / RANKS))
if [ "$PER" -lt 1 ]; then
  echo "$RANKS ranks on $CPUS CPUs: nothing to pin" >&2
  exit 2
fi
if [ "${QUICK:-0}" = 1 ]; then GRID=512 ROWS=4096 STEPS=4; else GRID=2688 ROWS=32768 STEPS=20; fi
lscpu > "$T/lscpu.txt" 2>&1
cat > "$W/stencil.yaml" <<YAML
workload: stencil
device: cpu
warmup: 1
repeats: 7
input: {path: '$W/stencil.h5', dataset: field}
generate: {shape: [$GRID, $GRID], dtype: float32, seed: 431, distribution: normal, loc: 1.0, scale: 2.0}
params: {iterations: 14}
output: '$W/stencil-out'
YAML
# the strong series' run at RANKS: the 1-rank batch of 896 split among the ranks
cat > "$W/train.yaml" <<YAML
workload: train
device: cpu
warmup: 1
repeats: 3
input: {path: '$W/train.h5', dataset: data}
generate: {shape: [$ROWS, 448], dtype: float32, seed: 433, distribution: normal, loc: 1.0, scale: 2.0}
params: {model: [448, 896, 448, 10], batch: $((896 / RANKS)), steps: $STEPS, optimizer: adam}
output: '$W/train-out'
YAML
cat > "$W/pin.sh" <<'SH'
#!/bin/sh
# pin this rank to its PER CPUs by its node-local rank (Open MPI's or MPICH's variable)
r=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}
if [ "$PIN" = reversed ]; then r=$((RANKS - 1 - r)); fi
exec taskset -c "$((r * PER))-$((r * PER + PER - 1))" "$@"
SH
chmod +x "$W/pin.sh"
export OMP_NUM_THREADS=$PER RANKS PER  # the threads spmd's default gives a rank, whatever its affinity shows
for w in stencil train; do
  timeout 300 python3 -m spmd generate "$W/$w.yaml" > /dev/null || exit 1
done
for turn in $(seq 1 "$TURNS"); do
  for w in stencil train; do
    for v in free scale pinned reversed; do
      rm -rf "$W/$w-out"
      case $v in
        free) timeout 300 "${LAUNCH[@]}" -n "$RANKS" python3 -m spmd run "$W/$w.yaml" -q ;;
        scale)  # the strong series holds the 1-rank batch: the MLP's whole 896
          whole=()
          if [ "$w" = train ]; then whole=(-o params.batch=896); fi
          timeout 300 "${LAUNCH[@]}" -n "$RANKS" python3 -m spmd scale "$W/$w.yaml" --mode strong --out "$W/$w-out" \
            "${whole[@]}" -q ;;
        *) PIN=$v timeout 300 "${LAUNCH[@]}" -n "$RANKS" "$W/pin.sh" python3 -m spmd run "$W/$w.yaml" -q ;;
      esac
      echo "$turn $w $v rc=$?"
      if [ "$v" = scale ]; then
        cp "$W/$w-out/scaling.json" "$T/$v-$w-$((TURN0 + turn)).json"
      else
        cp "$W/$w-out/report.json" "$T/$v-$w-$((TURN0 + turn)).json"
      fi
    done
  done
done
