"""The fixture writer that make_dtype.py and make_index.py share: cases whose inputs and
outputs may be float32, int64 or bool (bool saved as int64 0/1; tests/reference.h loads it
back as bool). writer("dtype") gives save(name, key, t) and case(name, fn, inputs) writing under
tests/fixtures/dtype/."""
import os

import numpy as np
import torch


def writer(folder):
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", folder)

    def save(name, key, t):
        a = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        if a.dtype == np.bool_:
            a = a.astype(np.int64)
        if a.dtype == np.float64:
            a = a.astype(np.float32)
        np.save(os.path.join(out, f"{name}.{key}.npy"), np.array(a, order="C"))

    def case(name, fn, inputs):
        """inputs: {key: tensor}; float ones are differentiated when the output is float."""
        leaves = {k: (v.clone().requires_grad_(True) if v.is_floating_point() else v)
                  for k, v in inputs.items()}
        result = fn(**leaves)
        y, i = result if isinstance(result, tuple) else (result, None)
        if y.requires_grad:
            g = torch.randn(y.shape)
            y.backward(g)
            save(name, "g", g)
            for k, v in leaves.items():
                if v.is_floating_point():
                    save(name, "d" + k, v.grad if v.grad is not None else torch.zeros_like(v))
        for k, v in leaves.items():
            save(name, k, v)
        save(name, "y", y)
        if i is not None:
            save(name, "i", i)

    return save, case
