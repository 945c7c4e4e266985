#!/usr/bin/env bash
# The per-op overhead of tapegrad against PyTorch eager, in one run: builds bench/op_overhead
# if needed, runs it and bench/op_overhead.py on the same chain, and prints ns per op and the
# ratio (PyTorch / tapegrad: how many times less overhead tapegrad has).
#   bench/run_overhead.sh [build dir = build] [N = 10000] [R = 15]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}" n="${2:-10000}" reps="${3:-15}"
python=/usr/bin/python3  # Debian's python3-torch (the python3 on PATH may lack torch)

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j2 --target op_overhead >"$build/op_overhead-build.log" 2>&1 ||
  { tail -30 "$build/op_overhead-build.log"; exit 1; }
"$python" -c "import torch" 2>/dev/null ||
  { echo "run_overhead: $python cannot import torch (scripts/install-deps.sh --torch)"; exit 1; }

tg_out=$(OPENBLAS_NUM_THREADS=1 "$build/bench/op_overhead" "$n" "$reps" 2>"$build/op_overhead.err")
pt_out=$(OPENBLAS_NUM_THREADS=1 "$python" "$root/bench/op_overhead.py" "$n" "$reps" 2>/dev/null)
torch_version=$("$python" -c "import torch; print(torch.__version__)")

echo "op overhead: y <- tanh(y * w + b) on (4,) tensors, N=$n (3N ops), best of $reps;"
echo "ns per op of process CPU time; $(date -u +%Y-%m-%d), torch $torch_version, 1 thread;"
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); tapegrad: $(sed -n 's/^op_overhead: .*; //p' "$build/op_overhead.err")"
echo
join <(sort <<<"$tg_out") <(sort <<<"$pt_out") | awk '
  BEGIN { order["forward"] = 1; order["backward"] = 2; order["step"] = 3; order["forward_nograd"] = 4
          what["forward"] = "forward (recording)"; what["backward"] = "backward (replay)"
          what["step"] = "step (fwd + bwd + free)"; what["forward_nograd"] = "forward, no grad" }
  { row[order[$1]] = sprintf("| %-25s | %12.0f | %12.0f | %6.1fx |", what[$1], $2, $3, $3 / $2) }
  END { print "| workload                  | tapegrad ns  | PyTorch ns   | ratio   |"
        print "|---------------------------|--------------|--------------|---------|"
        for (i = 1; i <= 4; ++i) print row[i] }'
