"""The live-mode protocol between a program and its edl worker (no torch).

One JSON object per line each way over the Unix socket named by EDL_SOCKET;
every request gets one reply; a reply with "error" means the request was
wrong (the message names what). Every op's request and reply is
described once in worker/live/protocol.json; the Go side (worker/live)
checks every message against it, and python/tests checks this package's.

Per-step metadata (the one small extra all-reduce) is a vector of
META_HEAD + SLOT_WIDTH * world numbers, summed over the ranks; each rank
writes only its own slot, so after the sum every member knows what every
rank consumed. It travels as float64 (exact for integers below 2**53) and
is never compressed.
"""

import json
import socket

COUNT, SWITCH, STOP, BLOCKED = 0, 1, 2, 3
META_HEAD = 4
SLOT_WIDTH = 4  # per rank: partition+1, start, end, flags
FLAG_LEAVING, FLAG_FIN = 1, 2


class EdlError(RuntimeError):
    """Bad use of the edl package, or an answer of the worker saying so."""


def meta_len(world):
    return META_HEAD + SLOT_WIDTH * world


def fill_meta(meta, rank, share):
    """Writes this rank's votes and slot into meta (a list of zeros).

    share is the worker's reply to "next": part, start, end, fin, leaving,
    switch, stop, blocked.
    """
    n = share["end"] - share["start"] if share["part"] >= 0 else 0
    meta[COUNT] = n
    meta[SWITCH] = 1 if share.get("switch") else 0
    meta[STOP] = 1 if share.get("stop") else 0
    meta[BLOCKED] = 1 if share.get("blocked") else 0
    b = META_HEAD + SLOT_WIDTH * rank
    flags = (FLAG_LEAVING if share.get("leaving") else 0) | (FLAG_FIN if share.get("fin") and n > 0 else 0)
    if share["part"] >= 0:
        meta[b], meta[b + 1], meta[b + 2] = share["part"] + 1, share["start"], share["end"]
    meta[b + 3] = flags
    return n


def local_batch(batch_size, world, rank):
    """fixed_global: the global batch split over the world, the first
    batch_size % world ranks taking one more (the built-in trainer's rule)."""
    n = batch_size // world + (1 if rank < batch_size % world else 0)
    return max(1, n)


def share_size(left, batch):
    """How many of the left samples of a partition a rank whose batch is
    batch takes in a step (the worker's rule, core.ShareSize in
    worker/core/datacursor.go): batch; all that is left when that is less;
    all that is left, batch + 1, when batch would leave a single sample
    behind (the partition's tail merges into its last batch instead of
    ending in a one-sample batch, which BatchNorm refuses in training)."""
    if left <= 0 or batch < 1:
        return 0
    if left <= batch + 1:  # all of it: at most the batch, or the batch and the one it would leave
        return left
    return batch


def sample_ids(share):
    """The global sample indices of a "next" reply."""
    if share["part"] < 0:
        return range(0)
    return range(share["first"] + share["start"], share["first"] + share["end"])


class Client:
    """A connection to the worker."""

    def __init__(self, path, connect_timeout=10.0):
        self.path = path
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(connect_timeout)
        try:
            s.connect(path)
        except OSError as e:
            s.close()
            raise EdlError("cannot reach the edl worker at EDL_SOCKET=%s: %s" % (path, e)) from e
        s.settimeout(None)  # "gen" waits as long as a generation takes
        self.sock = s
        self.rfile = s.makefile("rb")

    def call(self, op, **fields):
        rep = self.raw_call(op, **fields)
        if rep.get("error"):
            raise EdlError("edl worker: %s" % rep["error"])
        return rep

    def raw_call(self, op, **fields):
        """The reply as it is, an "error" in it included (edl.store raises
        its own errors, which a failed setup catches)."""
        fields["op"] = op
        self.sock.sendall(json.dumps(fields).encode() + b"\n")
        line = self.rfile.readline()
        if not line:
            raise EdlError("the edl worker closed the connection during %r" % op)
        return json.loads(line)

    def close(self):
        try:
            self.rfile.close()
            self.sock.close()
        except OSError:
            pass
