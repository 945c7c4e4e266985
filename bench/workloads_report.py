#!/usr/bin/python3
"""Runs every workload through tapegrad (bench/workloads.cpp) and PyTorch (bench/workloads.py),
each side in its own process, interleaved over several rounds, and prints the comparison
tables (markdown). Called by bench/run_benchmarks.sh, which builds first.

Tables (--tables, any of them, in this order):
  default    each library as a user runs it: OPENBLAS_CORETYPE and TAPEGRAD_BLAS_KERNEL unset
             for both (even where this environment sets them: the header says so), so
             OpenBLAS picks its kernels for PyTorch, and tapegrad picks them for itself.
  same       both on the same kernels: OPENBLAS_CORETYPE=<tapegrad's choice> for both
             (`workloads info` with the default environment says what that is).
  misdetect  a CPU that OpenBLAS misdetects, emulated: OPENBLAS_CORETYPE=Prescott (the SSE3
             kernels OpenBLAS 0.3.21 falls back to on a CPU it does not know) for both, and
             TAPEGRAD_BLAS_KERNEL=best for tapegrad (what its automatic choice does when
             OpenBLAS's own choice is of a slower class and the variable is unset).
--blas-core NAME replaces them with one table, OPENBLAS_CORETYPE=NAME for both.

Thread settings:
  1 core   tapegrad: tg::set_num_threads(1), OPENBLAS_NUM_THREADS=1
           PyTorch:  torch.set_num_threads(1), OPENBLAS_NUM_THREADS=1
  2 cores  PyTorch:  torch.set_num_threads(1), OPENBLAS_NUM_THREADS=2 (its fastest here: 2 + 2
                     is slower, the two pools fight over the cores)
           tapegrad: three settings are measured and the fastest is reported: 1 thread (the
                     1-core run), tg::set_num_threads(2) (its own 2 threads, OpenBLAS at 1),
                     and OpenBLAS's own 2 threads (set_num_threads not called)
A round runs, per workload, tapegrad@1, PyTorch@1, tapegrad@2 (both settings), PyTorch@2 (the
order of the two sides alternates between rounds); the best of all rounds counts for each side.

GEMM floor: every tapegrad run also replays one step's products alone through raw OpenBLAS
calls, as the step runs them (bench/workloads.cpp); the floor column is the best replay of all
rounds for the setting reported, with its GFLOP/s, and "tg / floor" is tapegrad's step time
over it. The header gives the machine's FMA peak, measured in the same run (bench/fma_peak).

Timing: --metric wall (default) uses the best wall-clock ms per step. On a busy machine,
--metric cpu uses process CPU time for the 1-core rows (robust to other jobs; equal to wall
time on an idle machine); 2-core rows always use wall time.

Usage: workloads_report.py --bin BUILD/bench/workloads [--fma-bin BUILD/bench/fma_peak]
       [--tables default,same,misdetect] [--rounds N] [--workloads w1,w3] [--threads 1,2]
       [--metric wall|cpu] [--blas-core NAME] [--quick]
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

WORKLOADS = {
    "w1": "W1 MLP 784-256-256-10, b64, SGD",
    "w2b1": "W2 char-RNN 57-128-18, T12, b1, Adam",
    "w2b32": "W2 char-RNN 57-128-18, T12, b32, Adam",
    "w3": "W3 GPT d128 L2 H4 T64 b16, AdamW",
    "w4": "W4 Linear 1024-1024 b256, fwd+bwd",
    "w5": "W5 GPT d384 L4 H6 T128 b8, AdamW",
}
W4_GFLOP = 3 * 2.0 * 256 * 1024 * 1024 / 1e9
TABLES = {
    "default": "each library as a user runs it (OPENBLAS_CORETYPE and TAPEGRAD_BLAS_KERNEL unset)",
    "same": "both on the same kernels (OPENBLAS_CORETYPE={core} for both)",
    "misdetect": "a CPU OpenBLAS misdetects, emulated (OPENBLAS_CORETYPE=Prescott for both; "
                 "TAPEGRAD_BLAS_KERNEL=best for tapegrad)",
    "custom": "OPENBLAS_CORETYPE={core} for both",
}
# Goals per table: ratio of steps/s (tapegrad ÷ PyTorch); tapegrad ÷ its GEMM floor; W4: >= 90%
# of raw sgemm (default and same tables).
RATIO_GOALS = {
    "default": {"w1": 1.5, "w2b1": 3.0, "w3": 1.5, "w5": 1.5},
    "same": {"w1": 1.5, "w2b1": 3.0, "w3": 1.5, "w5": 1.5},
    "misdetect": {"w3": 3.0},
    "custom": {"w1": 1.5, "w2b1": 3.0, "w3": 1.5, "w5": 1.5},
}
FLOOR_GOALS = {"w3": 1.2, "w5": 1.2}  # tapegrad's step time ÷ its GEMM floor, at most
MISDETECT_WORKLOADS = "w1,w3"  # the misdetect table's workloads unless --workloads is given
KNOBS = ("OPENBLAS_CORETYPE", "TAPEGRAD_BLAS_KERNEL")


def run(cmd, env_extra):
    """Runs one process with the environment's BLAS knobs removed, then env_extra added."""
    env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    env.update(env_extra)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    out = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition(" ")
        try:
            out[k] = float(v)
        except ValueError:
            out[k] = v
    return out


