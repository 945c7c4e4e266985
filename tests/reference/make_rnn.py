#!/usr/bin/python3
"""Reference values for the recurrent layers, from PyTorch 1.13.

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_rnn.py

Each case <name> writes, under tests/fixtures/rnn/:
    <name>.x.npy              the input
    <name>.h0.npy, .c0.npy    the initial states, when the case passes them
    <name>.y.npy              the output (cells: h'), and .h_n.npy / .c_n.npy (cells: .c.npy)
    <name>.g_<out>.npy        a random upstream gradient for each output
    <name>.dx.npy, .dh0.npy, .dc0.npy   d(Σ g_<out> · <out>)/d(input, states)
    <name>.param.<key>.npy    every state_dict entry, named by PyTorch's key ("weight_ih_l0")
    <name>.grad.<key>.npy     its gradient
tests/nn/test_rnn.cpp builds the same module, loads the parameters by name (mapping
RNNCell's i2h/h2h names onto weight_ih/bias_ih/weight_hh/bias_hh) and compares.

The char-RNN case writes charrnn.*: the one-hot word (T, 1, 57), the target class, the
loss, and the parameters and gradients of nn.RNNCell (keys rnn.*) and nn.Linear (h2o.*).
"""
import os
import string

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "rnn")
torch.manual_seed(0)
torch.set_default_dtype(torch.float32)


def save(name, a):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    np.save(os.path.join(OUT, name + ".npy"), np.array(a, order="C"))


def save_params(name, module, prefix=""):
    for key, p in module.named_parameters():
        save(f"{name}.param.{prefix}{key}", p)
        save(f"{name}.grad.{prefix}{key}", p.grad)


def leaf(*shape):
    return torch.randn(*shape).requires_grad_(True)


def backward(name, outputs):
    """Σ g_k · out_k with a random g_k per output, saved as <name>.g_<k>."""
    loss = 0
    for key, out in outputs.items():
        g = torch.randn(out.shape)
        save(f"{name}.g_{key}", g)
        save(f"{name}.{key}", out)
        loss = loss + (g * out).sum()
    loss.backward()


def cell_case(name, cell, B, lstm=False):
    x = leaf(B, cell.input_size)
    h = leaf(B, cell.hidden_size)
    save(f"{name}.x", x)
    save(f"{name}.h0", h)
    if lstm:
        c = leaf(B, cell.hidden_size)
        save(f"{name}.c0", c)
        y, c_new = cell(x, (h, c))
        backward(name, {"y": y, "c": c_new})
        save(f"{name}.dc0", c.grad)
    else:
        backward(name, {"y": cell(x, h)})
    save(f"{name}.dx", x.grad)
    save(f"{name}.dh0", h.grad)
    save_params(name, cell)


def seq_case(name, module, T, B, states=True):
    L, H = module.num_layers, module.hidden_size
    x = leaf(*((B, T, module.input_size) if module.batch_first else (T, B, module.input_size)))
    save(f"{name}.x", x)
    lstm = isinstance(module, nn.LSTM)
    h0 = leaf(L, B, H) if states else None
    c0 = leaf(L, B, H) if states and lstm else None
    if lstm:
        y, (h_n, c_n) = module(x, (h0, c0)) if states else module(x)
        backward(name, {"y": y, "h_n": h_n, "c_n": c_n})
    else:
        y, h_n = module(x, h0) if states else module(x)
        backward(name, {"y": y, "h_n": h_n})
    save(f"{name}.dx", x.grad)
    if states:
        save(f"{name}.h0", h0)
        save(f"{name}.dh0", h0.grad)
        if lstm:
            save(f"{name}.c0", c0)
            save(f"{name}.dc0", c0.grad)
    save_params(name, module)


def charrnn_case():
    """The classic name classifier: one-hot letters, h = tanh(i2h(x) + h2h(h)), h2o on the
    last step, log_softmax, NLL."""
    letters = string.ascii_letters + " .,;'"  # 57
    word, target = "O'Neill", 7
    H, K = 32, 18
    rnn = nn.RNNCell(len(letters), H)
    h2o = nn.Linear(H, K)
    x = torch.zeros(len(word), 1, len(letters))
    for t, ch in enumerate(word):
        x[t, 0, letters.index(ch)] = 1.0
    h = torch.zeros(1, H)
    for t in range(len(word)):
        h = rnn(x[t], h)
    logp = F.log_softmax(h2o(h), dim=1)
    loss = F.nll_loss(logp, torch.tensor([target]))
    loss.backward()
    save("charrnn.x", x)
    save("charrnn.target", np.array([target], dtype=np.int64))
    save("charrnn.logp", logp)
    save("charrnn.loss", loss)
    save_params("charrnn", rnn, "rnn.")
    save_params("charrnn", h2o, "h2o.")


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".npy"):
            os.remove(os.path.join(OUT, f))
    C, H = 5, 4
    cell_case("rnncell", nn.RNNCell(C, H), B=3)
    cell_case("rnncell_relu", nn.RNNCell(C, H, bias=False, nonlinearity="relu"), B=3)
    cell_case("lstmcell", nn.LSTMCell(C, H), B=3, lstm=True)
    cell_case("grucell", nn.GRUCell(C, H), B=3)
    seq_case("rnn", nn.RNN(C, H, num_layers=2), T=6, B=3)
    seq_case("rnn_bf", nn.RNN(C, H, num_layers=2, batch_first=True), T=6, B=3)
    seq_case("rnn_relu", nn.RNN(C, H, nonlinearity="relu", bias=False), T=5, B=2, states=False)
    seq_case("lstm", nn.LSTM(C, H, num_layers=2), T=6, B=3)
    seq_case("lstm_bf", nn.LSTM(C, H, batch_first=True, bias=False), T=5, B=2, states=False)
    seq_case("gru", nn.GRU(C, H, num_layers=2), T=6, B=3)
    seq_case("gru_bf", nn.GRU(C, H, num_layers=2, batch_first=True), T=5, B=2, states=False)
    # hidden 20: the vectorised kernels run full SIMD lanes and a scalar tail
    seq_case("rnn_wide", nn.RNN(3, 20), T=3, B=2)
    seq_case("lstm_wide", nn.LSTM(3, 20), T=3, B=2)
    seq_case("gru_wide", nn.GRU(3, 20), T=3, B=2)
    charrnn_case()


if __name__ == "__main__":
    main()
