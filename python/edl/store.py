"""The generation's rendezvous store, kept by the program's own edl worker.

A torch.distributed.Store whose calls go to this program's worker over its
socket (ops store_set, store_get, store_add, store_cas, store_wait,
store_check, store_num_keys, store_delete; worker/live/livestore.go), which keeps
the keys in Redis under the job's key base, one hash per generation (a fresh
namespace every generation; it expires after it). No program connects to
another program's store, so a peer that dies cannot take a survivor's store
down with it (torch 1.13 aborted a program whose TCPStore saw a peer's
connection reset: "terminate called ... Connection reset by peer").

gloo uses it from the thread that calls init_process_group (the setup
barrier too); calls are serialised on the program's connection by a lock.
Keep a Python reference to the WorkerStore while a group built on it lives:
torch holds only its C++ part, and once the Python object is collected
every call fails with "fn INTERNAL ASSERT FAILED at .../c10d/init.cpp:147"
(pybind11 finds no Python override any more).
"""

import base64
import datetime
import threading

import torch.distributed as dist


class StoreSuperseded(RuntimeError):
    """A wait ended because a newer generation replaced the one being set up."""


class WorkerStore(dist.Store):
    """The store of generation gen. client is the program's connection to
    its worker (protocol.Client); timeout (seconds) bounds a wait or get
    without its own timeout."""

    def __init__(self, client, gen, timeout):
        super().__init__()
        if client is None:
            raise ValueError("WorkerStore: no worker connection (standalone)")
        if not isinstance(gen, int) or gen < 1:
            raise ValueError("WorkerStore(gen=%r): want the generation being set up (an int >= 1)" % (gen,))
        self._client, self._gen = client, gen
        self._timeout_ms = max(1, int(round(float(timeout) * 1000)))
        self._lock = threading.Lock()
        self.superseded = False  # a wait ended because a newer generation replaced gen

    def _call(self, op, **fields):
        with self._lock:
            rep = self._client.raw_call(op, gen=self._gen, **fields)
        if rep.get("error"):
            if rep.get("superseded"):
                self.superseded = True
                raise StoreSuperseded("edl store: %s" % rep["error"])
            raise RuntimeError("edl store: %s" % rep["error"])
        return rep

    def _ms(self, timeout):
        if timeout is None:
            return self._timeout_ms
        if isinstance(timeout, datetime.timedelta):
            return max(1, int(timeout.total_seconds() * 1000))
        return max(1, int(float(timeout) * 1000))

    # c10d's Store interface (the names torch's PythonStore trampoline calls).

    def set(self, key, value):
        self._call("store_set", key=key, value=_b64(value))

    def get(self, key):
        return _unb64(self._call("store_get", key=key, timeout_ms=self._timeout_ms).get("value"))

    def add(self, key, amount):
        return int(self._call("store_add", key=key, amount=int(amount)).get("num", 0))

    def compare_set(self, key, expected, desired):
        rep = self._call("store_cas", key=key, expected=_b64(expected), value=_b64(desired))
        return _unb64(rep.get("value"))

    def wait(self, keys, timeout=None):
        self._call("store_wait", keys=list(keys), timeout_ms=self._ms(timeout))

    def check(self, keys):
        return bool(self._call("store_check", keys=list(keys)).get("exists"))

    def num_keys(self):
        return int(self._call("store_num_keys").get("num", 0))

    def delete_key(self, key):
        return bool(self._call("store_delete", key=key).get("exists"))


def _b64(v):
    if isinstance(v, str):
        v = v.encode()
    return base64.b64encode(bytes(v)).decode()


def _unb64(s):
    return base64.b64decode(s) if s else b""
