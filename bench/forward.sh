#!/usr/bin/env bash
# What forwarding adds: two release nodes on one file:// bucket serve the
# counter; node a owns the object, node b forwards every call to a over the
# internal HTTP/2 channel. Reads (GET, no write) and writes (POST, one
# durable write each: upload + re-read of the ownership record) at c=1
# (p50/p99) and c=64 (req/s), local on a and forwarded through b. Prints
# forwarded/local; the local loopback round trip of this run beside it.
#   bash bench/forward.sh [seconds]
source "$(dirname "$0")/lib.sh"
secs=${1:-10}
mkdir -p "$out/bucket"
node() { # name port
  RUST_LOG=warn target/release/cellhost run examples/counter --listen "127.0.0.1:$2" \
    --data "$out/data-$1" --bucket "file://$out/bucket" --node "$1" >/dev/null 2>"$out/$1.log" &
}
aport=$wport bport=$cport
node a "$aport"; wait_up "$aport"
curl -s -X POST "http://127.0.0.1:$aport/increment?name=fwd" >/dev/null # a takes it
node b "$bport"; wait_up "$bport"
[ "$(curl -s "http://127.0.0.1:$bport/?name=fwd")" = "1" ] || { echo "b does not forward" >&2; cat "$out/b.log" >&2; exit 1; }
cat > "$out/read.lua" <<'LUA'
wrk.path = "/?name=fwd"
LUA
cat > "$out/write.lua" <<'LUA'
wrk.method = "POST"
wrk.path = "/increment?name=fwd"
LUA
row() { # label script
  local l=$1 s=$2 out1 p50a p99a p50b p99b ra rb
  wrk_load "$aport" 1 "$s" >/dev/null
  p50a=$(wrk_ms 50 "$out/w.txt"); p99a=$(wrk_ms 99 "$out/w.txt")
  wrk_load "$bport" 1 "$s" >/dev/null
  p50b=$(wrk_ms 50 "$out/w.txt"); p99b=$(wrk_ms 99 "$out/w.txt")
  read -r ra _ < <(wrk_load "$aport" 64 "$s")
  read -r rb _ < <(wrk_load "$bport" 64 "$s")
  awk -v l="$l" -v a50="$p50a" -v a99="$p99a" -v b50="$p50b" -v b99="$p99b" -v ra="$ra" -v rb="$rb" 'BEGIN {
    printf "%-6s c=1 p50 %.3f -> %.3f ms (+%.3f)  p99 %.3f -> %.3f ms  |  c=64 %.0f -> %.0f req/s (%.2fx)\n",
      l, a50, b50, b50 - a50, a99, b99, ra, rb, rb / ra }'
}
echo "local (node a, the owner) -> forwarded (node b -> a), ${secs}s each"
row read read.lua
row write write.lua
kill %1 %2 2>/dev/null || true; wait 2>/dev/null || true
RUST_LOG=warn target/release/cellhost run examples/hello --listen "127.0.0.1:$aport" >/dev/null 2>&1 &
wait_up "$aport"
wrk -t1 -c1 -d"${secs}s" --latency "http://127.0.0.1:$aport/" > "$out/hello1.txt"
echo "loopback round trip (wrk c=1 p50 against examples/hello): $(wrk_ms 50 "$out/hello1.txt") ms"
