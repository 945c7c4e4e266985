#!/usr/bin/python3
"""Reference values for the core ops, from PyTorch 1.13 (Debian's python3-torch).

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_ops.py

Each case <name> writes, under tests/fixtures/ops/:
    <name>.<input>.npy    the inputs (float32; int64 for indices)
    <name>.y.npy          the forward value
    <name>.g.npy          a random upstream gradient, same shape as y
    <name>.d<input>.npy   the gradient of every float input after y.backward(g)
tests/ops/test_reference.cpp runs the same op in tapegrad and compares all of them.
"""
import os

import torch
import torch.nn.functional as F

import fixtures

FIX = fixtures.Folder("ops")
save = FIX.save
torch.manual_seed(0)
torch.set_default_dtype(torch.float32)


def case(name, fn, floats, ints=None):
    """floats: {key: tensor} differentiated; ints: {key: int64 tensor} passed as indices."""
    ints = ints or {}
    leaves = {k: v.clone().float().requires_grad_(True) for k, v in floats.items()}
    y = fn(**leaves, **ints)
    g = torch.randn(y.shape)
    y.backward(g)
    for k, v in leaves.items():
        save(name, k, v)
        save(name, "d" + k, v.grad if v.grad is not None else torch.zeros_like(v))
    for k, v in ints.items():
        save(name, k, v.to(torch.int64))
    save(name, "y", y)
    save(name, "g", g)


