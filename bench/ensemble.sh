#!/usr/bin/env bash
# Fleet durability against a distant bucket: the counter (one SQL write per
# request) at concurrency 1 and 64 on one object, on cellhost alone (local
# disk), then on an S3 bucket (moto) whose every request is held 20 ms by a
# proxy: one node with --durability bucket (upload, then the ownership
# read, before each acknowledgement) and two nodes with --durability fleet
# (the owner's follower fsyncs each round; uploads follow). Prints req/s and
# p50, the ratios to local, and the floor of a follower round trip measured
# in the same run (loopback round trip + one fdatasync).
#   bash bench/ensemble.sh [seconds] [delay-ms]
source "$(dirname "$0")/lib.sh"
secs=${1:-10}
delay=${2:-20}
command -v moto_server >/dev/null || { echo "moto_server is needed: pip install 'moto[server]'" >&2; exit 1; }
counter_lua 1
mport=$((cport + 1)); pport=$((cport + 2)); bport=$((cport + 3))

load() { # port conns -> "ok req/s p50" (answers other than 200 not counted)
  read -r r _ < <(wrk_load "$1" "$2" one.lua)
  local bad; bad=$(awk '/Non-2xx/ {print $5}' "$out/w.txt"); bad=${bad:-0}
  echo "$(echo "$r - $bad / $secs" | bc -l) $(wrk_ms 50 "$out/w.txt")"
}
# Waits for the node serving on PORT (its log NAME on failure).
up() { for _ in $(seq 6); do wait_up "$1" && return 0; done; { echo "node $2 did not start:" >&2; cat "$out/$2.log" >&2; exit 1; }; }
node() { # name port extra...
  local name=$1 port=$2; shift 2
  RUST_LOG=warn AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing \
    target/release/cellhost run examples/counter --listen "127.0.0.1:$port" \
    --data "$out/data-$name" "$@" >"$out/$name.log" 2>&1 &
  echo $!
}
# Long leases: a renewal stuck behind the uploads in this one-process S3
# server must not fence the node mid-measurement.
s3=(--endpoint "http://127.0.0.1:$pport" --region us-east-1 --lease-ttl-ms 60000)

# Local disk.
pid=$(node local "$cport"); up "$cport" local
read -r l1 lp1 < <(load "$cport" 1); read -r l64 lp64 < <(load "$cport" 64)
kill "$pid"; wait "$pid" 2>/dev/null || true

# The bucket stands for a remote one: its server and the proxy get the CPU
# last, so the nodes' share is not theirs. One bucket per mode.
nice -n 19 moto_server -H 127.0.0.1 -p "$mport" >/dev/null 2>&1 &
for b in fleet solo; do
  for _ in $(seq 100); do curl -s -o /dev/null -X PUT "http://127.0.0.1:$mport/$b" && break; sleep 0.2; done
done
nice -n 19 python3 bench/delay_proxy.py "$pport" "$mport" "$delay" &
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$pport/" && break; sleep 0.1; done

# Two nodes: b follows a.
pb=$(node b "$bport" "${s3[@]}" --bucket s3://fleet --node b --durability fleet); up "$bport" b
pa=$(node a "$cport" "${s3[@]}" --bucket s3://fleet --node a --durability fleet); up "$cport" a
sleep 2
read -r f1 fp1 < <(load "$cport" 1); read -r f64 fp64 < <(load "$cport" 64)
kill "$pa" "$pb" 2>/dev/null || true; wait "$pa" "$pb" 2>/dev/null || true
fences=$(cat "$out/a.log" "$out/b.log" | grep -c "SELF-FENCE" || true)

# The bucket proof alone.
pid=$(node bucket "$cport" "${s3[@]}" --bucket s3://solo --node solo --durability bucket); up "$cport" bucket
read -r b1 bp1 < <(load "$cport" 1); read -r b64 bp64 < <(load "$cport" 64)
kill "$pid"; wait "$pid" 2>/dev/null || true
sleep 1

# The floor of a follower round trip, in this run: a loopback round trip
# (wrk c=1 p50 against examples/hello) plus one fdatasync of a 4 KiB overwrite.
RUST_LOG=warn target/release/cellhost run examples/hello --listen "127.0.0.1:$cport" >/dev/null 2>&1 &
hp=$!; wait_up "$cport"
wrk -t1 -c1 -d"${secs}s" --latency "http://127.0.0.1:$cport/" > "$out/w.txt"; rtt=$(wrk_ms 50 "$out/w.txt")
kill $hp; wait $hp 2>/dev/null || true
sync=$(fsync_p50)

echo "counter, one object, wrk ${secs}s per column; the bucket is moto behind a ${delay} ms proxy; $(nproc) cores"
printf "%-22s %9s %8s %9s %8s\n" mode "c1 req/s" "c1 p50" "c64 req/s" "c64 p50"
printf "%-22s %9.0f %8.3f %9.0f %8.3f\n" "local disk" "$l1" "$lp1" "$l64" "$lp64"
printf "%-22s %9.0f %8.3f %9.0f %8.3f\n" "bucket proof (1 node)" "$b1" "$bp1" "$b64" "$bp64"
printf "%-22s %9.0f %8.3f %9.0f %8.3f\n" "fleet proof (2 nodes)" "$f1" "$fp1" "$f64" "$fp64"
echo "fences during the fleet run: $fences (a write acknowledged in 2 ms cannot have waited for a 20 ms bucket)"
printf "ratio fleet/local: c64 %.2fx (goal >= 0.5x); bucket/local: c64 %.2fx\n" "$(echo "$f64/$l64" | bc -l)" "$(echo "$b64/$l64" | bc -l)"
printf "c1 p50: fleet %.3f ms vs local %.3f + follower round trip floor %.3f (loopback %.3f + fdatasync %.3f) + 1 = %.3f ms\n" \
  "$fp1" "$lp1" "$(echo "$rtt+$sync" | bc -l)" "$rtt" "$sync" "$(echo "$lp1+$rtt+$sync+1" | bc -l)"
