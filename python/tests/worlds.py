"""Two real gloo ranks of a test program (grad_edit_world.py,
multi_opt_world.py), run as two processes that meet on a loopback port."""

import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def world_of_two(script, mode, tries=3):
    """Runs script's ranks 0 and 1 in mode; returns the processes and their
    outputs. The port is picked free and closed before rank 0's store binds
    it, so another process may take it in between: a run whose store found
    it taken (errno 98) is run again on another port."""
    for _ in range(tries):
        port = free_port()
        env = dict(os.environ, OMP_NUM_THREADS="1")
        procs = [subprocess.Popen([sys.executable, os.path.join(HERE, script), str(r), str(port), mode],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(2)]
        outs = [pr.communicate(timeout=90)[0].decode() for pr in procs]
        if not any("errno: 98" in o or "Address already in use" in o for o in outs):
            break
    return procs, outs
