"""A fake edl worker speaking the protocol of worker/live/live.go over the
program's Unix socket (edl.torch's tests' worker), and the small data set
and model they train."""

import json
import socket
import threading

import torch

from edl import protocol
from fakestore import StoreOps


def _no_bare_constants(name):
    raise ValueError("bare %s in a request: not JSON (the Go worker refuses it)" % name)


class FakeWorker:
    """Hands out partitions in order, applies steps like worker/live/live.go's
    liveStep (decideStep), and records every applied step's ranges."""

    def __init__(self, path, samples, partitions, fail_hello=None, initial_world=1):
        self.path, self.samples, self.parts = path, samples, partitions
        self.initial_world = initial_world
        self.fail_hello = fail_hello
        self.applied, self.epoch, self.epochs = -1, 0, 1
        self.cur = None  # [part, off, size]
        self.todo = list(range(partitions))
        self.steps = []  # (epoch, [(part, start, end)])
        self.ops = []
        self.store = StoreOps()  # the generations' rendezvous store (store_* ops)
        self.losses = []  # the "loss" of every step request
        self.reports = []  # every report request
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(1)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def part(self, p):
        first = self.samples * p // self.parts
        return first, self.samples * (p + 1) // self.parts - first

    def serve(self):
        c, _ = self.srv.accept()
        f = c.makefile("rb")
        try:
            for line in f:
                req = json.loads(line, parse_constant=_no_bare_constants)  # as Go's encoding/json reads it
                self.ops.append(req["op"])
                rep = self.handle(req)
                c.sendall(json.dumps(rep).encode() + b"\n")
        finally:  # a request it refused ends the connection: the program fails, it does not hang
            c.shutdown(socket.SHUT_RDWR)
            c.close()

    def handle(self, req):
        op = req["op"]
        if op.startswith("store_"):
            return self.store.do(req)
        if op == "hello":
            if self.fail_hello:
                return {"error": self.fail_hello(req)}
            self.epochs = req["epochs"]
            self.port = req["store_port"]
            return {"job": "j", "worker": "w0", "samples": self.samples, "partitions": self.parts, "timeout_s": 5,
                    "initial_world": self.initial_world}
        if op == "gen":
            if req["after"] >= 1:
                return {"action": "done"}
            return {"action": "run", "gen": 1, "rank": 0, "world": 1, "root": 0, "master_addr": "127.0.0.1",
                    "master_port": self.port, "have": True, "applied": self.applied, "epoch": 0,
                    "progress": {"applied": -1, "epoch": 0}}
        if op == "adopt":
            return {"applied": -1, "epoch": 0}
        if op == "report":  # rank 0's worker keeps it (worker/live/livereport.go)
            self.reports.append(req)
            return {"kept": True}
        if op == "latest":  # asked while a collective waits: the generation is not over
            return {"gen": req["gen"]}
        if op == "next":
            if self.cur is None or self.cur[1] >= self.cur[2]:
                self.cur = None
                if self.todo:
                    p = self.todo.pop(0)
                    self.cur = [p, 0, self.part(p)[1]]
            if self.cur is None:
                return {"part": -1, "start": 0, "end": 0, "first": 0}
            p, off, size = self.cur
            end = off + protocol.share_size(size - off, req["batch"])  # liveNext's rule
            return {"part": p, "start": off, "end": end, "first": self.part(p)[0], "fin": end >= size}
        if op == "step":
            meta = req["meta"]
            self.losses.append(req.get("loss_non_finite") or req["loss"])
            assert len(meta) == protocol.meta_len(1)
            if meta[protocol.COUNT] > 0:
                self.applied += 1
                b = protocol.META_HEAD
                self.steps.append((self.epoch, [(meta[b] - 1, meta[b + 1], meta[b + 2])]))
                self.cur[1] = meta[b + 2]
                return {"action": "continue", "applied": self.applied, "epoch": self.epoch}
            self.epoch += 1
            self.todo, self.cur = list(range(self.parts)), None
            if self.epoch >= self.epochs:
                return {"action": "done", "applied": self.applied, "epoch": self.epoch}
            return {"action": "continue", "applied": self.applied, "epoch": self.epoch}
        return {"error": "unexpected op %s" % op}


class Data:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((3,), float(i)), torch.tensor(i % 2)


def model_opt():
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    return m, torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
