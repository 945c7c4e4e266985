#!/bin/sh
# The benchmark tables of the README in one command: builds the workloads and fma_peak programs
# (Release) if needed, then runs W1-W5 through tapegrad and PyTorch 1.13 at 1 and 2 cores and
# prints the machine's FMA peak and three tables (bench/workloads_report.py): each library as a
# user runs it (default), both on tapegrad's kernels (same), and an emulated CPU that OpenBLAS
# misdetects (misdetect); beside each ratio, tapegrad's GEMM floor and its time over it. Its
# options pass through: --tables default,same,misdetect, --workloads w1,w3, --threads 1|2|1,2,
# --rounds N, --metric cpu, --blas-core NAME, --quick (one round, fewer repetitions).
#
#   bench/run_benchmarks.sh                   # build dir: build-bench (or $BUILD_DIR); ~10 min
#   bench/run_benchmarks.sh --quick           # ~3 min
#   BUILD_DIR=build bench/run_benchmarks.sh --tables same --workloads w3,w5 --threads 1
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
case $BUILD_DIR in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" --target workloads fma_peak >/dev/null

/usr/bin/python3 -c 'import torch' 2>/dev/null || {
  echo "PyTorch missing: apt-get install -y python3-torch (run with /usr/bin/python3)" >&2
  exit 1
}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"\
     "torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec /usr/bin/python3 "$ROOT/bench/workloads_report.py" --bin "$BUILD_DIR/bench/workloads" \
  --fma-bin "$BUILD_DIR/bench/fma_peak" "$@"
