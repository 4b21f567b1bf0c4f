#!/usr/bin/env python3
"""What verifying SimHash candidates would give on drift_dev: candidate pairs at a larger Hamming
distance kc, checked by the Jaccard similarity of neardup's default features (exact, or estimated
from a one-permutation MinHash sketch), then clustered; prints a markdown table for
docs/EVALUATION.md. neardup itself does not verify: this measures the idea, in Python.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy pyarrow
    cargo build --release
    /tmp/venv/bin/python bench/drift_verification.py      # about a minute on 2 cores

Steps:
  1. `neardup run --k 3` on drift_dev/docs.parquet, and `neardup eval --labels pairs.parquet
     --unlisted negative --format json` on it. The script's scorer must give the same TP, FP and
     FN on the run's groups, and connected components over its own Hamming <= 3 pairs must too
     (else it stops).
  2. `neardup query` exports clean_text(text), clean_text(text, 't2s=off') and simhash(text) of
     every document. simhash(text) must equal the run's signatures.simhash.
  3. Default features rebuilt from clean_text: its letters and digits (str.isalnum, for Rust's
     char::is_alphanumeric) cut into runs of Han and of other characters, Han runs into
     bigrams, the others into trigrams, a run shorter than n is one feature; the distinct ones
     form a set. Each document's count must equal the run's signatures.features.
  4. Candidates: every pair within Hamming distance kc of the 64-bit simhash (all pairs are
     compared, so kc > 8, beyond what 64-bit `run` matches, is measured too).
  5. Verifiers, each keeping a candidate pair when its similarity is >= t, for t = 0.50, 0.55 ..
     0.95 (the best t is reported):
       none            no verification, every candidate pair is kept
       Jaccard         exact Jaccard of the default feature sets
       Jaccard t2s=off the same, of clean_text(text, 't2s=off') (no Traditional-to-Simplified)
       OPH m           one-permutation MinHash of the default feature sets: m bins, 16-bit
                       values, estimate = agreeing bins / bins not empty in both (corrected for
                       chance 16-bit agreement); features hashed with keyed BLAKE2b (fixed key)
  6. Clustering of the kept pairs: cc = connected components (what `run` does today); star =
     documents in docs.parquet order, a document not yet in a group that has a neighbour not yet
     in a group becomes a centre and takes those neighbours (no chaining).
  7. Scored by drift_dev's rule (its README.txt, "Scoring rule"): predicted pairs are all pairs
     inside one group; label 1 pairs are TP or FN, label -1 pairs are ignored, every other
     predicted pair is a FP.

Each cell is the best F1 over t, with (precision/recall, t); a second table gives F1 (precision)
at every t for the exact Jaccard at kc = 8 and 12. The thresholds are chosen on
drift_dev itself; the held-out set is the real test. Deterministic: no Python string hashing.
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow.parquet as pq

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
NEARDUP = os.environ.get("NEARDUP", os.path.join(TARGET, "release", "neardup"))
DATA = os.path.join(REPO, "..", "shared", "data")

KCS = [3, 4, 5, 6, 7, 8, 10, 12, 16]
THRESHOLDS = [round(0.5 + 0.05 * step, 2) for step in range(10)]
PROFILE_KCS = [8, 12]
SKETCH_BINS = [64, 128]
SKETCH_KEY = b"neardup-drift-verification"

# neardup's is_han (src/text/mod.rs).
HAN = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0xF900, 0xFAFF), (0x20000, 0x2A6DF),
       (0x2A700, 0x2EE5F), (0x2F800, 0x2FA1F), (0x30000, 0x323AF)]
HAN_RUNS = re.compile("([" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in HAN) + "]+)")
NOT_ALNUM = re.compile(r"[\W_]+")  # \w is str.isalnum() plus "_"


def run(binary, *args):
    done = subprocess.run([binary, *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"neardup {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def read_column(path, column):
    """A column of a Parquet file or of a folder of Parquet files (a run's table)."""
    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".parquet"))
        return [x for f in files for x in pq.read_table(f, columns=[column]).column(column).to_pylist()]
    return pq.read_table(path, columns=[column]).column(column).to_pylist()


# --- scoring ---------------------------------------------------------------------------------

