#!/usr/bin/env bash
# The counter (one SQL write per request) on cellhost alone, with a
# file:// bucket, and with an S3 bucket (moto's server on loopback), in turn:
# req/s and p99 at concurrency 1 and 64 on one object, and over 1 000
# objects. Every acknowledged write is in the bucket in the bucket modes
# (LTX upload, then an ownership re-read, per group commit). Prints
# bucket/local ratios.
#   bash bench/bucket.sh [seconds]
source "$(dirname "$0")/lib.sh"
secs=${1:-10}
command -v moto_server >/dev/null || { echo "moto_server is needed: pip install 'moto[server]'" >&2; exit 1; }
counter_lua 1000
measure() { # name args...
  local name=$1; shift
  RUST_LOG=warn target/release/cellhost run examples/counter --listen "127.0.0.1:$cport" --data "$out/data-$name" "$@" >"$out/$name.log" 2>&1 &
  local pid=$!
  wait_up "$cport" || { cat "$out/$name.log"; exit 1; }
  read -r r1 p1 < <(wrk_load "$cport" 1 one.lua)
  read -r r64 p64 < <(wrk_load "$cport" 64 one.lua)
  read -r rs ps < <(wrk_load "$cport" 64 spread.lua)
  kill $pid; wait $pid 2>/dev/null || true
  echo "$name $r1 $p1 $r64 $p64 $rs $ps" >> "$out/results"
}

measure local
measure file --bucket "file://$out/bucket" --node bench
moto_server -H 127.0.0.1 -p "$wport" >/dev/null 2>&1 &
mpid=$!
for _ in $(seq 100); do curl -s -o /dev/null -X PUT "http://127.0.0.1:$wport/bench" && break; sleep 0.2; done
AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing \
  measure s3 --bucket s3://bench --node bench --endpoint "http://127.0.0.1:$wport" --region us-east-1
kill $mpid; wait $mpid 2>/dev/null || true

echo "counter with and without a bucket, wrk ${secs}s per column, $(nproc) cores"
printf "%-6s %9s %7s %9s %7s %11s %7s\n" mode "c1 req/s" "p99ms" "c64 req/s" "p99ms" "1k obj r/s" "p99ms"
while read -r n a b c d e f; do
  printf "%-6s %9.0f %7.2f %9.0f %7.2f %11.0f %7.2f\n" "$n" "$a" "$b" "$c" "$d" "$e" "$f"
done < "$out/results"
read -r _ la _ lc _ le _ < <(grep '^local' "$out/results")
for m in file s3; do
  read -r _ a _ c _ e _ < <(grep "^$m " "$out/results")
  printf "ratio %s/local: c1 %.2fx, c64 %.2fx, 1k objects %.2fx\n" "$m" \
    "$(echo "$a/$la" | bc -l)" "$(echo "$c/$lc" | bc -l)" "$(echo "$e/$le" | bc -l)"
done
