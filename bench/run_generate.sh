#!/usr/bin/env bash
# Greedy generation (issue 17): tapegrad with its KV cache, tapegrad recomputing every prefix,
# and PyTorch 1.13 with a hand-written cache (bench/generate_bench.py), for 64 and 256 new
# tokens from a 16-token prompt at batch 1 and 8, one thread each, interleaved round by round
# (the best of each cell over the rounds counts); then peak memory of one cached generation
# (tapegrad's allocator counter; PyTorch's profiler, as bench/run_memory.sh). Prints the table.
#
#   bench/run_generate.sh [--rounds R] [--tiny]      # build dir: build-bench (or $BUILD_DIR)
#
# --tiny runs a small model with few repetitions, to check that everything works.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build-bench}"
case $build in /*) ;; *) build=$root/$build ;; esac
python=/usr/bin/python3  # Debian's python3-torch (the python3 on PATH may lack torch)
rounds=3 tiny=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --tiny) tiny=--tiny; rounds=1; shift ;;
    *) echo "usage: $0 [--rounds R] [--tiny]" >&2; exit 2 ;;
  esac
done

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
else
  cmake "$build" >/dev/null  # a build folder from before generate_bench existed learns of it
fi
cmake --build "$build" -j2 --target generate_bench >"$build/generate_bench-build.log" 2>&1 ||
  { tail -30 "$build/generate_bench-build.log"; exit 1; }
"$python" -c "import torch" 2>/dev/null ||
  { echo "run_generate: $python cannot import torch (scripts/install-deps.sh --torch)"; exit 1; }
export OPENBLAS_NUM_THREADS=1

field() { awk -v k="$2" '$1 == k { print $2 }' <<<"$1"; }
best() { awk -v a="${1:-0}" -v b="$2" 'BEGIN { print (a > b ? a : b) }'; }
declare -A tps
reps_for() {  # recomputation at 256 tokens takes seconds: fewer repetitions
  if [[ -n $tiny ]]; then echo 1; elif [[ $1 == nocache && $2 == 256 ]]; then echo 1; elif [[ $1 == nocache ]]; then echo 2; else echo 5; fi
}

configs="64:1 64:8 256:1 256:8"
for ((r = 1; r <= rounds; r++)); do
  for c in $configs; do
    n=${c%%:*} b=${c##*:}
    for impl in tg_cache tg_nocache torch_cache; do
      case $impl in
        tg_cache) out=$("$build/bench/generate_bench" cache --new "$n" --batch "$b" --reps "$(reps_for cache "$n")" $tiny) ;;
        tg_nocache) out=$("$build/bench/generate_bench" nocache --new "$n" --batch "$b" --reps "$(reps_for nocache "$n")" $tiny) ;;
        torch_cache) out=$("$python" "$root/bench/generate_bench.py" cache --new "$n" --batch "$b" --reps "$(reps_for cache "$n")" $tiny) ;;
      esac
      key="$impl:$n:$b"
      tps[$key]=$(best "${tps[$key]:-0}" "$(field "$out" tokens_per_s)")
      [[ $impl == tg_cache ]] && kernel=$(field "$out" blas_core)
    done
  done
done

echo "greedy generation, new tokens per second (best of $rounds rounds), one thread; $(date -u +%Y-%m-%d),"\
     "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), OpenBLAS kernel $kernel,"\
     "torch $("$python" -c 'import torch; print(torch.__version__)')${tiny:+ (--tiny model)}"
echo
echo "| new tokens | batch | tapegrad, cache | tapegrad, no cache | PyTorch, cache | cache / no cache | tapegrad / PyTorch |"
echo "|---|---|---|---|---|---|---|"
for c in $configs; do
  n=${c%%:*} b=${c##*:}
  a=${tps[tg_cache:$n:$b]} x=${tps[tg_nocache:$n:$b]} p=${tps[torch_cache:$n:$b]}
  printf '| %s | %s | %s | %s | %s | %s× | %s× |\n' "$n" "$b" "$a" "$x" "$p" \
    "$(awk -v a="$a" -v b="$x" 'BEGIN { printf "%.1f", a / b }')" "$(awk -v a="$a" -v b="$p" 'BEGIN { printf "%.2f", a / b }')"
done

mib() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1048576 }'; }
echo
echo "| peak live bytes, one cached generation | tapegrad before | tapegrad peak | PyTorch before | PyTorch peak | tapegrad / PyTorch |"
echo "|---|---|---|---|---|---|"
for c in 256:1 256:8; do
  n=${c%%:*} b=${c##*:}
  tg=$("$build/bench/generate_bench" memory --new "$n" --batch "$b" $tiny)
  pt=$("$python" "$root/bench/generate_bench.py" memory --new "$n" --batch "$b" $tiny)
  printf '| %s new tokens, batch %s | %s MiB | %s MiB | %s MiB | %s MiB | %s |\n' "$n" "$b" \
    "$(mib "$(field "$tg" before)")" "$(mib "$(field "$tg" peak)")" "$(mib "$(field "$pt" before)")" \
    "$(mib "$(field "$pt" peak)")" "$(awk -v a="$(field "$tg" peak)" -v b="$(field "$pt" peak)" 'BEGIN { printf "%.3f", a / b }')"
done
