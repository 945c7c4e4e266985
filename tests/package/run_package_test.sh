#!/usr/bin/env bash
# Builds and runs tests/package/consumer against tapegrad as an outside project would:
#   install       cmake --install the built library into a fresh prefix, then find_package
#   subdirectory  add_subdirectory on the source tree
# Usage: run_package_test.sh install|subdirectory <build dir> <source dir> <cmake> [<c++ compiler>]
# Only the consumer (and, for subdirectory, the library) is built; ccache makes a repeat fast.
set -euo pipefail
mode=$1 build=$2 src=$3 cmake=$4 cxx=${5:-}
work="$build/package-test/$mode"
rm -rf "$work"
mkdir -p "$work"

args=(-S "$src/tests/package/consumer" -B "$work/build" -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
[[ -n "$cxx" ]] && args+=(-DCMAKE_CXX_COMPILER="$cxx")
if command -v ccache >/dev/null; then args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

case "$mode" in
  install)
    "$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log"
    config="$work/prefix/lib/cmake/tapegrad/tapegradConfig.cmake"
    [[ -f "$config" ]] || { echo "no package config at $config"; cat "$work/install.log"; exit 1; }
    [[ -f "$work/prefix/include/tapegrad/tapegrad.h" ]] || { echo "headers not installed"; exit 1; }
    if grep -rq internal.h "$work/prefix/include"; then echo "internal.h must not be installed"; exit 1; fi
    args+=(-DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
    ;;
  subdirectory)
    args+=(-DTAPEGRAD_SOURCE_DIR="$src")
    ;;
  *) echo "unknown mode '$mode' (install or subdirectory)"; exit 2 ;;
esac

"$cmake" "${args[@]}" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
"$cmake" --build "$work/build" --target consumer -j2 >"$work/build.log" 2>&1 ||
  { tail -50 "$work/build.log"; exit 1; }

# The consumer's own compile line must carry the library's PUBLIC flags: xsimd always, and
# -march=native when the library was built with TAPEGRAD_NATIVE (xsimd's alignment and
# instruction set are part of the ABI).
cmd=$(grep '"command"' "$work/build/compile_commands.json" | grep 'consumer/main.cpp' || true)
grep -q -- '-DXTENSOR_USE_XSIMD' <<<"$cmd" || { echo "consumer compiled without XTENSOR_USE_XSIMD: $cmd"; exit 1; }
cache="$build/CMakeCache.txt"
[[ "$mode" == subdirectory ]] && cache="$work/build/CMakeCache.txt"
if grep -q '^TAPEGRAD_NATIVE:BOOL=ON' "$cache"; then
  grep -q -- '-march=native' <<<"$cmd" || { echo "library built with -march=native, consumer not: $cmd"; exit 1; }
fi

"$work/build/consumer"
