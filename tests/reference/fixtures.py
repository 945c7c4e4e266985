"""What the make_*.py scripts that write one folder of float cases share (typed_cases.py is
the int64/bool twin): the folder, emptied of an earlier run's .npy files, and save(), one array
per file.

    FIX = fixtures.Folder("ops")        # tests/fixtures/ops
    save = FIX.save                     # save(name, key, tensor or array)
    def main(): FIX.clear(); ...
"""
import os

import numpy as np
import torch


class Folder:
    def __init__(self, folder, bool_as=None):
        """bool_as: the dtype bool arrays are stored as (None: kept bool)."""
        self.path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                                 folder)
        self.bool_as = bool_as

    def clear(self):
        """Creates the folder if missing and removes the .npy files an earlier run left."""
        os.makedirs(self.path, exist_ok=True)
        for f in os.listdir(self.path):
            if f.endswith(".npy"):
                os.remove(os.path.join(self.path, f))

    def save(self, name, key, t):
        """<folder>/<name>.<key>.npy from a tensor or array; float64 stored as float32."""
        a = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        if a.dtype == np.float64:
            a = a.astype(np.float32)
        if a.dtype == np.bool_ and self.bool_as is not None:
            a = a.astype(self.bool_as)
        # np.array, not np.ascontiguousarray, which would make a 0-d array 1-d
        np.save(os.path.join(self.path, f"{name}.{key}.npy"), np.array(a, order="C"))
