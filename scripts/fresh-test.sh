#!/usr/bin/env bash
# Runs `make test` as a newcomer would: a fresh clone of this repository's
# HEAD (committed work only) in a temporary directory, with an empty Go build
# cache, module cache and GOPATH, and no .tools/; then prints the set-up
# minutes per step, the test minutes per package, the slowest five packages
# and a pass/fail summary. Exits with make test's status.
#
# It cannot un-install Debian packages: those already installed are not
# installed again, and their time is not in the figures. EDL_FRESH_APT=1
# times `apt-get install --reinstall` of them first (as root; it rewrites
# system files, so not on a machine others are using).
#
#   scripts/fresh-test.sh                 # one fresh run
#   EDL_FRESH_RUNS=5 scripts/fresh-test.sh  # five in a row, a table at the end
#   EDL_FRESH_KEEP=1 ...                  # keep the temporary directory
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
rev="$(git -C "$src" rev-parse HEAD)"
runs="${EDL_FRESH_RUNS:-1}"
pkgs=(redis-server python3-torch python3-pytest chromium)

secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.0f", b-a}'; }
mins() { awk -v s="$1" 'BEGIN{printf "%.1f", s/60}'; }

apt_s=""
if [ "${EDL_FRESH_APT:-0}" = 1 ]; then
  echo "fresh: timing apt-get install --reinstall ${pkgs[*]}" >&2
  t0=$(date +%s.%N)
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall "${pkgs[@]}" >/dev/null
  apt_s=$(secs "$t0" "$(date +%s.%N)")
fi

table=()
green=0
status=0
for run in $(seq 1 "$runs"); do
  tmp="$(mktemp -d /tmp/edl-fresh.XXXXXX)"
  echo "fresh: run $run/$runs of $rev in $tmp (nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  git clone -q --no-checkout "$src" "$tmp/edl"
  git -C "$tmp/edl" checkout -q "$rev"
  mkdir -p "$tmp/gopath" "$tmp/gocache"
  # A newcomer's Go: nothing cached, nothing in GOFLAGS but what lets the
  # temporary module cache be removed afterwards.
  export GOPATH="$tmp/gopath" GOMODCACHE="$tmp/gopath/pkg/mod" GOCACHE="$tmp/gocache" \
    GOFLAGS=-modcacherw GOTOOLCHAIN=local
  cd "$tmp/edl"
  t0=$(date +%s.%N)
  set +e
  make setup > "$tmp/setup.log" 2>&1
  setup_rc=$?
  t1=$(date +%s.%N)
  test_rc=1
  if [ $setup_rc = 0 ]; then
    make test > "$tmp/test.log" 2>&1
    test_rc=$?
  fi
  t2=$(date +%s.%N)
  set -e
  setup_s=$(secs "$t0" "$t1")
  test_s=$(secs "$t1" "$t2")
  echo "== fresh run $run: set-up $(mins "$setup_s") min, tests $(mins "$test_s") min, total $(mins $((setup_s + test_s))) min"
  if [ -n "$apt_s" ]; then
    echo "   apt (--reinstall, measured first): $(mins "$apt_s") min"
  else
    echo "   apt: nothing timed (packages already installed; EDL_FRESH_APT=1 times a reinstall)"
  fi
  sed -n 's/^setup: \([a-z0-9-]*\) took \([0-9.]*\) s (CPU \([0-9.]*\) s)$/\1 \2 \3/p' "$tmp/setup.log" |
    awk '{printf "   set-up %s: %.1f min (%.1f CPU-min)\n", $1, $2/60, $3/60}'
  if [ $setup_rc != 0 ]; then
    echo "   make setup FAILED (exit $setup_rc); its last lines:"
    tail -20 "$tmp/setup.log" | sed 's/^/     /'
  fi
  if [ -n "${EDL_FRESH_JSON:-}" ] && [ -s "$tmp/edl/.test-results/test.json" ]; then
    mkdir -p "$EDL_FRESH_JSON" && cp "$tmp/edl/.test-results/test.json" "$EDL_FRESH_JSON/run-$run.json"
    cp "$tmp/test.log" "$EDL_FRESH_JSON/run-$run.log"
  fi
  if [ -s "$tmp/edl/.test-results/test.json" ]; then
    first="$(grep -m1 -o '"Time":"[^"]*"' "$tmp/edl/.test-results/test.json" | cut -d'"' -f4)"
    if [ -n "$first" ]; then
      echo "   make test to its first test event (the -race edl build, the first test binaries' compile): $(mins "$(secs "$t1" "$(date -d "$first" +%s.%N)")") min"
    fi
    echo "   test minutes per package (the test binary's run, not its build):"
    (cd "$src" && go run ./scripts/testsum -packages < "$tmp/edl/.test-results/test.json") | sed 's/^/     /'
  fi
  sed -n '/^== summary/,$p' "$tmp/test.log" | sed 's/^/   /'
  if [ $test_rc = 0 ]; then
    green=$((green + 1))
    result=green
  else
    result="FAILED (exit $test_rc)"
    status=1
    echo "   make test failed; its log: $tmp/test.log"
  fi
  slow=$(sed -n 's/^slowest packages: //p' "$tmp/test.log")
  table+=("| $run | $(mins "$setup_s") | $(mins "$test_s") | $(mins $((setup_s + test_s))) | $result | $slow |")
  cd "$src"
  if [ "${EDL_FRESH_KEEP:-0}" != 1 ] && [ $test_rc = 0 ]; then
    chmod -R u+w "$tmp" 2>/dev/null || true
    rm -rf "$tmp"
  fi
done
echo
echo "| run | set-up min | tests min | total min | result | slowest packages |"
echo "| --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${table[@]}"
echo "$green of $runs fresh runs green"
exit $status
