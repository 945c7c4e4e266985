#!/bin/sh
# Runs a test program with TAPEGRAD_CPU_LEVEL=<level> (lib/src/backend/vec.h), or exits 77
# (ctest: skipped) where this CPU or its operating system lacks the level's instructions
# (/proc/cpuinfo lists only what the kernel enabled).   run_at_level.sh <level> <program> [args]
level=$1
shift
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
need() {
  for f in "$@"; do
    case $flags in
      *" $f "*) ;;
      *) echo "this CPU lacks $f: TAPEGRAD_CPU_LEVEL=$level skipped"; exit 77 ;;
    esac
  done
}
case $level in
  avx2) need avx avx2 fma ;;
  avx512) need avx avx2 fma avx512f avx512cd avx512bw avx512dq avx512vl ;;
esac
TAPEGRAD_CPU_LEVEL=$level exec "$@"
