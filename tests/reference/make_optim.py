#!/usr/bin/python3
"""Reference values for the optimizers, LR schedulers and gradient clipping, from PyTorch 1.13
(Debian's python3-torch).

Run from the repository root with the system Python (it has torch and numpy):

    /usr/bin/python3 tests/reference/make_optim.py

Writes, under tests/fixtures/optim/:

Optimizer trajectories (tests/optim/test_optimizers.cpp): each case runs one optimizer configuration on
two parameters of shapes (3, 4) and (5,) for STEPS steps with a fixed sequence of gradients
whose scale changes from step to step (so amsgrad's running max matters). Some cases leave a
parameter without a gradient at one step (PyTorch then skips it and its step count).
    <case>.p0.npy, <case>.p1.npy        initial parameters
    <case>.g0.npy, <case>.g1.npy        the gradients, (STEPS, *shape)
    <case>.has0.npy, <case>.has1.npy    1 where the parameter has a gradient at that step
    <case>.traj0.npy, <case>.traj1.npy  the parameters after every step, (STEPS, *shape)

LR schedules (tests/optim/test_lr_scheduler.cpp), float64, one row per epoch starting at construction,
one column per parameter group (base lrs 0.1 and 0.02):
    sched_<name>.lr.npy

Clipping (tests/optim/test_optimizers.cpp): three gradients of shapes (3, 4), (5,), (2, 2, 2):
    clip_<name>.in<k>.npy, clip_<name>.out<k>.npy, clip_<name>.norm.npy (0-d float32)
"""
import math
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "optim")
STEPS = 7
SCALES = [1.0, 0.3, 2.0, 0.05, 1.5, 0.7, 0.2]
torch.set_default_dtype(torch.float32)


def save(name, t):
    a = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    np.save(os.path.join(OUT, name + ".npy"), np.array(a, order="C"))


# ---- optimizers --------------------------------------------------------------------------

def trajectory(name, make, skip=None, seed=0):
    """make(p0, p1) -> optimizer. skip: (step, param) that gets no gradient."""
    torch.manual_seed(seed)
    p0 = torch.randn(3, 4).requires_grad_(True)
    p1 = torch.randn(5).requires_grad_(True)
    save(f"{name}.p0", p0)
    save(f"{name}.p1", p1)
    g0 = torch.stack([torch.randn(3, 4) * s for s in SCALES])
    g1 = torch.stack([torch.randn(5) * s for s in SCALES])
    has = np.ones((2, STEPS), dtype=np.float32)
    if skip is not None:
        has[skip[1], skip[0]] = 0
    opt = make(p0, p1)
    traj0, traj1 = [], []
    for t in range(STEPS):
        p0.grad = g0[t].clone() if has[0, t] else None
        p1.grad = g1[t].clone() if has[1, t] else None
        opt.step()
        traj0.append(p0.detach().clone())
        traj1.append(p1.detach().clone())
    save(f"{name}.g0", g0)
    save(f"{name}.g1", g1)
    save(f"{name}.has0", has[0])
    save(f"{name}.has1", has[1])
    save(f"{name}.traj0", torch.stack(traj0))
    save(f"{name}.traj1", torch.stack(traj1))


def optimizer_cases():
    O = torch.optim
    F = dict(foreach=False)  # the single-tensor path, the one tapegrad follows
    cases = {
        # SGD: every option at least once
        "sgd_plain": lambda a, b: O.SGD([a, b], lr=0.1, **F),
        "sgd_momentum": lambda a, b: O.SGD([a, b], lr=0.05, momentum=0.9, **F),
        "sgd_dampening_wd": lambda a, b: O.SGD([a, b], lr=0.05, momentum=0.8, dampening=0.3,
                                               weight_decay=0.05, **F),
        "sgd_nesterov": lambda a, b: O.SGD([a, b], lr=0.05, momentum=0.7, nesterov=True,
                                           weight_decay=0.01, **F),
        "sgd_maximize": lambda a, b: O.SGD([a, b], lr=0.02, momentum=0.5, maximize=True, **F),
        "sgd_groups": lambda a, b: O.SGD([{"params": [a]}, {"params": [b], "lr": 0.01,
                                          "momentum": 0.5}], lr=0.1, momentum=0.9, **F),
        # Adam
        "adam_default": lambda a, b: O.Adam([a, b], lr=1e-2, **F),
        "adam_betas_eps_wd": lambda a, b: O.Adam([a, b], lr=5e-3, betas=(0.8, 0.95), eps=1e-3,
                                                 weight_decay=0.1, **F),
        "adam_amsgrad": lambda a, b: O.Adam([a, b], lr=1e-2, amsgrad=True, weight_decay=0.01, **F),
        "adam_maximize": lambda a, b: O.Adam([a, b], lr=1e-2, maximize=True, **F),
        "adam_groups": lambda a, b: O.Adam([{"params": [a]}, {"params": [b], "lr": 0.05,
                                            "weight_decay": 0.2}], lr=1e-2, **F),
        # AdamW
        "adamw_default": lambda a, b: O.AdamW([a, b], lr=1e-2, **F),
        "adamw_wd_amsgrad": lambda a, b: O.AdamW([a, b], lr=2e-2, betas=(0.85, 0.99), eps=1e-6,
                                                 weight_decay=0.3, amsgrad=True, **F),
        "adamw_groups": lambda a, b: O.AdamW([{"params": [a], "weight_decay": 0.0},
                                             {"params": [b], "lr": 0.03}], lr=1e-2, **F),
        # RMSprop
        "rmsprop_default": lambda a, b: O.RMSprop([a, b], lr=1e-2, **F),
        "rmsprop_alpha_eps_wd": lambda a, b: O.RMSprop([a, b], lr=1e-2, alpha=0.9, eps=1e-4,
                                                       weight_decay=0.1, **F),
        "rmsprop_momentum": lambda a, b: O.RMSprop([a, b], lr=5e-3, momentum=0.9, **F),
        "rmsprop_centered": lambda a, b: O.RMSprop([a, b], lr=5e-3, centered=True, momentum=0.5,
                                                   **F),
        "rmsprop_maximize_groups": lambda a, b: O.RMSprop(
            [{"params": [a]}, {"params": [b], "lr": 0.02, "centered": True}], lr=1e-2,
            maximize=True, **F),
    }
    skips = {"sgd_momentum": (2, 1), "adam_groups": (2, 1), "adam_amsgrad": (0, 0),
             "rmsprop_centered": (3, 0), "adamw_groups": (1, 1)}
    for i, (name, make) in enumerate(cases.items()):
        trajectory(name, make, skips.get(name), seed=i)


