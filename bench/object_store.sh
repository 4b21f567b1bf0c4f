#!/usr/bin/env bash
# The whole job with its input and outputs on a local S3-compatible server (moto on loopback)
# against the same job on local disk, one run each, one after the other; prints a table.
#
#   bench/object_store.sh CORPUS.parquet [WORK_DIR]
#
# Environment: NEARDUP (the binary; default $CARGO_TARGET_DIR/release/neardup),
# NEARDUP_MOTO_SERVER (default: the venv .ci/run makes, $HOME/.cache/neardup/venv).
# Also timed: the server alone (its client downloading the corpus) and a scan of the corpus's
# text through neardup from each place, so the table says where the time goes.
set -euo pipefail
corpus=$(realpath "$1")
work=${2:-$(mktemp -d)}
mkdir -p "$work"
target=${CARGO_TARGET_DIR:-$HOME/.cache/neardup/target}
neardup=${NEARDUP:-$target/release/neardup}
moto=${NEARDUP_MOTO_SERVER:-$HOME/.cache/neardup/venv/bin/moto_server}
python=$(dirname "$moto")/python
client="$(dirname "$0")/../tests/it/s3_client.py"
port=$((20000 + RANDOM % 20000))
endpoint=http://127.0.0.1:$port

"$moto" -H 127.0.0.1 -p "$port" >"$work/moto.log" 2>&1 &
moto_pid=$!
trap 'kill $moto_pid 2>/dev/null || true' EXIT
until (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do sleep 0.2; done

export AWS_ACCESS_KEY_ID=neardup-test AWS_SECRET_ACCESS_KEY=neardup-test-secret \
    AWS_REGION=us-east-1 AWS_ENDPOINT_URL=$endpoint AWS_ALLOW_HTTP=true

seconds() { python3 -c "import json,sys; print(f\"{json.load(open(sys.argv[1]))['total_seconds']:.2f}\")" "$1"; }
timed() { # command...: prints the command's wall seconds and peak KiB
    /usr/bin/time -o "$work/time.txt" -f "%e %M" "$@" >/dev/null 2>"$work/cmd.err" \
        || { cat "$work/cmd.err" >&2; exit 1; }
    tail -1 "$work/time.txt"
}

"$python" "$client" "$endpoint" create bench
read -r upload _ < <(timed "$python" "$client" "$endpoint" put bench in/corpus.parquet "$corpus")
read -r server_read _ < <(timed "$python" "$client" "$endpoint" download bench in/ "$work/downloaded")
rm -rf "$work/downloaded"
scan="SELECT sum(length(text)) AS chars FROM"
read -r scan_local _ < <(timed "$neardup" query "$scan '$corpus'")
read -r scan_s3 _ < <(timed "$neardup" query "$scan 's3://bench/in/corpus.parquet'")

rm -rf "$work/local"
read -r local_s local_kib < <(timed "$neardup" run --input "$corpus" --output "$work/local" -q)
read -r s3_s s3_kib < <(timed "$neardup" run --input s3://bench/in/corpus.parquet --output s3://bench/out -q)
manifest=$("$python" "$client" "$endpoint" get bench out/_SUCCESS)
run=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['run'])" "$manifest")
"$python" "$client" "$endpoint" get bench "out/$run/summary.json" >"$work/s3-summary.json"

size=$(stat -c %s "$corpus")
echo
echo "corpus: $corpus ($((size / 1000000)) MB); moto $("$python" -c 'import moto; print(moto.__version__)') on loopback"
echo
echo "| where | whole run s | job's own total s | peak RSS MiB |"
echo "|---|---|---|---|"
echo "| local disk | $local_s | $(seconds "$work/local/summary.json") | $((local_kib / 1024)) |"
echo "| S3 (moto) | $s3_s | $(seconds "$work/s3-summary.json") | $((s3_kib / 1024)) |"
echo
echo "ratio S3 / local (whole run): $(python3 -c "print(f'{$s3_s / $local_s:.2f}')")"
echo
echo "| the server alone and the scan | s |"
echo "|---|---|"
echo "| upload the corpus (boto3) | $upload |"
echo "| download the corpus (boto3) | $server_read |"
echo "| neardup query: scan the text, local | $scan_local |"
echo "| neardup query: scan the text, S3 | $scan_s3 |"