def tg_cmd(a, w, threads, blas_threads, env):
    """threads: tg::set_num_threads (0: not called, OpenBLAS's own threads)."""
    cmd = [a.bin, w, "--threads", str(threads)]
    if a.quick:
        cmd += ["--reps", "2"]
    return cmd, dict(env["tg"], OPENBLAS_NUM_THREADS=str(blas_threads))


def torch_cmd(a, w, blas_threads, env):
    cmd = ["/usr/bin/python3", os.path.join(HERE, "workloads.py"), w, "--torch-threads", "1"]
    if a.quick:
        cmd += ["--reps", "2"]
    return cmd, dict(env["torch"], OPENBLAS_NUM_THREADS=str(blas_threads))


def better(prev, new, key):
    """Keeps the run with the lower `key`; peak RSS is the max over runs (conservative); the
    GEMM floor is the best of all runs."""
    if prev is None:
        return new
    best = dict(new if new[key] < prev[key] else prev)
    best["peak_rss_kb"] = max(prev["peak_rss_kb"], new["peak_rss_kb"])
    for k in ("floor_t",):
        if k in prev and k in new:
            best[k] = min(prev[k], new[k])
    return best


def mib(kb):
    return f"{kb / 1024:.0f} MiB"


def measure(a, names, settings, env, label):
    """Every round of every workload at every setting; best[(workload, side, setting)]."""
    best = {}

    def record(key, res, metric_key):
        best[key] = better(best.get(key), res, metric_key)

    for r in range(a.rounds):
        for w in names:
            jobs = []
            if 1 in settings:
                jobs.append(("tg", "1", tg_cmd(a, w, 1, 1, env)))
                jobs.append(("torch", "1", torch_cmd(a, w, 1, env)))
            if 2 in settings:
                jobs.append(("tg", "2/own", tg_cmd(a, w, 2, 1, env)))
                jobs.append(("torch", "2", torch_cmd(a, w, 2, env)))
                jobs.append(("tg", "2/blas", tg_cmd(a, w, 0, 2, env)))
                if 1 not in settings:  # the 1-thread candidate, otherwise the 1-core run
                    jobs.append(("tg", "2/1", tg_cmd(a, w, 1, 1, env)))
            if r % 2 == 1:  # alternate which side goes first
                jobs.reverse()
            for side, setting, (cmd, e) in jobs:
                res = run(cmd, e)
                cpu = a.metric == "cpu" and setting == "1"
                res["t"] = res["cpu_ms_per_step" if cpu else "ms_per_step"]
                if "raw_ms" in res:  # W4: raw sgemm, timed the same way
                    res["raw_t"] = res["raw_cpu_ms" if cpu else "raw_ms"]
                if "floor_ms" in res:
                    res["floor_t"] = res["floor_cpu_ms" if cpu else "floor_ms"]
                record((w, side, setting), res, "t")
                if side == "tg" and setting == "1" and 2 in settings:
                    wall = dict(res)  # the 1-thread run is also a 2-core candidate (wall time)
                    wall["t"] = res["ms_per_step"]
                    if "raw_ms" in res:
                        wall["raw_t"] = res["raw_ms"]
                    if "floor_ms" in res:
                        wall["floor_t"] = res["floor_ms"]
                    record((w, "tg", "2/1"), wall, "t")
            print(f"  {label}: round {r + 1}/{a.rounds} {w} done", file=sys.stderr, flush=True)
    return best


