#!/usr/bin/env bash
# Build a CUDA-aware Open MPI from Debian's source package, then mpi4py from its sdist against
# it, into PREFIX; print how to use it. Needs a C compiler and CUDA's cuda.h (nvcc's toolkit);
# no network (fetch.sh brought the sources). About 6 minutes on 32 cores.
#   bash bench/cuda-mpi/build.sh [SRC] [PREFIX]     (defaults .cuda-mpi and /tmp/cuda-mpi)
# Environment: CUDA_HOME (default: the toolkit of the nvcc on PATH), JOBS (default: nproc).
set -euo pipefail
SRC=$(cd "${1:-.cuda-mpi}" && pwd)
PREFIX=${2:-/tmp/cuda-mpi}
JOBS=${JOBS:-$(nproc)}
if [[ -z "${CUDA_HOME:-}" ]]; then
  nvcc=$(command -v nvcc) || { echo "build.sh: no nvcc on PATH; set CUDA_HOME to a CUDA toolkit" >&2; exit 1; }
  CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
fi
[[ -f "$CUDA_HOME/include/cuda.h" ]] || { echo "build.sh: $CUDA_HOME/include/cuda.h not found" >&2; exit 1; }
# mpi4py is built without isolation (nothing can be downloaded): check its build tools before
# spending minutes on Open MPI.
python3 - <<'PY' || exit 1
import importlib.util, sys
missing = [name for name in ("setuptools", "Cython") if importlib.util.find_spec(name) is None]
if "setuptools" not in missing:
    try:
        from setuptools.command.bdist_wheel import bdist_wheel  # noqa: F401  (setuptools >= 70.1)
    except ImportError:
        if importlib.util.find_spec("wheel") is None:
            missing.append("wheel")
if missing:
    sys.exit(f"build.sh: building mpi4py needs {', '.join(missing)} for {sys.executable} (pip install them)")
PY
mkdir -p "$PREFIX"
PREFIX=$(cd "$PREFIX" && pwd)
LOG=$PREFIX/build.log
: > "$LOG"
timed() {  # timed NAME CMD...: run CMD with its output in the log, and say how long it took
  local name=$1 t0=$SECONDS; shift
  if ! "$@" >> "$LOG" 2>&1; then
    tail -30 "$LOG" >&2
    echo "build.sh: $name failed after $((SECONDS - t0)) s (whole log: $LOG)" >&2
    exit 1
  fi
  echo "$name: $((SECONDS - t0)) s" | tee -a "$PREFIX/build-times.txt"
}
: > "$PREFIX/build-times.txt"

# The tarball must be the one Debian's .dsc names (apt checked the .dsc against the archive).
dsc=$(ls "$SRC"/openmpi_*.dsc | tail -1)
orig=$(ls "$SRC"/openmpi_*.orig.tar.* | tail -1)
want=$(awk -v name="$(basename "$orig")" \
  '/^Checksums-Sha256:/{f=1; next} /^[^ ]/{f=0} f && $3 == name {print $1}' "$dsc")
echo "$want  $orig" | sha256sum --quiet -c - || { echo "build.sh: $orig does not match $dsc" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
tar -xf "$orig" -C "$WORK"
cd "$WORK"/openmpi-*
# Upstream's tarball as Debian ships it: Debian's patches only adapt packaging (paths, Fortran,
# pkg-config, other CPUs) and need autotools to regenerate configure, which is not wanted here.
# Transports: ob1 with the smcuda BTL (CUDA IPC between GPUs of one node) and TCP between
# nodes. UCX is left out on purpose: a UCX built without CUDA (Ubuntu's) would take device
# buffers and crash. ROMIO, Fortran and OpenSHMEM are not needed by spmd and cost build time.
timed configure ./configure --prefix="$PREFIX" --with-cuda="$CUDA_HOME" \
  --without-ucx --without-verbs --without-ofi --without-psm2 \
  --with-hwloc=internal --with-libevent=internal --with-pmix=internal \
  --disable-mpi-fortran --disable-oshmem --disable-io-romio --disable-dependency-tracking
timed make make -j "$JOBS" install

# mpi4py from its sdist, compiled by this MPI's mpicc (its rpath points at PREFIX/lib).
# No build isolation: nothing can be downloaded (the check at the top found its build tools).
timed mpi4py env MPICC="$PREFIX/bin/mpicc" python3 -m pip install -q --no-build-isolation --no-deps --no-index \
  --no-cache-dir --target "$PREFIX/python" "$SRC"/mpi4py-*.tar.gz

cat > "$PREFIX/env.sh" <<ENV
# source this: the CUDA-aware Open MPI and its mpi4py come first
export PATH="$PREFIX/bin:\$PATH"
export LD_LIBRARY_PATH="$PREFIX/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PYTHONPATH="$PREFIX/python\${PYTHONPATH:+:\$PYTHONPATH}"
ENV
"$PREFIX/bin/ompi_info" --parsable --all \
  | grep -E "mpi_built_with_cuda_support:value|^ompi:version:full" | tee -a "$LOG"
cat <<USE
Built: $("$PREFIX/bin/ompi_info" --parsable | grep ^ompi:version:full: | cut -d: -f4) with CUDA from $CUDA_HOME,
mpi4py $(PYTHONPATH="$PREFIX/python" python3 -c 'import mpi4py; print(mpi4py.__version__)') in $PREFIX/python.
Use it:
  source $PREFIX/env.sh
  python3 -m spmd info              # CUDA-aware MPI: yes (... MPIX_Query_cuda_support() = 1)
  mpirun -n 2 python3 -m spmd bench comm --backend all
USE
