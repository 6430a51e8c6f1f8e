"""Two real gloo ranks of a test program (grad_edit_world.py,
multi_opt_world.py), run as two processes that meet on a loopback port:
world_of_two starts them; join, hand_driven, start_step and
step_without_batch are the ranks' side, which drives the package's step
by hand (no worker)."""

import datetime
import os
import socket
import subprocess
import sys

import torch.distributed as dist

import edl.torch as et
from edl import protocol

# A dead peer fails the collective at once (connection closed): no need to wait for it.
TIMEOUT = 30

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


def join():
    """Joins the 2-rank gloo group as the rank that the command line
    (RANK PORT MODE) names; rank 0's store listens on PORT. Returns rank
    and mode."""
    rank, port, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=TIMEOUT))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=TIMEOUT))
    return rank, mode


def hand_driven(state, rank):
    """A Context on state as rank of 2, set up as steps() does while its
    loop runs, whose steps the caller drives by hand."""
    ctx = et.Context(None, TIMEOUT, standalone=True)  # no worker
    ctx.standalone, ctx.rank, ctx.world = False, rank, 2
    ctx._wrap(state)
    et._running.append(ctx)  # what steps() does while its loop runs
    return ctx


def start_step(ctx, state, rank, zero):
    """Starts a step's metadata all-reduce, as _generation does, for a
    4-sample global batch of which rank 0 has 3 and rank 1 one (zero: rank
    0 all 4, rank 1 none, so it takes part without a batch). Returns this
    rank's slice of the batch, the samples the step counts and its
    outcome."""
    if zero:
        mine = slice(0, 4) if rank == 0 else slice(4, 4)
    else:
        mine = slice(0, 3) if rank == 0 else slice(3, 4)
    k = mine.stop - mine.start
    share = {"part": rank, "start": 0, "end": k, "first": 0} if k else {"part": -1, "start": 0, "end": 0, "first": 0}
    meta = [0.0] * protocol.meta_len(2)
    n = protocol.fill_meta(meta, rank, share)
    out = et._Outcome()
    ctx._pending = (meta, n, out)
    ctx._start_meta(meta, out, state)
    return mine, n, out


def step_without_batch(ctx, state):
    """A started step's rest on a rank that has no samples in it: it takes
    part in the gradient all-reduce with zeros, as _generation does."""
    state.optimizer.zero_grad(set_to_none=False)
    ctx._collective(state, zero=True)
