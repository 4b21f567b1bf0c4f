#!/usr/bin/env bash
# Runs two neardup binaries on the same inputs and options and compares what they write: each
# output table's rows (read by OLD_BINARY's query, sorted: file names and the order rows leave
# parallel partitions in vary from run to run) and summary.json without its times. For changes that must not change any output.
#
#   bench/same_outputs.sh OLD_BINARY NEW_BINARY [DATA_DIR]
#
# DATA_DIR defaults to ../shared/data (debian_docs is used when present). Prints one line per
# configuration and exits non-zero if any differs.
set -euo pipefail
old=$1 new=$2
here=$(cd "$(dirname "$0")/.." && pwd)
data=${3:-$here/../shared/data}
sample=$here/fixtures/sample.parquet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

digest() { # the content of an output folder, independent of file names, row order and times
  local dir=$1
  for table in signatures pairs groups dedup; do
    [ -d "$dir/$table" ] || continue
    echo "$table: $("$old" query --data "$dir" --format csv --maxrows inf "SELECT * FROM $table" | LC_ALL=C sort | md5sum | cut -c1-16) ($("$old" query --data "$dir" --format csv "SELECT count(*) FROM $table" | tail -1) rows)"
  done
  python3 - "$dir/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for key in ("total_seconds", "peak_rss_bytes", "stages", "inputs"):
    s.pop(key, None)
if s.get("index"):
    s["index"].pop("path", None)
print("summary:", json.dumps(s, sort_keys=True))
PY
}

failed=0
check() { # name, then the arguments after the command (OUT and IDX stand for the places)
  local name=$1; shift
  local command=$1; shift
  for which in old new; do
    local bin=${!which} out=$work/$which/$name idx=$work/$which/$name.index
    local args=()
    for a in "$@"; do a=${a//OUT/$out}; a=${a//IDX/$idx}; a=${a//SIGS/$work/$which/sample/signatures}; args+=("$a"); done
    "$bin" "$command" "${args[@]}" --output "$out" --quiet >/dev/null
    digest "$out" > "$work/$which/$name.digest"
  done
  if cmp -s "$work/old/$name.digest" "$work/new/$name.digest"; then
    echo "same       $name: $(head -c 200 "$work/new/$name.digest" | tr '\n' ' ' | cut -c1-110)"
  else
    echo "DIFFERENT  $name"; diff "$work/old/$name.digest" "$work/new/$name.digest" || true
    failed=1
  fi
}

check sample run --input "$sample"
check sample-star run --input "$sample" --pairs star
check sample-128 run --input "$sample" --bits 128 --k 7
check sample-sql run --input "$sample" --clustering sql
check sample-join run --input "$sample" --matching join --k 4
check sample-index run --input "$sample" --index IDX --update-index
check sample-longest run --input "$sample" --keep longest
check sample-match match --signatures SIGS --k 5
if [ -f "$data/debian_docs/docs.parquet" ]; then
  check debian run --input "$data/debian_docs/docs.parquet"
  check debian-k6 run --input "$data/debian_docs/docs.parquet" --k 6 --features mode=words
fi
exit $failed
