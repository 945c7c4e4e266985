#!/usr/bin/env bash
# The soak test: trains examples/char_rnn_classify for a long time, SIGKILLs it at random
# moments, resumes it each time, and checks that a crash never costs more than it should.
#
#   bench/soak.sh [--minutes M] [--kills K] [--build DIR] [--limit N] [--batch B]
#                 [--hidden H] [--cell C] [--seed S] [--work DIR]
#
# Defaults: 20 minutes, at least 5 kills, build dir build-rel, 3000 words per split, batch 32.
# The example saves its checkpoint (atomically) at the end of every epoch, so with --limit N
# and --batch B the checkpoint interval is ceil(N / B) steps.
#
# What it checks:
#   1. Every checkpoint on disk always loads: tapegrad-inspect after every kill, and a watcher
#      that inspects the file every 2 s while training runs (saves, kills and all).
#   2. No more than the steps since the last checkpoint are lost: after each kill, the
#      checkpoint holds the last epoch boundary the run had passed (from the CSV log, one row per
#      step, flushed), so the loss is at most one interval.
#   3. The final model equals an uninterrupted run with the same seed, bitwise: the two final
#      checkpoints are byte-identical (weights, optimizer, scheduler, RNG, data position), and
#      so are the two loss curves (CSV).
# The uninterrupted reference runs in the background at the same time (both single-threaded).
# Exit status 0 when every check passed. Figures go to stdout and $WORK/soak_summary.txt.
set -euo pipefail

