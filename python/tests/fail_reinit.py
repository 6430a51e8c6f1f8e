#!/usr/bin/python3
"""Runs a live script with re-initialisation in process disabled (tests only).

    /usr/bin/python3 python/tests/fail_reinit.py SCRIPT [ARGS...]

Every group setup after this process's first raises, as a fragile
backend's re-initialisation in process would (NCCL): the test of the
fallback to restart mode (worker/live/liverestart_test.go) runs its program so.
The hook lives here, on the tests' side, not in the edl package.
"""

import os
import runpy
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import edl.torch as et  # noqa: E402

_build = et.Context._build_group
_setups = [0]


def _failing_build(self, g):
    _setups[0] += 1
    if _setups[0] > 1:
        raise RuntimeError("EDL_TEST_FAIL_REINIT: re-initialisation in process disabled (setup %d of this process)" % _setups[0])
    return _build(self, g)


et.Context._build_group = _failing_build

if __name__ == "__main__":
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