class Scorer:
    """drift_dev's rule over group labels per document (docs.parquet row order, -1 = alone)."""

    def __init__(self, pairs_path, position):
        ids_a, ids_b = read_column(pairs_path, "id_a"), read_column(pairs_path, "id_b")
        self.a = np.array([position[x] for x in ids_a])
        self.b = np.array([position[x] for x in ids_b])
        self.label = np.array(read_column(pairs_path, "label"))
        self.positives = int((self.label == 1).sum())

    def score(self, groups):
        grouped = groups >= 0
        _, sizes = np.unique(groups[grouped], return_counts=True)
        predicted = int((sizes * (sizes - 1) // 2).sum())
        same = grouped[self.a] & (groups[self.a] == groups[self.b])
        tp = int((same & (self.label == 1)).sum())
        ignored = int((same & (self.label == -1)).sum())
        fp = predicted - tp - ignored
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / self.positives
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return dict(tp=tp, fp=fp, fn=self.positives - tp, ignored=ignored,
                    precision=precision, recall=recall, f1=f1)


def components(i, j, n):
    """Connected components; group label = smallest member, -1 for a document alone."""
    parent = np.arange(n)

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in zip(i.tolist(), j.tolist()):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    roots = np.array([find(x) for x in range(n)])
    sizes = np.bincount(roots, minlength=n)
    return np.where(sizes[roots] > 1, roots, -1)


def star(i, j, n):
    """Documents in row order: one not yet grouped with neighbours not yet grouped becomes a
    centre and takes them; members join only through their centre."""
    neighbours = [[] for _ in range(n)]
    for a, b in zip(i.tolist(), j.tolist()):
        neighbours[a].append(b)
        neighbours[b].append(a)
    groups = np.full(n, -1)
    for centre in range(n):
        if groups[centre] >= 0:
            continue
        members = [x for x in neighbours[centre] if groups[x] < 0]
        if members:
            groups[centre] = centre
            groups[members] = centre
    return groups


# --- features and similarities ---------------------------------------------------------------

def ngrams(run_, n):
    if len(run_) <= n:
        return [run_]
    return [run_[k:k + n] for k in range(len(run_) - n + 1)]


def default_features(clean, vocabulary):
    """Distinct default features (mode=auto: Han bigrams, other trigrams) of a cleaned text, as
    a sorted array of vocabulary numbers."""
    letters = NOT_ALNUM.sub("", clean)
    numbers = []
    for k, part in enumerate(HAN_RUNS.split(letters)):
        if part:  # split with a group: odd parts are the Han runs
            numbers.extend(vocabulary.setdefault(g, len(vocabulary))
                           for g in ngrams(part, 2 if k % 2 else 3))
    return np.unique(np.array(numbers, dtype=np.int64))


def jaccard(features, i, j):
    out = np.empty(len(i))
    for r, (a, b) in enumerate(zip(i.tolist(), j.tolist())):
        x, y = features[a], features[b]
        if len(x) > len(y):
            x, y = y, x
        if len(x) == 0:
            out[r] = 1.0 if len(y) == 0 else 0.0
            continue
        at = np.searchsorted(y, x)
        at[at == len(y)] = 0
        common = int((y[at] == x).sum())
        out[r] = common / (len(x) + len(y) - common)
    return out


def sketches(features, vocabulary, bins):
    """One-permutation MinHash: a feature's keyed 64-bit BLAKE2b hash; its top log2(m) bits pick
    the bin, each bin keeps the smallest of the other bits and stores their low 16 bits; -1 is
    an empty bin."""
    hashes = np.array([int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8,
                                                      key=SKETCH_KEY).digest(), "little")
                       for g in vocabulary], dtype=np.uint64)
    shift = np.uint64(64 - int(np.log2(bins)))
    low = (np.uint64(1) << shift) - np.uint64(1)
    out = np.full((len(features), bins), -1, dtype=np.int32)
    for doc, numbers in enumerate(features):
        if len(numbers) == 0:
            continue
        h = hashes[numbers]
        b, rest = (h >> shift).astype(np.int64), h & low
        order = np.lexsort((rest, b))
        b, rest = b[order], rest[order]
        first = np.ones(len(b), dtype=bool)
        first[1:] = b[1:] != b[:-1]
        out[doc, b[first]] = (rest[first] & np.uint64(0xFFFF)).astype(np.int32)
    return out


def sketch_jaccard(sketch, i, j):
    x, y = sketch[i], sketch[j]
    bins = sketch.shape[1]
    both_empty = ((x < 0) & (y < 0)).sum(1)
    agree = ((x == y) & (x >= 0)).sum(1)
    estimate = agree / np.maximum(bins - both_empty, 1)
    chance = 2.0 ** -16
    return np.clip((estimate - chance) / (1 - chance), 0, 1)


