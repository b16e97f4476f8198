# Shared set-up of the benchmarks (sourced): tools, a release build, a
# scratch directory, two free-ish ports, and small helpers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }
[ -x tests/node_modules/.bin/workerd ] || npm ci --prefix tests --no-audit --no-fund --loglevel=error
cargo build --release -q -p cellhost
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT
wport=$((20000 + RANDOM % 10000)); cport=$((wport + 1))

# wrk's latency figure ("812.00us", "1.20ms", "2.1s") in milliseconds.
to_ms() { awk -v v="$1" 'BEGIN { if (v ~ /us$/) { sub(/us$/,"",v); print v/1000 } else if (v ~ /ms$/) { sub(/ms$/,"",v); print v } else if (v ~ /s$/) { sub(/s$/,"",v); print v*1000 } else print v }'; }

# Waits until the server on PORT answers PATH (default /), whatever the status.
wait_up() { for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$1${2:-/}" && return 0; sleep 0.1; done; return 1; }

# Resident memory of a process, in MB.
rss_mb() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }

# wrk for $secs against PORT with CONNS connections and the Lua SCRIPT in
# $out; prints "req/s p99-ms".
wrk_load() {
  wrk -t"$(( $2 < 2 ? 1 : 2 ))" -c"$2" -d"${secs}s" --latency -s "$out/$3" "http://127.0.0.1:$1" > "$out/w.txt"
  echo "$(awk '/Requests\/sec/ {print $2}' "$out/w.txt") $(to_ms "$(awk '$1=="99%" {print $2}' "$out/w.txt")")"
}
