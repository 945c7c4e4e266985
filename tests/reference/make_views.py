#!/usr/bin/python3
"""Reference values for views and in-place writes through them, from PyTorch 1.13.

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_views.py

Each case <name> writes, under tests/fixtures/views/, the same files as make_ops.py:
    <name>.<input>.npy    the inputs (float32)
    <name>.y.npy          the forward value
    <name>.g.npy          a random upstream gradient, same shape as y
    <name>.d<input>.npy   the gradient of every input after y.backward(g)
tests/ops/test_views.cpp runs the same function in tapegrad and compares all of them.
"""
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "views")
torch.manual_seed(0)


def save(name, key, t):
    a = t.detach().numpy()
    np.save(os.path.join(OUT, f"{name}.{key}.npy"), np.array(a, order="C"))


def case(name, fn, **inputs):
    leaves = {k: v.clone().float().requires_grad_(True) for k, v in inputs.items()}
    y = fn(**leaves)
    g = torch.randn(y.shape)
    y.backward(g)
    for k, v in leaves.items():
        save(name, k, v)
        save(name, "d" + k, v.grad if v.grad is not None else torch.zeros_like(v))
    save(name, "y", y)
    save(name, "g", g)


def narrow_copy(x, w):
    a = x * 2
    a.narrow(1, 1, 2).copy_(w)
    return a * a


def select_mul(x, w):
    a = x * 1.5
    a.select(0, 1).mul_(w)
    return torch.tanh(a)


def transpose_add(x, w):
    a = x * 1.0
    a.t().add_(w)
    return torch.exp(a) * x


def overlapping_views(x, w):
    a = x * 1.0
    v1 = a[:, 0:3]
    v2 = a[:, 1:4]  # made before the write through v1, which changes two of its columns
    v1.mul_(w)
    return v2 * v2 + a.narrow(1, 0, 3)


def view_of_view(x, w):
    a = x * 1.0
    c = a.t().narrow(0, 1, 2)
    c.sub_(w)
    return (a * a).sum(0)


def base_write_then_view(x, w):
    a = x * 1.0
    v = a.select(0, 1)
    a.mul_(2.0)
    a.div_(x + 3.0)
    return v * w


def copy_into_plain_buffer(x, w):
    a = torch.zeros(3, 4)
    a.select(1, 2).copy_(x)
    a.narrow(0, 0, 2).add_(w)
    return a * a


def clamp_fill_through_view(x):
    a = x * 1.0
    a.t().narrow(0, 0, 2).clamp_(-0.5, 0.5)
    a.narrow(1, 3, 1).fill_(0.25)
    return a * x


def attention_on_views(q, k, v):
    B, T, C, H = 2, 5, 6, 3
    heads = lambda x: x.view(B, T, H, C // H).transpose(1, 2)
    qh, kh, vh = heads(q), heads(k), heads(v)
    s = qh @ kh.transpose(-2, -1) / (C // H) ** 0.5
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return torch.softmax(s, -1) @ vh


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".npy"):
            os.remove(os.path.join(OUT, f))
    r = torch.randn
    # views read by ops that need contiguous inputs, and their gradients
    case("chain", lambda x, w: (x.t() * w).reshape(-1)[2:10], x=r(3, 4), w=r(4, 3))
    case("permute_reshape_copy", lambda x, w: x.permute(2, 0, 1).reshape(4, 6) * w,
         x=r(2, 3, 4), w=r(4, 6))
    case("expand", lambda x, w: x.expand(3, 2, 4) * w, x=r(2, 1), w=r(3, 2, 4))
    case("squeeze_unsqueeze", lambda x, w: (x.unsqueeze(1) * w).squeeze(1).flatten(),
         x=r(3, 4), w=r(3, 1, 4))
    case("select_narrow", lambda x: x.select(1, 2).narrow(0, 1, 2) * x.select(0, -1).narrow(0, 0, 2),
         x=r(3, 4))
    case("matmul_transposed", lambda x, w: torch.matmul(x.t(), w) + torch.matmul(w.t(), x),
         x=r(5, 3), w=r(5, 3))
    case("matmul_batched_transposed", lambda x, w: torch.matmul(x.transpose(1, 2), w),
         x=r(2, 4, 3), w=r(2, 4, 5))
    case("linear_on_views", lambda x, w, b: torch.nn.functional.linear(x.narrow(1, 1, 3), w.t(), b),
         x=r(4, 5), w=r(3, 2), b=r(2))
    # in-place writes through views
    case("narrow_copy", narrow_copy, x=r(3, 4), w=r(3, 2))
    case("select_mul", select_mul, x=r(3, 4), w=r(4))
    case("transpose_add", transpose_add, x=r(3, 4), w=r(4, 3))
    case("overlapping_views", overlapping_views, x=r(2, 4), w=r(2, 3))
    case("view_of_view", view_of_view, x=r(3, 4), w=r(2, 3))
    case("base_write_then_view", base_write_then_view, x=r(3, 4), w=r(4))
    case("copy_into_plain_buffer", copy_into_plain_buffer, x=r(3), w=r(2, 4))
    case("clamp_fill_through_view", clamp_fill_through_view, x=r(3, 4))
    # attention on (B, H, T, D) views of (B, T, H*D) projections, causal
    case("attention_on_views", attention_on_views, q=r(2, 5, 6), k=r(2, 5, 6), v=r(2, 5, 6))


if __name__ == "__main__":
    main()
