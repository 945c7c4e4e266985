#!/usr/bin/python3
"""Reference values for indexing and selection, from PyTorch 1.13 (Debian's python3-torch):
gather, scatter (tensor and value), scatter_add, index_add, sort/argsort (ties, NaN), topk,
tensor indexing (slices with steps, None, Ellipsis, int64 and bool index tensors) and
index_put_.

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_index.py

Each case <name> writes, under tests/fixtures/index/, the same files as make_dtype.py:
    <name>.<input>.npy    the inputs (bool saved as int64 0/1)
    <name>.y.npy          the output, and <name>.i.npy the indices of sort/topk
    <name>.g.npy          a random upstream gradient, and
    <name>.d<input>.npy   the gradient of every float input after y.backward(g)
tests/ops/test_index.cpp runs the same op in tapegrad and compares them.
"""
import os

import numpy as np
import torch

from typed_cases import writer

torch.manual_seed(0)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "index")
save, case = writer("index")


def put(x, v, *index):
    y = x.clone()
    y[index] = v
    return y


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".npy"):
            os.remove(os.path.join(OUT, f))

    # gather / scatter / scatter_add / index_add (repeated indices included).
    case("gather_dim1", lambda x, idx: torch.gather(x, 1, idx),
         {"x": torch.randn(3, 4), "idx": torch.randint(0, 4, (3, 5))})
    case("gather_dim0_3d", lambda x, idx: torch.gather(x, 0, idx),
         {"x": torch.randn(2, 3, 4), "idx": torch.randint(0, 2, (3, 2, 3))})
    perm = torch.stack([torch.randperm(5)[:3] for _ in range(2)])  # distinct per row
    case("scatter_dim1", lambda x, idx, src: torch.scatter(x, 1, idx, src),
         {"x": torch.randn(3, 5), "idx": perm, "src": torch.randn(2, 3)})
    case("scatter_value", lambda x, idx: torch.scatter(x, 1, idx, 2.5),
         {"x": torch.randn(3, 5), "idx": perm})
    case("scatter_add_dim0", lambda x, idx, src: torch.scatter_add(x, 0, idx, src),
         {"x": torch.randn(3, 4), "idx": torch.randint(0, 3, (5, 4)), "src": torch.randn(5, 4)})
    case("index_add_dim0", lambda x, idx, src: torch.index_add(x, 0, idx, src, alpha=0.5),
         {"x": torch.randn(5, 3), "idx": torch.tensor([0, 4, 2, 0]), "src": torch.randn(4, 3)})
    case("index_add_dim1", lambda x, idx, src: torch.index_add(x, 1, idx, src),
         {"x": torch.randn(2, 5, 3), "idx": torch.tensor([3, 1]), "src": torch.randn(2, 2, 3)})

    # sort (stable: ties keep their order), argsort, NaN as the largest, topk.
    ties = torch.randint(-2, 3, (3, 6)).float()
    case("sort_dim1", lambda x: torch.sort(x, dim=1, stable=True), {"x": ties})
    case("sort_desc_dim0", lambda x: torch.sort(x, dim=0, descending=True, stable=True), {"x": ties})
    case("sort_default", lambda x: torch.sort(x), {"x": ties})
    case("argsort_desc", lambda x: torch.argsort(x, 1, descending=True), {"x": torch.randn(4, 5)})
    nan = torch.tensor([[1.0, float("nan"), -3.0, 2.0], [float("nan"), 0.0, 5.0, float("nan")]])
    case("sort_nan", lambda x: torch.sort(x.detach(), dim=1, stable=True), {"x": nan})
    case("sort_nan_desc", lambda x: torch.sort(x.detach(), dim=1, descending=True, stable=True), {"x": nan})
    case("sort_int", lambda x: torch.sort(x, dim=1, stable=True), {"x": torch.randint(0, 4, (2, 7))})
    r = torch.randn(4, 7)
    case("topk_largest", lambda x: torch.topk(x, 3), {"x": r})
    case("topk_smallest_dim0", lambda x: torch.topk(x, 2, 0, largest=False), {"x": r})
    case("topk_unsorted", lambda x: torch.topk(x, 4, 1, sorted=False), {"x": r})

    # Tensor indexing: basic (views), advanced (copies), mixed.
    x = torch.randn(4, 5, 6)
    case("index_slice_int", lambda x: x[1:3, -1], {"x": x})
    case("index_step_none", lambda x: x[::2, None, 1:5:2], {"x": x})
    case("index_ellipsis", lambda x: x[..., 0], {"x": x})
    case("index_int_ellipsis_neg", lambda x: x[1, ..., -4:], {"x": x})
    case("index_tensor", lambda x, idx: x[idx], {"x": x, "idx": torch.tensor([[0, -1, 2], [3, 3, 1]])})
    case("index_tensor_dim1", lambda x, idx: x[:, idx, 1::3], {"x": x, "idx": torch.tensor([4, 0, 4])})
    case("index_two_adjacent", lambda x, a, b: x[:, a, b],
         {"x": x, "a": torch.tensor([[0], [2]]), "b": torch.tensor([1, 5, 0])})
    case("index_two_apart", lambda x, a, b: x[a, :, b],
         {"x": x, "a": torch.tensor([3, 0]), "b": torch.tensor([[5], [1], [2]])})
    case("index_mask", lambda x, m: x[m], {"x": x, "m": torch.rand(4, 5) > 0.5})
    case("index_mask_dim1", lambda x, m: x[1:, m], {"x": x, "m": torch.rand(5) > 0.4})

    # index_put_ (y = x.clone(); y[index] = v): the gradient flows to x (not where written) and v.
    case("put_slice", lambda x, v: put(x, v, slice(None), slice(1, 5, 2)), {"x": x, "v": torch.randn(6)})
    case("put_int", lambda x, v: put(x, v, 2), {"x": x, "v": torch.randn(5, 1)})
    case("put_tensor", lambda x, v, idx: put(x, v, slice(None), idx),
         {"x": x, "v": torch.randn(4, 2, 6), "idx": torch.tensor([3, 0])})
    case("put_mask", lambda x, v, m: put(x, v, m), {"x": x, "v": torch.randn(6), "m": torch.rand(4, 5) > 0.5})
    print("wrote", len(os.listdir(OUT)), "files to", os.path.normpath(OUT))


if __name__ == "__main__":
    main()