def main():
    FIX.clear()

    # ---- softmax family: ordinary logits, and rows holding ±1000 ------------------------
    big = torch.randn(4, 5) * 3
    big[1, 2] = 1000.0
    big[2, :] = torch.tensor([-1000.0, 1000.0, 999.0, -999.0, 0.0])
    big[3, :] = -1000.0 + torch.randn(5)
    case("softmax_big", lambda x: torch.softmax(x, -1), {"x": big})
    case("log_softmax_big", lambda x: torch.log_softmax(x, -1), {"x": big})
    x3 = torch.randn(2, 3, 4) * 2
    case("softmax_axis1", lambda x: torch.softmax(x, 1), {"x": x3})
    case("log_softmax_axis0", lambda x: torch.log_softmax(x, 0), {"x": x3})

    # ---- gelu -------------------------------------------------------------------------------
    xg = torch.linspace(-6, 6, 15).reshape(3, 5) + 0.1 * torch.randn(3, 5)
    case("gelu_exact", lambda x: F.gelu(x), {"x": xg})
    case("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), {"x": xg})

    # ---- layer_norm: 3-D input, weight and bias ---------------------------------------------
    xl = torch.randn(2, 3, 4) * 2 + 1
    case("layer_norm_last", lambda x, w, b: F.layer_norm(x, (4,), w, b, 1e-5),
         {"x": xl, "w": torch.randn(4), "b": torch.randn(4)})
    case("layer_norm_last2", lambda x, w, b: F.layer_norm(x, (3, 4), w, b, 1e-5),
         {"x": xl, "w": torch.randn(3, 4), "b": torch.randn(3, 4)})

    # ---- cross_entropy ----------------------------------------------------------------------
    logits = torch.randn(6, 5) * 2
    t = torch.tensor([0, 4, -100, 2, 2, -100])
    case("ce_ignore_mean", lambda x, t: F.cross_entropy(x, t), {"x": logits}, {"t": t})
    t2 = torch.tensor([0, 4, 3, 2, 2, 1])
    case("ce_ignore3_smooth_mean",
         lambda x, t: F.cross_entropy(x, t, ignore_index=3, label_smoothing=0.2),
         {"x": logits}, {"t": t2})
    case("ce_ignore_smooth_sum",
         lambda x, t: F.cross_entropy(x, t, reduction="sum", label_smoothing=0.1),
         {"x": logits}, {"t": t})
    big_logits = torch.randn(4, 5)
    big_logits[0] = torch.tensor([1000.0, -1000.0, 999.0, 0.0, 0.0])
    big_logits[1] = torch.tensor([-1000.0, -999.5, -1000.0, -1001.0, -1000.0])
    case("ce_big_none", lambda x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.1),
         {"x": big_logits}, {"t": torch.tensor([2, 1, 3, 0])})
    logits3 = torch.randn(2, 4, 3) * 2  # (N, K, d)
    t3 = torch.tensor([[1, -100, 3], [0, 0, 2]])
    case("ce_nkd_none", lambda x, t: F.cross_entropy(x, t, reduction="none"),
         {"x": logits3}, {"t": t3})
    case("ce_nkd_smooth_mean", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.3),
         {"x": logits3}, {"t": t3})

    # ---- matmul: batched, broadcast batch dims, and 1-D operands ---------------------------
    mm = {
        "matmul_bcast4d": ((2, 1, 3, 4), (3, 4, 5)),
        "matmul_2d": ((3, 4), (4, 5)),
        "matmul_3d_2d": ((2, 3, 4), (4, 5)),
        "matmul_2d_3d": ((3, 4), (2, 4, 5)),
        "matmul_1d_1d": ((4,), (4,)),
        "matmul_1d_2d": ((4,), (4, 5)),
        "matmul_2d_1d": ((3, 4), (4,)),
        "matmul_1d_3d": ((4,), (2, 4, 5)),
        "matmul_4d_1d": ((2, 3, 2, 4), (4,)),
    }
    for name, (sa, sb) in mm.items():
        case(name, lambda a, b: torch.matmul(a, b), {"a": torch.randn(sa), "b": torch.randn(sb)})

    # ---- gather with repeated indices --------------------------------------------------------
    case("index_select_rows", lambda w, i: torch.index_select(w, 0, i),
         {"w": torch.randn(5, 3)}, {"i": torch.tensor([1, 3, 1, 1, 0, 3])})
    case("index_select_axis1", lambda w, i: torch.index_select(w, 1, i),
         {"w": torch.randn(2, 4, 3)}, {"i": torch.tensor([2, 0, 2])})
    ids = torch.tensor([[1, 4, 1, 0], [4, 4, 2, 1]])
    case("embedding", lambda w, i: F.embedding(i, w), {"w": torch.randn(6, 3)}, {"i": ids})
    case("embedding_pad", lambda w, i: F.embedding(i, w, padding_idx=4),
         {"w": torch.randn(6, 3)}, {"i": ids})

    # ---- broadcast arithmetic ----------------------------------------------------------------
    a, b = torch.randn(3, 1, 4), torch.randn(2, 4)
    bpos = torch.rand(2, 4) + 0.5  # keep the divisor away from 0
    case("bcast_add", lambda a, b: a + b, {"a": a, "b": b})
    case("bcast_sub", lambda a, b: a - b, {"a": a, "b": b})
    case("bcast_mul", lambda a, b: a * b, {"a": a, "b": b})
    case("bcast_div", lambda a, b: a / b, {"a": a, "b": bpos})
    case("bcast_div_rev", lambda a, b: b / a,
         {"a": torch.rand(3, 1, 4) + 0.5, "b": torch.randn(2, 4)})
    case("bcast_mul_col_row", lambda a, b: a * b,
         {"a": torch.randn(4, 1), "b": torch.randn(1, 3)})
    case("bcast_sub_0d", lambda a, b: a - b, {"a": torch.randn(()), "b": torch.randn(2, 3)})

    # ---- add_layer_norm: s = a + b and layer_norm(s), stacked so one backward reaches both --
    def add_layer_norm(a, b, w, bias):
        s = a + b
        return torch.stack([s, F.layer_norm(s, (6,), w, bias, 1e-5)])
    case("add_layer_norm", add_layer_norm,
         {"a": torch.randn(2, 3, 6), "b": torch.randn(2, 3, 6) * 2, "w": torch.randn(6),
          "bias": torch.randn(6)})

    print("wrote", len(os.listdir(FIX.path)), "files to", os.path.normpath(FIX.path))


if __name__ == "__main__":
    main()