def hamming_pairs(simhash, limit):
    """Every pair (i < j) within Hamming distance `limit`, with its distance."""
    table = np.array([bin(x).count("1") for x in range(1 << 16)], dtype=np.uint8)
    mask = np.uint64(0xFFFF)
    out_i, out_j, out_d = [], [], []
    for i in range(len(simhash) - 1):
        x = simhash[i] ^ simhash[i + 1:]
        d = (table[x & mask] + table[(x >> np.uint64(16)) & mask]
             + table[(x >> np.uint64(32)) & mask] + table[x >> np.uint64(48)])
        keep = np.nonzero(d <= limit)[0]
        out_i.append(np.full(len(keep), i, dtype=np.int64))
        out_j.append(keep + i + 1)
        out_d.append(d[keep])
    return np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_d).astype(np.int64)


# --- main ------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--neardup", default=NEARDUP,
                        help="binary (default $NEARDUP, else $CARGO_TARGET_DIR or target, release)")
    parser.add_argument("--data", default=DATA, help="folder holding drift_dev (default ../shared/data)")
    parser.add_argument("--work", help="scratch folder (default a temporary folder, removed)")
    options = parser.parse_args()
    if not os.access(options.neardup, os.X_OK):
        sys.exit(f"no neardup binary at {options.neardup} (cargo build --release, or --neardup PATH)")
    if options.work:
        os.makedirs(options.work, exist_ok=True)
        measure(options, options.work)
    else:
        with tempfile.TemporaryDirectory(prefix="neardup-drift-") as work:
            measure(options, work)


