#!/usr/bin/env python3
"""Scores feature options on the labelled data in ../shared/data and prints markdown tables.

Every configuration in CONFIGS is run (`neardup run --features ...`) on each data set and scored
with `neardup eval --format json` at the run's k (3, unverified, unless the configuration gives
flags such as `--k N --verify T`; `DEFAULTS` is `run`'s own defaults). Results go to docs/EVALUATION.md by hand.

    cargo build --release
    python3 bench/eval_features.py                  # every configuration
    python3 bench/eval_features.py mode=chars,n=3   # just these option strings

Environment: NEARDUP (binary, default $CARGO_TARGET_DIR or target, release), DATA (default
../shared/data), WORK (scratch folder, default /tmp/neardup-eval).
"""

import json
import os
import subprocess
import sys
import time
import zlib

TARGET = os.environ.get("CARGO_TARGET_DIR", "target")
NEARDUP = os.environ.get("NEARDUP", os.path.join(TARGET, "release", "neardup"))
DATA = os.environ.get("DATA", "../shared/data")
WORK = os.environ.get("WORK", "/tmp/neardup-eval")

CONFIGS = [
    "",  # the defaults
    "min_features=0",
    "min_features=20",
    "html=off",
    "t2s=off",
    "t2s=tw",
    "mode=jieba_tfidf,t2s=off",  # the original system
    "mode=jieba_tfidf",
    "mode=jieba_tfidf,top_k=200",
    "mode=jieba_tf",
    "mode=words",
    "mode=shingles,n=2",
    "mode=shingles,n=3",
    "mode=chars,n=2",
    "mode=chars,n=3",
    "mode=chars,n=4",
    "mode=chars,n=5",
    # 128 bits: the same features, eight bands; k = 6 of 128 is about k = 3 of 64.
    "bits=128 --k 6 --verify off",
    "bits=128 --k 7 --verify off",
]


