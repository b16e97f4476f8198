#!/usr/bin/env bash
# Deployments: the time `cellhost deploy` takes for a 2 MB bundle (a fresh
# 2 MB module each run, so every run uploads it), and the time from the
# switch until 3 `cellhost node`s all answer with the new version, on a
# file:// bucket.
#   bash bench/deploy.sh [runs]
source "$(dirname "$0")/lib.sh"
runs=${1:-5}
bucket="file://$out/bucket"; mkdir -p "$out/bucket" "$out/src"
project() { # version
  cat > "$out/src/worker.js" <<JS
import big from "./big.txt";
export class Obj {}
export default { fetch() { return new Response("$1 " + big.length); } };
JS
  printf 'name = "bench"\nmain = "worker.js"\ncompatibility_date = "2026-11-01"\n' > "$out/src/wrangler.toml"
  head -c 1500000 /dev/urandom | base64 -w 100 > "$out/src/big.txt" # 2.02 MB
}
ms() { date +%s%3N; }
total=0
for i in $(seq "$runs"); do
  project "d$i"
  t=$(ms); RUST_LOG=warn target/release/cellhost deploy "$out/src" --bucket "$bucket" --json >/dev/null; d=$(( $(ms) - t ))
  total=$((total + d)); echo "deploy of a 2 MB bundle: $d ms"
done
echo "deploy mean: $((total / runs)) ms over $runs runs"
ports=()
for n in 1 2 3; do
  p=$((wport + 10 + n)); ports+=("$p")
  RUST_LOG=warn target/release/cellhost node --bucket "$bucket" --node "n$n" --data "$out/data-$n" \
    --listen "127.0.0.1:$p" --deploy-poll-ms 200 >/dev/null 2>"$out/n$n.log" &
done
for p in "${ports[@]}"; do wait_up "$p"; done
for i in $(seq 3); do
  project "u$i"
  RUST_LOG=warn target/release/cellhost deploy "$out/src" --bucket "$bucket" --json >/dev/null
  t=$(ms)
  for p in "${ports[@]}"; do
    until curl -s "http://127.0.0.1:$p/" | grep -q "^u$i "; do sleep 0.02; done
  done
  echo "new version served by all 3 nodes $(( $(ms) - t )) ms after the switch"
done
