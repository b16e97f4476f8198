#!/usr/bin/env bash
# The Durable Object counter (one SQL write per request) on workerd and on
# cellhost, in turn, under the same wrk load: one object at concurrency 1 and
# 64, then a spread over 10 000 objects; resident memory after touching the
# 10 000 objects and again once they were evicted. Prints cellhost/workerd,
# and cellhost/floor at c=1 (see floor_rounds).
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
  local m1; m1=$(wrk_ms 50 "$out/w.txt")
  if [ "$name" = cellhost ]; then floor_rounds "$port"; wal_sync=$(wal_fsync_p50); fi
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
  echo "$name $m1" >> "$out/p50"
}

# The floor of a durable write at c=1, measured in this run on this disk: a
# loopback round trip (wrk c=1 p50 against examples/hello on cellhost) plus
# one fdatasync of a 4 KiB overwrite (p50 of 2000). Both drift by tens of
# microseconds over minutes, so the floor is taken in rounds interleaved
# with cellhost's own c=1 p50 (hello running beside the counter): each
# round gives a ratio, and the median round is reported. Appends "fsync
# hello counter" in ms per round to $out/floor.
floor_rounds() { # counter's port
  local hport=$((cport + 2))
  RUST_LOG=warn target/release/cellhost run examples/hello --listen "127.0.0.1:$hport" >/dev/null 2>&1 &
  local hp=$!
  wait_up "$hport"
  wrk -t1 -c1 -d1s "http://127.0.0.1:$hport/" >/dev/null
  local i f
  for i in 1 2 3 4 5; do
    # An object of its own per round: it lives on the isolate of the
    # round's connection, as the c=1 row's object does (the first caller
    # places an object; wrk's new connection may land on another isolate).
    printf 'wrk.method = "POST"\nwrk.path = "/increment?name=floor%s"\n' "$i" > "$out/round.lua"
    f=$(fsync_p50)
    wrk -t1 -c1 -d3s --latency "http://127.0.0.1:$hport/" > "$out/h.txt"
    wrk -t1 -c1 -d3s --latency -s "$out/round.lua" "http://127.0.0.1:$1" > "$out/c.txt"
    echo "$f $(wrk_ms 50 "$out/h.txt") $(wrk_ms 50 "$out/c.txt")" >> "$out/floor"
  done
  kill $hp; wait $hp 2>/dev/null || true
}
# For scale: the fdatasync of one SQLite WAL commit of the counter's row
# (python's sqlite3, synchronous=NORMAL): a frame is 24 + 4096 bytes, so
# each commit dirties two blocks of the WAL where the floor's overwrite
# dirties one.
wal_fsync_p50() {
  python3 - "$out/walsync.sqlite" <<'PY'
import os, sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=NORMAL")
c.execute("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)")
fd = os.open(sys.argv[1] + "-wal", os.O_RDONLY)
q = "INSERT INTO counter (id, value) VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET value = value + 1 RETURNING value"
ts = []
for i in range(3000):
    c.execute("BEGIN"); c.execute(q).fetchall(); c.execute("COMMIT")
    t = time.perf_counter(); os.fdatasync(fd); ts.append(time.perf_counter() - t)
ts = sorted(ts[1000:])
print(f"{ts[len(ts) // 2] * 1000:.3f}")
PY
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
read -r _ cm1 < <(grep '^cellhost' "$out/p50")
read -r _ wm1 < <(grep '^workerd' "$out/p50")
printf "c=1 p50: cellhost %.3f ms, workerd %.3f ms (the rows above)\n" "$cm1" "$wm1"
# Median round by its ratio; its parts are printed beside it.
read -r fs fh fc fr < <(awk '{print $1, $2, $3, $3 / ($1 + $2)}' "$out/floor" | sort -g -k4 | sed -n 3p)
printf "floor rounds (fdatasync + hello round trip -> cellhost c=1 p50, ms):"
awk '{printf " %.3f+%.3f->%.3f (%.2fx)", $1, $2, $3, $3 / ($1 + $2)}' "$out/floor"; echo
printf "cellhost/floor, median of 5 rounds: %.2fx (cellhost %.3f ms; floor %.3f = round trip %.3f + fdatasync of an overwrite %.3f)\n" \
  "$fr" "$fc" "$(r "$fs+$fh" 1)" "$fh" "$fs"
printf "for scale: fdatasync of one SQLite WAL commit of the counter's row (python sqlite3) %.3f ms\n" "$wal_sync"
