#!/usr/bin/env bash
# Build datasets/words/{train,val,test}.tsv and languages.txt from the Debian
# word-list packages.  Idempotent and deterministic: running it twice gives
# byte-identical files.  See datasets/README.md for the exact procedure.
#
# Usage: bash datasets/build_words.sh        (from anywhere; needs root or sudo
#                                             for apt-get if the lists are missing)
set -euo pipefail
export LC_ALL=C.UTF-8

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/words"
dict=/usr/share/dict
pkgs=(wamerican wngerman wfrench witalian wspanish wportuguese wdutch wpolish wswedish wdanish wnorwegian)

# 1. Install the word lists with apt-get (skipped when all are installed;
#    "apt-get update" only if the first install attempt fails).
missing=0
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing=1
done
if [ "$missing" -eq 1 ]; then
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo_cmd[@]}" apt-get install -y "${pkgs[@]}"; then
    "${sudo_cmd[@]}" apt-get update
    "${sudo_cmd[@]}" apt-get install -y "${pkgs[@]}"
  fi
fi

# 2. Bring every source list to UTF-8 in a scratch directory.
#    Order and codes: en de fr it es pt nl pl sv da no.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
declare -A src=(
  [en]=american-english [de]=ngerman [fr]=french [it]=italian [es]=spanish
  [pt]=portuguese [nl]=dutch [pl]=polish [sv]=swedish [da]=danish [no]=bokmaal
)
langs=(en de fr it es pt nl pl sv da no)
for l in "${langs[@]}"; do
  f="$dict/${src[$l]}"
  case "$l" in
    sv|no) iconv -f ISO-8859-1 -t UTF-8 "$f" > "$tmp/$l.txt" ;;
    *)     iconv -f UTF-8 -t UTF-8 "$f" > "$tmp/$l.txt" ;;   # also validates UTF-8
  esac
done

# 3. Normalise, deduplicate, sample and split (Python standard library only).
mkdir -p "$out"
/usr/bin/python3 - "$tmp" "$out" "${langs[@]}" <<'PY'
import sys, random, unicodedata, collections

tmp, out, langs = sys.argv[1], sys.argv[2], sys.argv[3:]
SEED = 1234
PER_LANG = 2000
N_TRAIN, N_VAL = 1600, 200           # 80/10/10 -> 1600/200/200
MIN_LEN, MAX_LEN = 3, 14
RARE = 5                             # a char must occur in >= RARE sampled words

stats = {l: {} for l in langs}
pools = {}
for l in langs:
    with open(f"{tmp}/{l}.txt", encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    stats[l]["source"] = len(lines)
    keep = set()
    for w in lines:
        w = unicodedata.normalize("NFC", w.strip())
        if not w or w[0].isupper():        # empty or proper noun / acronym
            continue
        if not w.isalpha():                # apostrophe, space, hyphen, digit, ...
            continue
        w = w.lower()
        if not w.isalpha() or not (MIN_LEN <= len(w) <= MAX_LEN):
            continue
        keep.add(w)
    pools[l] = keep
    stats[l]["normalised"] = len(keep)

# Remove words that occur in more than one language.
count = collections.Counter(w for l in langs for w in pools[l])
for l in langs:
    pools[l] = sorted(w for w in pools[l] if count[w] == 1)   # code-point order
    stats[l]["unique"] = len(pools[l])

# Fixed shuffled order of each language's pool (independent per language).
order = {}
for i, l in enumerate(langs):
    p = list(pools[l])
    random.Random(SEED * 100 + i).shuffle(p)
    order[l] = p

# Iteratively ban characters that occur in fewer than RARE words of the
# sample: take the first PER_LANG words (in the fixed order) whose characters
# are all allowed, count characters, ban the rare ones, repeat until stable.
banned = set()
while True:
    sample = {}
    for l in langs:
        s = [w for w in order[l] if not (set(w) & banned)][:PER_LANG]
        if len(s) < PER_LANG:
            sys.exit(f"{l}: only {len(s)} words available")
        sample[l] = s
    df = collections.Counter(c for l in langs for w in sample[l] for c in set(w))
    rare = {c for c, n in df.items() if n < RARE}
    if not rare:
        break
    banned |= rare
for l in langs:
    stats[l]["eligible"] = sum(1 for w in order[l] if not (set(w) & banned))

# Split each language 1600/200/200 (sample is already in random order),
# then shuffle each split with a fixed seed so the files are not grouped.
splits = {"train": [], "val": [], "test": []}
for l in langs:
    s = sample[l]
    splits["train"] += [(l, w) for w in s[:N_TRAIN]]
    splits["val"]   += [(l, w) for w in s[N_TRAIN:N_TRAIN + N_VAL]]
    splits["test"]  += [(l, w) for w in s[N_TRAIN + N_VAL:]]
for k, name in enumerate(["train", "val", "test"]):
    rows = splits[name]
    random.Random(SEED + k).shuffle(rows)
    with open(f"{out}/{name}.tsv", "w", encoding="utf-8", newline="\n") as fh:
        for l, w in rows:
            fh.write(f"{l}\t{w}\n")
with open(f"{out}/languages.txt", "w", encoding="utf-8", newline="\n") as fh:
    fh.write("".join(l + "\n" for l in langs))

# Report (stderr, so it does not mix with anything else).
err = sys.stderr
print("lang source normalised unique eligible sampled", file=err)
for l in langs:
    s = stats[l]
    print(l, s["source"], s["normalised"], s["unique"], s["eligible"], PER_LANG, file=err)
chars = sorted(df)
print(f"charset ({len(chars)}): {''.join(chars)}", file=err)
print(f"banned chars ({len(banned)}): {''.join(sorted(banned))}", file=err)
train_chars = {c for _, w in splits['train'] for c in w}
missing = sorted(set(chars) - train_chars)
print(f"chars in val/test but not in train: {''.join(missing) or 'none'}", file=err)
PY
