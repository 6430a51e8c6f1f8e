#!/bin/bash
# Counts duplicate pairs in non-test code, as issue 23 measures them: the
# tracked files less _test.go, testdata, internal/e2e and test_*.py, copied
# aside, then `duplicates --most 200`. With --no-imports each line of a Go
# grouped import block is written as its own `import` line in the copy (the
# tool passes over single import lines but counts grouped ones).
# Usage: scripts/dups-nontest.sh [--no-imports]   (needs `duplicates` on PATH)
set -euo pipefail
src=$(git rev-parse --show-toplevel)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$src"
git ls-files | grep -v -e '_test\.go$' -e '/testdata/' -e '^internal/e2e/' -e 'test_[^/]*\.py$' |
	while read -r f; do
		[ -f "$f" ] || continue
		mkdir -p "$out/$(dirname "$f")"
		cp "$f" "$out/$f"
	done
if [ "${1:-}" = --no-imports ]; then
	find "$out" -name '*.go' | while read -r f; do
		awk '/^import \($/ {inb = 1; next}
			inb && /^\)$/ {inb = 0; next}
			inb { if ($0 ~ /^[[:space:]]*$/ || $0 ~ /^[[:space:]]*\/\//) print; else { sub(/^[[:space:]]+/, ""); print "import " $0 }; next }
			{print}' "$f" > "$f.tmp" && mv "$f.tmp" "$f"
	done
fi
cd "$out" && duplicates --most 200 --seconds 200
