#!/usr/bin/python3
"""PyTorch twin of bench/workloads.cpp: the same workloads, models, shapes, optimizers, step
counts and output lines (see the header of workloads.cpp). Run with Debian's /usr/bin/python3
(PyTorch 1.13). Threads: torch's intra-op pool is set with --torch-threads (default 1); OpenBLAS,
which runs every fp32 Linear/matmul, takes OPENBLAS_NUM_THREADS from the environment (it must
be set before torch is imported; bench/workloads_report.py does that).

Usage: /usr/bin/python3 bench/workloads.py <w1|w2b1|w2b32|w3|w4|w5> [--torch-threads N]
       [--steps S] [--warmup W] [--reps R]
"""
import argparse
import ctypes
import os
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def status_kb(field):
    """A field of /proc/self/status in kB (VmHWM = peak RSS, VmRSS = current)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def time_steps(step, steps, warmup, reps):
    """W warm-up calls, then R repetitions of S calls; ms per call: wall (best, median) and
    process CPU time (best)."""
    for _ in range(warmup):
        step()
    hwm0 = status_kb("VmHWM")
    per_rep, cpu = [], []
    f0 = minor_faults()
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        per_rep.append((time.perf_counter() - t0) * 1e3 / steps)
        cpu.append((time.process_time() - c0) * 1e3 / steps)
    faults = (minor_faults() - f0) / (steps * reps)
    return {"best": min(per_rep), "median": statistics.median_low(per_rep), "cpu": min(cpu),
            "faults": faults,
            "hwm0": hwm0}


def class_ids(n, k, shape):
    return torch.randint(0, k, (n,)).view(shape)


# ---- W1: MLP ---------------------------------------------------------------------------------

def w1(a, out):
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 784)
    y = class_ids(64, 10, (64,))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        out["loss"] = loss.item()
    return time_steps(step, a.steps or 200, 20 if a.warmup < 0 else a.warmup, a.reps or 7)


# ---- W2: Elman char-RNN, the hand-written loop of our notes ------------------------------------

def w2(a, B, out):
    V, H, K, T = 57, 128, 18, 12
    i2h, h2h, h2o = nn.Linear(V, H), nn.Linear(H, H), nn.Linear(H, K)
    params = list(i2h.parameters()) + list(h2h.parameters()) + list(h2o.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    xs = [F.one_hot(class_ids(B, V, (B,)), V).float() for _ in range(T)]  # T x (B, V)
    y = class_ids(B, K, (B,))

    def step():
        opt.zero_grad()
        h = torch.zeros(B, H)
        for t in range(T):
            h = torch.tanh(i2h(xs[t]) + h2h(h))
        loss = F.nll_loss(F.log_softmax(h2o(h), dim=-1), y)
        loss.backward()
        opt.step()
        out["loss"] = loss.item()
    return time_steps(step, a.steps or (300 if B == 1 else 200), 20 if a.warmup < 0 else a.warmup,
                      a.reps or 7)


# ---- W3: GPT-style LM from torch.nn pieces -------------------------------------------------------

class Block(nn.Module):
    """Pre-LN: x = x + attn(ln1(x)), then x = x + fc2(gelu(fc1(ln2(x))))."""

    def __init__(self, C, heads, d_ff):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = nn.MultiheadAttention(C, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(C)
        self.fc1 = nn.Linear(C, d_ff)
        self.fc2 = nn.Linear(d_ff, C)

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab, T, C, heads, layers, d_ff):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, C)
        self.pos_emb = nn.Embedding(T, C)
        self.blocks = nn.ModuleList([Block(C, heads, d_ff) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(C)
        self.head = nn.Linear(C, vocab)
        self.register_buffer("pos", torch.arange(T))
        # True = masked out (key j > query i), as nn.MultiheadAttention reads a bool mask.
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1))

    def forward(self, ids):  # (B, T) -> (B, T, V)
        x = self.tok_emb(ids) + self.pos_emb(self.pos)
        for b in self.blocks:
            x = b(x, self.mask)
        return self.head(self.ln_f(x))


def gpt(a, out, V, C, NH, L, FF, T, B, steps, warmup, reps):
    """One AdamW training step of TinyGPT on a fixed random batch, timed."""
    model = TinyGPT(V, T, C, NH, L, FF)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    ids = class_ids(B * T, V, (B, T))
    targets = class_ids(B * T, V, (B * T,))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(ids).view(B * T, V), targets)
        loss.backward()
        opt.step()
        out["loss"] = loss.item()
    return time_steps(step, a.steps or steps, warmup if a.warmup < 0 else a.warmup, a.reps or reps)


def w3(a, out):
    return gpt(a, out, V=65, C=128, NH=4, L=2, FF=512, T=64, B=16, steps=10, warmup=3, reps=5)


# ---- W5: a larger GPT-style LM ----------------------------------------------------------------

def w5(a, out):
    return gpt(a, out, V=65, C=384, NH=6, L=4, FF=1536, T=128, B=8, steps=3, warmup=1, reps=5)


# ---- W4: one big Linear ---------------------------------------------------------------------------

def w4(a, out):
    B, IN, OUT = 256, 1024, 1024
    lin = nn.Linear(IN, OUT)
    x = torch.randn(B, IN, requires_grad=True)
    g = torch.ones(B, OUT)

    def step():
        x.grad = None
        lin.zero_grad(set_to_none=True)
        lin(x).backward(g)
        out["loss"] = float(lin.weight.grad[0, 0])
    return time_steps(step, a.steps or 20, 3 if a.warmup < 0 else a.warmup, a.reps or 5)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("workload", choices=["w1", "w2b1", "w2b32", "w3", "w4", "w5"])
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--warmup", type=int, default=-1)
    p.add_argument("--reps", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(a.torch_threads)
    torch.manual_seed(0)
    print(f"threads {torch.get_num_threads()}")
    print(f"openblas_threads {os.environ.get('OPENBLAS_NUM_THREADS', 'default')}")
    try:  # the OpenBLAS torch loaded (Debian's, through libblas.so.3): which kernels it chose
        core = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
        core.restype = ctypes.c_char_p
        print(f"blas_core {core().decode()}")
    except (OSError, AttributeError):
        print("blas_core unknown")
    out = {"loss": 0.0}
    run = {"w1": lambda: w1(a, out), "w2b1": lambda: w2(a, 1, out), "w2b32": lambda: w2(a, 32, out),
           "w3": lambda: w3(a, out), "w4": lambda: w4(a, out), "w5": lambda: w5(a, out)}[a.workload]
    with torch.autograd.set_grad_enabled(True):
        t = run()
    if a.workload == "w4":
        print(f"gflops {3 * 2.0 * 256 * 1024 * 1024 / 1e9 / (t['best'] / 1e3):.1f}")
    print(f"ms_per_step {t['best']:.4f}\nms_median {t['median']:.4f}")
    print(f"cpu_ms_per_step {t['cpu']:.4f}\nloss {out['loss']:.6g}")
    print(f"faults_per_step {t['faults']:.1f}\nhwm_growth_kb {status_kb('VmHWM') - t['hwm0']}")
    print(f"peak_rss_kb {status_kb('VmHWM')}\nrss_kb {status_kb('VmRSS')}")


if __name__ == "__main__":
    main()
