#!/usr/bin/python3
"""The numpy side of tests/io/test_npz.cpp (run with /usr/bin/python3, which has numpy).

  npz_roundtrip.py IN OUT KEY=SHAPE...
      Checks that IN (written by tapegrad) holds exactly the arrays KEY with SHAPE ("4x3",
      "4", "" for 0-d), float32, with element i equal to ((i*7 + len(KEY)) % 23 - 11) / 4,
      stored uncompressed with valid CRCs; then writes OUT with np.savez, holding 2*v + 1
      for every array (2-D arrays in Fortran order, to exercise that path).
  npz_roundtrip.py --fixtures DIR
      Writes the committed fixtures DIR/numpy_savez.npz and DIR/numpy_compressed.npz.
Exits non-zero with a message on any mismatch.
"""
import sys
import zipfile

import numpy as np


def expected(key, shape, dtype=np.float32):
    n = int(np.prod(shape)) if shape else 1
    i = np.arange(n)
    return (((i * 7 + len(key)) % 23 - 11) / 4).astype(dtype).reshape(shape)


def fail(msg):
    print("npz_roundtrip.py: " + msg)
    sys.exit(1)


def roundtrip(src, dst, specs):
    want = {}
    for spec in specs:
        key, _, dims = spec.partition("=")
        want[key] = tuple(int(d) for d in dims.split("x")) if dims else ()
    with zipfile.ZipFile(src) as z:
        bad = z.testzip()
        if bad is not None:
            fail(f"{src}: CRC error in {bad}")
        for info in z.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                fail(f"{src}: {info.filename} is compressed")
    arrays = dict(np.load(src).items())
    if set(arrays) != set(want):
        fail(f"{src}: keys {sorted(arrays)} != expected {sorted(want)}")
    out = {}
    for key, shape in want.items():
        a = arrays[key]
        if a.dtype != np.dtype("<f4"):
            fail(f"{key}: dtype {a.dtype.str}, expected <f4")
        if a.shape != shape:
            fail(f"{key}: shape {a.shape}, expected {shape}")
        if not np.array_equal(a, expected(key, shape)):
            fail(f"{key}: values differ: {a.ravel()[:8]} vs {expected(key, shape).ravel()[:8]}")
        b = (a * 2 + 1).astype(np.float32)
        out[key] = np.asfortranarray(b) if b.ndim == 2 else b
    np.savez(dst, **out)
    print(f"npz_roundtrip.py: {len(want)} arrays checked, {dst} written")


def fixtures(folder):
    arrays = {
        "a.weight": expected("a.weight", (2, 3)),
        "a.fortran": np.asfortranarray(expected("a.fortran", (3, 2))),
        "b.f64": expected("b.f64", (4,), np.float64),
        "c.scalar": expected("c.scalar", ()),
        "d.big": expected("d.big", (2, 2)).astype(">f4"),
        "e.empty": np.zeros((0, 3), np.float32),
    }
    np.savez(f"{folder}/numpy_savez.npz", **arrays)
    np.savez_compressed(f"{folder}/numpy_compressed.npz", w=expected("w", (2, 2)))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--fixtures":
        fixtures(sys.argv[2])
    elif len(sys.argv) >= 3:
        roundtrip(sys.argv[1], sys.argv[2], sys.argv[3:])
    else:
        fail(__doc__)
