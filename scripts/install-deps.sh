#!/usr/bin/env bash
# Installs exactly the Debian 12 packages tapegrad needs. Idempotent: packages already
# present are skipped, and apt is not touched at all when nothing is missing.
#   scripts/install-deps.sh            build + test dependencies
#   scripts/install-deps.sh --torch    also python3-torch (reference data, benchmarks)
#   scripts/install-deps.sh --fuzz     also clang-14 and libFuzzer (fuzz/run_fuzzers.sh)
set -euo pipefail

packages=(
  g++ cmake make ccache pkgconf     # toolchain (pkg-config: the package test)
  libxtensor-dev libxsimd-dev xtl-dev   # arrays
  libopenblas-dev                   # BLAS: cblas.h to build, libopenblas.so.0 loaded at run time
  libcereal-dev                     # checkpoints
  libgtest-dev                      # tests
  libcli11-dev                      # example command lines
  python3-numpy                     # npz interop test
  gnuplot-nox                       # loss-curve plots
  libopenmpi-dev openmpi-bin        # tapegrad::distributed and its mpirun tests
)
for arg in "$@"; do
  case "$arg" in
    --torch) packages+=(python3-torch) ;;
    --fuzz) packages+=(clang-14 libclang-rt-14-dev) ;;
    *) echo "install-deps: unknown option '$arg' (--torch, --fuzz)"; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
