#!/usr/bin/env bash
# The GPU check: cuBLAS against OpenBLAS (the comparison may not skip), the device cache on a
# real device, the CPU/CUDA crossover with and without the weight cache, and W4 and W3 on
# cuda and on cpu. A GPU machine may lack the project's dependencies (xtensor, OpenBLAS,
# GoogleTest), so the check comes in two halves:
#
#   bench/gpu_check.sh pack [dir [build-dir]]
#                                   on a machine with the CUDA toolkit (a GPU not needed):
#                                   builds with -DTAPEGRAD_CUDA=ON and copies the programs, the
#                                   plugin and the shared libraries they need that are not part
#                                   of CUDA or the C library into dir (default gpu-pack)
#   bench/gpu_check.sh run [dir]    on the GPU machine, from that folder: one timed command;
#                                   non-zero on any failure or skip; the log in dir/gpu_check.log
#   bench/gpu_check.sh [build-dir]  both on one machine (build, then run), as before
#
# The crossover printed last sets the default of TAPEGRAD_CUDA_MIN_FLOPS (backend/device.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
PROGRAMS=(tests/test_backend_gemm tests/test_backend_device_cache bench/gemm_bench bench/workloads)

pack() {
  local dir=$1 build=${2:-build-gpu}
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_CUDA=ON \
        -DTAPEGRAD_BUILD_EXAMPLES=OFF -DTAPEGRAD_MPI=OFF
  cmake --build "$build" -j"$(nproc)" --target tapegrad_cuda tapegrad_cuda_emulated \
        test_backend_gemm test_backend_device_cache gemm_bench workloads
  rm -rf "$dir"
  mkdir -p "$dir/bin" "$dir/lib"
  for p in "${PROGRAMS[@]}"; do cp "$build/$p" "$dir/bin/"; done
  cp "$build/lib/libtapegrad_cuda.so" "$dir/lib/"
  cp "$build"/tests/libtapegrad_cuda_emulated.so "$dir/lib/"
  # OpenBLAS is dlopened by name (libopenblas.so.0), so ldd does not list it: copy it and
  # what it needs. CUDA's own libraries and the C/C++ runtime come from the GPU machine.
  local openblas
  openblas=$(/sbin/ldconfig -p | awk '/libopenblas\.so\.0 /{lib = $NF} END {print lib}')
  cp -L "$openblas" "$dir/lib/libopenblas.so.0"
  for f in "$dir"/bin/* "$dir"/lib/*; do
    ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
      libcuda*|libcublas*|libcudart*) ;;
      *) cp -L "$lib" "$dir/lib/" ;;
    esac
  done
  cp bench/gpu_check.sh "$dir/"
  echo "gpu_check: packed into $dir ($(du -sh "$dir" | cut -f1)); on the GPU machine run: $dir/gpu_check.sh run $dir"
}

run() {
  local dir=$1
  export LD_LIBRARY_PATH="$dir/lib:${LD_LIBRARY_PATH:-}"
  export TAPEGRAD_CUDA_PLUGIN="$dir/lib/libtapegrad_cuda.so"
  # The tests were built elsewhere: these name the plugins in this folder.
  export TAPEGRAD_TEST_CUDA_PLUGIN="$TAPEGRAD_CUDA_PLUGIN"
  export TAPEGRAD_TEST_EMULATED_PLUGIN="$dir/lib/libtapegrad_cuda_emulated.so"
  local log="$dir/gpu_check.log" failed=0
  exec > >(tee "$log") 2>&1
  step() {  # every step runs, whatever failed before; the status says if any did
    echo "== $*"
    env "$@" || { echo "gpu_check: FAILED: $*"; failed=1; }
  }
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  grep -m1 "model name" /proc/cpuinfo || true
  # TAPEGRAD_REQUIRE_CUDA turns GemmCuda.MatchesOpenBlas's skip into a failure.
  step TAPEGRAD_REQUIRE_CUDA=1 "$dir/bin/test_backend_gemm"
  step "$dir/bin/test_backend_device_cache"  # the cache's tests with the real plugin
  step "$dir/bin/gemm_bench" --max-size 4096
  for dev in cpu cuda; do
    for w in w4 w3; do step TAPEGRAD_DEVICE=$dev "$dir/bin/workloads" $w --threads 0 --reps 3; done
  done
  for w in w4 w3; do  # the same without the weight cache
    step TAPEGRAD_DEVICE=cuda TAPEGRAD_CUDA_CACHE_MB=0 "$dir/bin/workloads" $w --threads 0 --reps 3
  done
  if grep -q "SKIPPED \] GemmCuda" "$log"; then
    echo "gpu_check: the cuBLAS comparison was skipped; is there a GPU?"
    failed=1
  fi
  return $failed
}

case "${1:-}" in
  pack) pack "$(realpath -m "${2:-gpu-pack}")" "${3:-build-gpu}" ;;
  run) run "$(realpath "${2:-$(dirname "$0")}")" ;;
  *) build=${1:-build-gpu}
     pack "$(realpath -m "$build/pack")" "$build"
     run "$(realpath "$build/pack")" ;;
esac
