#!/usr/bin/env bash
# Installs what edl's tests and `edl dev` need and is missing, nothing else:
# Debian's redis-server, python3-torch, python3-pytest and chromium, and tools built from the Go module
# proxy into .tools/bin (swag, deadcode, versitygw: the tests' S3 server; SeaweedFS weed too with
# EDL_SETUP_WEED=1, for `make bench`). Safe to run again. The Debian packages install while the Go
# tools build: one waits on the network and the disk, the other on the CPUs.
set -euo pipefail
cd "$(dirname "$0")/.."

# step NAME CMD...: runs CMD and says how long it took, in wall-clock and CPU
# seconds ("setup: NAME took N s (CPU M s)", which scripts/fresh-test.sh reads;
# on a busy machine the CPU seconds are the figure to compare). The CPU time is
# what `times` says this shell's finished children used (run in this shell: in
# a $(...) it would see a fresh subshell's).
step() {
  local name="$1" t0 c0 c1 f
  shift
  f="$(mktemp)"
  t0=$(date +%s.%N)
  times > "$f"
  c0=$(child_cpu "$f")
  "$@"
  times > "$f"
  c1=$(child_cpu "$f")
  rm -f "$f"
  echo "setup: $name took $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s (CPU $(awk -v a="$c0" -v b="$c1" 'BEGIN{printf "%.1f", b-a}') s)" >&2
}
# child_cpu FILE: user + system seconds of the children, from `times` output.
child_cpu() { awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }; printf "%.1f", t }' "$1"; }

need_pkgs=()
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || need_pkgs+=(redis-server)
if [ "${EDL_SETUP_TORCH:-1}" != 0 ] && ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  need_pkgs+=(python3-torch)
fi
# The edl Python package's unit tests (python/tests) run under Debian's pytest.
if [ "${EDL_SETUP_TORCH:-1}" != 0 ] && ! /usr/bin/python3 -c 'import pytest' >/dev/null 2>&1; then
  need_pkgs+=(python3-pytest)
fi
# The dashboard's browser test drives Debian's headless Chromium.
if [ "${EDL_SETUP_CHROMIUM:-1}" != 0 ] && ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  need_pkgs+=(chromium)
fi

if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    SUDO=""
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo"
  else
    echo "setup: missing Debian packages: ${need_pkgs[*]}; install them as root: apt-get install -y ${need_pkgs[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${need_pkgs[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt_install() {
    if ! $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null 2>&1; then
      $SUDO apt-get update -qq
      $SUDO apt-get install -y -qq "${need_pkgs[@]}" || {
        echo "setup: could not install Debian packages: ${need_pkgs[*]}" >&2
        exit 1
      }
    fi
  }
  step apt apt_install &
  apt_pid=$!
fi

# edl's own Go modules download while the tools build (the network beside
# the CPUs): the first build and test would otherwise fetch them one after
# another, on the test's clock.
step modules go mod download &
mod_pid=$!

mkdir -p .tools/bin
if [ ! -x .tools/bin/swag ]; then
  echo "setup: building swag v1.16.6 into .tools/bin" >&2
  step swag env GOBIN="$PWD/.tools/bin" go install -trimpath -ldflags=-s\ -w github.com/swaggo/swag/cmd/swag@v1.16.6
fi
if [ ! -x .tools/bin/deadcode ]; then
  echo "setup: building deadcode (golang.org/x/tools v0.52.0) into .tools/bin" >&2
  step deadcode env GOBIN="$PWD/.tools/bin" go install -trimpath -ldflags=-s\ -w golang.org/x/tools/cmd/deadcode@v0.52.0
fi
if [ -x .tools/bin/versitygw ]; then
  scripts/build-versitygw.sh .tools/bin # nothing to do when the version matches
else
  step s3-server scripts/build-versitygw.sh .tools/bin
fi
if [ "${EDL_SETUP_WEED:-0}" != 0 ] && [ ! -x .tools/bin/weed ]; then
  step weed scripts/build-weed.sh .tools/bin
fi
wait "$mod_pid" || { echo "setup: go mod download failed" >&2; exit 1; }
if [ -n "${apt_pid:-}" ]; then
  wait "$apt_pid" || { echo "setup: the Debian packages did not install" >&2; exit 1; }
fi
