#!/usr/bin/env bash
# Fetch the sources build.sh needs, on a machine that can reach Debian and PyPI:
# Debian's Open MPI source package (apt-get source, through a private deb-src list, so the
# system's apt sources stay as they are and no root is needed) and mpi4py's sdist.
#   bash bench/cuda-mpi/fetch.sh [DEST]    (default .cuda-mpi, git-ignored; carry it to the GPU machine)
set -euo pipefail
DEST=${1:-.cuda-mpi}
SUITE=${DEBIAN_SUITE:-bookworm}          # bookworm ships Open MPI 4.1.4: --with-cuda is its CUDA switch
MPI4PY_VERSION=${MPI4PY_VERSION:-4.1.2}  # the version the GPU machine's own mpi4py has
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)

apt_dir=$(mktemp -d)
trap 'rm -rf "$apt_dir"' EXIT
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
echo "deb-src [signed-by=$KEYRING] http://deb.debian.org/debian $SUITE main" > "$apt_dir/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
apt-get -q "${apt_opts[@]}" update
# apt checks the .dsc against the signed Sources index; build.sh checks the tarball against the .dsc.
(cd "$DEST" && apt-get -q "${apt_opts[@]}" source --download-only openmpi)
python3 -m pip download -q --no-binary :all: --no-deps -d "$DEST" "mpi4py==$MPI4PY_VERSION"
ls -l "$DEST"
