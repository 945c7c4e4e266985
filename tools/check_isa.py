#!/usr/bin/env python3
"""Checks that a portable tapegrad library (TAPEGRAD_NATIVE=OFF) runs on any x86-64 CPU.

Its only AVX code may be the vector kernels that it picks at run time (lib/src/backend/vec.h):
the functions in namespace tg::vec::avx2 and tg::vec::avx512. Every other function must be
baseline x86-64: no ymm or zmm register, no opmask register, no VEX or EVEX instruction
(their mnemonics start with "v", or "k" for the opmask ones). And the avx2 kernels must not use
AVX-512 (zmm, opmask or the upper xmm16-31 registers).

Disassembles the library with objdump, prints every offending function with one of its
instructions, and exits 1 if there is one.  Usage: tools/check_isa.py <libtapegrad.a|.so> [listing]
(the listing, objdump's output, is kept for reading when given).
"""
import re
import subprocess
import sys

AVX = re.compile(r"%[yz]mm\d+|%k[0-7]\b|^\s*[vk][a-z0-9]+\s")
AVX512 = re.compile(r"%zmm\d+|%k[0-7]\b|%xmm(1[6-9]|2\d|3[01])\b|%ymm(1[6-9]|2\d|3[01])\b")
SYMBOL = re.compile(r"^[0-9a-f]+ <(.*)>:$")
KERNELS = {"tg::vec::avx2::": "avx2", "tg::vec::avx512::": "avx512"}


def level_of(symbol):
    """The dispatched level a function belongs to, or None for the rest of the library."""
    for prefix, level in KERNELS.items():
        # The function's own name begins there (its return type, if any, comes first for a
        # template: "void tg::vec::avx2::(anonymous namespace)::map2<...>(...)").
        if symbol.startswith(prefix) or (" " + prefix) in symbol.split("(")[0]:
            return level
    return None


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    listing = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", sys.argv[1]],
                             check=True, capture_output=True, text=True).stdout
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w", encoding="utf-8") as f:
            f.write(listing)
    symbol, bad, kernels = "?", {}, {"avx2": 0, "avx512": 0}
    for line in listing.splitlines():
        m = SYMBOL.match(line)
        if m:
            symbol = m.group(1)
            continue
        if ":\t" not in line:
            continue
        insn = line.split(":\t", 1)[1]
        level = level_of(symbol)
        if level is None:
            if AVX.search(insn):
                bad.setdefault(symbol, insn.strip())
        else:
            kernels[level] += 1
            if level == "avx2" and AVX512.search(insn):
                bad.setdefault(symbol, insn.strip() + "   (AVX-512 in an avx2 kernel)")
    for symbol, insn in bad.items():
        print(f"{symbol}:\n    {insn}")
    if bad:
        print(f"{len(bad)} function(s) outside tg::vec::avx2/avx512 use AVX (or avx2 kernels "
              "use AVX-512): a portable library must run on any x86-64")
        return 1
    if not all(kernels.values()):
        print(f"no dispatched kernels found ({kernels}): is this a portable build?")
        return 1
    print(f"ok: AVX only in the dispatched kernels ({kernels['avx2']} avx2 and "
          f"{kernels['avx512']} avx512 instructions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
