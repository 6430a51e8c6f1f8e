"""edl.store.WorkerStore against a fake worker speaking the store ops of
worker/live/livestore.go (tests/fakestore.py: the same semantics; the Go side's
own test is worker/live/livestore_test.go's TestLiveStoreOps)."""

import datetime
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
import torch
import torch.distributed as dist

from edl import protocol
from edl.store import StoreSuperseded, WorkerStore

from fakestore import StoreOps

HERE = os.path.dirname(os.path.abspath(__file__))


class FakeWorker:
    """A Unix socket server answering store_* ops (tests/fakestore.py) on
    every connection; latest: generations above it make a wait end as
    superseded."""

    def __init__(self, path):
        self.path, self.store, self.ops = path, StoreOps(), []
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def latest(self):
        return self.store.latest

    @latest.setter
    def latest(self, v):
        self.store.latest = v

    def _accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        f = c.makefile("rb")
        for line in f:
            req = json.loads(line)
            self.ops.append(req["op"])
            c.sendall(json.dumps(self.store.do(req)).encode() + b"\n")

    def close(self):
        self.srv.close()


@pytest.fixture
def worker(tmp_path):
    w = FakeWorker(str(tmp_path / "edl.sock"))
    yield w
    w.close()


def test_store_ops(worker):
    s = WorkerStore(protocol.Client(worker.path), 3, timeout=1)
    blob = bytes(range(256))
    s.set("addr", blob)
    assert s.get("addr") == blob  # binary values survive (gloo's addresses)
    s.set("txt", "1")
    assert s.get("txt") == b"1"
    assert s.add("n", 2) == 2 and s.add("n", 0) == 2 and s.add("n", -1) == 1
    assert s.compare_set("c", "", "a") == b"a"  # absent, expected empty: set
    assert s.compare_set("c", "x", "b") == b"a"  # differs: the current value
    assert s.compare_set("c", "a", "b") == b"b"
    assert s.compare_set("absent", "x", "y") == b"x"
    assert s.check(["addr", "n"]) and not s.check(["addr", "nope"])
    assert s.num_keys() == 4
    assert s.delete_key("txt") and not s.delete_key("txt")
    s.wait(["addr"])
    s.wait(["addr"], datetime.timedelta(seconds=1))
    # Through a PrefixStore, as the package uses it.
    p = dist.PrefixStore("edl/gen/3", s)
    p.set("k", "v")
    assert p.get("k") == b"v" and s.get("edl/gen/3/k") == b"v"
    # Another generation is another namespace.
    assert not WorkerStore(protocol.Client(worker.path), 4, timeout=1).check(["addr"])


def test_store_wait_bounded_and_errors_are_runtime_errors(worker):
    s = WorkerStore(protocol.Client(worker.path), 1, timeout=0.2)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="Timeout") as e:
        s.wait(["never"])
    assert not isinstance(e.value, protocol.EdlError)  # a failed setup, not bad use
    assert time.monotonic() - start < 2
    with pytest.raises(RuntimeError, match="Timeout"):
        s.get("never")  # a get waits for its key, bounded the same way
    worker.latest = 2
    with pytest.raises(StoreSuperseded):
        s.wait(["never"], datetime.timedelta(seconds=30))
    assert s.superseded


def test_store_bad_arguments(worker):
    c = protocol.Client(worker.path)
    with pytest.raises(ValueError, match="gen"):
        WorkerStore(c, 0, timeout=1)
    with pytest.raises(ValueError, match="standalone"):
        WorkerStore(None, 1, timeout=1)


RANK = r"""
import datetime, sys
import torch, torch.distributed as dist
sys.path.insert(0, sys.argv[3])
from edl import protocol
from edl.store import WorkerStore
rank = int(sys.argv[2])
ws = WorkerStore(protocol.Client(sys.argv[1]), 5, timeout=20)  # kept referenced: see edl.store
s = dist.PrefixStore("edl/gen/5", ws)
dist.init_process_group("gloo", store=s, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=20))
x = torch.tensor([float(rank + 1)])
dist.all_reduce(x)
print(x.item())
"""


def test_gloo_group_through_worker_store(worker, tmp_path):
    # Each rank's store talks only to "its worker" (here one fake for both):
    # init_process_group (gloo's rendezvous, the store based barrier, the
    # sequence number) works through it on this torch.
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    pkg = os.path.dirname(HERE)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, str(script), worker.path, str(r), pkg], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env) for r in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()[-2000:]
        assert float(out.decode().split()[-1]) == 3.0
    assert {"store_set", "store_get", "store_add"} <= set(worker.ops)
