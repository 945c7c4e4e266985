#!/usr/bin/python3
"""Writes torch_mlp.npz (a state_dict trained in PyTorch) and torch_mlp_io.npz (an input x
and the trained model's output y), read by tests/test_npz.cpp (Npz.LoadsWeightsTrainedInPyTorch).
Run from the repository root with /usr/bin/python3 (PyTorch 1.13, Debian's python3-torch):
  /usr/bin/python3 tests/data/checkpoint/make_torch_fixture.py
"""
import numpy as np
import torch

torch.manual_seed(0)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


model = Mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
data, target = torch.randn(32, 4), torch.randint(0, 3, (32,))
for _ in range(20):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(data), target).backward()
    opt.step()

out = "tests/data/checkpoint/"
np.savez(out + "torch_mlp.npz", **{k: v.numpy() for k, v in model.state_dict().items()})
x = torch.randn(5, 4)
with torch.no_grad():
    y = model(x)
np.savez(out + "torch_mlp_io.npz", x=x.numpy(), y=y.numpy())
