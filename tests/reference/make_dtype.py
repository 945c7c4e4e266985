#!/usr/bin/python3
"""Reference values for int64 and bool tensors, from PyTorch 1.13 (Debian's python3-torch):
comparisons, logical ops, where/masked_fill with bool masks, max/min/argmax/argmin (ties
included), cat of int64 tensors, all/any, nonzero, masked_select and one_hot.

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_dtype.py

Each case <name> writes, under tests/fixtures/dtype/:
    <name>.<input>.npy    the inputs: float32, int64, or bool saved as int64 0/1 (the loader
                          in tests/reference.h turns it back into a bool tensor)
    <name>.y.npy          the output (bool outputs as int64 0/1), and <name>.i.npy the indices
                          of max/min
    <name>.g.npy          for outputs with a gradient: a random upstream gradient, and
    <name>.d<input>.npy   the gradient of every float input after y.backward(g)
tests/ops/test_integer.cpp runs the same op in tapegrad and compares them.
"""
import os

import numpy as np
import torch

from typed_cases import writer

torch.manual_seed(0)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "dtype")
save, case = writer("dtype")


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".npy"):
            os.remove(os.path.join(OUT, f))

    # Small integers as floats, so that comparisons meet equal values.
    fa = torch.randint(-2, 3, (3, 4)).float()
    fb = torch.randint(-2, 3, (4,)).float()
    ia = torch.randint(-3, 4, (3, 4))
    ib = torch.randint(-3, 4, (3, 1))
    ops = {"gt": torch.gt, "lt": torch.lt, "ge": torch.ge, "le": torch.le, "eq": torch.eq,
           "ne": torch.ne}
    for n, op in ops.items():
        case(f"{n}_float", lambda a, b, op=op: op(a, b), {"a": fa, "b": fb})
        case(f"{n}_int", lambda a, b, op=op: op(a, b), {"a": ia, "b": ib})
        case(f"{n}_mixed", lambda a, b, op=op: op(a, b), {"a": ia, "b": fb + 0.5 * (fb > 0)})
        case(f"{n}_scalar_float", lambda a, op=op: op(a, 0.5), {"a": fa})
        case(f"{n}_scalar_int", lambda a, op=op: op(a, 1), {"a": ia})

    p = torch.rand(2, 3, 4) > 0.5
    q = torch.rand(3, 1) > 0.5
    case("logical_and", lambda a, b: a & b, {"a": p, "b": q})
    case("logical_or", lambda a, b: a | b, {"a": p, "b": q})
    case("logical_xor", lambda a, b: a ^ b, {"a": p, "b": q})
    case("logical_not", lambda a: ~a, {"a": p})

    # where / masked_fill with bool masks, broadcast.
    case("where_bool", lambda c, a, b: torch.where(c, a, b),
         {"c": torch.rand(3, 1, 4) > 0.5, "a": torch.randn(2, 4), "b": torch.randn(4)})
    case("masked_fill_bool", lambda a, m: a.masked_fill(m, -7.5),
         {"a": torch.randn(2, 3, 4), "m": torch.rand(3, 1) > 0.5})
    x = torch.randn(2, 3, 4)
    case("masked_fill_cmp", lambda a: a.masked_fill(a > 0.3, 0.0), {"a": x})

    # max/min/argmax/argmin with ties (the first index wins) and NaN (which wins).
    t = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, -1.0], [5.0, 0.0, 5.0, 0.0]])
    case("max_dim1", lambda x: torch.max(x, 1), {"x": t})
    case("max_dim0_keep", lambda x: torch.max(x, 0, keepdim=True), {"x": t})
    case("min_dim1", lambda x: torch.min(x, 1), {"x": t})
    case("min_dim0_keep", lambda x: torch.min(x, 0, keepdim=True), {"x": t})
    r = torch.randn(2, 5, 3)
    case("max_3d", lambda x: torch.max(x, -2), {"x": r})
    case("min_3d", lambda x: torch.min(x, 2, keepdim=True), {"x": r})
    case("argmax_all", lambda x: torch.argmax(x), {"x": t})
    case("argmin_all", lambda x: torch.argmin(x), {"x": t})
    case("argmax_dim1", lambda x: torch.argmax(x, 1), {"x": t})
    case("argmin_dim0_keep", lambda x: torch.argmin(x, 0, keepdim=True), {"x": t})
    nan = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [4.0, 2.0, 4.0, 1.0]])
    case("max_nan", lambda x: torch.max(x.detach(), 1), {"x": nan})
    case("argmin_nan", lambda x: torch.argmin(x.detach(), 1), {"x": nan})

    # cat of int64 and bool tensors.
    case("cat_int", lambda a, b: torch.cat([a, b], 1),
         {"a": torch.randint(0, 9, (2, 3)), "b": torch.randint(0, 9, (2, 1))})
    case("cat_bool", lambda a, b: torch.cat([a, b], 0), {"a": p[0], "b": p[1, :2]})
    # all / any, nonzero, masked_select (differentiable in the input), one_hot.
    m = torch.rand(3, 4) > 0.3
    case("all", lambda a: torch.all(a), {"a": m})
    case("any_dim1", lambda a: torch.any(a, 1), {"a": m})
    case("all_dim0_keep", lambda a: torch.all(a, 0, keepdim=True), {"a": m})
    case("nonzero", lambda a: torch.nonzero(a), {"a": torch.randint(-1, 2, (3, 2, 4))})
    case("masked_select", lambda a, m: torch.masked_select(a, m),
         {"a": torch.randn(2, 1, 4), "m": torch.rand(3, 4) > 0.5})
    case("masked_select_int", lambda a, m: torch.masked_select(a, m),
         {"a": torch.randint(0, 9, (3, 4)), "m": torch.rand(4) > 0.5})
    case("one_hot", lambda a: torch.nn.functional.one_hot(a), {"a": torch.randint(0, 5, (2, 3))})
    case("one_hot_k", lambda a: torch.nn.functional.one_hot(a, 7), {"a": torch.randint(0, 5, (4,))})
    print("wrote", len(os.listdir(OUT)), "files to", os.path.normpath(OUT))


if __name__ == "__main__":
    main()
