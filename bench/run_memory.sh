#!/usr/bin/env bash
# Peak live tensor bytes of the same workloads in tapegrad (its allocator's counter) and in
# PyTorch 1.13 (rebuilt from torch.profiler's memory events, median of 5 runs), in one run:
# builds bench/memory_bench if needed, runs both and prints the table with the ratio.
#   bench/run_memory.sh [build dir = build]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
python=/usr/bin/python3  # Debian's python3-torch (the python3 on PATH may lack torch)

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j2 --target memory_bench >"$build/memory_bench-build.log" 2>&1 ||
  { tail -30 "$build/memory_bench-build.log"; exit 1; }
"$python" -c "import torch" 2>/dev/null ||
  { echo "run_memory: $python cannot import torch (scripts/install-deps.sh --torch)"; exit 1; }

mib() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1048576 }'; }
field() { awk -v k="$2" '$1 == k { print $2 }' <<<"$1"; }

echo "peak live tensor bytes per step; $(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"\
     "torch $("$python" -c 'import torch; print(torch.__version__)')"
echo
echo "| workload | tapegrad before | tapegrad peak | PyTorch before | PyTorch peak (median, min–max of 5) | tapegrad / PyTorch | OpenBLAS kernel tg |"
echo "|---|---|---|---|---|---|---|"
for w in chain w3 lm; do
  tg=$("$build/bench/memory_bench" "$w" 2>/dev/null)
  pt=$("$python" "$root/bench/memory_bench.py" "$w" 2>/dev/null)
  tp=$(field "$tg" peak) pp=$(field "$pt" peak)
  printf '| %s | %s MiB | %s MiB | %s MiB | %s MiB (%s–%s) | %s | %s |\n' "$w" \
    "$(mib "$(field "$tg" before)")" "$(mib "$tp")" "$(mib "$(field "$pt" before)")" "$(mib "$pp")" \
    "$(mib "$(field "$pt" peak_min)")" "$(mib "$(field "$pt" peak_max)")" \
    "$(awk -v a="$tp" -v b="$pp" 'BEGIN { printf "%.3f", a / b }')" "$(field "$tg" blas_core)"
done
