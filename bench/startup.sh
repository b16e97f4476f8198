#!/usr/bin/env bash
# Start-up and footprint: how long `cellhost run` takes from exec to its first
# answered request, its resident memory then, and the binary and snapshot
# sizes; the same Worker on workerd side by side. Each Worker runs without
# Node.js compatibility and with it (`nodejs_compat`: deno_node's globals are
# loaded as each isolate starts). CELLHOST_BEFORE=/path/to/an/older/cellhost
# adds that build's figures (the "before" of a change).
#   bash bench/startup.sh [runs]
source "$(dirname "$0")/lib.sh"
runs=${1:-10}
isolates=2

mkdir -p "$out/off" "$out/on"
cp examples/hello/worker.js "$out/off/worker.js"
cp examples/hello/worker.js "$out/on/worker.js"
printf 'name = "hello"\nmain = "worker.js"\ncompatibility_date = "2025-01-01"\n[vars]\nGREETING = "cellhost"\n' > "$out/off/wrangler.toml"
printf 'name = "hello"\nmain = "worker.js"\ncompatibility_date = "2025-01-01"\ncompatibility_flags = ["nodejs_compat"]\n[vars]\nGREETING = "cellhost"\n' > "$out/on/wrangler.toml"
for mode in off on; do
  flags=""; [ "$mode" = on ] && flags='compatibilityFlags = ["nodejs_compat"],'
  cp examples/hello/worker.js "$out/$mode/w.js"
  hello_config "$out/$mode/config.capnp" w.js 2025-01-01 "$flags"
done

# One start: exec, poll until the first 200, read RSS; prints "ms rss_mb".
start_once() { # port cmd...
  local port=$1; shift
  local t0 t1 pid rss
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1 &
  pid=$!
  until curl -sf -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.002; done
  t1=$(date +%s%N)
  sleep 0.3
  rss=$(rss_mb "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$(( (t1 - t0) / 1000000 )) $rss"
}

# The median of column $2 of file $1.
median() { sort -n -k"$2" "$1" | awk -v k="$2" '{a[NR]=$k} END {print a[int((NR+1)/2)]}'; }

measure() { # label port cmd...
  local label=$1; shift
  : > "$out/m.txt"
  for _ in $(seq "$runs"); do start_once "$@" >> "$out/m.txt"; done
  printf "%-28s %10s %12s\n" "$label" "$(median "$out/m.txt" 1)" "$(median "$out/m.txt" 2)"
  echo "$label $(median "$out/m.txt" 1) $(median "$out/m.txt" 2)" >> "$out/results"
}

echo "start-up to the first answered request, median of $runs; $isolates isolates; $(nproc) cores"
printf "%-28s %10s %12s\n" "" "ms" "RSS MB"
for mode in off on; do
  measure "workerd nodejs_compat=$mode" "$wport" tests/node_modules/.bin/workerd serve "$out/$mode/config.capnp"
  measure "cellhost nodejs_compat=$mode" "$cport" target/release/cellhost run "$out/$mode" --listen "127.0.0.1:$cport" --isolates "$isolates" --data "$out/data"
  if [ -n "${CELLHOST_BEFORE:-}" ]; then
    measure "before nodejs_compat=$mode" "$cport" "$CELLHOST_BEFORE" run "$out/$mode" --listen "127.0.0.1:$cport" --isolates "$isolates" --data "$out/data"
  fi
done
for mode in off on; do
  read -r _ _ wms wrss < <(grep "^workerd nodejs_compat=$mode" "$out/results")
  read -r _ _ cms crss < <(grep "^cellhost nodejs_compat=$mode" "$out/results")
  printf "ratio cellhost/workerd, nodejs_compat=%s: start-up %.2fx, RSS %.2fx\n" "$mode" \
    "$(echo "$cms/$wms" | bc -l)" "$(echo "$crss/$wrss" | bc -l)"
done
snap=$(ls -t target/release/build/cellhost-host-*/out/CELLHOST_SNAPSHOT.bin | head -1)
printf "binary %.1f MB, startup snapshot %.2f MB" "$(echo "$(stat -c %s target/release/cellhost)/1048576" | bc -l)" \
  "$(echo "$(stat -c %s "$snap")/1048576" | bc -l)"
if [ -n "${CELLHOST_BEFORE:-}" ]; then
  printf ", before: binary %.1f MB" "$(echo "$(stat -c %s "$CELLHOST_BEFORE")/1048576" | bc -l)"
fi
echo
