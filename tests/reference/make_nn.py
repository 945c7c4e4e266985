#!/usr/bin/python3
"""Reference values for the simple nn modules and the initializers, from PyTorch 1.13.

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_nn.py

Each module case <name> writes, under tests/fixtures/nn/:
    <name>.x.npy              the input (float32), or <name>.ids.npy (int64) for Embedding
    <name>.y.npy              the module's output
    <name>.g.npy              a random upstream gradient, same shape as y
    <name>.dx.npy             d(sum(g * y))/dx (float inputs only)
    <name>.param.<key>.npy    every state_dict entry, named by its key ("0.weight")
    <name>.grad.<key>.npy     its gradient
    <name>.nparams.npy        how many state_dict entries there are (int64)
tests/nn/test_layers.cpp builds the same module, loads the parameters by name and compares.

The init cases write init.*.npy: fans, gains and the bounds/stds PyTorch's formulas give
(read by tests/nn/test_init.cpp, which lists the same shapes and nonlinearities).

The cases of issue 16 (written last, so the earlier files do not change) add the modules
Softmax, LogSoftmax, Flatten, Identity and Embedding.from_pretrained (same files as above),
init.gains64.npy (calculate_gain in float64, the exact Python values), and for
nn.init.orthogonal_ orthogonal.<i>.normal.npy (the N(0, 1) matrix PyTorch drew, (rows, cols))
and orthogonal.<i>.w.npy (the tensor orthogonal_ filled), read by tests/nn/test_modules16.cpp.
"""
import math
import os

import numpy as np
import torch
import torch.nn as nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "nn")
torch.manual_seed(0)
torch.set_default_dtype(torch.float32)


def save(name, a):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    np.save(os.path.join(OUT, name + ".npy"), np.array(a, order="C"))


