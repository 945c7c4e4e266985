#!/usr/bin/env bash
# The figures of the README's "Distributed training" section, from a build directory:
#   bench/ddp_bench.sh [build]
# 1. allreduce_bench with 2 ranks over shared memory, then over TCP on loopback;
# 2. ddp_bench on W3 (global batch 16): 1 process with 1 and 2 OpenBLAS threads, then 2 ranks
#    with 1 thread each (batch 8 per rank).
set -euo pipefail
build=${1:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   # harmless when not root
export OMPI_MCA_btl_vader_single_copy_mechanism=none                # containers forbid CMA
mpirun=(mpirun --oversubscribe)
quiet() { grep -v '^tapegrad: CUDA unavailable' || true; }
echo "== load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
echo "== allreduce, 2 ranks, shared memory"
"${mpirun[@]}" -np 2 "$build/bench/allreduce_bench" 2>&1 | quiet
echo "== allreduce, 2 ranks, TCP over loopback"
"${mpirun[@]}" -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo "$build/bench/allreduce_bench" 2>&1 | quiet
for threads in 1 2; do
  echo "== W3, 1 process, batch 16, $threads OpenBLAS thread(s)"
  "$build/bench/ddp_bench" --threads $threads --reps 10 2>&1 | quiet | tr '\n' ' '; echo
done
echo "== W3, 2 ranks, batch 8 each, 1 OpenBLAS thread each"
"${mpirun[@]}" -np 2 "$build/bench/ddp_bench" --threads 1 --reps 10 2>&1 | quiet | tr '\n' ' '; echo
echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)"
