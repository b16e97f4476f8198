#!/usr/bin/env bash
# Restore time of a cell with many commits on a file:// bucket: one node
# commits COMMITS increments to one counter object while it stays open,
# then stops; a fresh node serves the object (the first request takes the
# cell and restores it). Measured with the epoch's snapshots, as written,
# and with them removed: the chain read from TXID 1, as every restore read
# it before snapshots. Each variant restores from its own copy of the
# bucket, RUNS times.
#   bash bench/restore.sh [increments] [runs] [connections]
# At 1 connection every increment is its own commit (TXID); at more, the
# group commit folds several into one.
source "$(dirname "$0")/lib.sh"
commits=${1:-100000}
runs=${2:-3}
conns=${3:-1}
ms() { date +%s%3N; }
node() { # name bucket-dir port
  RUST_LOG=info target/release/cellhost run examples/counter --bucket "file://$2" --node "$1" \
    --data "$out/data-$1" --listen "127.0.0.1:$3" --log-format json >"$out/$1.log" 2>&1 &
}
cat > "$out/n.lua" <<LUA
wrk.method = "POST"
wrk.path = "/increment?name=r"
LUA
mkdir -p "$out/bucket"
node writer "$out/bucket" "$wport"; wp=$!
wait_up "$wport"
t=$(ms)
# wrk stops at its duration only: poll the count and stop it at the target
# (before the object could go idle and reopen under a new epoch).
wrk -t"$(( conns < 2 ? 1 : 2 ))" -c"$conns" -d600s -s "$out/n.lua" "http://127.0.0.1:$wport" >/dev/null & load=$!
until [ "$(curl -s "http://127.0.0.1:$wport/?name=r")" -ge "$commits" ]; do sleep 0.2; done
kill -INT "$load"; wait "$load" 2>/dev/null || true
value=$(curl -s "http://127.0.0.1:$wport/?name=r")
took=$(( $(ms) - t ))
txids=$(grep -o '"txid":[0-9]*' "$out/writer.log" | tail -1 | cut -d: -f2)
echo "committed $value increments in $took ms at c=$conns (last snapshot at TXID ${txids:-none})"
kill -TERM "$wp"; wait "$wp" 2>/dev/null || true
snaps=$(grep -c '"cell.snapshot"' "$out/writer.log" || true)
echo "snapshots uploaded while it stayed open: $snaps"
cp -a "$out/bucket" "$out/bucket-without"
find "$out/bucket-without" -type d -path '*/ltx/e1/0009' -prune -exec rm -rf {} +

restore() { # variant run
  local dir="$out/b-$1-$2" port=$((wport + 2))
  cp -a "$out/bucket$1" "$dir"
  node "r$1$2" "$dir" "$port"; local p=$!
  wait_up "$port" /favicon.ico
  local t; t=$(ms)
  local got; got=$(curl -s "http://127.0.0.1:$port/?name=r")
  local took=$(( $(ms) - t ))
  [ "$got" = "$value" ] || { echo "restored $got, not $value" >&2; exit 1; }
  local acquired objects listed
  acquired=$(grep '"cell.acquired"' "$out/r$1$2.log")
  objects=$(sed -E 's/.*"restored_objects":([0-9]+).*/\1/' <<< "$acquired")
  listed=$(sed -E 's/.*"listed_keys":([0-9]+).*/\1/' <<< "$acquired")
  kill -TERM "$p"; wait "$p" 2>/dev/null || true
  rm -rf "$dir" "$out/data-r$1$2"
  echo "$took $objects $listed"
}
for variant in "" "-without"; do
  total=0
  for i in $(seq "$runs"); do
    read -r took objects listed < <(restore "$variant" "$i")
    total=$((total + took))
    echo "restore ${variant:-with snapshots}: $took ms ($objects objects read, $listed keys listed)"
  done
  echo "${variant:-with} mean: $((total / runs)) ms" >> "$out/means"
done
cat "$out/means"
with=$(awk '/^with/ {print $3}' "$out/means"); without=$(awk '/^-without/ {print $3}' "$out/means")
awk -v a="$with" -v b="$without" 'BEGIN { printf "restore with snapshots / without: %.3f\n", (b > 0 ? a / b : 0) }'
