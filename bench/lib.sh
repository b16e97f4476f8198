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

# A latency percentile (50, 99) of the wrk --latency output FILE, in ms.
wrk_ms() { to_ms "$(awk -v p="$1%" '$1==p {print $2}' "$2")"; }

# The p50 of 2000 fdatasyncs of a 4 KiB overwrite on this disk, in ms:
# the disk's part of a durable write's floor.
fsync_p50() {
  python3 - "$out/fsync.bin" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
os.pwrite(fd, b"\0" * 4096 * 64, 0)
os.fsync(fd)
buf, ts = os.urandom(4096), []
for i in range(2000):
    t = time.perf_counter()
    os.pwrite(fd, buf, (i % 64) * 4096)
    os.fdatasync(fd)
    ts.append(time.perf_counter() - t)
ts.sort()
print(f"{ts[len(ts) // 2] * 1000:.3f}")
PY
}

# Waits until the server on PORT answers PATH (default /), whatever the status.
wait_up() { for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$1${2:-/}" && return 0; sleep 0.1; done; return 1; }

# Resident memory of a process, in MB.
rss_mb() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }

# wrk for $secs against PORT with CONNS connections and the Lua SCRIPT in
# $out; prints "req/s p99-ms".
wrk_load() {
  wrk -t"$(( $2 < 2 ? 1 : 2 ))" -c"$2" -d"${secs}s" --latency -s "$out/$3" "http://127.0.0.1:$1" > "$out/w.txt"
  echo "$(awk '/Requests\/sec/ {print $2}' "$out/w.txt") $(wrk_ms 99 "$out/w.txt")"
}

# workerd's config for examples/hello's Worker: hello_config FILE MODULE DATE
# [EXTRA] writes FILE serving MODULE (beside FILE) on $wport, with
# GREETING bound; EXTRA is more Worker fields (`compatibilityFlags = [...],`).
hello_config() {
  cat > "$1" <<CAPNP
using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "hello", worker = .w)],
  sockets = [(name = "http", address = "127.0.0.1:$wport", http = (), service = "hello")]);
const w :Workerd.Worker = (modules = [(name = "worker.js", esModule = embed "$2")],
  compatibilityDate = "$3", ${4:-} bindings = [(name = "GREETING", text = "cellhost")]);
CAPNP
}

# workerd's config for the example Worker in DIR with one SQLite-backed
# Durable Object class: workerd_config DIR SERVICE BINDING CLASS. Copies
# its worker.js into $out and writes $out/config.capnp (storage in
# $out/wstore, listening on $wport).
workerd_config() {
  cp "$1/worker.js" "$out/worker.js"
  mkdir -p "$out/wstore"
  cat > "$out/config.capnp" <<CAPNP
using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "$2", worker = .w), (name = "store", disk = (path = "$out/wstore", writable = true))],
  sockets = [(name = "http", address = "127.0.0.1:$wport", http = (), service = "$2")]);
const w :Workerd.Worker = (modules = [(name = "worker.js", esModule = embed "worker.js")],
  compatibilityDate = "2026-11-01",
  bindings = [(name = "$3", durableObjectNamespace = "$4")],
  durableObjectNamespaces = [(className = "$4", uniqueKey = "$2-$4", enableSql = true)],
  durableObjectStorage = (localDisk = "store"));
CAPNP
}

# The counter's wrk scripts in $out: one.lua increments one object;
# spread.lua cycles through N objects (counter_lua N), each once per cycle.
counter_lua() {
  cat > "$out/one.lua" <<'LUA'
wrk.method = "POST"
wrk.path = "/increment?name=bench"
LUA
  cat > "$out/spread.lua" <<LUA
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "/increment?name=o" .. (n * 7919 % $1))
end
LUA
}
