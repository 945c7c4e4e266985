#!/usr/bin/python3
"""Runs every workload through tapegrad (bench/workloads.cpp) and PyTorch (bench/workloads.py),
each side in its own process, interleaved over several rounds, and prints the comparison
table (markdown). Called by bench/run_benchmarks.sh, which builds first.

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

OpenBLAS kernels: OpenBLAS picks its kernels for the CPU when it loads, unless
OPENBLAS_CORETYPE names them; tapegrad loads OpenBLAS at run time and asks for faster kernels
where OpenBLAS's choice is of a slower class than the CPU runs and the variable is unset
(lib/src/backend/openblas.h). --blas-core NAME sets OPENBLAS_CORETYPE=NAME for BOTH sides;
--tg-blas-kernel MODE sets TAPEGRAD_BLAS_KERNEL=MODE for tapegrad (best: its choice even over
OPENBLAS_CORETYPE). Each row says which kernels each side ran.

Timing: --metric wall (default) uses the best wall-clock ms per step. On a busy machine,
--metric cpu uses process CPU time for the 1-core rows (robust to other jobs; equal to wall
time on an idle machine); 2-core rows always use wall time.

Usage: workloads_report.py --bin BUILD/bench/workloads [--rounds N] [--workloads w1,w3]
       [--threads 1,2] [--metric wall|cpu] [--blas-core NAME] [--tg-blas-kernel MODE] [--quick]
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
GOALS = {"w1": 1.5, "w2b1": 3.0, "w3": 1.5, "w5": 1.5}  # ratio of steps/s; W4: >= 90% of raw sgemm


BLAS_CORE = {}  # OPENBLAS_CORETYPE for both sides, if --blas-core is given
TG_ENV = {}  # TAPEGRAD_BLAS_KERNEL for tapegrad, if --tg-blas-kernel is given


def run(cmd, env_extra):
    env = dict(os.environ)
    env.update(env_extra)
    env.update(BLAS_CORE)
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


def tg_cmd(a, w, threads, blas_threads):
    """threads: tg::set_num_threads (0: not called, OpenBLAS's own threads)."""
    cmd = [a.bin, w, "--threads", str(threads)]
    if a.quick:
        cmd += ["--reps", "2"]
    return cmd, dict(TG_ENV, OPENBLAS_NUM_THREADS=str(blas_threads))


def torch_cmd(a, w, blas_threads):
    cmd = ["/usr/bin/python3", os.path.join(HERE, "workloads.py"), w, "--torch-threads", "1"]
    if a.quick:
        cmd += ["--reps", "2"]
    return cmd, {"OPENBLAS_NUM_THREADS": str(blas_threads)}


def better(prev, new, key):
    """Keeps the run with the lower `key`; peak RSS is the max over runs (conservative)."""
    if prev is None:
        return new
    best = dict(new if new[key] < prev[key] else prev)
    best["peak_rss_kb"] = max(prev["peak_rss_kb"], new["peak_rss_kb"])
    return best


def mib(kb):
    return f"{kb / 1024:.0f} MiB"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True, help="the workloads binary")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--threads", default="1,2", help="settings to run: 1, 2 or 1,2")
    p.add_argument("--metric", choices=["wall", "cpu"], default="wall")
    p.add_argument("--blas-core", default="", help="OPENBLAS_CORETYPE for both sides")
    p.add_argument("--tg-blas-kernel", default="", help="TAPEGRAD_BLAS_KERNEL for tapegrad")
    p.add_argument("--quick", action="store_true", help="fewer repetitions per process")
    a = p.parse_args()
    if a.blas_core:
        BLAS_CORE["OPENBLAS_CORETYPE"] = a.blas_core
    if a.tg_blas_kernel:
        TG_ENV["TAPEGRAD_BLAS_KERNEL"] = a.tg_blas_kernel
    names = a.workloads.split(",")
    settings = [int(s) for s in a.threads.split(",")]
    for n in names:
        if n not in WORKLOADS:
            sys.exit(f"unknown workload {n}; expected one of {', '.join(WORKLOADS)}")

    load0 = os.getloadavg()[0]
    t_start = time.time()
    # best[(workload, side, setting)] where side is "tg" or "torch" and, for tapegrad at 2
    # cores, the setting is "2/1" (one thread), "2/own" or "2/blas".
    best = {}

    def record(key, res, metric_key):
        best[key] = better(best.get(key), res, metric_key)

    for r in range(a.rounds):
        for w in names:
            jobs = []
            if 1 in settings:
                jobs.append(("tg", "1", tg_cmd(a, w, 1, 1)))
                jobs.append(("torch", "1", torch_cmd(a, w, 1)))
            if 2 in settings:
                jobs.append(("tg", "2/own", tg_cmd(a, w, 2, 1)))
                jobs.append(("torch", "2", torch_cmd(a, w, 2)))
                jobs.append(("tg", "2/blas", tg_cmd(a, w, 0, 2)))
                if 1 not in settings:  # the 1-thread candidate, otherwise the 1-core run
                    jobs.append(("tg", "2/1", tg_cmd(a, w, 1, 1)))
            if r % 2 == 1:  # alternate which side goes first
                jobs.reverse()
            for side, setting, (cmd, env) in jobs:
                res = run(cmd, env)
                cpu = a.metric == "cpu" and setting == "1"
                res["t"] = res["cpu_ms_per_step" if cpu else "ms_per_step"]
                if "raw_ms" in res:  # W4: raw sgemm, timed the same way
                    res["raw_t"] = res["raw_cpu_ms" if cpu else "raw_ms"]
                record((w, side, setting), res, "t")
                if side == "tg" and setting == "1" and 2 in settings:
                    wall = dict(res)  # the 1-thread run is also a 2-core candidate (wall time)
                    wall["t"] = res["ms_per_step"]
                    if "raw_ms" in res:
                        wall["raw_t"] = res["raw_ms"]
                    record((w, "tg", "2/1"), wall, "t")
            print(f"  round {r + 1}/{a.rounds} {w} done", file=sys.stderr, flush=True)

    load1 = os.getloadavg()[0]
    cores = {side: sorted({str(v.get("blas_core")) for k, v in best.items() if k[1] == side})
             for side in ("tg", "torch")}
    rows = []
    notes = []
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
            if w == "w4":
                gflop = 3 * 2.0 * 256 * 1024 * 1024 / 1e9
                gf, raw_gf = gflop / (tg_r["t"] / 1e3), gflop / (tg_r["raw_t"] / 1e3)
                pct = 100 * gf / raw_gf
                goal = f"{pct:.0f}% of raw sgemm ({gf:.0f} / {raw_gf:.0f} GF/s)"
                met = pct >= 90
            elif w in GOALS:
                goal, met = f">= {GOALS[w]}x", ratio >= GOALS[w]
            else:
                goal, met = "-", True
            rss_ok = tg_r["peak_rss_kb"] <= torch_r["peak_rss_kb"]
            threads = (f"tg {tg_set} / torch 1+2 BLAS" if s == 2 else "1 / 1")
            rows.append([WORKLOADS[w], f"{s} ({threads})", f"{tg_r['t']:.3f}", f"{torch_r['t']:.3f}",
                         f"{ratio:.2f}x", goal + (" ok" if met else " MISSED"),
                         mib(tg_r["peak_rss_kb"]) + ("" if rss_ok else " (above!)"),
                         mib(torch_r["peak_rss_kb"]),
                         f"{tg_r['faults_per_step']:.0f} / {torch_r['faults_per_step']:.0f}",
                         f"{tg_r['hwm_growth_kb']:.0f} / {torch_r['hwm_growth_kb']:.0f}",
                         f"{tg_r.get('blas_core')} / {torch_r.get('blas_core')}"])

    metric = "process CPU time (1 core), wall (2 cores)" if a.metric == "cpu" else "wall clock"
    print(f"\n{time.strftime('%Y-%m-%d %H:%M')}, {a.rounds} rounds, best of each, ms/step by "
          f"{metric}; load average {load0:.2f} before, {load1:.2f} after; "
          f"{time.time() - t_start:.0f} s; OpenBLAS kernels: tapegrad {'/'.join(cores['tg'])}, "
          f"PyTorch {'/'.join(cores['torch'])}\n")
    head = ["workload", "cores (threads)", "tapegrad ms/step", "PyTorch ms/step",
            "ratio (steps/s)", "goal", "tapegrad peak RSS", "PyTorch peak RSS",
            "page faults/step tg / torch", "peak growth after warm-up kB tg / torch",
            "OpenBLAS kernel tg / torch"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    for n in notes:
        print(n)
    for how in sorted({str(v.get("blas")) for k, v in best.items() if k[1] == "tg"}):
        print(f"tapegrad's OpenBLAS: {how}")


if __name__ == "__main__":
    main()
