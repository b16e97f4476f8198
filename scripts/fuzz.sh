#!/usr/bin/env bash
# Long fuzzing runs, MINUTES each (default 10), one target at a time on one core:
#
#   bash scripts/fuzz.sh [MINUTES] [TARGET...]
#
# cargo-fuzz targets (need `rustup toolchain install nightly` and `cargo install cargo-fuzz`):
#   ltx_decode  the LTX decoder, apply and re-encode           runtime/ltx/fuzz
#   id          idFromString                                  fuzz/ (runtime/ext/src/id.rs)
#   records     bucket JSON records, object keys, chain rule  fuzz/ (runtime/fleet/src/records.rs)
#   http_head   raw bytes through hyper into the request URL  fuzz/ (runtime/server/src/head.rs)
# Property tests run with many cases (stable, and jq; the same tests CI runs with the default count):
#   config      the wrangler config parser (runtime/cli/src/config.rs: cargo-fuzz cannot link
#               the binary crate without V8, so these are its fuzz targets)
#   id_props records_props head_props   the proptest twins of the cargo-fuzz targets
#   heads       malformed request heads over TCP against a running `cellhost run`
#
# Without TARGETs it runs them all. Logs and corpora: bench/out/fuzz/ and each fuzz project's
# corpus/. A crash leaves its input in the project's artifacts/ and makes the script fail; a
# failing property prints its minimal input and is saved under the crate's
# proptest-regressions/ (commit that file). FUZZ_PROFILE=release runs the property tests
# optimized (a release build of the V8 stack first: long).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
minutes=${1:-10}
shift || true
secs=${FUZZ_SECS:-$((minutes * 60))} # FUZZ_SECS: seconds instead, for a quick check
out=$root/bench/out/fuzz
mkdir -p "$out"
profile=()
[ "${FUZZ_PROFILE:-dev}" = release ] && profile=(--release)
all=(ltx_decode id records http_head config id_props records_props head_props heads)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
failed=()

# Seeds, written once: valid inputs the mutations start from.
seed() { # dir name bytes (printf format)
  mkdir -p "$1"
  [ -e "$1/$2" ] || printf "$3" >"$1/$2"
}
seeds() {
  local c=$root/fuzz/corpus
  seed "$c/records" own '{"node": "n1", "epoch": 7}'
  seed "$c/records" lease '{"node":"n1","expires_ms":5,"address":"127.0.0.1:1","load":2}'
  seed "$c/records" hint '{"at_ms":9,"name":"room"}'
  seed "$c/records" key 'e12/0000/0000000000000001-000000000000002a.ltx'
  seed "$c/records" entry 'wake/entries/Counter:ab12.json'
  seed "$c/http_head" get 'GET /p?q=1 HTTP/1.1\r\nHost: example.com:8787\r\nAccept: */*\r\n\r\n'
  seed "$c/http_head" post 'POST /x HTTP/1.1\r\nHost: [::1]\r\nContent-Length: 3\r\n\r\nabc'
  seed "$c/http_head" chunked 'PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n'
  seed "$c/http_head" old 'GET http://other/abs HTTP/1.0\r\n\r\nOPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n'
  seed "$c/id" hex '\001\002\003\004\005\006\007\010\011\012\013\014\015\016\017\020\000a\001B'
}

cargo_fuzz() { # project-dir target
  local dir=$1 t=$2 dict=()
  [ -f "$dir/dicts/$t.dict" ] && dict=(-dict="dicts/$t.dict")
  mkdir -p "$dir/corpus/$t"
  echo "== $t: cargo fuzz, $secs s (log: $out/$t.log)"
  if (cd "$dir" && cargo +nightly fuzz run -O "$t" "corpus/$t" -- \
    -max_total_time="$secs" -print_final_stats=1 "${dict[@]}") >"$out/$t.log" 2>&1; then
    grep -E '^Done|DONE' "$out/$t.log" | tail -2
  else
    tail -40 "$out/$t.log"
    failed+=("$t")
  fi
}

# Property tests: built once with cargo, then the test binaries run directly (cargo would hold
# the build directory's lock for the whole run), in batches with fresh random seeds until the
# time is up; a batch doubles its case count while it takes under 30 s.
props() { # name cargo-args... -- test-args...
  local name=$1 cases=1000 total=0 start
  shift
  local cargo_args=() test_args=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    cargo_args+=("$1")
    shift
  done
  [ $# -gt 0 ] && shift
  test_args=("$@")
  echo "== $name: property tests, $secs s (log: $out/$name.log)"
  local bins
  bins=$(cargo test "${profile[@]}" --no-run --message-format=json "${cargo_args[@]}" 2>"$out/$name.log" |
    jq -r 'select(.profile.test == true and .executable != null) | .executable')
  if [ -z "$bins" ]; then
    tail -40 "$out/$name.log"
    failed+=("$name")
    return
  fi
  start=$SECONDS
  while [ $((SECONDS - start)) -lt "$secs" ]; do
    local t0=$SECONDS bin
    for bin in $bins; do
      if ! PROPTEST_CASES=$cases "$bin" "${test_args[@]}" --test-threads=1 -q >>"$out/$name.log" 2>&1; then
        tail -40 "$out/$name.log"
        failed+=("$name")
        return
      fi
    done
    total=$((total + cases))
    [ $((SECONDS - t0)) -lt 30 ] && cases=$((cases * 2))
  done
  echo "$name: $total cases per property in $((SECONDS - start)) s"
}

seeds
for t in "${targets[@]}"; do
  case $t in
  ltx_decode)
    # The decoder's seeds are valid LTX files written by its mutation test.
    LTX_FUZZ_SEEDS=$root/runtime/ltx/fuzz/corpus/decode LTX_MUTATIONS=10 \
      cargo test -q -p cellhost-ltx --test mutate >/dev/null 2>&1
    cargo_fuzz runtime/ltx/fuzz decode
    ;;
  id | records | http_head) cargo_fuzz fuzz "$t" ;;
  config) props config -p cellhost --bin cellhost -- config::tests::props ;;
  id_props) props id_props -p cellhost-ext --lib -- id::tests::props ;;
  records_props)
    props records_props -p cellhost-fleet -p cellhost-logic --lib -- props
    ;;
  head_props) props head_props -p cellhost-server --lib -- head::tests::props ;;
  heads) props heads -p cellhost --test heads -- malformed ;;
  *)
    echo "unknown target $t (one of: ${all[*]})" >&2
    exit 2
    ;;
  esac
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all clean"
