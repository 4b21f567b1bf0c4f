#!/usr/bin/env bash
# The job writing Delta tables against the same job writing Parquet folders, on local disk, one
# run each, one after the other; prints a table with each run's seconds, the time of its commit
# step and its peak memory.
#
#   bench/delta.sh CORPUS.parquet [WORK_DIR]
#
# Environment: NEARDUP (the binary; default $CARGO_TARGET_DIR/release/neardup).
set -euo pipefail
corpus=$(realpath "$1")
work=${2:-$(mktemp -d)}
mkdir -p "$work"
target=${CARGO_TARGET_DIR:-$HOME/.cache/neardup/target}
neardup=${NEARDUP:-$target/release/neardup}

timed() { # command...: prints the command's wall seconds and peak KiB
    /usr/bin/time -o "$work/time.txt" -f "%e %M" "$@" >/dev/null 2>"$work/cmd.err" \
        || { cat "$work/cmd.err" >&2; exit 1; }
    tail -1 "$work/time.txt"
}
# The job's own seconds up to its commit (the sum of its stages), from summary.json.
stages() { python3 -c "import json,sys; print(f\"{sum(s['seconds'] for s in json.load(open(sys.argv[1]))['stages']):.2f}\")" "$1"; }
bytes() { du -sb "$1" | cut -f1; }

rm -rf "$work/parquet" "$work/delta"
read -r parquet_s parquet_kib < <(timed "$neardup" run --input "$corpus" --output "$work/parquet" -q)
read -r delta_s delta_kib < <(timed "$neardup" run --input "$corpus" --output "$work/delta" --output-format delta -q)

size=$(stat -c %s "$corpus")
echo
echo "corpus: $corpus ($((size / 1000000)) MB)"
echo
echo "| output | whole run s | stages s | after the stages s | peak RSS MiB | bytes written |"
echo "|---|---|---|---|---|---|"
for kind in parquet delta; do
    s=${kind}_s kib=${kind}_kib
    st=$(stages "$work/$kind/summary.json")
    after=$(python3 -c "print(f'{${!s} - $st:.2f}')")
    echo "| $kind | ${!s} | $st | $after | $((${!kib} / 1024)) | $(bytes "$work/$kind") |"
done
echo
echo "ratio delta / parquet (whole run): $(python3 -c "print(f'{$delta_s / $parquet_s:.2f}')")"
