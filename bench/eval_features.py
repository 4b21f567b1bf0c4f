#!/usr/bin/env python3
"""Scores feature options on the labelled data in ../shared/data and prints markdown tables.

Every configuration in CONFIGS is run (`neardup run --features ...`) on each data set and scored
with `neardup eval --format json` at k = 3 (the default). Results go to docs/EVALUATION.md by hand.

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

TARGET = os.environ.get("CARGO_TARGET_DIR", "target")
NEARDUP = os.environ.get("NEARDUP", os.path.join(TARGET, "release", "neardup"))
DATA = os.environ.get("DATA", "../shared/data")
WORK = os.environ.get("WORK", "/tmp/neardup-eval")

CONFIGS = [
    "",  # the defaults
    "min_features=0",
    "html=off",
    "t2s=on",
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
    "mode=chars,n=3,t2s=on",
]


def neardup(*args):
    done = subprocess.run([NEARDUP, *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"neardup {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def prepare():
    """Generated sets (Chinese and English debian_docs pages with crawl-like edits) and the
    zh-TW/zh-CN same-page pairs, made once."""
    os.makedirs(WORK, exist_ok=True)
    docs = f"{DATA}/debian_docs/docs.parquet"
    for name, langs in [("zh", "'zh-CN'"), ("en", "'en-US', 'en'")]:
        corpus = f"{WORK}/gen_{name}.parquet"
        if os.path.exists(corpus):
            continue
        source = f"{WORK}/src_{name}.parquet"
        neardup("query", f"COPY (SELECT id, text FROM '{docs}' WHERE lang IN ({langs}) "
                f"AND length(text) > 300) TO '{source}'")
        neardup("generate", "--input", source, "--output", corpus, "--truth",
                f"{WORK}/gen_{name}_truth.parquet", "--sources", "2000", "--max-copies", "3",
                "--seed", "42", "--overwrite")
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
    return {
        "gen_zh": (f"{WORK}/gen_zh.parquet", ["--truth", f"{WORK}/gen_zh_truth.parquet"]),
        "gen_en": (f"{WORK}/gen_en.parquet", ["--truth", f"{WORK}/gen_en_truth.parquet"]),
        "clough": (f"{DATA}/clough_stevenson/documents.parquet",
                   ["--truth", f"{DATA}/clough_stevenson/documents.parquet",
                    "--truth-cluster-column", "group_cut_light"]),
        "help_en": (f"{DATA}/help_pages_en/docs.parquet",
                    ["--labels", f"{DATA}/help_pages_en/pairs_aligned.tsv"]),
        "zh_tw": (f"{WORK}/zh_tw_docs.parquet", ["--labels", pairs]),
        "paws_zh": (f"{DATA}/pawsx_zh/docs.parquet", ["--labels", f"{DATA}/pawsx_zh/pairs.tsv"]),
    }


def score(config, name, corpus, truth):
    out = f"{WORK}/out_{name}"
    neardup("run", "--input", corpus, "--output", out, "--overwrite", "--features", config)
    summary = json.load(open(f"{out}/summary.json"))
    row = json.loads(neardup("eval", "--output", out, *truth, "--format", "json"))["rows"][-1]
    signing = next(s["seconds"] for s in summary["stages"] if s["stage"] == "signatures")
    row["docs_per_second"] = summary["counts"]["documents"] / max(signing, 1e-9)
    return row


def fmt(x):
    return "-" if x is None else f"{x:.3f}"


def main():
    configs = sys.argv[1:] or CONFIGS
    sets = prepare()
    print(f"neardup: {NEARDUP}; k = 3; {time.strftime('%Y-%m-%d')}\n")
    print("| features | gen_zh P / R / F1 | gen_en P / R / F1 | clough P / R / F1 "
          "| help_en R | zh_tw R | paws_zh FP / negatives | docs/s (gen_zh) |")
    print("|---|---|---|---|---|---|---|---|")
    for config in configs:
        r = {name: score(config, name, corpus, truth) for name, (corpus, truth) in sets.items()}
        prf = lambda s: f"{fmt(s['precision'])} / {fmt(s['recall'])} / **{fmt(s['f1'])}**"
        paws = r["paws_zh"]
        negatives = paws["false_positives"] + paws["true_negatives"]
        print(f"| `{config or '(defaults)'}` | {prf(r['gen_zh'])} | {prf(r['gen_en'])} "
              f"| {prf(r['clough'])} | {fmt(r['help_en']['recall'])} | {fmt(r['zh_tw']['recall'])} "
              f"| {paws['false_positives']} / {negatives} | {r['gen_zh']['docs_per_second']:,.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