def measure(options, work):
    started = time.time()
    binary = options.neardup
    docs = os.path.join(options.data, "drift_dev", "docs.parquet")
    labels = os.path.join(options.data, "drift_dev", "pairs.parquet")
    ids = read_column(docs, "id")
    n = len(ids)
    position = {x: k for k, x in enumerate(ids)}
    scorer = Scorer(labels, position)

    def log(message):
        print(f"[{time.time() - started:5.0f} s] {message}", file=sys.stderr, flush=True)

    # 1. neardup at k = 3 and its own score.
    out = os.path.join(work, "k3")
    run(binary, "run", "--input", docs, "--output", out, "--k", "3", "--quiet", "--overwrite")
    report = json.loads(run(binary, "eval", "--output", out, "--labels", labels,
                            "--unlisted", "negative", "--format", "json"))["rows"][-1]
    expected = (report["true_positives"], report["false_positives"], report["false_negatives"])
    groups = np.full(n, -1)
    for x, g in zip(read_column(f"{out}/groups", "id"), read_column(f"{out}/groups", "group_id")):
        groups[position[x]] = g
    mine = scorer.score(groups)
    if (mine["tp"], mine["fp"], mine["fn"]) != expected:
        sys.exit(f"scorer differs from neardup eval on the k = 3 groups: TP/FP/FN "
                 f"{mine['tp']}/{mine['fp']}/{mine['fn']} against {expected}")
    log(f"neardup run k = 3 scored: TP/FP/FN {expected} (neardup eval and this script)")

    # 2. Cleaned texts and signatures.
    export = os.path.join(work, "clean.parquet")
    run(binary, "query", "--format", "parquet", "--out", export, "--overwrite",
        f"SELECT id, clean_text(text) AS clean, clean_text(text, 't2s=off') AS clean_off, "
        f"simhash(text) AS simhash FROM '{docs}'")
    order = np.array([position[x] for x in read_column(export, "id")])
    if sorted(order.tolist()) != list(range(n)):
        sys.exit("the export does not hold every document once")
    back = np.empty(n, dtype=np.int64)
    back[order] = np.arange(n)  # back[document] = its row in the export
    clean, clean_off = ([texts[r] for r in back]
                        for texts in (read_column(export, "clean"), read_column(export, "clean_off")))
    simhash = np.array(read_column(export, "simhash"), dtype=np.uint64)[back]
    run_simhash = np.zeros(n, dtype=np.uint64)
    run_features = np.zeros(n, dtype=np.int64)
    for x, s, f in zip(read_column(f"{out}/signatures", "id"),
                       read_column(f"{out}/signatures", "simhash"),
                       read_column(f"{out}/signatures", "features")):
        run_simhash[position[x]] = s
        run_features[position[x]] = f
    if not (simhash == run_simhash).all():
        sys.exit(f"simhash(text) differs from the run's signatures for "
                 f"{(simhash != run_simhash).sum()} documents")
    log("clean_text and simhash exported; simhash(text) = signatures.simhash for every document")

    # 3. Features, checked against the run's counts.
    vocabulary = {}
    features = [default_features(x, vocabulary) for x in clean]
    counts = np.array([len(f) for f in features])
    if not (counts == run_features).all():
        bad = np.nonzero(counts != run_features)[0]
        sys.exit(f"default features rebuilt differ from signatures.features for {len(bad)} documents, "
                 f"e.g. {ids[bad[0]]}: {counts[bad[0]]} against {run_features[bad[0]]}")
    features_off = [default_features(x, vocabulary) for x in clean_off]
    log(f"default features rebuilt: {counts.sum():,} in all, equal to signatures.features "
        "for every document")

    # 4. Candidates, and the k = 3 components against the run's.
    i, j, d = hamming_pairs(simhash, max(KCS))
    at3 = d <= 3
    own = scorer.score(components(i[at3], j[at3], n))
    if (own["tp"], own["fp"], own["fn"]) != expected:
        sys.exit(f"components over Hamming <= 3 differ from the run: {own} against {expected}")
    log(f"{len(i):,} pairs within Hamming {max(KCS)}; components at 3 score as the run")

    # 5. Similarities of every candidate.
    similarity = {"Jaccard": jaccard(features, i, j), "Jaccard t2s=off": jaccard(features_off, i, j)}
    for bins in SKETCH_BINS:
        similarity[f"OPH {bins}"] = sketch_jaccard(sketches(features, vocabulary, bins), i, j)
    log("similarities computed")

    # 6, 7. Sweep.
    columns = [("none", "cc"), ("none", "star"), ("Jaccard", "cc"), ("Jaccard", "star"),
               ("Jaccard t2s=off", "cc")] + [(f"OPH {m}", "cc") for m in SKETCH_BINS]
    clusterings = {"cc": components, "star": star}
    key = i * n + j
    labelled = np.minimum(scorer.a, scorer.b) * n + np.maximum(scorer.a, scorer.b)
    row = np.searchsorted(key, labelled)
    found = row < len(key)
    found[found] = key[row[found]] == labelled[found]
    label_distance = np.full(len(labelled), 99)
    label_distance[found] = d[row[found]]

    print(f"drift_dev: {n} documents, {scorer.positives} label-1 pairs; neardup {binary}; "
          f"{time.strftime('%Y-%m-%d')}. Best F1 over t (precision/recall, t); "
          f"cc = connected components, star = star in docs.parquet order.\n")
    print("| kc | candidate pairs | label-1 within kc | "
          + " | ".join(f"{meas}, {clu}" for meas, clu in columns) + " |")
    print("|---" * (len(columns) + 3) + "|")
    results = {}
    for kc in KCS:
        within = d <= kc
        cells = []
        for meas, clu in columns:
            best = None
            for t in [None] if meas == "none" else THRESHOLDS:
                keep = within if t is None else within & (similarity[meas] >= t)
                s = results[kc, meas, clu, t] = scorer.score(clusterings[clu](i[keep], j[keep], n))
                if best is None or s["f1"] > best[0]["f1"]:
                    best = (s, t)
            s, t = best
            cells.append(f"{s['f1']:.4f} ({s['precision']:.3f}/{s['recall']:.3f}"
                         + ("" if t is None else f", t={t:g}") + ")")
        label1 = int(((label_distance <= kc) & (scorer.label == 1)).sum())
        print(f"| {kc} | {int(within.sum()):,} | {label1:,} | " + " | ".join(cells) + " |", flush=True)
    print("\nBy threshold: F1 (precision) of the exact Jaccard of the default features.\n")
    print("| kc, clustering | " + " | ".join(f"t={t:g}" for t in THRESHOLDS) + " |")
    print("|---" * (len(THRESHOLDS) + 1) + "|")
    for kc in PROFILE_KCS:
        for clu in clusterings:
            cells = [results[kc, "Jaccard", clu, t] for t in THRESHOLDS]
            print(f"| {kc}, {clu} | "
                  + " | ".join(f"{s['f1']:.3f} ({s['precision']:.3f})" for s in cells) + " |")
    log("done")


if __name__ == "__main__":
    main()
