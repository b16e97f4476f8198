#!/usr/bin/env bash
# The Durable Object counter (one SQL write per request) on workerd and on
# cellhost, in turn, under the same wrk load: one object at concurrency 1 and
# 64, then a spread over 10 000 objects; resident memory after touching the
# 10 000 objects and again once they were evicted. Prints cellhost/workerd.
#   bash bench/counter.sh [seconds]
source "$(dirname "$0")/lib.sh"
secs=${1:-10}
workerd_config examples/counter counter COUNTER Counter
counter_lua 10000
cat > "$out/touch.lua" <<'LUA'
local n = -1
local t = 0
setup = function(thread) thread:set("id", t); t = t + 1 end
request = function()
  n = n + 1
  return wrk.format("POST", "/increment?name=t" .. ((n * 2 + id) % 10000))
end
LUA

measure() { # name port pid
  local name=$1 port=$2 pid=$3
  wait_up "$port"
  local base; base=$(rss_mb "$pid")
  read -r r1 p1 < <(wrk_load "$port" 1 one.lua)
  read -r r64 p64 < <(wrk_load "$port" 64 one.lua)
  read -r rs ps < <(wrk_load "$port" 64 spread.lua)
  # Touch 10 000 distinct objects (two wrk threads, each name once).
  wrk -t2 -c2 -d30s -s "$out/touch.lua" "http://127.0.0.1:$port" >/dev/null &
  local wp=$!
  sleep 12; kill $wp 2>/dev/null || true; wait $wp 2>/dev/null || true
  local touched; touched=$(rss_mb "$pid")
  sleep 15
  curl -s "http://127.0.0.1:$port/?name=after" >/dev/null
  sleep 1
  local evicted; evicted=$(rss_mb "$pid")
  echo "$name $r1 $p1 $r64 $p64 $rs $ps $base $touched $evicted" >> "$out/results"
}

# cellhost first: workerd deletes each evicted object's -wal and -shm, and
# on ext4 (no journal) freshly deleted inodes slow every file creation in
# their block group for minutes, so whichever runtime went second paid for
# workerd's evictions. cellhost deletes no files.
RUST_LOG=warn target/release/cellhost run examples/counter --listen "127.0.0.1:$cport" --data "$out/cdata" >/dev/null 2>&1 &
cpid=$!
measure cellhost "$cport" "$cpid"
kill $cpid; wait $cpid 2>/dev/null || true

tests/node_modules/.bin/workerd serve "$out/config.capnp" >/dev/null 2>&1 &
wpid=$!
measure workerd "$wport" "$wpid"
kill $wpid; wait $wpid 2>/dev/null || true

echo "counter (one SQL write per request), wrk ${secs}s per row, $(nproc) cores"
printf "%-9s %9s %7s %9s %7s %11s %7s %8s %9s %9s\n" runtime "c1 req/s" "p99ms" "c64 req/s" "p99ms" "10k req/s" "p99ms" "RSS0 MB" "RSS10k" "evicted"
while read -r n a b c d e f g h i; do
  printf "%-9s %9.0f %7.2f %9.0f %7.2f %11.0f %7.2f %8s %9s %9s\n" "$n" "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$h" "$i"
done < "$out/results"
read -r _ wa wb wc wd we wf _ _ _ < <(grep '^workerd' "$out/results")
read -r _ ca cb cc cd ce cf _ _ _ < <(grep '^cellhost' "$out/results")
r() { echo "$1/$2" | bc -l; }
printf "ratio cellhost/workerd: c1 %.2fx (p99 %.2fx), c64 %.2fx (p99 %.2fx), 10k objects %.2fx (p99 %.2fx)\n" \
  "$(r "$ca" "$wa")" "$(r "$cb" "$wb")" "$(r "$cc" "$wc")" "$(r "$cd" "$wd")" "$(r "$ce" "$we")" "$(r "$cf" "$wf")"
