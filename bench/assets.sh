#!/usr/bin/env bash
# Static-file throughput: the same assets directory (a 1 KiB stylesheet and a
# 64 KiB script) served by workerd's asset serving (Cloudflare's router and
# asset workers, as `wrangler dev` 4.86 runs them in workerd) and by cellhost,
# under the same wrk load; prints req/s and p99 per file and the ratios.
#   bash bench/assets.sh [seconds] [connections]
source "$(dirname "$0")/lib.sh"
secs=${1:-10}
conns=${2:-64}
mkdir -p "$out/app/public/assets"
head -c 1024 /dev/urandom | base64 -w 100 | head -c 1024 > "$out/app/public/assets/small.css"
head -c 49152 /dev/urandom | base64 -w 100 | head -c 65536 > "$out/app/public/assets/big.js"
echo '<!doctype html><p>home</p>' > "$out/app/public/index.html"
echo 'export default { fetch() { return new Response("worker"); } };' > "$out/app/worker.js"
cat > "$out/app/wrangler.jsonc" <<JSON
{ "name": "assets-bench", "main": "worker.js", "compatibility_date": "2025-06-01",
  "assets": { "directory": "public", "not_found_handling": "single-page-application" } }
JSON
echo 'wrk.headers["Accept-Encoding"] = "identity"' > "$out/plain.lua"

measure() { # name port
  wait_up "$2" /assets/small.css
  for _ in $(seq 200); do curl -s "http://127.0.0.1:$2/assets/small.css" >/dev/null; done
  for f in small.css big.js; do
    wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$out/plain.lua" "http://127.0.0.1:$2/assets/$f" > "$out/w.txt"
    echo "$1 $f $(awk '/Requests\/sec/ {print $2}' "$out/w.txt") $(wrk_ms 99 "$out/w.txt")" >> "$out/results"
  done
}

(cd "$out/app" && WRANGLER_SEND_METRICS=false CI=true exec "$OLDPWD/tests/node_modules/.bin/wrangler" dev --ip 127.0.0.1 --port "$wport" >/dev/null 2>&1) &
wpid=$!
measure workerd "$wport"
kill -- -$wpid 2>/dev/null || kill $wpid; pkill -f "port $wport" 2>/dev/null || true; wait $wpid 2>/dev/null || true

RUST_LOG=warn target/release/cellhost run "$out/app" --listen "127.0.0.1:$cport" --data "$out/data" >/dev/null 2>&1 &
cpid=$!
measure cellhost "$cport"
kill $cpid; wait $cpid 2>/dev/null || true

echo "static assets, wrk -t2 -c$conns -d${secs}s, $(nproc) cores (workerd: wrangler dev's asset workers)"
printf "%-9s %-10s %12s %9s\n" runtime file "req/s" "p99 ms"
while read -r name f rps p99; do printf "%-9s %-10s %12.0f %9.2f\n" "$name" "$f" "$rps" "$p99"; done < "$out/results"
for f in small.css big.js; do
  read -r _ _ wr wp < <(grep "^workerd $f" "$out/results")
  read -r _ _ cr cp < <(grep "^cellhost $f" "$out/results")
  printf "ratio cellhost/workerd %s: req/s %.2fx, p99 %.2fx\n" "$f" "$(echo "$cr/$wr" | bc -l)" "$(echo "$cp/$wp" | bc -l)"
done
