#!/usr/bin/python3
"""PyTorch eager twin of bench/op_overhead.cpp: the same chain y <- tanh(y * w + b) on (4,)
tensors, N times, then sum(y).backward() and freeing the graph; ns per op of process CPU time, best of R. One
thread.

Usage: /usr/bin/python3 bench/op_overhead.py [N = 10000] [R = 15]
"""
import sys
import time

import torch


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    torch.set_num_threads(1)
    torch.manual_seed(0)
    ops = 3.0 * n
    x = torch.randn(4, requires_grad=True)
    w = torch.full((4,), 0.9, requires_grad=True)
    b = torch.full((4,), 0.1, requires_grad=True)

    best = {"forward": 1e300, "backward": 1e300, "step": 1e300, "forward_nograd": 1e300}
    checksum = 0.0
    for _ in range(reps):
        for p in (x, w, b):
            p.grad = None
        t0 = time.process_time_ns()
        y = x
        for _ in range(n):
            y = torch.tanh(y * w + b)
        loss = y.sum()
        t1 = time.process_time_ns()
        loss.backward()
        t2 = time.process_time_ns()
        checksum += float(x.grad[0])
        del y, loss  # frees the graph
        t3 = time.process_time_ns()
        best["forward"] = min(best["forward"], t1 - t0)
        best["backward"] = min(best["backward"], t2 - t1)
        best["step"] = min(best["step"], t3 - t0)

        with torch.no_grad():
            t4 = time.process_time_ns()
            z = x
            for _ in range(n):
                z = torch.tanh(z * w + b)
            best["forward_nograd"] = min(best["forward_nograd"], time.process_time_ns() - t4)
        checksum += float(z[0])

    for k, v in best.items():
        print(f"{k} {v / ops:.1f}")
    print(f"op_overhead.py: N={n} R={reps} torch {torch.__version__} checksum {checksum:g}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
