#!/usr/bin/env bash
# Hello-world throughput: workerd and cellhost serve examples/hello in turn and
# are driven by the same wrk load; prints req/s, p50/p99 latency, resident
# memory at idle and under load, and the cellhost/workerd ratios.
# CELLHOST_BEFORE=/path/to/an/older/cellhost adds that build's row and the
# ratios against it (the "before" of a change); ROUNDS=n runs the two builds
# n times each, alternating which goes first, and prints each figure's median
# (one run on a 2-core machine moves by several per cent).
#   [ROUNDS=n] bash bench/hello.sh [seconds] [connections]
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
  echo "$name $rps $(to_ms "$p50") $(to_ms "$p99") $idle $peak" >> "$out/results"
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
serve() { # name binary
  RUST_LOG=warn "$2" run examples/hello --listen "127.0.0.1:$cport" >/dev/null 2>&1 &
  local pid=$!
  run_one "$1" "$cport" "$pid"
  kill $pid; wait $pid 2>/dev/null || true
}
for round in $(seq "${ROUNDS:-1}"); do
  if [ -z "${CELLHOST_BEFORE:-}" ]; then
    serve cellhost "$out/cellhost"
  elif [ $((round % 2)) = 1 ]; then
    serve cellhost "$out/cellhost"; serve before "$out/before"
  else
    serve before "$out/before"; serve cellhost "$out/cellhost"
  fi
done

# The median of column COL (2: req/s ... 6: load RSS) of NAME's rows.
median() {
  awk -v n="$1" -v c="$2" '$1 == n { print $c }' "$out/results" | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
echo "hello world, wrk -t2 -c$conns -d${secs}s, $(nproc) cores, ${ROUNDS:-1} round(s) (medians)"
printf "%-9s %12s %9s %9s %11s %11s\n" runtime "req/s" "p50 ms" "p99 ms" "idle RSS MB" "load RSS MB"
names="workerd cellhost"
[ -n "${CELLHOST_BEFORE:-}" ] && names="$names before"
for name in $names; do
  printf "%-9s %12.0f %9.2f %9.2f %11.1f %11.1f\n" "$name" "$(median "$name" 2)" "$(median "$name" 3)" \
    "$(median "$name" 4)" "$(echo "$(median "$name" 5)/1024" | bc -l)" "$(echo "$(median "$name" 6)/1024" | bc -l)"
done
ratio() { # a b: "req/s .., p99 .., idle RSS .., load RSS .." of a against b
  printf "req/s %.2fx, p99 %.2fx, idle RSS %.2fx, load RSS %.2fx\n" \
    "$(echo "$(median "$1" 2)/$(median "$2" 2)" | bc -l)" "$(echo "$(median "$1" 4)/$(median "$2" 4)" | bc -l)" \
    "$(echo "$(median "$1" 5)/$(median "$2" 5)" | bc -l)" "$(echo "$(median "$1" 6)/$(median "$2" 6)" | bc -l)"
}
echo "ratio cellhost/workerd: $(ratio cellhost workerd)"
if [ -n "${CELLHOST_BEFORE:-}" ]; then
  echo "ratio cellhost/before: $(ratio cellhost before)"
fi
