#!/bin/bash
# Runs one Worker on the pinned workerd the way tests/differential.rs does
# (module Worker, compatibilityDate "2026-11-01", no compatibility flags,
# globalOutbound to a network service), sends GET requests and prints each
# response body followed by a "--- status" line, then workerd's stderr.
#
# usage: tests/sandbox/run-workerd.sh WORKER.js|FIXTURE_DIR [PATH...]
#   BINDINGS='(name = "GREETING", text = "hello")'   extra capnp bindings
#   FLAGS=', compatibilityFlags = ["no_nodejs_compat"]'  extra Worker fields
# Needs `npm ci --prefix tests` first.
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=$(realpath "$1"); shift
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
if [ -d "$SRC" ]; then
  # A directory fixture: worker.js is the main module, then the other .js files.
  cp -r "$SRC" "$T/w"
  MODS="(name = \"worker.js\", esModule = embed \"w/worker.js\")"
  for f in $(cd "$T/w" && find . -name '*.js' ! -path ./worker.js | sed 's|^\./||' | sort); do
    MODS="$MODS, (name = \"$f\", esModule = embed \"w/$f\")"
  done
else
  mkdir -p "$T/w"; B=$(basename "$SRC"); cp "$SRC" "$T/w/$B"
  MODS="(name = \"$B\", esModule = embed \"w/$B\")"
fi
cat > "$T/config.capnp" <<CFG
using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (services = [(name = "net", network = (allow = ["public", "private", "local"])), (name = "s0", worker = .w0)], sockets = [(name = "k0", address = "127.0.0.1:$PORT", http = (), service = "s0")]);
const w0 :Workerd.Worker = (modules = [$MODS], compatibilityDate = "2026-11-01", bindings = [${BINDINGS:-}], globalOutbound = "net"${FLAGS:-});
CFG
"$ROOT/tests/node_modules/.bin/workerd" serve "$T/config.capnp" >/dev/null 2>"$T/workerd.log" &
WP=$!
for i in $(seq 200); do
  (echo >/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break
  kill -0 $WP 2>/dev/null || break
  sleep 0.1
done
[ $# -eq 0 ] && set -- /
for p in "$@"; do
  curl -s -D "$T/h" "http://127.0.0.1:$PORT$p" || true
  echo
  echo "--- status: $(head -1 "$T/h" 2>/dev/null | tr -d '\r')"
done
kill $WP 2>/dev/null || true
wait $WP 2>/dev/null || true
echo "--- workerd log:"
cat "$T/workerd.log"
