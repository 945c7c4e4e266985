#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang-14, ASan + UBSan, coverage on the library) and runs
# each target in turn, one process at a time.
#
#   fuzz/run_fuzzers.sh [SECONDS] [TARGET...]   run each target SECONDS (default 60);
#                                               targets: checkpoint npz words points
#                                               (default all)
#   fuzz/run_fuzzers.sh --seeds                 regenerate the committed seed corpus
#
# Needs clang-14 and libclang-rt-14-dev (scripts/install-deps.sh --fuzz).
# Each run starts from fuzz/corpus/<target>/ (committed: seeds and past crashers) and grows a
# working corpus in build-fuzz/corpus/<target>/ (not committed). A crash, leak, timeout or
# out-of-memory stops the target and leaves its input under build-fuzz/crashes/<target>/:
# fix the bug, then copy the input into fuzz/corpus/<target>/ so that ctest replays it
# (tests/io/test_fuzz_regressions.cpp). Totals go to build-fuzz/summary.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TAPEGRAD_FUZZ_BUILD:-$root/build-fuzz}
cxx=${CXX_FUZZ:-clang++-14}

command -v "$cxx" >/dev/null || { echo "run_fuzzers: $cxx not found (scripts/install-deps.sh --fuzz)"; exit 2; }
cmake -S "$root/fuzz" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
cmake --build "$build" -j"${JOBS:-2}" --target fuzz_checkpoint fuzz_npz fuzz_words fuzz_points fuzz_inspect make_fuzz_seeds

if [[ "${1:-}" == "--seeds" ]]; then
  "$build/make_fuzz_seeds" "$root" "$root/fuzz/corpus"
  exit 0
fi

seconds=${1:-60}
shift || true
targets=("$@")
(( ${#targets[@]} )) || targets=(checkpoint npz words points inspect)

: >"$build/summary.txt"
status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t" crashes="$build/crashes/$t"
  mkdir -p "$corpus" "$crashes"
  dict=()
  [[ -f "$root/fuzz/$t.dict" ]] && dict=(-dict="$root/fuzz/$t.dict")
  echo "== fuzz_$t for ${seconds}s"
  log="$build/fuzz_$t.log"
  # detect_leaks: every input's allocations must be freed; -timeout: a hang is a failure.
  if ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     "$build/fuzz_$t" "$corpus" "$root/fuzz/corpus/$t" "${dict[@]}" \
       -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
       -artifact_prefix="$crashes/" -print_final_stats=1 >"$log" 2>&1; then
    result=ok
  else
    result="FAILED (see $log and $crashes/)"
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  ran=$seconds  # a crash stops the run early: executions / rate is how long it ran
  [[ $result != ok && -n "$execs" && -n "$rate" && "$rate" -gt 0 ]] && ran=$(( execs / rate ))
  line="fuzz_$t: ${ran}s, ${execs:-?} executions, coverage ${cov:-?} edges, corpus $(ls "$corpus" | wc -l) files: $result"
  echo "$line" | tee -a "$build/summary.txt"
done
exit $status
