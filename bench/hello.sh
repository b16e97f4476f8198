#!/usr/bin/env bash
# Hello-world throughput: workerd and cellhost serve examples/hello in turn and
# are driven by the same wrk load; prints req/s, p50/p99 latency, resident
# memory at idle and under load, and the cellhost/workerd ratios.
# CELLHOST_BEFORE=/path/to/an/older/cellhost adds that build's row and the
# ratios against it (the "before" of a change).
#   bash bench/hello.sh [seconds] [connections]
source "$(dirname "$0")/lib.sh"
secs=${1:-10}
conns=${2:-64}
cp examples/hello/worker.js "$out/worker.js"
hello_config "$out/config.capnp" worker.js 2026-11-01

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

run_one() { # name port pid
  local name=$1 port=$2 pid=$3
  wait_up "$port"
  for _ in $(seq 200); do curl -s "http://127.0.0.1:$port/" >/dev/null; done   # warm up
  # Idle: 2 s after the warm-up. An isolate gives memory back once it has
  # been without work for 1 s (runtime/host/src/quiet.rs); both runtimes
  # get the same wait.
  sleep 2
  local idle; idle=$(rss_kb "$pid")
  local peak=0
  ( while sleep 0.5; do r=$(rss_kb "$pid" 2>/dev/null || echo 0); echo "$r"; done ) > "$out/$name.rss" &
  local sampler=$!
  wrk -t2 -c"$conns" -d"${secs}s" --latency "http://127.0.0.1:$port/" > "$out/$name.wrk"
  kill $sampler 2>/dev/null || true
  peak=$(sort -n "$out/$name.rss" | tail -1)
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' "$out/$name.wrk")
  p50=$(awk '$1=="50%" {print $2}' "$out/$name.wrk")
  p99=$(awk '$1=="99%" {print $2}' "$out/$name.wrk")
  echo "$name $rps $p50 $p99 $idle $peak" >> "$out/results"
}

tests/node_modules/.bin/workerd serve "$out/config.capnp" >/dev/null 2>&1 &
wpid=$!
run_one workerd "$wport" "$wpid"
kill $wpid; wait $wpid 2>/dev/null || true

# Both cellhost builds run from fresh copies in $out: how much of a
# binary's code counts as resident depends on how much of the file the page
# cache holds (the same binary read 33 or 38 MB of file-backed RSS), so
# each starts with its whole file cached, as a server's would be.
cp target/release/cellhost "$out/cellhost"
[ -n "${CELLHOST_BEFORE:-}" ] && cp "$CELLHOST_BEFORE" "$out/before"
RUST_LOG=warn "$out/cellhost" run examples/hello --listen "127.0.0.1:$cport" >/dev/null 2>&1 &
cpid=$!
run_one cellhost "$cport" "$cpid"
kill $cpid; wait $cpid 2>/dev/null || true

if [ -n "${CELLHOST_BEFORE:-}" ]; then
  RUST_LOG=warn "$out/before" run examples/hello --listen "127.0.0.1:$cport" >/dev/null 2>&1 &
  bpid=$!
  run_one before "$cport" "$bpid"
  kill $bpid; wait $bpid 2>/dev/null || true
fi

echo "hello world, wrk -t2 -c$conns -d${secs}s, $(nproc) cores"
printf "%-9s %12s %9s %9s %11s %11s\n" runtime "req/s" "p50 ms" "p99 ms" "idle RSS MB" "load RSS MB"
while read -r name rps p50 p99 idle peak; do
  printf "%-9s %12.0f %9.2f %9.2f %11.1f %11.1f\n" "$name" "$rps" "$(to_ms "$p50")" "$(to_ms "$p99")" "$(echo "$idle/1024" | bc -l)" "$(echo "$peak/1024" | bc -l)"
done < "$out/results"
read -r _ wr wp50 wp99 wi wpk < <(grep '^workerd' "$out/results")
read -r _ cr cp50 cp99 ci cpk < <(grep '^cellhost' "$out/results")
printf "ratio cellhost/workerd: req/s %.2fx, p99 %.2fx, idle RSS %.2fx, load RSS %.2fx\n" \
  "$(echo "$cr/$wr" | bc -l)" "$(echo "$(to_ms "$cp99")/$(to_ms "$wp99")" | bc -l)" \
  "$(echo "$ci/$wi" | bc -l)" "$(echo "$cpk/$wpk" | bc -l)"
if [ -n "${CELLHOST_BEFORE:-}" ]; then
  read -r _ br bp50 bp99 bi bpk < <(grep '^before' "$out/results")
  printf "ratio cellhost/before: req/s %.2fx, p99 %.2fx, idle RSS %.2fx, load RSS %.2fx\n" \
    "$(echo "$cr/$br" | bc -l)" "$(echo "$(to_ms "$cp99")/$(to_ms "$bp99")" | bc -l)" \
    "$(echo "$ci/$bi" | bc -l)" "$(echo "$cpk/$bpk" | bc -l)"
fi
