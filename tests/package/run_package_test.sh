#!/usr/bin/env bash
# Builds and runs tests/package/consumer against tapegrad as an outside project would:
#   static        cmake --install this (static) build into a fresh prefix, then find_package
#   shared        build the library alone with BUILD_SHARED_LIBS=ON, install it, find_package;
#                 also pkg-config against that install
#   pkgconfig     pkg-config --static against the static install
#   subdirectory  add_subdirectory on the source tree
# Usage: run_package_test.sh MODE <build dir> <source dir> <cmake> [<c++ compiler>]
#
# Every consumer must: compile without -march (and, using only tapegrad::tapegrad, without
# xtensor, xsimd or cereal: neither on its compile line nor among the headers it read), run,
# print nothing on stderr on this CPU-only machine (the default device is auto), and find the
# CUDA plugin relative to the prefix where one was installed. consumer_xtensor
# (tapegrad::xtensor) must get XTENSOR_USE_XSIMD, and -march=native exactly when the library
# was built with it. Only the consumer (and, for shared and subdirectory, the library) is
# built; ccache makes a repeat fast.
set -euo pipefail
mode=$1 build=$2 src=$3 cmake=$4 cxx=${5:-}
work="$build/package-test/$mode"
rm -rf "$work"
mkdir -p "$work"
cxx_bin=${cxx:-c++}

fail() { echo "package.$mode: $*"; exit 1; }

args=(-S "$src/tests/package/consumer" -B "$work/build" -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
[[ -n "$cxx" ]] && args+=(-DCMAKE_CXX_COMPILER="$cxx")
launcher=()
if command -v ccache >/dev/null; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  launcher=(ccache)
fi

# install <build dir> <prefix>: cmake --install, then the checks every install must pass.
install_to() {
  "$cmake" --install "$1" --prefix "$2" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; fail "cmake --install failed"; }
  [[ -f "$2/lib/cmake/tapegrad/tapegradConfig.cmake" ]] || fail "no package config in $2"
  [[ -f "$2/include/tapegrad/tapegrad.h" ]] || fail "headers not installed"
  [[ -f "$2/lib/pkgconfig/tapegrad.pc" ]] || fail "no tapegrad.pc in $2/lib/pkgconfig"
  if grep -rq internal.h "$2/include"; then fail "internal.h must not be installed"; fi
}

# run_quiet <exe> <name>: runs it; stdout must say OK, stderr must be empty.
run_quiet() {
  "$1" >"$work/$2.out" 2>"$work/$2.err" || { cat "$work/$2.out" "$work/$2.err"; fail "$2 failed"; }
  grep -q "consumer OK" "$work/$2.out" || { cat "$work/$2.out"; fail "$2 did not say OK"; }
  [[ ! -s "$work/$2.err" ]] || { cat "$work/$2.err"; fail "$2 printed on stderr (a CPU-only run must not)"; }
}

# check_plugin_found <exe> <prefix>: where the CUDA plugin was installed with the library,
# an explicit cuda request must have found it there (the reason is then the driver or the
# device, never "not found").
check_plugin_found() {
  [[ -f "$2/lib/libtapegrad_cuda.so" ]] || return 0
  TAPEGRAD_DEVICE=cuda TAPEGRAD_VERBOSE=1 "$1" >/dev/null 2>"$work/plugin.err" || true
  if grep -q "libtapegrad_cuda.so not found" "$work/plugin.err"; then
    cat "$work/plugin.err"; fail "the plugin in $2/lib was not found from $1"
  fi
}

# check_cmake_consumer <native ON|OFF>: the two consumers' compile lines and headers.
check_cmake_consumer() {
  local native=$1 cmd xcmd deps
  cmd=$(grep '"command"' "$work/build/compile_commands.json" | grep 'consumer/main.cpp' || true)
  xcmd=$(grep '"command"' "$work/build/compile_commands.json" | grep 'consumer/main_xtensor.cpp' || true)
  [[ -n "$cmd" && -n "$xcmd" ]] || fail "compile commands not found"
  grep -q -- '-march' <<<"$cmd" && fail "consumer compiled with an architecture flag: $cmd"
  grep -q -- 'XTENSOR_USE_XSIMD' <<<"$cmd" && fail "consumer got xtensor's flags: $cmd"
  deps=$(find "$work/build/CMakeFiles/consumer.dir" -name 'main.cpp.o.d' | head -1)
  [[ -n "$deps" ]] || fail "no dependency file for consumer/main.cpp"
  if grep -Eq '/(xtensor|xsimd|xtl|cereal)/' "$deps"; then
    fail "consumer/main.cpp read xtensor or cereal headers: $(grep -Eo '[^ ]*/(xtensor|xsimd|xtl|cereal)/[^ ]*' "$deps" | head -3)"
  fi
  grep -q -- '-DXTENSOR_USE_XSIMD' <<<"$xcmd" || fail "consumer_xtensor compiled without XTENSOR_USE_XSIMD: $xcmd"
  if [[ "$native" == ON ]]; then
    grep -q -- '-march=native' <<<"$xcmd" || fail "library built with -march=native, tapegrad::xtensor did not pass it: $xcmd"
  else
    grep -q -- '-march' <<<"$xcmd" && fail "portable library, but tapegrad::xtensor passed an architecture flag: $xcmd"
  fi
  return 0
}

build_consumer() {
  "$cmake" "${args[@]}" "$@" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure failed"; }
  "$cmake" --build "$work/build" --target consumer consumer_xtensor -j2 >"$work/build.log" 2>&1 ||
    { tail -50 "$work/build.log"; fail "build failed"; }
}

