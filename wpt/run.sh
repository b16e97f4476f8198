#!/usr/bin/env bash
# Web Platform Tests on cellhost and workerd, compared with wpt/expectations.json.
#
#   bash wpt/run.sh [FOLDER|FILE…] [--update] [--verbose] [--jobs N] …
#
# Fetches the WPT copy first (wpt/fetch.sh) when it is missing. Exit status:
# 0 all as expected; 1 a difference from wpt/expectations.json; 2 a setup
# error (no cellhost binary, no workerd, bad arguments); 3 WPT NOT RUN (the
# tests could not be fetched; WPT_OPTIONAL=1 turns that into 0, loudly).
set -uo pipefail
cd "$(dirname "$0")/.."

banner() {
  echo "################################################################" >&2
  echo "### $*" >&2
  echo "################################################################" >&2
}

if ! bash wpt/fetch.sh; then
  if [ "${WPT_OPTIONAL:-0}" = 1 ]; then
    banner "WPT NOT RUN: the Web Platform Tests could not be fetched (WPT_OPTIONAL=1, so this does not fail)"
    exit 0
  fi
  banner "WPT NOT RUN: the Web Platform Tests could not be fetched (see above; WPT_OPTIONAL=1 lets this pass)"
  exit 3
fi

command -v node >/dev/null || { echo "wpt: node is not installed" >&2; exit 2; }
if [ ! -x tests/node_modules/.bin/workerd ] && [ -z "${WORKERD_BIN:-}" ]; then
  npm ci --prefix tests --no-audit --no-fund --loglevel=error || { echo "wpt: npm ci --prefix tests failed (workerd)" >&2; exit 2; }
fi
target=${CARGO_TARGET_DIR:-target}
if [ -z "${CELLHOST_BIN:-}" ] && [ ! -x "$target/release/cellhost" ] && [ ! -x "$target/debug/cellhost" ]; then
  echo "wpt: no cellhost binary in $target/{release,debug} (cargo build -p cellhost, or set CELLHOST_BIN)" >&2
  exit 2
fi
exec node wpt/runner.mjs "$@"