def table(a, table_name, names, settings, env, core):
    load0 = os.getloadavg()[0]
    t_start = time.time()
    best = measure(a, names, settings, env, table_name)
    load1 = os.getloadavg()[0]
    cores = {side: sorted({str(v.get("blas_core")) for k, v in best.items() if k[1] == side})
             for side in ("tg", "torch")}
    goals = RATIO_GOALS[table_name]
    rows, notes = [], []
    for w in names:
        for s in settings:
            torch_r = best[(w, "torch", str(s))]
            if s == 1:
                tg_r, tg_set = best[(w, "tg", "1")], "1"
            else:
                labels = {"2/1": "1 thread", "2/own": "own 2 thr", "2/blas": "BLAS 2 thr"}
                cands = [(best[(w, "tg", k)]["t"], k) for k in labels]
                k = min(cands)[1]
                tg_r, tg_set = best[(w, "tg", k)], labels[k]
                notes.append(f"{w} 2 cores, tapegrad: " +
                             ", ".join(f"{labels[c]} {t:.3f} ms" for t, c in cands) +
                             f" -> {labels[k]}")
            ratio = torch_r["t"] / tg_r["t"]
            goal_parts = []
            if w in goals:
                goal_parts.append(f">= {goals[w]}x" + (" ok" if ratio >= goals[w] else " MISSED"))
            if w == "w4" and table_name != "misdetect":
                # raw sgemm as the step runs its products: the floor (the raw column itself,
                # except with tapegrad's own threads, where the raw column runs on one thread)
                raw_t = tg_r.get("floor_t", tg_r["raw_t"])
                gf, raw_gf = W4_GFLOP / (tg_r["t"] / 1e3), W4_GFLOP / (raw_t / 1e3)
                pct = 100 * gf / raw_gf
                goal_parts.append(f"{pct:.0f}% of raw sgemm ({gf:.0f} / {raw_gf:.0f} GF/s)" +
                                  (" ok" if pct >= 90 else " MISSED"))
            floor = tg_r.get("floor_t")
            if floor:
                over = tg_r["t"] / floor
                floor_cell = f"{floor:.3f} ({tg_r['floor_gflop'] / (floor / 1e3):.0f} GF/s)"
                over_cell = f"{over:.2f}x"
                if w in FLOOR_GOALS and table_name != "misdetect":
                    over_cell += f" (<= {FLOOR_GOALS[w]}x " + (
                        "ok)" if over <= FLOOR_GOALS[w] else "MISSED)")
                if over < 0.95:  # the step cannot run its products faster than alone
                    over_cell += " (below the floor: noise?)"
            else:
                floor_cell = over_cell = "-"
            rss_ok = tg_r["peak_rss_kb"] <= torch_r["peak_rss_kb"]
            threads = (f"tg {tg_set} / torch 1+2 BLAS" if s == 2 else "1 / 1")
            rows.append([WORKLOADS[w], f"{s} ({threads})", f"{tg_r['t']:.3f}", f"{torch_r['t']:.3f}",
                         f"{ratio:.2f}x", "; ".join(goal_parts) or "-", floor_cell, over_cell,
                         mib(tg_r["peak_rss_kb"]) + ("" if rss_ok else " (above!)"),
                         mib(torch_r["peak_rss_kb"]),
                         f"{tg_r['faults_per_step']:.0f} / {torch_r['faults_per_step']:.0f}",
                         f"{tg_r['hwm_growth_kb']:.0f} / {torch_r['hwm_growth_kb']:.0f}",
                         f"{tg_r.get('blas_core')} / {torch_r.get('blas_core')}"])
            if floor:
                notes.append(f"{w} at {s} core{'s' if s > 1 else ''}, floor: "
                             f"{tg_r['floor_products']:.0f} products "
                             f"({tg_r.get('floor_concurrent', 0):.0f} in parallel parts), "
                             f"{tg_r['floor_gflop']:.3f} GFLOP, {tg_r.get('floor_replay')}")

    metric = "process CPU time (1 core), wall (2 cores)" if a.metric == "cpu" else "wall clock"
    print(f"\n### {table_name}: {TABLES[table_name].format(core=core)}\n")
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {a.rounds} round(s), best of each, ms/step by "
          f"{metric}; load average {load0:.2f} before, {load1:.2f} after; "
          f"{time.time() - t_start:.0f} s; OpenBLAS kernels: tapegrad {'/'.join(cores['tg'])}, "
          f"PyTorch {'/'.join(cores['torch'])}\n")
    head = ["workload", "cores (threads)", "tapegrad ms/step", "PyTorch ms/step",
            "ratio (steps/s)", "goal", "GEMM floor ms (GF/s)", "tg / floor",
            "tapegrad peak RSS", "PyTorch peak RSS", "page faults/step tg / torch",
            "peak growth after warm-up kB tg / torch", "OpenBLAS kernel tg / torch"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    for n in notes:
        print(n)
    for how in sorted({str(v.get("blas")) for k, v in best.items() if k[1] == "tg"}):
        print(f"tapegrad's OpenBLAS: {how}")


def fma_peak(a, settings):
    if not a.fma_bin:
        return "FMA peak: not measured (no --fma-bin)"
    n = max(settings)
    r = run([a.fma_bin, "--threads", str(n)] + (["--ms", "50"] if a.quick else []), {})
    line = (f"FMA peak ({r['fma_isa']}, {r['fma_lanes']:.0f} floats a vector; bench/fma_peak): "
            f"{r['fma_peak_gflops_1']:.0f} GFLOP/s on 1 thread")
    if n > 1:
        line += f", {r['fma_peak_gflops_n']:.0f} on {n} threads"
    return line


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True, help="the workloads binary")
    p.add_argument("--fma-bin", default="", help="the fma_peak binary")
    p.add_argument("--tables", default="default,same,misdetect")
    p.add_argument("--rounds", type=int, default=0, help="default 2; --quick: 1")
    p.add_argument("--workloads", default="",
                   help=f"default: all (the misdetect table: {MISDETECT_WORKLOADS})")
    p.add_argument("--threads", default="1,2", help="settings to run: 1, 2 or 1,2")
    p.add_argument("--metric", choices=["wall", "cpu"], default="wall")
    p.add_argument("--blas-core", default="", help="one table, OPENBLAS_CORETYPE=NAME for both")
    p.add_argument("--quick", action="store_true", help="1 round, fewer repetitions")
    a = p.parse_args()
    a.rounds = a.rounds or (1 if a.quick else 2)
    settings = [int(s) for s in a.threads.split(",")]
    if any(s not in (1, 2) for s in settings):
        sys.exit(f"--threads: expected 1, 2 or 1,2, got {a.threads}")
    tables = ["custom"] if a.blas_core else a.tables.split(",")
    for t in tables:
        if t not in TABLES:
            sys.exit(f"unknown table {t}; expected some of default, same, misdetect")
    chosen = {}
    for t in tables:
        names = (a.workloads or (MISDETECT_WORKLOADS if t == "misdetect" else ",".join(WORKLOADS)))
        chosen[t] = names.split(",")
        for n in chosen[t]:
            if n not in WORKLOADS:
                sys.exit(f"unknown workload {n}; expected one of {', '.join(WORKLOADS)}")

    print(fma_peak(a, settings))
    set_here = [f"{k}={os.environ[k]}" for k in KNOBS if k in os.environ]
    if set_here:
        print(f"This environment sets {', '.join(set_here)}: every table unsets it for both "
              "sides and sets only what the table says.")
    info = run([a.bin, "info"], {})  # tapegrad's choice, with the knobs unset
    best_core = info["blas_core"]
    print(f"tapegrad's choice with nothing set: {info['blas']}")
    for t in tables:
        if t == "default":
            env = {"tg": {}, "torch": {}}
            core = ""
        elif t == "same":
            core = best_core
            env = {"tg": {"OPENBLAS_CORETYPE": core}, "torch": {"OPENBLAS_CORETYPE": core}}
        elif t == "misdetect":
            core = "Prescott"
            env = {"tg": {"OPENBLAS_CORETYPE": core, "TAPEGRAD_BLAS_KERNEL": "best"},
                   "torch": {"OPENBLAS_CORETYPE": core}}
        else:
            core = a.blas_core
            env = {"tg": {"OPENBLAS_CORETYPE": core}, "torch": {"OPENBLAS_CORETYPE": core}}
        table(a, t, chosen[t], settings, env, core)


if __name__ == "__main__":
    main()