# ---- schedulers ---------------------------------------------------------------------------

def warmup_cosine(W, T, r):
    """The factor of tg::optim::WarmupCosineLR (see lr_scheduler.h)."""
    def f(e):
        if e < W:
            return (e + 1) / (W + 1)
        if e < T:
            return r + (1 - r) * 0.5 * (1 + math.cos(math.pi * (e - W) / (T - W)))
        return r
    return f


def schedule(name, make, epochs):
    a = torch.zeros(2, requires_grad=True)
    b = torch.zeros(3, requires_grad=True)
    opt = torch.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.02}], lr=0.1)
    sched = make(opt)
    lrs = [list(sched.get_last_lr())]
    for _ in range(epochs):
        opt.step()  # no gradients: nothing moves, but PyTorch sees the right call order
        sched.step()
        lrs.append(list(sched.get_last_lr()))
    np.save(os.path.join(OUT, f"sched_{name}.lr.npy"), np.array(lrs, dtype=np.float64))


def scheduler_cases():
    S = torch.optim.lr_scheduler
    schedule("steplr", lambda o: S.StepLR(o, step_size=3, gamma=0.5), 15)
    schedule("cosine", lambda o: S.CosineAnnealingLR(o, T_max=8, eta_min=1e-3), 30)
    schedule("cosine_zero", lambda o: S.CosineAnnealingLR(o, T_max=5), 12)
    schedule("warmup_cosine", lambda o: S.LambdaLR(o, warmup_cosine(4, 20, 0.1)), 25)
    schedule("lambda", lambda o: S.LambdaLR(o, lambda e: 0.9 ** e), 10)


# ---- clipping ------------------------------------------------------------------------------

def clip(name, grads, max_norm, norm_type):
    params = [torch.zeros(g.shape, requires_grad=True) for g in grads]
    for k, (p, g) in enumerate(zip(params, grads)):
        p.grad = g.clone()
        save(f"clip_{name}.in{k}", g)
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    for k, p in enumerate(params):
        save(f"clip_{name}.out{k}", p.grad)
    save(f"clip_{name}.norm", norm.to(torch.float32))


def clip_cases():
    torch.manual_seed(100)

    def grads():
        return [torch.randn(3, 4) * 3, torch.randn(5), torch.randn(2, 2, 2) * 0.5]

    clip("norm2", grads(), 1.0, 2.0)
    clip("norm2_noclip", grads(), 100.0, 2.0)
    clip("norm1", grads(), 2.0, 1.0)
    clip("norm3", grads(), 0.5, 3.0)
    clip("inf", grads(), 0.5, float("inf"))
    g = grads()
    g[1][2] = float("nan")
    clip("nan", g, 1.0, 2.0)
    g = grads()
    g[0][1, 1] = float("inf")
    clip("infgrad", g, 1.0, 2.0)
    g = grads()
    g[2][0, 1, 0] = float("nan")
    clip("nan_infnorm", g, 1.0, float("inf"))

    # clip_grad_value_
    g = grads()
    g[0][0, 0] = float("nan")
    params = [torch.zeros(x.shape, requires_grad=True) for x in g]
    for k, (p, x) in enumerate(zip(params, g)):
        p.grad = x.clone()
        save(f"clipvalue.in{k}", x)
    torch.nn.utils.clip_grad_value_(params, 0.5)
    for k, p in enumerate(params):
        save(f"clipvalue.out{k}", p.grad)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".npy"):
            os.remove(os.path.join(OUT, f))
    optimizer_cases()
    scheduler_cases()
    clip_cases()


if __name__ == "__main__":
    main()
