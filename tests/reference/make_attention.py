#!/usr/bin/python3
"""Reference values for nn::MultiheadAttention and nn::TransformerBlock, from PyTorch 1.13.

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_attention.py

Each case <name> writes, under tests/fixtures/attention/:
    <name>.query.npy, .key.npy, .value.npy   the inputs (self-attention cases: only .x.npy)
    <name>.attn_mask.npy                      0/1 (bool cases; 1 = masked) or additive values
    <name>.key_padding_mask.npy               0/1, 1 = padding
    <name>.g.npy                              a random upstream gradient, same shape as y
    <name>.y.npy                              the output
    <name>.weights.npy                        attention weights per head (B, H, Tq, Tk)
    <name>.dquery.npy, .dkey.npy, .dvalue.npy d(sum(g * y))/d(input) (self-attention: .dx.npy)
    <name>.param.<key>.npy, .grad.<key>.npy   every parameter and its gradient, under
                                              tapegrad's names
    <name>.nparams.npy                        how many parameters there are (int64)

PyTorch packs the input projections into in_proj_weight (3C, C) / in_proj_bias (3C); tapegrad
has q_proj, k_proj, v_proj. TAPEGRAD_NAMES below is the mapping: rows [0:C] are q_proj, [C:2C]
k_proj, [2C:3C] v_proj; out_proj.weight/.bias keep their names.

The TransformerBlock reference is built from torch.nn pieces (LayerNorm,
MultiheadAttention(batch_first=True), Linear, GELU/ReLU) with dropout 0, pre-LN:
x = x + attn(ln1(x)); x = x + fc2(act(fc1(ln2(x)))).
tests/nn/test_attention.cpp builds the same modules, loads parameters by name and compares.
"""
import os

import numpy as np
import torch
import torch.nn as nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "attention")
torch.manual_seed(0)
torch.set_default_dtype(torch.float32)


def save(name, a):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    if a.dtype == np.bool_:
        a = a.astype(np.float32)
    np.save(os.path.join(OUT, name + ".npy"), np.array(a, order="C"))


def tapegrad_names(prefix, key, value):
    """PyTorch state_dict entry -> [(tapegrad name, tensor)], splitting the packed in_proj."""
    if key.endswith("in_proj_weight") or key.endswith("in_proj_bias"):
        base = key[: -len("in_proj_weight")] if key.endswith("weight") else key[: -len("in_proj_bias")]
        kind = "weight" if key.endswith("weight") else "bias"
        return [(f"{prefix}{base}{p}.{kind}", chunk) for p, chunk in
                zip(("q_proj", "k_proj", "v_proj"), value.chunk(3, dim=0))]
    return [(prefix + key, value)]


def perturb(module):
    """Random parameters (biases non-zero, LayerNorm weights off 1) so every gradient counts."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() == 2:
                p.copy_(0.4 * torch.randn(p.shape))
            else:
                p.add_(0.3 * torch.randn(p.shape))


def dump_params(name, module, rename=lambda k: k):
    entries = []
    for key, p in module.named_parameters():
        for tk, value in tapegrad_names("", rename(key), p):
            entries.append((tk, value))
    for key, p in module.named_parameters():
        for tk, grad in tapegrad_names("", rename(key), p.grad):
            save(f"{name}.grad.{tk}", grad)
    for tk, value in entries:
        save(f"{name}.param.{tk}", value)
    save(f"{name}.nparams", np.array(len(entries), dtype=np.int64))


def causal(tq, tk):
    """bool (Tq, Tk), True where key j > query i: what tapegrad's causal flag masks."""
    return torch.triu(torch.ones(tq, tk, dtype=torch.bool), diagonal=1)


