#!/usr/bin/env bash
# Paged restore: time to the first answer of a large cell on a fresh node,
# whole download against paged in (--paged-min-mb), and the node's RSS
# after it. One node fills one object of tests/apps/rows with ROWS rows of
# about 1 KiB on a bucket and stops; then, RUNS times each, a fresh node
# serves one row (taking the cell) with --paged-min-mb 1000000 (the chain
# downloaded and applied first, as before) and with --paged-min-mb 1 (the
# cell opens over the bucket's pages). The bucket is a local directory, or
# with DELAY_MS an S3 bucket (moto) whose every request is held that long
# by bench/delay_proxy.py.
#   bash bench/paged.sh [rows] [runs]
source "$(dirname "$0")/lib.sh"
rows=${1:-100000}
runs=${2:-3}
delay=${DELAY_MS:-}
ms() { date +%s%3N; }
bucket=("--bucket" "file://$out/bucket")
if [ -n "$delay" ]; then
  command -v moto_server >/dev/null || { echo "moto_server is needed: pip install 'moto[server]'" >&2; exit 1; }
  mport=$((cport + 1)); pport=$((cport + 2))
  nice -n 19 moto_server -H 127.0.0.1 -p "$mport" >/dev/null 2>&1 &
  for _ in $(seq 100); do curl -s -o /dev/null -X PUT "http://127.0.0.1:$mport/rows" && break; sleep 0.2; done
  nice -n 19 python3 bench/delay_proxy.py "$pport" "$mport" "$delay" &
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$pport/" && break; sleep 0.1; done
  bucket=("--bucket" "s3://rows" "--endpoint" "http://127.0.0.1:$pport" "--region" "us-east-1")
  export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
fi
node() { # name port paged-min-mb
  RUST_LOG=info target/release/cellhost run tests/apps/rows "${bucket[@]}" --node "$1" \
    --data "$out/data-$1" --listen "127.0.0.1:$2" --paged-min-mb "$3" >"$out/$1.log" 2>&1 &
  echo $!
}
stop() { kill -TERM "$1"; wait "$1" 2>/dev/null || true; }

pid=$(node writer "$wport" 64); wait_up "$wport"
t=$(ms)
for _ in $(seq $(( rows / 5000 ))); do curl -sf -X POST "http://127.0.0.1:$wport/fill?n=5000" >/dev/null; done
n=$(curl -s "http://127.0.0.1:$wport/count")
echo "filled $n rows in $(( $(ms) - t )) ms; database $(du -m "$out/data-writer" | tail -1 | cut -f1) MB on disk"
stop "$pid"

first() { # mode paged-min-mb run -> "ms rss"
  local name="$1-$3" port=$((cport + 10 + $3))
  local p; p=$(node "$name" "$port" "$2")
  wait_up "$port" /nothing >/dev/null
  local t; t=$(ms)
  local v; v=$(curl -s "http://127.0.0.1:$port/row?id=$(( rows / 2 ))")
  local took=$(( $(ms) - t ))
  [ "$v" = "v$(( rows / 2 ))" ] || { echo "$name read $v" >&2; cat "$out/$name.log" >&2; exit 1; }
  echo "$took $(rss_mb "$p")"
  stop "$p"
}
declare -A sum_ms sum_rss
for r in $(seq "$runs"); do
  for mode in whole paged; do
    min=1000000; [ "$mode" = paged ] && min=1
    read -r took rss < <(first "$mode" "$min" "$r")
    echo "run $r $mode: first answer after ${took} ms, RSS ${rss} MB"
    sum_ms[$mode]=$(( ${sum_ms[$mode]:-0} + took ))
    sum_rss[$mode]=$(echo "${sum_rss[$mode]:-0} + $rss" | bc -l)
  done
done
w=$(( sum_ms[whole] / runs )); p=$(( sum_ms[paged] / runs ))
printf "mean first answer: whole %d ms, paged %d ms (%.1fx faster); mean RSS whole %.1f MB, paged %.1f MB\n" \
  "$w" "$p" "$(echo "$w / ($p + 0.001)" | bc -l)" \
  "$(echo "${sum_rss[whole]} / $runs" | bc -l)" "$(echo "${sum_rss[paged]} / $runs" | bc -l)"