def neardup(*args):
    done = subprocess.run([NEARDUP, *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"neardup {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def distinct_sources(docs, langs, path):
    """Source pages for the generated sets: longer than 300 characters, and no two alike
    (character 5-gram Jaccard < 0.5, estimated on the 5-grams whose CRC-32 is 0 mod 8 and
    compared over all pairs: a method independent of neardup's), so every near-duplicate in a
    generated set is one the truth knows about."""
    where = f"lang IN ({langs}) AND length(text) > 300"
    rows = [json.loads(line) for line in neardup(
        "query", "--format", "ndjson",
        f"SELECT id, text FROM '{docs}' WHERE {where} ORDER BY id").splitlines()]
    grams = []
    for row in rows:
        text = "".join(row["text"].split())
        all_grams = {text[i:i + 5] for i in range(len(text) - 4)}
        grams.append({g for g in all_grams if zlib.crc32(g.encode()) % 8 == 0})
    kept = []
    for i, g in enumerate(grams):
        alike = any(
            min(len(g), len(grams[j])) >= 0.5 * max(len(g), len(grams[j]))
            and len(g & grams[j]) >= 0.5 * len(g | grams[j])
            for j in kept)
        if not alike:
            kept.append(i)
    numbers = ", ".join(str(i) for i in kept)
    neardup("query", f"""COPY (SELECT id, text FROM (
        SELECT id, text, row_number() OVER (ORDER BY id) - 1 AS i FROM '{docs}' WHERE {where})
        WHERE i IN ({numbers})) TO '{path}'""")
    return len(rows), len(kept)


# Edits a crawler meets on a copy of the same page; the full set adds sentence-level rewrites
# and truncation by 10-30 %, which move a document beyond a few bits of 64 whatever the features.
CRAWL_EDITS = {"zh": "boilerplate,markup,punctuation_width,traditional,typos",
               "en": "boilerplate,markup,punctuation_width,typos"}


def prepare():
    """Generated sets (Chinese and English debian_docs pages with crawl-like edits) and the
    zh-TW/zh-CN same-page pairs, made once."""
    os.makedirs(WORK, exist_ok=True)
    docs = f"{DATA}/debian_docs/docs.parquet"
    sets = {}
    for name, langs in [("zh", "'zh-CN'"), ("en", "'en-US', 'en'")]:
        source = f"{WORK}/src_{name}.parquet"
        if not os.path.exists(source):
            print(f"sources {name}: %d pages, %d distinct" % distinct_sources(docs, langs, source),
                  file=sys.stderr)
        for flavour, edits in [("crawl", CRAWL_EDITS[name]), ("all", "")]:
            corpus = f"{WORK}/gen_{name}_{flavour}.parquet"
            truth = f"{WORK}/gen_{name}_{flavour}_truth.parquet"
            if not os.path.exists(corpus):
                neardup("generate", "--input", source, "--output", corpus, "--truth", truth,
                        "--sources", "2000", "--max-copies", "3", "--seed", "42", "--overwrite",
                        *(["--edits", edits] if edits else []))
            sets[f"{name}_{flavour}"] = (corpus, ["--truth", truth])
    pairs = f"{WORK}/zh_tw_pairs.parquet"
    if not os.path.exists(pairs):
        # The same page in zh-CN and zh-TW: ids differ only in the zh-cn/zh-tw part (LibreOffice
        # help, manpages, Debian reference); both sides must be Chinese (some zh-TW LibreOffice
        # pages are untranslated English, identical in both).
        neardup("query", f"""COPY (
            WITH k AS (
                SELECT id, lang, text, regexp_replace(regexp_replace(lower(id),
                       'zh[-_](cn|tw)', 'zh-xx', 'g'), '\\.zh-(cn|tw)\\.', '.', 'g') AS key
                FROM '{docs}' WHERE lang IN ('zh-CN', 'zh_CN', 'zh-TW', 'zh_TW'))
            SELECT a.id AS id_a, b.id AS id_b FROM k a JOIN k b ON a.key = b.key
            WHERE a.lang IN ('zh-CN', 'zh_CN') AND b.lang IN ('zh-TW', 'zh_TW')
              AND regexp_like(a.text, '\\p{{Han}}{{20}}') AND regexp_like(b.text, '\\p{{Han}}{{20}}')
        ) TO '{pairs}'""")
        neardup("query", f"""COPY (
            SELECT * FROM '{docs}' WHERE id IN (SELECT id_a FROM '{pairs}')
                                      OR id IN (SELECT id_b FROM '{pairs}')
        ) TO '{WORK}/zh_tw_docs.parquet'""")
    sets.update({
        "clough": (f"{DATA}/clough_stevenson/documents.parquet",
                   ["--truth", f"{DATA}/clough_stevenson/documents.parquet",
                    "--truth-cluster-column", "group_cut_light"]),
        "help_en": (f"{DATA}/help_pages_en/docs.parquet",
                    ["--labels", f"{DATA}/help_pages_en/pairs_aligned.tsv"]),
        "zh_tw": (f"{WORK}/zh_tw_docs.parquet", ["--labels", pairs]),
        "paws_zh": (f"{DATA}/pawsx_zh/docs.parquet", ["--labels", f"{DATA}/pawsx_zh/pairs.tsv"]),
    })
    return sets


def score(config, name, corpus, truth):
    """Runs one configuration on one data set: "<features>" at k = 3 without verification (the
    features were chosen so), or "<features> --flag value ..." with the flags given (e.g.
    " --verify 0.75 --k 8"; "DEFAULTS" alone runs `run`'s own defaults)."""
    out = f"{WORK}/out_{name}"
    features, *flags = config.split(" --")
    extra = [word for flag in flags for word in ("--" + flag).split()]
    if features == "DEFAULTS":
        features = ""
    elif not flags:
        extra = ["--verify", "off", "--k", "3"]
    neardup("run", "--input", corpus, "--output", out, "--overwrite", "--features", features,
            *extra)
    summary = json.load(open(f"{out}/summary.json"))
    row = json.loads(neardup("eval", "--output", out, *truth, "--format", "json"))["rows"][-1]
    signing = next(s["seconds"] for s in summary["stages"] if s["stage"] == "signatures")
    row["docs_per_second"] = summary["counts"]["documents"] / max(signing, 1e-9)
    return row


def fmt(x):
    return "-" if x is None else f"{x:.3f}"


def per_edit(name):
    """Copies with one edit, and whether each is in its original's group."""
    out = f"{WORK}/out_{name}"
    rows = neardup("query", "--data", out, "--format", "ndjson", """
        SELECT c.edits AS edit, count(*) AS copies, count(o.id) AS found
        FROM corpus c
        LEFT JOIN groups g ON g.id = c.id
        LEFT JOIN groups o ON o.id = regexp_replace(c.id, '#[0-9]+$', '#0')
                          AND o.group_id = g.group_id
        WHERE c.edits <> '' AND c.edits NOT LIKE '%,%'
        GROUP BY 1 ORDER BY 1""")
    return {r["edit"]: (r["found"], r["copies"]) for r in map(json.loads, rows.splitlines())}


def main():
    configs = sys.argv[1:] or CONFIGS
    sets = prepare()
    print(f"neardup: {NEARDUP}; k = 3 unless given; {time.strftime('%Y-%m-%d')}; "
          "F1 (precision / recall)\n")
    generated = [n for n in sets if n.endswith(("_crawl", "_all"))]
    print("| features | " + " | ".join(generated) + " | clough | help_en R | zh_tw R "
          "| paws_zh FP / negatives | docs/s (zh_all) |")
    print("|---" * (len(generated) + 6) + "|")
    edits = {}
    for config in configs:
        r = {name: score(config, name, corpus, truth) for name, (corpus, truth) in sets.items()}
        edits[config] = {n: per_edit(n) for n in ("zh_all", "en_all")}
        prf = lambda s: f"**{fmt(s['f1'])}** ({fmt(s['precision'])} / {fmt(s['recall'])})"
        paws = r["paws_zh"]
        negatives = paws["false_positives"] + paws["true_negatives"]
        print(f"| `{config or '(defaults)'}` | " + " | ".join(prf(r[n]) for n in generated)
              + f" | {prf(r['clough'])} | {fmt(r['help_en']['recall'])} | {fmt(r['zh_tw']['recall'])} "
              f"| {paws['false_positives']} / {negatives} | {r['zh_all']['docs_per_second']:,.0f} |",
              flush=True)
    names = sorted({e for c in edits.values() for n in c.values() for e in n})
    print("\nSingle-edit copies found in their original's group (zh_all, en_all):\n")
    print("| features | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for config, by_set in edits.items():
        cells = []
        for e in names:
            parts = [f"{by_set[n][e][0]}/{by_set[n][e][1]}" if e in by_set[n] else "-"
                     for n in ("zh_all", "en_all")]
            cells.append(", ".join(parts))
        print(f"| `{config or '(defaults)'}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
