#!/usr/bin/env bash
# Builds the Versity S3 Gateway (versitygw, the S3 server the tests use) from
# the Go module proxy into $1 (default .tools/bin): a static binary, no debug
# information. Idempotent: does nothing when that version is already there.
set -euo pipefail
VERSITYGW_VERSION="${VERSITYGW_VERSION:-v1.8.0}"
. "$(dirname "$0")/bin-dir.sh"
bin_dir "${1:-}"
if [ -x "$BIN_DIR/versitygw" ]; then
  # Read it whole first: with pipefail, grep -q closing the pipe early
  # would make an up-to-date binary look stale.
  have="$("$BIN_DIR/versitygw" --version 2>/dev/null || true)"
  if grep -q "^Version  : $VERSITYGW_VERSION\$" <<<"$have"; then
    exit 0
  fi
fi
echo "setup: building versitygw $VERSITYGW_VERSION into $BIN_DIR" >&2
# A private directory: two builds running at once must not take each other's file.
tmp="$(mktemp -d "$BIN_DIR/.versitygw.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath \
  -ldflags="-s -w -X=main.Version=$VERSITYGW_VERSION" \
  "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
mv -f "$tmp/versitygw" "$BIN_DIR/versitygw"