# pkgconfig_consumer <prefix> <static|shared>
pkgconfig_consumer() {
  local prefix=$1 kind=$2 cflags libs
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  cflags=$(pkg-config --cflags tapegrad)
  if [[ "$kind" == static ]]; then libs=$(pkg-config --libs --static tapegrad)
  else libs="$(pkg-config --libs tapegrad) -Wl,-rpath,$prefix/lib"; fi
  grep -q -- '-march' <<<"$cflags $libs" && fail "pkg-config passes an architecture flag: $cflags $libs"
  # shellcheck disable=SC2086
  "${launcher[@]}" "$cxx_bin" -std=c++17 -O1 $cflags "$src/tests/package/consumer/main.cpp" \
    -o "$work/consumer_pc_$kind" $libs >"$work/pc_build.log" 2>&1 ||
    { cat "$work/pc_build.log"; fail "pkg-config build ($kind) failed: $cflags $libs"; }
  run_quiet "$work/consumer_pc_$kind" "consumer_pc_$kind"
  if [[ "$kind" == shared ]]; then
    readelf -d "$work/consumer_pc_$kind" | grep -q 'NEEDED.*libtapegrad\.so' ||
      fail "the pkg-config consumer does not use libtapegrad.so"
  fi
}

native=$(grep -q '^TAPEGRAD_NATIVE:BOOL=ON' "$build/CMakeCache.txt" && echo ON || echo OFF)
case "$mode" in
  static)
    prefix="$work/prefix"
    install_to "$build" "$prefix"
    [[ -f "$prefix/lib/libtapegrad.a" ]] || fail "no libtapegrad.a"
    build_consumer -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
    check_cmake_consumer "$native"
    # As installed: the executable in <prefix>/bin finds the plugin in <prefix>/lib.
    mkdir -p "$prefix/bin"
    cp "$work/build/consumer" "$work/build/consumer_xtensor" "$prefix/bin/"
    run_quiet "$prefix/bin/consumer" consumer
    run_quiet "$prefix/bin/consumer_xtensor" consumer_xtensor
    check_plugin_found "$prefix/bin/consumer" "$prefix"
    ;;
  shared)
    # The library alone, shared (tests, examples, benchmarks and tools are not built).
    libbuild="$build/package-test/shared-library"
    prefix="$work/prefix"
    lib_args=(-S "$src" -B "$libbuild" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON
              -DTAPEGRAD_NATIVE="$native")
    [[ -n "$cxx" ]] && lib_args+=(-DCMAKE_CXX_COMPILER="$cxx")
    "$cmake" "${lib_args[@]}" >"$work/lib-configure.log" 2>&1 || { cat "$work/lib-configure.log"; fail "library configure failed"; }
    "$cmake" --build "$libbuild" -j2 >"$work/lib-build.log" 2>&1 || { tail -50 "$work/lib-build.log"; fail "library build failed"; }
    install_to "$libbuild" "$prefix"
    so=$(find "$prefix/lib" -maxdepth 1 -name 'libtapegrad.so.*.*.*' | head -1)
    [[ -n "$so" ]] || fail "no versioned libtapegrad.so in $prefix/lib"
    soname=$(readelf -d "$so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
    [[ "$soname" =~ ^libtapegrad\.so\.[0-9]+\.[0-9]+$ ]] || fail "soname '$soname', expected libtapegrad.so.<major>.<minor>"
    # Only the public API is exported: no third-party or backend-internal symbols.
    # (Instantiations of std templates over tapegrad's public types are exported too: libstdc++
    # gives its templates default visibility.)
    exported=$(nm -D --defined-only "$so" | c++filt | sed -E 's/^[^ ]+ [^ ]+ //')
    leaked=$(grep -E '^((typeinfo|typeinfo name|vtable|VTT) for )?((xt|xsimd|xtl|cereal)::|tg::(blas|cpu|gemm)::)' <<<"$exported" | head -5 || true)
    [[ -z "$leaked" ]] || fail "libtapegrad.so exports internals: $leaked"
    grep -q '^tg::Tensor::backward' <<<"$exported" || fail "libtapegrad.so does not export tg::Tensor::backward"
    grep -q '^typeinfo for tg::ShapeError' <<<"$exported" || fail "libtapegrad.so does not export its exceptions' typeinfo"
    echo "libtapegrad.so: soname $soname, $(wc -l <<<"$exported") exported symbols"
    build_consumer -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
    check_cmake_consumer "$native"
    readelf -d "$work/build/consumer" | grep -q "NEEDED.*\[$soname\]" || fail "consumer does not need $soname"
    run_quiet "$work/build/consumer" consumer
    run_quiet "$work/build/consumer_xtensor" consumer_xtensor
    check_plugin_found "$work/build/consumer" "$prefix"
    pkgconfig_consumer "$prefix" shared
    ;;
  pkgconfig)
    prefix="$work/prefix"
    install_to "$build" "$prefix"
    pkgconfig_consumer "$prefix" static
    ;;
  subdirectory)
    build_consumer -DTAPEGRAD_SOURCE_DIR="$src"
    check_cmake_consumer "$(grep -q '^TAPEGRAD_NATIVE:BOOL=OFF' "$work/build/CMakeCache.txt" && echo OFF || echo ON)"
    run_quiet "$work/build/consumer" consumer
    run_quiet "$work/build/consumer_xtensor" consumer_xtensor
    ;;
  *) fail "unknown mode (static, shared, pkgconfig or subdirectory)" ;;
esac
echo "package.$mode: ok"
