#!/bin/sh
# The benchmark table of the README in one command: builds the workloads program (Release) if
# needed, then runs W1-W5 through tapegrad and PyTorch 1.13 at 1 and 2 cores and prints the
# table (bench/workloads_report.py; its options pass through: --rounds N, --workloads w1,w3,
# --threads 1, --metric cpu, --quick).
#
#   bench/run_benchmarks.sh                   # build dir: build-bench (or $BUILD_DIR)
#   BUILD_DIR=build bench/run_benchmarks.sh --workloads w1 --rounds 5
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
case $BUILD_DIR in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" --target workloads >/dev/null

/usr/bin/python3 -c 'import torch' 2>/dev/null || {
  echo "PyTorch missing: apt-get install -y python3-torch (run with /usr/bin/python3)" >&2
  exit 1
}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"\
     "torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec /usr/bin/python3 "$ROOT/bench/workloads_report.py" --bin "$BUILD_DIR/bench/workloads" "$@"
