#!/usr/bin/python3
"""Runs a live script whose rank 0 misbehaves after its loop (tests only).

    /usr/bin/python3 python/tests/after_loop.py MODE SCRIPT [ARGS...]

Once ctx.steps() returned because training finished, rank 0's program
then: MODE "sleep" sleeps 2 s and prints "AFTERLOOP exit time=<t>" just
before it exits 0; "fail" writes "saving the model failed" to stderr and
exits 3; "hang" never returns. worker/live/liveend_test.go checks that the job
ends by what the program does, not before. MODE "break" is a user's break
out of the loop instead: every rank leaves its loop after its third batch
(the package's generator closed, as by a break) and the program exits 0.
"""

import os
import runpy
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import edl.torch as et  # noqa: E402

MODE = sys.argv[1]
_steps = et.Context.steps


def _steps_then(self, *a, **k):
    if MODE == "break":
        it = _steps(self, *a, **k)
        for i, batch in enumerate(it):
            yield batch
            if i == 2:
                it.close()  # what a break in the program's loop does to the package's generator
                return
        return
    yield from _steps(self, *a, **k)
    if self.rank != 0 or not self.finished:
        return
    if MODE == "sleep":
        time.sleep(2)
        print("AFTERLOOP exit time=%.6f" % time.time(), flush=True)
    elif MODE == "fail":
        sys.stderr.write("saving the model failed\n")
        sys.stderr.flush()
        os._exit(3)
    elif MODE == "hang":
        while True:
            time.sleep(60)


et.Context.steps = _steps_then

if __name__ == "__main__":
    sys.argv = sys.argv[2:]
    runpy.run_path(sys.argv[0], run_name="__main__")
