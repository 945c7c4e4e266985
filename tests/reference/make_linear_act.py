#!/usr/bin/python3
"""Reference values for Linear followed by its activation (detail::linear_act, the op
FeedForward runs for fc1 and its activation), from PyTorch 1.13 (Debian's python3-torch).

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_linear_act.py

Each case <name> writes, under tests/fixtures/linear_act/:
    <name>.{x,w,b}.npy   the input (..., in), the weight (out, in), the bias (out) if any
    <name>.y.npy         act(x wᵀ + b)
    <name>.g.npy         a random upstream gradient, same shape as y
    <name>.d{x,w,b}.npy  the gradients after y.backward(g)
tests/ops/test_linear_act.cpp runs the same op in tapegrad and compares all of them.
"""
import torch
import torch.nn.functional as F

import fixtures

FIX = fixtures.Folder("linear_act")
save = FIX.save
torch.manual_seed(0)
torch.set_default_dtype(torch.float32)

ACTS = {"relu": F.relu, "gelu": F.gelu}  # F.gelu: the exact (erf) form, tapegrad's default


def case(name, act, x, w, b=None):
    leaves = {"x": x, "w": w} if b is None else {"x": x, "w": w, "b": b}
    leaves = {k: v.clone().requires_grad_(True) for k, v in leaves.items()}
    y = ACTS[act](F.linear(leaves["x"], leaves["w"], leaves.get("b")))
    g = torch.randn(y.shape)
    y.backward(g)
    for k, v in leaves.items():
        save(name, k, v)
        save(name, "d" + k, v.grad)
    save(name, "y", y)
    save(name, "g", g)


def main():
    FIX.clear()
    for act in ACTS:
        # (B, T, C) -> (B, T, F) with a bias, as FeedForward's fc1
        case(f"{act}_3d", act, torch.randn(2, 3, 5), torch.randn(7, 5) * 0.5, torch.randn(7) * 0.5)
        # a 2-D input without a bias; inputs of both signs around the kink
        case(f"{act}_2d_nobias", act, torch.randn(4, 6), torch.randn(3, 6) * 0.5)
        # more rows than a GEMM block, wider than a vector register: the products block up
        case(f"{act}_wide", act, torch.randn(70, 40), torch.randn(33, 40) * 0.2, torch.randn(33) * 0.2)


if __name__ == "__main__":
    main()
