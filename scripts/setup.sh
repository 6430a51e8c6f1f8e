#!/usr/bin/env bash
# Installs what edl's tests and `edl dev` need and is missing, nothing else:
# Debian's redis-server, python3-torch, python3-pytest and chromium, and tools built from the Go module
# proxy into .tools/bin (swag, deadcode, SeaweedFS weed). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

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
  if ! $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq "${need_pkgs[@]}" || {
      echo "setup: could not install Debian packages: ${need_pkgs[*]}" >&2
      exit 1
    }
  fi
fi

mkdir -p .tools/bin
if [ ! -x .tools/bin/swag ]; then
  echo "setup: building swag v1.16.6 into .tools/bin" >&2
  GOBIN="$PWD/.tools/bin" go install github.com/swaggo/swag/cmd/swag@v1.16.6
fi
if [ ! -x .tools/bin/deadcode ]; then
  echo "setup: building deadcode (golang.org/x/tools v0.52.0) into .tools/bin" >&2
  GOBIN="$PWD/.tools/bin" go install golang.org/x/tools/cmd/deadcode@v0.52.0
fi
scripts/build-weed.sh .tools/bin
