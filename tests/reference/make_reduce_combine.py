#!/usr/bin/python3
"""Reference values for the ops of issue 16 (reductions, combining and splitting, creation,
checks), from PyTorch 1.13 (Debian's python3-torch).

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_reduce_combine.py

Each case <name> writes, under tests/fixtures/reduce_combine/, the files of make_ops.py:
    <name>.<input>.npy    the inputs (float32)
    <name>.y.npy          the forward value
    <name>.g.npy          a random upstream gradient, same shape as y
    <name>.d<input>.npy   the gradient of every input after y.backward(g)
and, for the ops without a gradient, <name>.*.npy as each block below says.
tests/ops/test_reduce_combine.cpp runs the same functions in tapegrad and compares all of them.
"""
import numpy as np
import torch

import fixtures

FIX = fixtures.Folder("reduce_combine", bool_as=np.float32)
save = FIX.save
torch.manual_seed(0)
torch.set_default_dtype(torch.float32)
INF = float("inf")
NAN = float("nan")


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


def weighted_cat(pieces, dim):
    """Each piece times its position + 1, joined again: every piece's gradient differs."""
    return torch.cat([p * (i + 1) for i, p in enumerate(pieces)], dim)


def main():
    FIX.clear()

    # ---- max/min of the whole tensor, amax/amin: ties share the gradient --------------------
    ties = torch.tensor([[1.0, 3.0, -2.0, 3.0], [0.5, 3.0, -2.0, 0.0], [-2.0, 1.0, 2.0, -1.0]])
    case("max_all_ties", lambda x: torch.max(x), x=ties)
    case("min_all_ties", lambda x: torch.min(x), x=ties)
    with_nan = ties.clone()
    with_nan[1, 2] = NAN
    case("max_all_nan", lambda x: torch.max(x), x=with_nan)
    x3 = torch.randint(-3, 4, (2, 3, 4)).float()  # small integers: many ties
    case("amax_dims02", lambda x: torch.amax(x, (0, 2)), x=x3)
    case("amin_dim1_keepdim", lambda x: torch.amin(x, 1, keepdim=True), x=x3)
    case("amax_all", lambda x: torch.amax(x), x=torch.randn(3, 4))

    # ---- cumsum -----------------------------------------------------------------------------
    case("cumsum_dim1", lambda x: torch.cumsum(x, 1), x=torch.randn(3, 5))
    case("cumsum_dim0", lambda x: torch.cumsum(x, 0), x=torch.randn(4, 2, 3))
    case("cumsum_last", lambda x: torch.cumsum(x, -1), x=torch.randn(2, 3, 4))

    # ---- logsumexp: ordinary, huge values, a row of -inf ------------------------------------
    big = torch.randn(4, 5) * 3
    big[1, :] = torch.tensor([1000.0, 999.0, -1000.0, 998.5, 0.0])
    big[2, :] = -INF
    big[3, :] = -1000.0 + torch.randn(5)
    case("logsumexp_big", lambda x: torch.logsumexp(x, 1), x=big)
    case("logsumexp_dims02_keepdim", lambda x: torch.logsumexp(x, (0, 2), keepdim=True), x=torch.randn(2, 3, 4))

    # ---- var / std --------------------------------------------------------------------------
    xv = torch.randn(3, 4) * 2 + 1
    case("var_dim1", lambda x: torch.var(x, 1), x=xv)
    case("var_all_biased", lambda x: torch.var(x, unbiased=False), x=xv)
    case("var_dims01_keepdim", lambda x: torch.var(x, (0, 2), unbiased=True, keepdim=True), x=torch.randn(2, 3, 4))
    case("var_one_element", lambda x: torch.var(x, 1), x=torch.randn(2, 1))  # 0/0: NaN
    const_row = torch.randn(3, 4)
    const_row[1, :] = 0.75
    case("std_dim1_zero_row", lambda x: torch.std(x, 1), x=const_row)  # std 0: gradient 0
    case("std_dim0_biased", lambda x: torch.std(x, 0, unbiased=False), x=torch.randn(4, 3))
    case("std_one_element", lambda x: torch.std(x, 0), x=torch.randn(1, 3))

    # ---- norm: every kind of p, rows of zeros, ties -----------------------------------------
    xn = torch.randn(3, 4)
    xn[1, :] = 0.0
    xn[2, 1] = 0.0
    for label, p in [("2", 2.0), ("1", 1.0), ("3", 3.0), ("1p5", 1.5), ("0p5", 0.5), ("0", 0.0)]:
        case(f"norm_p{label}_dim1", lambda x, p=p: torch.linalg.vector_norm(x, p, dim=1), x=xn)
    xt = torch.tensor([[1.0, -3.0, 3.0, 2.0], [0.0, 0.0, 0.0, 0.0], [-0.5, 0.25, 4.0, -1.0]])
    case("norm_pinf_dim1", lambda x: torch.linalg.vector_norm(x, INF, dim=1), x=xt)
    case("norm_pneginf_dim1", lambda x: torch.linalg.vector_norm(x, -INF, dim=1), x=xt + 0.5)
    case("norm_all", lambda x: torch.linalg.vector_norm(x), x=torch.randn(2, 3, 4))
    case("norm_p3_dims02_keepdim", lambda x: torch.linalg.vector_norm(x, 3.0, dim=(0, 2), keepdim=True),
         x=torch.randn(2, 3, 4))
    case("norm_zero_all", lambda x: torch.linalg.vector_norm(x), x=torch.zeros(2, 3))

    # ---- prod: no zero, one zero, two zeros in a row ----------------------------------------
    xp = torch.rand(3, 4) + 0.5
    xp[1, 2] = 0.0
    xp[2, 0] = 0.0
    xp[2, 3] = 0.0
    case("prod_dim1_zeros", lambda x: torch.prod(x, 1), x=xp)
    case("prod_dim0_keepdim", lambda x: torch.prod(x, 0, keepdim=True), x=xp)
    case("prod_all", lambda x: torch.prod(x), x=torch.rand(2, 3) + 0.5)
    one_zero = torch.rand(2, 3) + 0.5
    one_zero[1, 1] = 0.0
    case("prod_all_one_zero", lambda x: torch.prod(x), x=one_zero)
    two_zeros = one_zero.clone()
    two_zeros[0, 2] = 0.0
    case("prod_all_two_zeros", lambda x: torch.prod(x), x=two_zeros)

    # ---- combining and splitting ------------------------------------------------------------
    a, b, c = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)
    case("stack_dim0", lambda a, b, c: torch.stack([a, b, c], 0), a=a, b=b, c=c)
    case("stack_dim1", lambda a, b, c: torch.stack([a, b, c], 1), a=a, b=b, c=c)
    case("stack_dim_last", lambda a, b, c: torch.stack([a, b, c], -1), a=a, b=b, c=c)
    case("chunk_dim1", lambda x: weighted_cat(torch.chunk(x, 3, 1), 1), x=torch.randn(2, 7))
    case("split_size_dim0", lambda x: weighted_cat(torch.split(x, 2, 0), 0), x=torch.randn(5, 3))
    case("split_sizes_dim1", lambda x: weighted_cat(torch.split(x, [1, 3, 2], 1), 1), x=torch.randn(2, 6))
    case("unbind_dim1", lambda x: torch.stack([p * (i + 1) for i, p in enumerate(torch.unbind(x, 1))], 0),
         x=torch.randn(2, 3, 2))
    case("repeat_new_dim", lambda x: x.repeat(2, 1, 3), x=torch.randn(2, 3))
    case("repeat_same_rank", lambda x: x.repeat(3, 2), x=torch.randn(2, 3))
    case("flip_dims02", lambda x: torch.flip(x, (0, 2)), x=torch.randn(2, 3, 4))
    case("flip_last", lambda x: torch.flip(x, (-1,)), x=torch.randn(3, 4))
    case("roll_two_dims", lambda x: torch.roll(x, (1, -2), (0, 1)), x=torch.randn(3, 4))
    case("roll_flat", lambda x: torch.roll(x, 5), x=torch.randn(3, 4))
    case("roll_big_shift", lambda x: torch.roll(x, 11, 1), x=torch.randn(2, 4))

    # ---- tril / triu ------------------------------------------------------------------------
    xb = torch.randn(2, 3, 4)
    case("tril_0", lambda x: torch.tril(x), x=xb)
    case("tril_m1", lambda x: torch.tril(x, -1), x=xb)
    case("triu_1", lambda x: torch.triu(x, 1), x=xb)
    case("triu_m2", lambda x: torch.triu(x, -2), x=torch.randn(4, 3))

    # ---- creation (no gradient): <name>.y.npy -----------------------------------------------
    save("eye_3_4", "y", torch.eye(3, 4))
    save("eye_3", "y", torch.eye(3))
    # linspace: (start, end, steps) in <name>.args.npy, the values in <name>.y.npy
    for i, (start, end, steps) in enumerate([(0.0, 1.0, 5), (-3.0, 7.5, 11), (0.1, 0.7, 7), (-1.0, 1.0, 100),
                                             (2.5, -4.25, 37), (0.0, 1.0, 1000), (1e-3, 123.456, 64)]):
        save(f"linspace_{i}", "args", np.array([start, end, steps], dtype=np.float32))
        save(f"linspace_{i}", "y", torch.linspace(start, end, steps))

    # ---- allclose / equal: pairs a[k], b[k] with options opts[k] = (rtol, atol, equal_nan) ---
    a = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, INF, 3.0], [1.0, INF, 3.0], [1.0, NAN, 3.0],
                      [1.0, NAN, 3.0], [0.0, 0.0, 0.0], [100.0, 200.0, 300.0], [1.0, -INF, 0.0],
                      [1e-9, 0.0, 0.0]])
    b = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.00001, 3.0], [1.0, INF, 3.0], [1.0, -INF, 3.0], [1.0, NAN, 3.0],
                      [1.0, NAN, 3.0], [1e-8, 0.0, 0.0], [100.001, 200.0, 300.0], [1.0, -INF, 0.0],
                      [0.0, 0.0, 0.0]])
    opts = torch.tensor([[1e-5, 1e-8, 0], [1e-5, 1e-8, 0], [1e-5, 1e-8, 0], [1e-5, 1e-8, 0], [1e-5, 1e-8, 0],
                         [1e-5, 1e-8, 1], [0.0, 1e-8, 0], [1e-5, 1e-8, 0], [0.0, 0.0, 0], [0.0, 0.0, 0]],
                        dtype=torch.float64)
    close = [torch.allclose(a[k], b[k], rtol=float(opts[k, 0]), atol=float(opts[k, 1]), equal_nan=bool(opts[k, 2]))
             for k in range(len(a))]
    equal = [torch.equal(a[k], b[k]) for k in range(len(a))]
    save("allclose", "a", a)
    save("allclose", "b", b)
    save("allclose", "opts", opts.float())  # float32: 1e-5 and 1e-8 decide no case here
    save("allclose", "close", np.array(close))
    save("allclose", "equal", np.array(equal))


if __name__ == "__main__":
    main()