def perturb(module):
    """Moves every parameter off its default (ones/zeros) so gradients are informative."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.5 * torch.randn(p.shape))


def module_case(name, module, x=None, ids=None):
    module.zero_grad()
    if x is not None:
        x = x.clone().requires_grad_(True)
        y = module(x)
    else:
        y = module(ids)
    g = torch.randn(y.shape)
    y.backward(g)
    if x is not None:
        save(f"{name}.x", x)
        save(f"{name}.dx", x.grad)
    else:
        save(f"{name}.ids", ids.to(torch.int64))
    save(f"{name}.y", y)
    save(f"{name}.g", g)
    params = dict(module.named_parameters())
    state = module.state_dict()
    for key, value in state.items():
        save(f"{name}.param.{key}", value)
        save(f"{name}.grad.{key}", params[key].grad)
    save(f"{name}.nparams", np.array(len(state), dtype=np.int64))


def modules():
    # ---- Linear: 2-D and 3-D input, with and without bias -----------------------------------
    for bias in (True, False):
        suffix = "" if bias else "_nobias"
        lin = nn.Linear(4, 3, bias=bias)
        module_case("linear_2d" + suffix, lin, x=torch.randn(5, 4))
        lin = nn.Linear(4, 3, bias=bias)
        module_case("linear_3d" + suffix, lin, x=torch.randn(2, 3, 4))

    # ---- Embedding: repeated ids, padding_idx (positive and negative) ------------------------
    emb = nn.Embedding(7, 3, padding_idx=0)
    ids = torch.tensor([[1, 0, 3, 3, 6], [0, 2, 1, 1, 5]])
    module_case("embedding_pad", emb, ids=ids)
    emb = nn.Embedding(6, 4, padding_idx=-2)  # normalised to 4
    ids = torch.tensor([4, 2, 2, 5, 4, 0])
    module_case("embedding_negpad", emb, ids=ids)
    emb = nn.Embedding(5, 2)
    ids = torch.tensor([[[0, 4], [4, 4]], [[1, 2], [3, 0]]])
    module_case("embedding_3d", emb, ids=ids)

    # ---- LayerNorm: one and two normalised dims, affine or not -------------------------------
    ln = nn.LayerNorm(6)
    perturb(ln)
    module_case("layernorm_last", ln, x=torch.randn(2, 3, 6) * 2 + 1)
    ln = nn.LayerNorm((3, 4), eps=1e-3)
    perturb(ln)
    module_case("layernorm_last2", ln, x=torch.randn(2, 3, 4))
    ln = nn.LayerNorm(5, elementwise_affine=False)
    module_case("layernorm_noaffine", ln, x=torch.randn(4, 5))

    # ---- Sequential: names "0".."3", the activations, order of application -------------------
    seq = nn.Sequential(nn.Linear(4, 8), nn.GELU(approximate="tanh"), nn.LayerNorm(8),
                        nn.Linear(8, 6), nn.Tanh(), nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3),
                        nn.Sigmoid(), nn.GELU())
    perturb(seq[2])
    module_case("sequential", seq, x=torch.randn(3, 4))


# Shapes and nonlinearities for the init cases; tests/nn/test_init.cpp lists the same ones.
INIT_SHAPES = [(300, 200), (64, 32, 3, 3), (40, 100, 5), (128, 1000)]
GAINS = [("linear", 0.0), ("conv2d", 0.0), ("sigmoid", 0.0), ("tanh", 0.0), ("relu", 0.0),
         ("leaky_relu", 0.01), ("leaky_relu", 0.2), ("leaky_relu", math.sqrt(5)), ("selu", 0.0)]
# (a, mode, nonlinearity) for the kaiming bounds.
KAIMING = [(0.0, "fan_in", "relu"), (0.0, "fan_out", "relu"), (0.1, "fan_in", "leaky_relu"),
           (math.sqrt(5), "fan_in", "leaky_relu"), (0.0, "fan_out", "tanh")]


def inits():
    fans = []
    xavier = []   # rows: (uniform bound, normal std) with gain 1 and gain 5/3
    kaiming = []  # rows per shape: for each KAIMING entry (uniform bound, normal std)
    maxabs = []   # max |w| of PyTorch's own xavier_uniform_ / kaiming_uniform_(relu) draws
    for shape in INIT_SHAPES:
        w = torch.empty(shape)
        fi, fo = nn.init._calculate_fan_in_and_fan_out(w)
        fans.append((fi, fo))
        row = []
        for gain in (1.0, 5.0 / 3.0):
            std = gain * math.sqrt(2.0 / (fi + fo))
            row += [math.sqrt(3.0) * std, std]
        xavier.append(row)
        row = []
        for a, mode, nl in KAIMING:
            fan = nn.init._calculate_correct_fan(w, mode)
            std = nn.init.calculate_gain(nl, a) / math.sqrt(fan)
            row += [math.sqrt(3.0) * std, std]
        kaiming.append(row)
        maxabs.append((nn.init.xavier_uniform_(w).abs().max().item(),
                       nn.init.kaiming_uniform_(w, nonlinearity="relu").abs().max().item()))
    save("init.fans", np.array(fans, dtype=np.int64))
    save("init.xavier", np.array(xavier, dtype=np.float32))
    save("init.kaiming", np.array(kaiming, dtype=np.float32))
    save("init.maxabs", np.array(maxabs, dtype=np.float32))
    save("init.gains", np.array([nn.init.calculate_gain(nl, p) for nl, p in GAINS], dtype=np.float32))


# (shape, gain) for the orthogonal_ cases; tests/nn/test_modules16.cpp lists the same ones.
ORTHOGONAL = [((6, 4), 1.0), ((3, 7), 1.0), ((4, 2, 3), 2.0), ((5, 5), 5.0 / 3)]
# calculate_gain cases in float64; the test lists the same ones.
GAINS64 = [("linear", None), ("conv1d", None), ("conv_transpose2d", None), ("sigmoid", None),
           ("tanh", None), ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2),
           ("leaky_relu", math.sqrt(5)), ("selu", None)]


def issue16():
    module_case("softmax_dim1", nn.Softmax(dim=1), x=torch.randn(2, 3, 4))
    module_case("softmax_neg", nn.Softmax(dim=-1), x=torch.randn(3, 5) * 3)
    module_case("logsoftmax_dim0", nn.LogSoftmax(dim=0), x=torch.randn(4, 3))
    module_case("logsoftmax_neg", nn.LogSoftmax(dim=-1), x=torch.randn(2, 3, 4) * 3)
    module_case("flatten_default", nn.Flatten(), x=torch.randn(2, 3, 4, 5))
    module_case("flatten_mid", nn.Flatten(1, 2), x=torch.randn(2, 3, 4, 5))
    module_case("flatten_neg", nn.Flatten(0, -2), x=torch.randn(2, 3, 4))
    module_case("identity", nn.Identity(), x=torch.randn(3, 4))
    weights = torch.randn(6, 3)
    emb = nn.Embedding.from_pretrained(weights, freeze=False, padding_idx=1)
    module_case("embedding_pretrained", emb, ids=torch.tensor([[1, 0, 5], [1, 3, 3]]))

    np.save(os.path.join(OUT, "init.gains64.npy"),
            np.array([nn.init.calculate_gain(nl, p) for nl, p in GAINS64], dtype=np.float64))
    for i, (shape, gain) in enumerate(ORTHOGONAL):
        rows = shape[0]
        cols = int(np.prod(shape)) // rows
        state = torch.get_rng_state()
        normal = torch.empty(rows, cols).normal_(0, 1)  # what orthogonal_ draws first
        torch.set_rng_state(state)
        w = nn.init.orthogonal_(torch.empty(shape), gain=gain)
        save(f"orthogonal.{i}.normal", normal)
        save(f"orthogonal.{i}.w", w)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".npy"):
            os.remove(os.path.join(OUT, f))
    modules()
    inits()
    issue16()


if __name__ == "__main__":
    main()
