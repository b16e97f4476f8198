#!/usr/bin/env bash
# The fault lab (tests/faultlab.rs) as a soak: three nodes of
# tests/faultlab/worker on one bucket, clients incrementing a few counters
# (some in turns whose commit fails, which must never succeed), and seeded
# faults (SIGKILL, SIGKILL with the data directory wiped, SIGSTOP past the
# lease then SIGCONT, SIGTERM, rolling restarts, deploys of a new version
# (each node switches in process), store outages, flaky uploads, partitions,
# and on S3 an upload that fails for good) for MINUTES per store, then a
# cold restart of the whole fleet. Prints, per store, the faults by kind, requests,
# acknowledged, lost and duplicated increments, availability during and
# outside faults and the recovery time per fault kind; exits non-zero on
# any violation (the history and node logs are kept; the report says where).
#   bash bench/faultlab.sh SEED MINUTES [file|s3|both]
# A release build by default, as the other benchmarks; FAULTLAB_DEBUG=1
# uses the debug build the test suite already has.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bash bench/faultlab.sh SEED MINUTES [file|s3|both]"
seed=${1:?$usage}
minutes=${2:?$usage}
store=${3:-both}
case "$store" in file|s3|both) ;; *) echo "$usage" >&2; exit 2 ;; esac
if [ "$store" != file ]; then
  command -v moto_server >/dev/null || { echo "moto_server is needed: pip install 'moto[server]'" >&2; exit 1; }
fi
profile=(--release)
[ "${FAULTLAB_DEBUG:-0}" = 1 ] && profile=()
secs=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
echo "fault lab soak: seed $seed, $minutes min of faults per store ($store), $(nproc) cores"
FAULTLAB_SEED=$seed FAULTLAB_SECS=$secs FAULTLAB_STORE=$store RUST_LOG=${RUST_LOG:-info} \
  cargo test "${profile[@]}" -q -p cellhost --test faultlab -- \
  --nocapture --test-threads=1 --skip checker faultlab_
