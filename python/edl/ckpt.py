"""Checkpoints of a live program's State (docs/live.md, "Checkpoints").

The worker decides when (rank 0, at a step boundary: every
checkpoint.every_steps steps, at an epoch's end, at the end, when every
member leaves) and names the file in its reply; the program writes
State.state_dict() there with torch.save. Training does not wait for the
write: the state is first copied to host memory (a few ms for a model of
millions of parameters), then written by a thread, to file.tmp and renamed
into place, which is what the worker waits for before it uploads the file
with the data pipeline's position of the same step. A failed write leaves
file.err with the message instead.

The same files carry the state across a restart of the program in the
job-level fallback to restart mode (edl.torch, "Fallback"): there the write
is synchronous, just before the program exits.
"""

import collections
import os
import threading

import torch

from .protocol import EdlError

__all__ = ["Saver", "load", "host_copy", "FORMAT"]

# A file holds {"format": FORMAT, "applied": the job's step it is the state
# after, "state": State.state_dict()}.
FORMAT = "edl-live-torch-v1"


def host_copy(obj):
    """A deep copy of a state dict with every tensor copied to host memory."""
    if torch.is_tensor(obj):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, collections.OrderedDict):
        return collections.OrderedDict((k, host_copy(v)) for k, v in obj.items())
    if isinstance(obj, dict):
        return {k: host_copy(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [host_copy(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(host_copy(v) for v in obj)
    if hasattr(obj, "copy") and type(obj).__module__.startswith("numpy"):
        return obj.copy()
    return obj


def _write(snap, path):
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            torch.save(snap, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:  # the worker must hear of it, whatever it is
        try:
            os.remove(tmp)
        except OSError:
            pass
        with open(path + ".err", "w") as f:
            f.write("%s: %s" % (type(e).__name__, e))
        if not isinstance(e, Exception):
            raise


class Saver:
    """Writes checkpoints one at a time, beside training."""

    def __init__(self):
        self._thread = None
        self.saved = 0

    def save(self, state, path, applied, background=True):
        """Copies state (the state after step applied) now; writes it to
        path in the background (or now)."""
        self.wait()  # at most one in flight (the worker asks for one at a time)
        snap = {"format": FORMAT, "applied": applied, "state": host_copy(state.state_dict())}
        self.saved += 1
        if not background:
            _write(snap, path)
            return
        self._thread = threading.Thread(target=_write, args=(snap, path), name="edl-checkpoint", daemon=True)
        self._thread.start()

    def wait(self):
        """Waits for the write in flight, if any."""
        t, self._thread = self._thread, None
        if t is not None:
            t.join()


def load(path, state, applied=None):
    """Loads a file written by Saver into state; with applied, the file
    must be the state after that step."""
    try:
        d = torch.load(path, map_location="cpu", weights_only=False)  # RNG states are not tensors
    except TypeError:  # a torch without weights_only
        d = torch.load(path, map_location="cpu")
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise EdlError("%s: not an edl live checkpoint (format %r)" % (path, d.get("format") if isinstance(d, dict) else None))
    if applied is not None and d["applied"] != applied:
        raise EdlError("%s holds the state after step %d, the worker expects step %d" % (path, d["applied"], applied))
    state.load_state_dict(d["state"])
    return d["applied"]