def mha_case(name, C, H, bias, B, Tq, Tk, self_attn, attn_mask=None, key_padding_mask=None):
    mha = nn.MultiheadAttention(C, H, bias=bias, batch_first=True)
    perturb(mha)
    if self_attn:
        x = torch.randn(B, Tq, C, requires_grad=True)
        q = k = v = x
        save(f"{name}.x", x)
    else:
        q = torch.randn(B, Tq, C, requires_grad=True)
        k = torch.randn(B, Tk, C, requires_grad=True)
        v = torch.randn(B, Tk, C, requires_grad=True)
        for n, t in (("query", q), ("key", k), ("value", v)):
            save(f"{name}.{n}", t)
    y, w = mha(q, k, v, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
               need_weights=True, average_attn_weights=False)
    assert not torch.isnan(y).any()
    g = torch.randn(y.shape)
    (g * y).sum().backward()
    save(f"{name}.g", g)
    save(f"{name}.y", y)
    save(f"{name}.weights", w)
    if attn_mask is not None:
        save(f"{name}.attn_mask", attn_mask)
    if key_padding_mask is not None:
        save(f"{name}.key_padding_mask", key_padding_mask)
    if self_attn:
        save(f"{name}.dx", x.grad)
    else:
        for n, t in (("query", q), ("key", k), ("value", v)):
            save(f"{name}.d{n}", t.grad)
    dump_params(name, mha)


class Block(nn.Module):
    def __init__(self, d, h, f, act):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, f)
        self.act = nn.GELU() if act == "gelu" else nn.ReLU()
        self.fc2 = nn.Linear(f, d)

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                          need_weights=False)[0]
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


def block_case(name, d, h, f, act, B, T, attn_mask=None, key_padding_mask=None):
    block = Block(d, h, f, act)
    perturb(block)
    x = torch.randn(B, T, d, requires_grad=True)
    y = block(x, attn_mask=attn_mask, key_padding_mask=key_padding_mask)
    g = torch.randn(y.shape)
    (g * y).sum().backward()
    save(f"{name}.x", x)
    save(f"{name}.g", g)
    save(f"{name}.y", y)
    save(f"{name}.dx", x.grad)
    if key_padding_mask is not None:
        save(f"{name}.key_padding_mask", key_padding_mask)
    dump_params(name, block, rename=lambda k: "ffn." + k if k.startswith("fc") else k)


def main():
    os.makedirs(OUT, exist_ok=True)
    B, C, H = 2, 8, 2
    for bias in (True, False):
        sfx = "bias" if bias else "nobias"
        # Causal self-attention (the causal flag in tapegrad; a bool triu mask in PyTorch).
        mha_case(f"mha_causal_{sfx}", C, H, bias, B, 5, 5, True, attn_mask=causal(5, 5))
        # Self-attention with a key_padding_mask: batch 0 pads its last 2 keys, batch 1 its last 1.
        kpm = torch.zeros(B, 5, dtype=torch.bool)
        kpm[0, 3:] = True
        kpm[1, 4:] = True
        mha_case(f"mha_padding_{sfx}", C, H, bias, B, 5, 5, True, key_padding_mask=kpm)
        # Cross-attention: Tq = 3 queries over Tk = 6 keys/values (three different tensors).
        mha_case(f"mha_cross_{sfx}", C, H, bias, B, 3, 6, False)
    # Cross-attention with an additive (Tq, Tk) mask and a key_padding_mask together.
    add = 0.5 * torch.randn(3, 6)
    add[0, 2] = float("-inf")
    kpm = torch.zeros(B, 6, dtype=torch.bool)
    kpm[1, 0] = True
    mha_case("mha_cross_additive", C, H, True, B, 3, 6, False, attn_mask=add, key_padding_mask=kpm)
    # A per-(batch, head) bool mask (B·H, Tq, Tk), as PyTorch's 3-D attn_mask.
    m3 = torch.rand(B * H, 4, 4) < 0.3
    m3[:, :, 0] = False  # no row entirely masked
    mha_case("mha_mask3d", C, H, True, B, 4, 4, True, attn_mask=m3)
    # Pre-LN transformer blocks.
    block_case("block_gelu_causal", 8, 2, 16, "gelu", 2, 5, attn_mask=causal(5, 5))
    kpm = torch.zeros(2, 5, dtype=torch.bool)
    kpm[0, 4] = True
    block_case("block_relu_padding", 8, 2, 16, "relu", 2, 5, key_padding_mask=kpm)


if __name__ == "__main__":
    main()