minutes=20 kills=5 build=build-rel limit=3000 batch=32 hidden=64 cell=rnn seed=1 work=""
while (( $# )); do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --kills) kills=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --hidden) hidden=$2; shift 2 ;;
    --cell) cell=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "soak: unknown option $1"; exit 2 ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
[[ "$build" = /* ]] || build="$root/$build"
exe="$build/examples/char_rnn_classify"
inspect="$build/tools/tapegrad-inspect"
for f in "$exe" "$inspect"; do
  [[ -x "$f" ]] || { echo "soak: $f not built (cmake --build $build --target char_rnn_classify tapegrad-inspect)"; exit 2; }
done
work=${work:-$(mktemp -d /tmp/tg_soak.XXXXXX)}
mkdir -p "$work"
summary="$work/soak_summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }   # floating-point arithmetic without bc
now() { date +%s.%N; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

steps_per_epoch=$(( (limit + batch - 1) / batch ))
common=(--data "$root/datasets/words" --limit "$limit" --batch "$batch" --hidden "$hidden" --cell "$cell"
        --seed "$seed" --threads 1 --log-every 1)

# ---- calibration: how many epochs make M minutes --------------------------------------------
calib_steps=$(( steps_per_epoch * 2 ))
t0=$(now)
"$exe" "${common[@]}" --epochs 1000 --stop-after "$calib_steps" --checkpoint "$work/calib/c.ckpt" >"$work/calib.log" 2>&1
t1=$(now)
per_step=$(calc "($t1 - $t0) / $calib_steps")
epochs=$(awk "BEGIN { print int(($minutes * 60) / ($per_step * $steps_per_epoch)) + 1 }")
(( epochs >= 2 )) || epochs=2
total_steps=$(( epochs * steps_per_epoch ))
say "soak: $cell cell, hidden $hidden, limit $limit, batch $batch: $steps_per_epoch steps per epoch (checkpoint interval)"
say "soak: $(awk "BEGIN { printf \"%.2f\", $per_step * 1000 }") ms per step (calibration) -> $epochs epochs, $total_steps steps, ~$minutes min"

# ---- the uninterrupted reference, in the background -----------------------------------------
ref_dir="$work/ref" soak_dir="$work/soak"
rm -rf "$ref_dir" "$soak_dir"
mkdir -p "$ref_dir" "$soak_dir"
"$exe" "${common[@]}" --epochs "$epochs" --checkpoint "$ref_dir/run.ckpt" >"$ref_dir/log.txt" 2>&1 &
ref_pid=$!

# ---- the watcher: the checkpoint must load whenever one looks -------------------------------
ck="$soak_dir/run.ckpt"
watch_log="$work/watch.log"
: >"$watch_log"
(
  while true; do
    if [[ -f "$ck" ]]; then
      if "$inspect" "$ck" >/dev/null 2>&1; then echo ok >>"$watch_log"
      else echo "FAIL $(date +%T)" >>"$watch_log"; cp "$ck" "$work/unloadable-$(date +%s%N).ckpt" 2>/dev/null || true
      fi
    fi
    sleep 2
  done
) &
watch_pid=$!
cleanup() { kill "$watch_pid" 2>/dev/null || true; kill "$ref_pid" 2>/dev/null || true; }
trap cleanup EXIT

# ---- the soak run: kill, check, resume --------------------------------------------------------
last_csv_step() {  # the last complete row of the CSV log: the last step the run finished
  [[ -f "$soak_dir/run.csv" ]] || { echo 0; return; }
  awk -F, '/^[0-9]+,/ { s = $1 } END { print s + 0 }' "$soak_dir/run.csv"
}
ck_step() {
  [[ -f "$ck" ]] || { echo 0; return; }
  "$inspect" "$ck" | awk '/^step:/ { print $2 }'
}

start=$(date +%s)
est=$(calc "$per_step * $total_steps")
mean_gap=$(calc "$est / ($kills + 2)")
killed=0 runs=0 failures=0 lost_total=0 lost_max=0
lost_list=""
RANDOM=$seed
while true; do
  runs=$(( runs + 1 ))
  resume=()
  [[ -f "$ck" ]] && resume=(--resume)
  "$exe" "${common[@]}" --epochs "$epochs" --checkpoint "$ck" "${resume[@]}" >>"$soak_dir/log.txt" 2>&1 &
  pid=$!
  # Until the kills asked for are done, spread them over the estimated time left (0.5 to 1.5
  # shares of it each, so they all land before the end); then up to as many again, 0.25 to
  # 1.75 mean gaps apart; then let the run finish.
  if (( killed < kills )); then
    left=$(calc "$per_step * ($total_steps - $(ck_step))")
    gap=$(calc "$left / ($kills - $killed + 1) * (0.5 + $RANDOM / 32767)")
  elif (( killed < kills * 2 )); then
    gap=$(calc "$mean_gap * (0.25 + 1.5 * $RANDOM / 32767)")
  else
    gap=1000000
  fi
  deadline=$(( $(now_ms) + $(awk "BEGIN { print int($gap * 1000) }") ))
  while kill -0 "$pid" 2>/dev/null && (( $(now_ms) < deadline )); do sleep 0.1; done
  if ! kill -0 "$pid" 2>/dev/null; then
    if wait "$pid"; then break; fi
    say "soak: run $runs exited with an error (see $soak_dir/log.txt)"
    failures=$(( failures + 1 ))
    break
  fi
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  killed=$(( killed + 1 ))
  done_steps=$(last_csv_step)
  if [[ -f "$ck" ]] && ! "$inspect" "$ck" >"$work/inspect.txt" 2>&1; then
    say "soak: kill $killed: the checkpoint does not load"
    cat "$work/inspect.txt"
    failures=$(( failures + 1 ))
    cp "$ck" "$work/unloadable-kill$killed.ckpt"
  fi
  saved=$(ck_step)
  boundary=$(( done_steps / steps_per_epoch * steps_per_epoch ))
  lost=$(( done_steps - saved ))
  # The checkpoint is the last boundary passed, or the one before if the kill came between
  # the boundary's last step and the end of its save (evaluation, writing).
  if (( saved != boundary )) && ! (( done_steps % steps_per_epoch == 0 && saved == boundary - steps_per_epoch )); then
    say "soak: kill $killed: $done_steps steps done but the checkpoint holds step $saved (expected $boundary)"
    failures=$(( failures + 1 ))
  fi
  (( lost > steps_per_epoch )) && { say "soak: kill $killed lost $lost steps (> $steps_per_epoch)"; failures=$(( failures + 1 )); }
  lost_total=$(( lost_total + lost ))
  (( lost > lost_max )) && lost_max=$lost
  lost_list+="$lost "
  leftovers=$(ls "$soak_dir" | grep -c '\.tmp-' || true)
  say "soak: kill $killed at $(( $(date +%s) - start ))s: $done_steps steps done, checkpoint at step $saved, $lost lost; .tmp files left: $leftovers"
done
end=$(date +%s)
wait "$ref_pid"
ref_pid=""
kill "$watch_pid" 2>/dev/null || true

# ---- the verdict -----------------------------------------------------------------------------
identical_ck=no identical_csv=no
cmp -s "$ck" "$ref_dir/run.ckpt" && identical_ck=yes
cmp -s "$soak_dir/run.csv" "$ref_dir/run.csv" && identical_csv=yes
watch_ok=$(grep -c '^ok' "$watch_log" || true)
watch_fail=$(grep -c '^FAIL' "$watch_log" || true)
[[ $identical_ck == yes ]] || { failures=$(( failures + 1 )); say "soak: the final checkpoint differs from the uninterrupted run's"; "$inspect" "$ck" "$ref_dir/run.ckpt" | grep -E 'step:|norm' | head -40; }
[[ $identical_csv == yes ]] || { failures=$(( failures + 1 )); say "soak: the loss curve differs from the uninterrupted run's"; }
(( watch_fail == 0 )) || failures=$(( failures + 1 ))
(( killed >= kills )) || { failures=$(( failures + 1 )); say "soak: only $killed kills (wanted $kills): the run finished too soon"; }

say "soak: $(( (end - start) / 60 )) min $(( (end - start) % 60 )) s (training and the final evaluation) in $runs runs, $killed SIGKILLs survived"
say "soak: steps lost per kill: $lost_list(total $lost_total, max $lost_max, interval $steps_per_epoch)"
say "soak: watcher inspections: $watch_ok loaded, $watch_fail failed; after-kill inspections: $killed"
say "soak: final checkpoint identical to the uninterrupted run: $identical_ck; loss curve identical: $identical_csv"
say "soak: $( (( failures == 0 )) && echo PASSED || echo "FAILED ($failures problems)" ); files in $work"
(( failures == 0 ))
