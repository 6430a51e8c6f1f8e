#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (the S3-compatible server the tests use) from the Go
# module proxy into $1 (default .tools/bin). `go install mod@version` refuses it
# because its go.mod has replace directives, so it is built from a writable copy
# of the downloaded module. Idempotent: does nothing when the binary exists.
set -euo pipefail
WEED_VERSION="${WEED_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
. "$(dirname "$0")/bin-dir.sh"
bin_dir "${1:-}"
if [ -x "$BIN_DIR/weed" ]; then
  exit 0
fi
echo "building SeaweedFS weed $WEED_VERSION (a few minutes, once) into $BIN_DIR" >&2
dir="$(GOFLAGS=-mod=mod go mod download -json "github.com/seaweedfs/seaweedfs@$WEED_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
  echo "build-weed: could not download github.com/seaweedfs/seaweedfs@$WEED_VERSION" >&2
  exit 1
fi
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -r "$dir/." "$work/"
chmod -R u+w "$work"
# A private temporary name: two builds running at once must not take each other's file.
tmp="$BIN_DIR/.weed.$$.tmp"
(cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$tmp" ./weed)
mv -f "$tmp" "$BIN_DIR/weed"
