#!/usr/bin/python3
"""PyTorch twin of bench/generate_bench.cpp: the same decoder, prompt shape and greedy loop,
with a key/value cache kept by hand (nn.MultiheadAttention has none in PyTorch 1.13): each
block keeps its keys and values as tensors and grows them with torch.cat, as people write it.
One thread (torch.set_num_threads(1); OPENBLAS_NUM_THREADS=1 is set before torch loads).

Usage: /usr/bin/python3 bench/generate_bench.py <cache|memory> [--batch B] [--new N]
       [--prompt P] [--reps R] [--warmup W] [--tiny]

Output, one "key value" per line, as generate_bench.cpp: tokens_per_s, ms_per_generation,
ms_median, checksum; memory: before (parameters and prompt), peak (before + the most live
bytes during one generation, from torch.profiler's memory events, as bench/memory_bench.py).
"""
import argparse
import math
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(1)


class Block(nn.Module):
    """Pre-LN: x = x + attn(ln1(x)), then x = x + fc2(gelu(fc1(ln2(x)))); attention by hand
    over the cached keys and values (nn.MultiheadAttention's parameters)."""

    def __init__(self, C, heads, d_ff):
        super().__init__()
        self.H = heads
        self.ln1 = nn.LayerNorm(C)
        self.attn = nn.MultiheadAttention(C, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(C)
        self.fc1 = nn.Linear(C, d_ff)
        self.fc2 = nn.Linear(d_ff, C)

    def forward(self, x, cache):
        """x (B, T, C) new positions; cache: [k, v] (B, H, past, D) or [None, None], updated."""
        B, T, C = x.shape
        H, D = self.H, C // self.H
        q, k, v = F.linear(self.ln1(x), self.attn.in_proj_weight, self.attn.in_proj_bias).chunk(3, dim=-1)
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        if cache[0] is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        cache[0], cache[1] = k, v
        s = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, past + T)
        if T > 1:  # causal, aligned at the bottom right
            past = k.size(2) - T
            s = s.masked_fill(torch.ones(T, past + T, dtype=torch.bool).triu(past + 1), float("-inf"))
        o = (s.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.attn.out_proj(o)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Decoder(nn.Module):
    def __init__(self, V, C, H, L, d_ff, max_pos):
        super().__init__()
        self.tok_emb = nn.Embedding(V, C)
        self.pos_emb = nn.Embedding(max_pos, C)
        self.blocks = nn.ModuleList([Block(C, H, d_ff) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        self.head = nn.Linear(C, V)

    def forward(self, ids, start, caches):
        """ids (B, T) at positions start.. -> logits (B, V) of the last position."""
        pos = torch.arange(start, start + ids.size(1))
        x = self.tok_emb(ids) + self.pos_emb(pos)
        for b, c in zip(self.blocks, caches):
            x = b(x, c)
        return self.head(self.ln_f(x[:, -1]))


@torch.no_grad()
def generate(model, prompt, n):
    caches = [[None, None] for _ in model.blocks]
    ids, start, out = prompt, 0, []
    for _ in range(n):
        nxt = model(ids, start, caches).argmax(dim=-1, keepdim=True)  # (B, 1)
        start += ids.size(1)
        ids = nxt
        out.append(nxt)
    return torch.cat(out, dim=1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["cache", "memory"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--new", type=int, default=64)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--tiny", action="store_true")
    a = p.parse_args()
    torch.manual_seed(0)
    shape = (256, 32, 2, 2, 64, 512) if a.tiny else (256, 192, 6, 4, 768, 512)
    model = Decoder(*shape).eval()
    prompt = torch.randint(0, shape[0], (a.batch, a.prompt))
    if a.mode == "memory":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from memory_bench import Timeline, nbytes  # noqa: E402
        from torch.profiler import ProfilerActivity, profile  # noqa: E402
        generate(model, prompt, a.new)  # warm-up
        before = nbytes(list(model.parameters()) + [prompt])
        peaks = []
        for _ in range(3):
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                generate(model, prompt, a.new)
            peaks.append(Timeline(prof).peak())
        print(f"before {before}\npeak {before + statistics.median_low(peaks)}")
        return
    ms, checksum = [], 0
    for r in range(a.warmup + a.reps):
        t0 = time.perf_counter()
        out = generate(model, prompt, a.new)
        t = (time.perf_counter() - t0) * 1e3
        if r >= a.warmup:
            ms.append(t)
        checksum = int(out[0].sum())
    ms.sort()
    print(f"tokens_per_s {1e3 * a.batch * a.new / ms[0]:.1f}\nms_per_generation {ms[0]:.3f}\n"
          f"ms_median {ms[(len(ms) - 1) // 2]:.3f}\nchecksum {checksum}")


if __name__ == "__main__":
    main()
