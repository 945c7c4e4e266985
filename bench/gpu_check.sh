#!/usr/bin/env bash
# For a machine with an NVIDIA GPU, the driver and the CUDA toolkit: build the cuBLAS plugin,
# check cuBLAS against OpenBLAS (the test may not skip here), and benchmark CPU vs CUDA GEMM.
#   bench/gpu_check.sh [build-dir [gemm_bench args]]   (default build-gpu; non-zero on failure)
# The benchmark's last line is the measured crossover, to set TAPEGRAD_CUDA_MIN_FLOPS.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
shift || true
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_CUDA=ON -DTAPEGRAD_BUILD_EXAMPLES=OFF
cmake --build "$B" -j"$(nproc)" --target tapegrad_cuda test_backend_gemm gemm_bench
export TAPEGRAD_CUDA_PLUGIN="$(cd "$B" && pwd)/lib/libtapegrad_cuda.so"
# TAPEGRAD_REQUIRE_CUDA turns GemmCuda.MatchesOpenBlas's skip into a failure.
TAPEGRAD_REQUIRE_CUDA=1 "$B/tests/test_backend_gemm" | tee "$B/test_backend_gemm.log"
if grep -q "SKIPPED \] GemmCuda" "$B/test_backend_gemm.log"; then
  echo "gpu_check: the cuBLAS comparison was skipped; is there a GPU?" >&2
  exit 1
fi
"$B/bench/gemm_bench" "$@"
