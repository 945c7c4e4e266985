#!/usr/bin/python3
"""Reference values for custom autograd Functions and optimizer steps with a closure, from
PyTorch 1.13 (Debian's python3-torch).

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_grad_api.py

Writes, under tests/fixtures/grad_api/:

A custom Function (tests/autograd/test_grad_api.cpp, Function.MatchesPyTorch): MulSquare,
(a, b, s) -> (s*a*b, a*a + b) with b (4,) broadcast against a (3, 4), s = 1.5, inside
loss = sum(y0 * y0) + sum(tanh(y1) * w):
    function.a.npy, function.b.npy, function.w.npy   the inputs
    function.y0.npy, function.y1.npy                 the outputs
    function.da.npy, function.db.npy                 the gradients of the loss

Optimizer steps with a closure (tests/optim/test_closure.cpp): each case minimizes
loss(w, b) = mean((tanh(X @ w + b) - T)^2) + 0.01 * sum(w^4) for STEPS steps of
opt.step(closure), the closure zeroing the gradients, computing the loss and calling backward:
    closure.X.npy (5, 3), closure.T.npy (5, 2), closure.w.npy (3, 2), closure.b.npy (2,)
    closure_<case>.w.npy, closure_<case>.b.npy   the parameters after every step, (STEPS, ...)
    closure_<case>.loss.npy                      what every step returned, (STEPS,)
"""
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "grad_api")
STEPS = 6
torch.set_default_dtype(torch.float32)


def save(name, t):
    a = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    np.save(os.path.join(OUT, name + ".npy"), np.array(a, dtype=np.float32, order="C"))


class MulSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, s):
        ctx.save_for_backward(a, b)
        ctx.s = s
        return a * b * s, a * a + b

    @staticmethod
    def backward(ctx, g0, g1):
        a, b = ctx.saved_tensors
        return g0 * b * ctx.s + g1 * 2 * a, (g0 * a * ctx.s + g1).sum(0), None


def function_case():
    torch.manual_seed(0)
    a = torch.randn(3, 4, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    w = torch.randn(3, 4)
    y0, y1 = MulSquare.apply(a, b, 1.5)
    loss = (y0 * y0).sum() + (torch.tanh(y1) * w).sum()
    loss.backward()
    for k, v in dict(a=a, b=b, w=w, y0=y0, y1=y1, da=a.grad, db=b.grad).items():
        save(f"function.{k}", v)


def closure_cases():
    torch.manual_seed(1)
    X, T = torch.randn(5, 3), torch.randn(5, 2)
    w0, b0 = torch.randn(3, 2), torch.randn(2)
    for k, v in dict(X=X, T=T, w=w0, b=b0).items():
        save(f"closure.{k}", v)
    O = torch.optim
    F = dict(foreach=False)
    cases = {
        "sgd": lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, **F),
        "adam": lambda ps: O.Adam(ps, lr=0.05, amsgrad=True, **F),
        "adamw": lambda ps: O.AdamW(ps, lr=0.05, weight_decay=0.1, **F),
        "rmsprop": lambda ps: O.RMSprop(ps, lr=0.01, momentum=0.5, centered=True, **F),
    }
    for name, make in cases.items():
        w = w0.clone().requires_grad_(True)
        b = b0.clone().requires_grad_(True)
        opt = make([w, b])

        def closure():
            opt.zero_grad()
            loss = ((torch.tanh(X @ w + b) - T) ** 2).mean() + 0.01 * (w ** 4).sum()
            loss.backward()
            return loss

        ws, bs, losses = [], [], []
        for _ in range(STEPS):
            losses.append(opt.step(closure).item())
            ws.append(w.detach().clone())
            bs.append(b.detach().clone())
        save(f"closure_{name}.w", torch.stack(ws))
        save(f"closure_{name}.b", torch.stack(bs))
        save(f"closure_{name}.loss", np.array(losses))


def main():
    os.makedirs(OUT, exist_ok=True)
    function_case()
    closure_cases()


if __name__ == "__main__":
    main()
