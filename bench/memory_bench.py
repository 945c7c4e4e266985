"""The PyTorch twin of bench/memory_bench.cpp: the same workloads, and their live tensor bytes.

PyTorch 1.13 keeps no CPU allocator statistics, so the live bytes are rebuilt from
torch.profiler with profile_memory=True: the net bytes each op allocated (its
self_cpu_memory_usage) and the frees outside ops ("[memory]" events), ordered by time, on top
of what was live when it started (summed here from the tensors the script holds: the leaf, or
parameters, gradients, optimizer state and the batch). Two limits: what an op allocates and
frees again inside itself is netted away, so PyTorch's peak is a lower bound; and now and then
a run's events do not balance (the step ends with more live than it started with, by MBs), so
the measured step is repeated R times and the median over the balanced runs is reported, with
the spread.

    /usr/bin/python3 bench/memory_bench.py <chain|w3|lm>     (prints "key bytes" lines)
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import TinyGPT  # noqa: E402  (W3's model, shared with the timing benchmark)

torch.set_num_threads(1)
REPS = 5


def nbytes(ts):
    seen, total = set(), 0
    for t in ts:
        if t is None:
            continue
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        key = s.data_ptr()
        if key not in seen:
            seen.add(key)
            total += s.nbytes()
    return total


class Timeline:
    """Live bytes over the profiled region, relative to its start."""

    def __init__(self, prof):
        self.prof = prof
        pts = []
        for e in prof.events():
            m = e.cpu_memory_usage if e.name == "[memory]" else e.self_cpu_memory_usage
            if m:
                pts.append((e.time_range.start, 0 if m > 0 else 1, m))
        pts.sort()
        self.points = pts

    def peak(self):
        cur = best = 0
        for _, _, m in self.points:
            cur += m
            best = max(best, cur)
        return best

    def at(self, t_us):
        return sum(m for t, _, m in self.points if t <= t_us)


def chain():
    timelines = []
    for _ in range(REPS):
        x = torch.zeros(1 << 20, requires_grad=True)
        before = nbytes([x])
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            y = x
            for _ in range(20):
                y = y + 1.0
            loss = y.sum()
            with torch.profiler.record_function("after_forward"):
                pass
            loss.backward()
        timelines.append(Timeline(prof))
        del x, y, loss
    return before, timelines, None


def gpt(V, T, C, heads, layers, d_ff, B):
    torch.manual_seed(0)
    model = TinyGPT(V, T, C, heads, layers, d_ff)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    ids = torch.tensor([(i * 7 + 3) % V for i in range(B * T)]).view(B, T)
    targets = torch.tensor([(i * 11 + 5) % V for i in range(B * T)])

    def step():
        opt.zero_grad(set_to_none=False)  # in place, as tapegrad's workloads do
        loss = F.cross_entropy(model(ids).view(B * T, V), targets)
        with torch.profiler.record_function("after_forward"):
            pass
        loss.backward()
        opt.step()
        return loss

    step()  # warm-up: gradients and AdamW's state now exist
    state = [t for s in opt.state.values() for t in s.values() if torch.is_tensor(t)]
    params = list(model.parameters())
    before = nbytes(params + [p.grad for p in params] + state + list(model.buffers()) + [ids, targets])
    timelines = []
    for _ in range(REPS):
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            loss = step()
        timelines.append(Timeline(prof))
        del loss
    return before, timelines, None


def main():
    w = sys.argv[1] if len(sys.argv) > 1 else ""
    if w == "chain":
        before, tls, _ = chain()
        expected_end = 2 * (4 << 20) + 4  # y and x.grad, and the loss
    elif w == "w3":
        before, tls, _ = gpt(65, 64, 128, 4, 2, 512, 16)
        expected_end = 4
    elif w == "lm":
        before, tls, _ = gpt(64, 16, 96, 4, 3, 384, 64)
        expected_end = 4
    else:
        sys.exit("usage: memory_bench.py <chain|w3|lm>")
    rows = []
    for tl in tls:
        net = sum(m for _, _, m in tl.points)
        t = [e.time_range.start for e in tl.prof.events() if e.name == "after_forward"]
        rows.append((tl.peak(), tl.at(t[0]) if t else 0, net))
    balanced = [r for r in rows if abs(r[2] - expected_end) < (64 << 10)] or rows
    peaks = sorted(r[0] for r in balanced)
    fwds = sorted(r[1] for r in balanced)
    mid = len(peaks) // 2
    print(f"before {before}\npeak {before + peaks[mid]}\nafter_forward {before + fwds[mid]}")
    print(f"peak_min {before + peaks[0]}\npeak_max {before + peaks[-1]}\nruns {len(rows)}\nbalanced {len(balanced)}")


if __name__ == "__main__":
    main()
