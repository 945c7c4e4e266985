#!/usr/bin/python3
"""Reference values for the ops, modules and losses of issue 16, from PyTorch 1.13.

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_pointwise_loss.py

Each case <name> writes, under tests/fixtures/pointwise_loss/:
    <name>.<input>.npy    the inputs (float32; int64 for class indices)
    <name>.y.npy          the forward value
    <name>.g.npy          a random upstream gradient, same shape as y
    <name>.d<input>.npy   the gradient of every differentiated input after y.backward(g)
Constant inputs (weights) are written as <name>.<input>.npy with no gradient.
tests/ops/test_pointwise_loss.cpp and tests/nn/test_activation.cpp run the same ops and compare.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import fixtures

FIX = fixtures.Folder("pointwise_loss")
save = FIX.save
torch.manual_seed(16)
torch.set_default_dtype(torch.float32)


def case(name, fn, floats, consts=None, ints=None):
    """fn takes, in order, floats (differentiated), consts (float, not) and ints (int64 indices)."""
    consts = consts or {}
    ints = ints or {}
    leaves = {k: v.clone().float().requires_grad_(True) for k, v in floats.items()}
    y = fn(*leaves.values(), *consts.values(), *ints.values())  # in that order
    g = torch.randn(y.shape)
    y.backward(g)
    for k, v in leaves.items():
        save(name, k, v)
        save(name, "d" + k, v.grad if v.grad is not None else torch.zeros_like(v))
    for k, v in consts.items():
        save(name, k, v)
    for k, v in ints.items():
        save(name, k, v.to(torch.int64))
    save(name, "y", y)
    save(name, "g", g)


def main():
    FIX.clear()

    # ---- elementwise --------------------------------------------------------------------------
    x = torch.randn(3, 5) * 2
    x[0, :3] = torch.tensor([-0.5, 0.5, 0.0])  # at the clamp bounds, and 0 for the kinks
    case("clamp_both", lambda x: torch.clamp(x, -0.5, 0.5), {"x": x})
    case("clamp_min", lambda x: torch.clamp(x, min=0.0), {"x": x})
    case("clamp_max", lambda x: torch.clamp(x, max=-0.5), {"x": x})
    case("clamp_inverted", lambda x: torch.clamp(x, 0.5, -0.5), {"x": x})
    lo = torch.full((3, 1), -0.5)
    lo[2, 0] = 0.7  # above max in row 2: everything becomes max there
    hi = torch.tensor([0.5, 1.0, 0.2, 2.0, 0.0])
    case("clamp_tensor", lambda x, lo, hi: torch.clamp(x, lo, hi), {"x": x, "lo": lo, "hi": hi})
    case("clamp_tensor_min", lambda x, lo: torch.clamp(x, min=lo), {"x": x, "lo": lo})
    case("clamp_tensor_max", lambda x, hi: torch.clamp(x, max=hi), {"x": x, "hi": hi})
    case("sin", torch.sin, {"x": x})
    case("cos", torch.cos, {"x": x})
    case("expm1", torch.expm1, {"x": x})
    xp = torch.rand(3, 5) * 3 + 0.05
    xp[0, 0] = 1e-6
    case("log1p", torch.log1p, {"x": xp - 0.9})
    case("rsqrt", torch.rsqrt, {"x": xp})
    case("reciprocal", torch.reciprocal, {"x": torch.where(x.abs() < 0.2, x.sign() * 0.3 + 0.3, x)})
    xs = torch.linspace(-12, 12, 20).reshape(4, 5)
    case("softplus", lambda x: F.softplus(x), {"x": xs})
    case("softplus_b2_t5", lambda x: F.softplus(x, beta=2.0, threshold=5.0), {"x": xs})
    case("silu", F.silu, {"x": xs})
    case("leaky_relu", lambda x: F.leaky_relu(x), {"x": x})
    case("leaky_relu_02", lambda x: F.leaky_relu(x, 0.2), {"x": x})
    case("elu", lambda x: F.elu(x), {"x": x})
    case("elu_05", lambda x: F.elu(x, 0.5), {"x": x})
    xr = torch.tensor([[-2.5, -1.5, -0.5, 0.5, 1.5], [2.5, -0.7, 0.3, 3.49, -3.51], [0.0, -0.0, 7.0, 1e-3, -1e-3]])
    for name, f in [("sign", torch.sign), ("round", torch.round), ("floor", torch.floor), ("ceil", torch.ceil)]:
        case(name, f, {"x": xr})
    case("pow_bcast", torch.pow, {"a": torch.rand(3, 1, 4) * 2 + 0.1, "b": torch.randn(2, 4)})
    base = torch.rand(2, 4) + 0.1
    base[0, :] = 0.0
    expo = torch.tensor([[0.0, 1.0, 2.5, 0.5], [0.0, -1.0, 3.0, -0.5]])
    case("pow_zero_base", torch.pow, {"a": base, "b": expo})
    case("pow_scalar_base", lambda b: torch.pow(2.5, b), {"b": torch.randn(3, 4)})
    case("pow_zero_scalar_base", lambda b: torch.pow(0.0, b), {"b": torch.tensor([0.0, 0.5, 2.0, 3.0])})

    # ---- activation modules -----------------------------------------------------------------------
    case("module_silu", nn.SiLU(), {"x": xs})
    case("module_leaky_relu", nn.LeakyReLU(0.2), {"x": x})
    case("module_elu", nn.ELU(alpha=0.5), {"x": x})
    case("module_softplus", nn.Softplus(beta=2.0, threshold=5.0), {"x": xs})

    # ---- pointwise losses -----------------------------------------------------------------------
    p = torch.rand(3, 4) * 0.9 + 0.05
    t = torch.rand(3, 4)
    w = torch.rand(4) + 0.5
    for red in ["none", "mean", "sum"]:
        case(f"bce_{red}", lambda x, t: F.binary_cross_entropy(x, t, reduction=red), {"x": p, "t": t})
        case(f"bce_logits_{red}", lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction=red),
             {"x": torch.randn(3, 4) * 3, "t": t})
        case(f"smooth_l1_{red}", lambda x, t: F.smooth_l1_loss(x, t, reduction=red),
             {"x": torch.randn(3, 4) * 2, "t": torch.randn(3, 4)})
        case(f"huber_{red}", lambda x, t: F.huber_loss(x, t, reduction=red),
             {"x": torch.randn(3, 4) * 2, "t": torch.randn(3, 4)})
        case(f"l1_{red}", lambda x, t: F.l1_loss(x, t, reduction=red),
             {"x": torch.randn(3, 4), "t": torch.randn(3, 4)})
    case("bce_weight", lambda x, t, w: F.binary_cross_entropy(x, t, weight=w), {"x": p, "t": t}, {"w": w})
    # probabilities at 0 and 1: the logs clamp at -100 (the target is not differentiated there)
    pe = torch.tensor([0.0, 1.0, 0.5, 1e-30])
    case("bce_edges", lambda x, t: F.binary_cross_entropy(x, t, reduction="sum"), {"x": pe},
         {"t": torch.tensor([1.0, 0.0, 0.5, 1.0])})
    case("bce_logits_weights", lambda x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=pw),
         {"x": torch.randn(3, 4) * 3, "t": t}, {"w": torch.rand(3, 1) + 0.5, "pw": w * 2})
    big = torch.tensor([[100.0, -100.0, 1e4, -1e4], [1e4, -1e4, 100.0, -100.0], [0.0, 30.0, -30.0, 88.0]])
    tb = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.3, 0.7], [0.5, 1.0, 0.0, 0.2]])
    case("bce_logits_big", lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="none"),
         {"x": big, "t": tb})
    case("bce_logits_big_pw", lambda x, t, pw: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="sum"),
         {"x": big, "t": tb}, {"pw": torch.tensor([3.0, 0.5, 2.0, 1.0])})
    d = torch.tensor([[-2.0, -0.5, -0.3, 0.0], [0.2, 0.5, 0.7, 3.0]])
    case("smooth_l1_beta05", lambda x, t: F.smooth_l1_loss(x, t, reduction="none", beta=0.5),
         {"x": d + 1.0, "t": torch.ones(2, 4)})
    case("smooth_l1_beta0", lambda x, t: F.smooth_l1_loss(x, t, reduction="sum", beta=0.0),
         {"x": d + 1.0, "t": torch.ones(2, 4)})
    case("huber_delta2", lambda x, t: F.huber_loss(x, t, reduction="none", delta=2.0),
         {"x": d * 2, "t": torch.zeros(2, 4)})

    # ---- kl_div -------------------------------------------------------------------------------
    lx = torch.log_softmax(torch.randn(3, 5), 1)
    tp = torch.softmax(torch.randn(3, 5), 1)
    for red in ["none", "batchmean", "sum", "mean"]:
        case(f"kl_{red}", lambda x, t: F.kl_div(x, t, reduction=red), {"x": lx, "t": tp})
        case(f"kl_log_target_{red}", lambda x, t: F.kl_div(x, t, reduction=red, log_target=True),
             {"x": lx, "t": torch.log(tp)})
    tz = tp.clone()
    tz[0, 1] = 0.0
    tz[2, 4] = 0.0
    case("kl_zero_target", lambda x, t: F.kl_div(x, t, reduction="batchmean"), {"x": lx}, {"t": tz})

    # ---- cross_entropy with probability targets ---------------------------------------------------
    logits = torch.randn(4, 5) * 2
    q = torch.softmax(torch.randn(4, 5), 1)
    wk = torch.rand(5) + 0.5
    case("ce_probs_mean", lambda x, t: F.cross_entropy(x, t), {"x": logits, "t": q})
    case("ce_probs_none_smooth", lambda x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.2),
         {"x": logits, "t": q})
    case("ce_probs_weight_smooth", lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1),
         {"x": logits, "t": q}, {"w": wk})
    case("ce_probs_3d_sum", lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction="sum"),
         {"x": torch.randn(2, 5, 3), "t": torch.softmax(torch.randn(2, 5, 3), 1)}, {"w": wk})
    case("ce_probs_1d", lambda x, t: F.cross_entropy(x, t), {"x": torch.randn(5), "t": q[0]})

    # ---- class weights for cross_entropy and nll_loss (class-index targets) ---------------------
    logits6 = torch.randn(6, 5) * 2
    tgt = torch.tensor([0, 4, -100, 2, 2, 1])
    for red in ["none", "mean", "sum"]:
        case(f"ce_weight_{red}", lambda x, w, t: F.cross_entropy(x, t, weight=w, reduction=red),
             {"x": logits6}, {"w": wk}, {"t": tgt})
        case(f"ce_weight_smooth_{red}",
             lambda x, w, t: F.cross_entropy(x, t, weight=w, reduction=red, label_smoothing=0.3),
             {"x": logits6}, {"w": wk}, {"t": tgt})
        case(f"nll_weight_{red}", lambda x, w, t: F.nll_loss(x, t, weight=w, reduction=red),
             {"x": torch.log_softmax(logits6, 1)}, {"w": wk}, {"t": tgt})
    tgt3 = torch.tensor([[0, 3, 1], [2, -100, 4]])
    case("ce_weight_3d_smooth", lambda x, w, t: F.cross_entropy(x, t, weight=w, label_smoothing=0.2),
         {"x": torch.randn(2, 5, 3)}, {"w": wk}, {"t": tgt3})
    case("ce_weight_ignore3", lambda x, w, t: F.cross_entropy(x, t, weight=w, ignore_index=3),
         {"x": logits6}, {"w": wk}, {"t": torch.tensor([0, 3, 3, 2, 1, 4])})


if __name__ == "__main__":
    main()
