#!/usr/bin/env python3
"""`neardup match` at scale: stage seconds and peak memory at 10M, 30M and 100M fingerprints, with
and without a memory limit, in one Markdown table. Python's standard library only.

    cargo build --release
    python3 bench/scale.py                          # 10M 30M 100M, unlimited and --memory-limit 4G
    python3 bench/scale.py 10000000 --limit 400M    # sizes and limit of your choice
    python3 bench/scale.py 4000000 --limit none     # unlimited only

Fingerprints come from `neardup generate-fingerprints --count N` (10% planted neighbours within
3 bits of an earlier row) into --data (default: ./scale-data, kept between runs, about 1.6 GB at
100M). Each `match --k 3` runs in its own process; a row gives summary.json's stage seconds, the
whole run's wall seconds, and the process's peak resident memory as the kernel reports it
(wait4's ru_maxrss), so memory outside DataFusion's pool (union-find, Parquet writers' buffers)
counts too. A run that fails prints its last error line in the table and the script goes on.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

STAGES = ["check ids", "fingerprints", "candidates", "verify", "pairs", "clustering", "groups"]


def neardup_binary() -> str:
    repo = Path(__file__).resolve().parent.parent
    target = os.environ.get("CARGO_TARGET_DIR", str(repo / "target"))
    for candidate in [os.environ.get("NEARDUP"), f"{target}/release/neardup",
                      str(Path.home() / ".cache/neardup/target/release/neardup")]:
        if candidate and Path(candidate).is_file():
            return candidate
    sys.exit("no neardup binary: run `cargo build --release`, or set NEARDUP to its path")


def run(argv: list[str]) -> tuple[int, float, int, str]:
    """Exit code, wall seconds, peak RSS in bytes and standard error of one process."""
    start = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = process.stderr.read() if process.stderr else ""
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.monotonic() - start
    return os.waitstatus_to_exitcode(status), seconds, usage.ru_maxrss * 1024, stderr


def human(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else str(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[10_000_000, 30_000_000, 100_000_000])
    parser.add_argument("--limit", default="4G", help="--memory-limit of the limited runs, or none")
    parser.add_argument("--data", default="scale-data", help="folder for fingerprints and outputs")
    parser.add_argument("--threads", type=int, help="--threads of each run (default: all cores)")
    args = parser.parse_args()
    binary = neardup_binary()
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    limits = [None] if args.limit == "none" else [None, args.limit]

    rows = []
    for n in args.sizes:
        fingerprints = data / f"fp{human(n)}.parquet"
        if not fingerprints.exists():
            code, seconds, _, err = run([binary, "generate-fingerprints", "--count", str(n),
                                         "--output", str(fingerprints)])
            if code != 0:
                sys.exit(f"generate-fingerprints --count {n} failed: {err.strip()}")
            print(f"made {fingerprints} in {seconds:.1f} s", file=sys.stderr)
        for limit in limits:
            out = data / f"out{human(n)}"
            argv = [binary, "match", "--signatures", str(fingerprints), "--output", str(out),
                    "--k", "3", "--overwrite", "--quiet"]
            if limit:
                argv += ["--memory-limit", limit]
            if args.threads:
                argv += ["--threads", str(args.threads)]
            print(" ".join(argv[1:]), file=sys.stderr)
            code, seconds, rss, err = run(argv)
            row = {"n": human(n), "limit": limit or "-", "wall": seconds, "rss": rss}
            if code == 0:
                summary = json.loads((out / "summary.json").read_text())
                row["stages"] = {s["stage"]: s["seconds"] for s in summary["stages"]}
                row["plan"] = f'{summary["plan"]["plan"]} ({summary["plan"]["passes"]} passes)'
                row["pairs"] = summary["counts"]["pairs"]
            else:
                lines = [line for line in err.splitlines() if line.strip()]
                row["error"] = lines[-1] if lines else f"exit code {code}"
            rows.append(row)
            shutil.rmtree(out, ignore_errors=True)

    header = ["fingerprints", "--memory-limit", "plan", *STAGES, "whole s", "peak RSS GiB", "pairs"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        if "error" in row:
            cells = [row["n"], row["limit"], "failed: " + row["error"][:160]] + [""] * len(STAGES)
        else:
            cells = [row["n"], row["limit"], row["plan"]]
            cells += [f'{row["stages"].get(s, 0.0):.1f}' for s in STAGES]
        cells += [f'{row["wall"]:.1f}', f'{row["rss"] / 2**30:.2f}', str(row.get("pairs", ""))]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
