#!/usr/bin/env bash
# Gets the Web Platform Tests that Node.js vendors (test/fixtures/wpt, with
# versions.json naming each folder's WPT commit) from Debian's `nodejs`
# source package, through apt's source mode, into wpt/.cache/wpt (ignored by
# git: WPT's files are third-party code and are never committed).
#
#   bash wpt/fetch.sh          # no-op when the pinned version is already there
#
# Exit status: 0 when wpt/.cache/wpt holds the pinned version; 3 when it could
# not be fetched (the caller reports WPT as NOT RUN).
set -uo pipefail
cd "$(dirname "$0")"

# The pinned source package: bump all three together (`apt-cache showsrc nodejs`
# lists what the archive has; the SHA-256 is that of the .orig.tar.xz).
PKG_VERSION='22.22.2+dfsg+~cs22.19.15-3'
ORIG='nodejs_22.22.2+dfsg+~cs22.19.15.orig.tar.xz'
ORIG_SHA256='f1a6dfca7ffe7f9f42942274adf9f0a12733977a4744a53f41b20836907c449b'
# Debian suite whose Sources list carries PKG_VERSION (unstable has 22.x).
SUITE='sid'

CACHE=.cache
DEST=$CACHE/wpt
STAMP=$CACHE/wpt.version

not_run() {
  echo "wpt/fetch.sh: $*" >&2
  echo "wpt/fetch.sh: the Web Platform Tests could NOT be fetched (nodejs $PKG_VERSION source); WPT NOT RUN" >&2
  exit 3
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PKG_VERSION" ] && [ -f "$DEST/resources/testharness.js" ]; then
  exit 0
fi
mkdir -p "$CACHE/src"

if [ ! -f "$CACHE/src/$ORIG" ] || ! echo "$ORIG_SHA256  $CACHE/src/$ORIG" | sha256sum -c --quiet - 2>/dev/null; then
  command -v apt-get >/dev/null || not_run "apt-get is not available (a Debian-based machine is needed, or unpack test/fixtures/wpt of Node's source into wpt/.cache/wpt by hand and write '$PKG_VERSION' into wpt/.cache/wpt.version)"
  have_version() { apt-cache showsrc nodejs 2>/dev/null > "$CACHE/showsrc"; grep -qxF "Version: $PKG_VERSION" "$CACHE/showsrc"; }
  if ! have_version; then
    # Add a deb-src entry for the suite, on the mirror apt already uses.
    mirror=$(grep -hoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
      | grep -v -- '-security' | head -1 | tr -d ' ')
    mirror=${mirror:-http://deb.debian.org/debian}
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    list=/etc/apt/sources.list.d/cellhost-wpt-src.sources
    if [ ! -f "$list" ]; then
      [ -w /etc/apt/sources.list.d ] || not_run "cannot add a deb-src entry ($list is not writable; run as root, or add 'deb-src $mirror $SUITE main' yourself)"
      { echo "Types: deb-src"; echo "URIs: $mirror"; echo "Suites: $SUITE"; echo "Components: main"
        [ -f "$keyring" ] && echo "Signed-By: $keyring"; } > "$list"
      echo "wpt/fetch.sh: added $list (deb-src $mirror $SUITE main)" >&2
    fi
    apt-get update -qq >&2 || not_run "apt-get update failed"
    have_version \
      || not_run "nodejs $PKG_VERSION is not in apt's source lists (have: $(sed -n 's/^Version: //p' "$CACHE/showsrc" | tr '\n' ' ')); bump PKG_VERSION, ORIG and ORIG_SHA256 in wpt/fetch.sh"
  fi
  # apt checks each file against the Sources index; only the upstream
  # tarball is needed, so a mirror missing the .dsc or Debian's patches is
  # fine as long as the .orig.tar.xz arrives (checked below by SHA-256).
  (cd "$CACHE/src" && apt-get source --download-only -qq "nodejs=$PKG_VERSION" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) \
    || echo "wpt/fetch.sh: apt-get source reported errors; checking whether $ORIG arrived" >&2
  [ -f "$CACHE/src/$ORIG" ] || not_run "$ORIG was not downloaded"
  echo "$ORIG_SHA256  $CACHE/src/$ORIG" | sha256sum -c --quiet - || not_run "$ORIG: SHA-256 mismatch"
fi

rm -rf "$DEST" "$CACHE/unpack"
mkdir -p "$CACHE/unpack"
tar -xJf "$CACHE/src/$ORIG" -C "$CACHE/unpack" --wildcards '*/test/fixtures/wpt/*' \
  || not_run "unpacking test/fixtures/wpt from $ORIG failed"
src=$(find "$CACHE/unpack" -maxdepth 4 -type d -path '*/test/fixtures/wpt' | head -1)
[ -n "$src" ] && [ -f "$src/resources/testharness.js" ] || not_run "$ORIG has no test/fixtures/wpt/resources/testharness.js"
mv "$src" "$DEST"
rm -rf "$CACHE/unpack"
# The other files apt fetched (Debian's patches) are not needed.
find "$CACHE/src" -type f ! -name "$ORIG" -delete
rm -f "$CACHE/showsrc"
echo "$PKG_VERSION" > "$STAMP"
echo "wpt/fetch.sh: WPT from nodejs $PKG_VERSION in wpt/$DEST ($(find "$DEST" -name '*.any.js' | wc -l) .any.js files)" >&2
