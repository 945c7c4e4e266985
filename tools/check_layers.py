#!/usr/bin/env python3
"""Checks that lib/ includes point only downward through the layers (README, "Architecture").

    core, backend  <-  autograd  <-  ops  <-  nn  <-  optim, io, data

(tapegrad/error.h and tapegrad/arg.h sit below all of them.)

A file may include headers of its own layer and of the layers below it, never above, and
never by a relative path ("../"). Public headers count in the layer their implementation
lives in (tapegrad/ops.h is ops, tapegrad/nn/*.h is nn, ...). Prints every violation and
exits 1 if there is one.  Usage: tools/check_layers.py [repository root]
"""
import pathlib
import re
import sys

RANK = {"base": -1, "core": 0, "backend": 0, "autograd": 1, "ops": 2, "nn": 3, "optim": 4, "io": 4, "data": 4}
# Public headers (lib/include/tapegrad/...) by the layer that implements them.
PUBLIC = {
    "error.h": "base", "arg.h": "base", "tensor.h": "core", "random.h": "core", "state_dict.h": "core",
    "xtensor.h": "core", "memory.h": "core", "device.h": "backend", "autograd.h": "autograd",
    "ops.h": "ops", "nn.h": "nn", "optim.h": "optim", "checkpoint.h": "io", "npz.h": "io",
    "data.h": "data",
}
OUTSIDE = {"tapegrad.h", "distributed.h"}  # the umbrella header; lib/distributed (its own target)


def layer_of_public(rel):
    """rel: the path under lib/include/tapegrad."""
    parts = rel.split("/")
    if len(parts) > 1:
        return parts[0]  # nn/..., optim/...
    return PUBLIC.get(rel)


def layer_of_include(inc):
    if inc.startswith("tapegrad/"):
        rel = inc[len("tapegrad/"):]
        return None if rel in OUTSIDE else layer_of_public(rel)
    head = inc.split("/")[0]
    return head if head in RANK else None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    files = []
    for f in sorted((root / "lib/src").rglob("*")):
        if f.suffix in (".h", ".cpp"):
            files.append((f, f.relative_to(root / "lib/src").parts[0]))
    for f in sorted((root / "lib/include/tapegrad").rglob("*.h")):
        rel = f.relative_to(root / "lib/include/tapegrad").as_posix()
        if rel not in OUTSIDE:
            files.append((f, layer_of_public(rel)))
    bad = []
    for f, layer in files:
        if layer not in RANK:
            bad.append(f"{f.relative_to(root)}: not in a known layer")
            continue
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            m = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
            if not m:
                continue
            inc = m.group(1)
            if "../" in inc:
                bad.append(f"{f.relative_to(root)}:{n}: relative include \"{inc}\"")
                continue
            target = layer_of_include(inc)
            if target is not None and RANK[target] > RANK[layer]:
                bad.append(f"{f.relative_to(root)}:{n}: {layer} includes \"{inc}\" ({target}, a layer above)")
            elif target is not None and RANK[target] == RANK[layer] and target != layer and RANK[layer] == 0:
                bad.append(f"{f.relative_to(root)}:{n}: {layer} includes \"{inc}\" ({target}: core and backend are independent)")
    for b in bad:
        print(b)
    print(f"check_layers: {len(files)} files, {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
