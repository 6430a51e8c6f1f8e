"""edl.ckpt and the checkpoint hooks of edl.torch (docs/live.md,
"Checkpoints") against the fake worker of test_torch.py."""

import os

import pytest
import torch

import edl.torch as et
from edl import ckpt
from fakeworker import Data, FakeWorker, model_opt


class CkptWorker(FakeWorker):
    """Asks for a checkpoint after step ckpt_at; hands restore (a file)
    to the program in its generation."""

    def __init__(self, path, samples, partitions, ckpt_file=None, ckpt_at=None, restore=None, applied=-1):
        super().__init__(path, samples, partitions)
        self.ckpt_file, self.ckpt_at, self.restore = ckpt_file, ckpt_at, restore
        self.applied = applied

    def handle(self, req):
        rep = super().handle(req)
        if req["op"] == "step" and self.ckpt_at is not None and rep.get("applied") == self.ckpt_at and rep["action"] == "continue":
            rep["checkpoint"] = self.ckpt_file
        if req["op"] == "gen" and rep.get("action") == "run" and self.restore:
            rep["restore"] = self.restore
        return rep


def train(ctx, m, opt, epochs=1, on_first=None):
    after = []  # (parameters, momentum) after every batch's step
    for x, y in ctx.steps(et.DataLoader(Data(20), batch_size=4), et.State(model=m, optimizer=opt), epochs=epochs):
        if on_first is not None:
            on_first()
            on_first = None
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        opt.zero_grad()
        after.append(([p.detach().clone() for p in m.parameters()],
                      [opt.state[p]["momentum_buffer"].clone() for p in m.parameters()]))
    return after


def test_checkpoint_is_the_state_of_its_step_and_restores(tmp_path, monkeypatch):
    path, file = str(tmp_path / "a.sock"), str(tmp_path / "live-2.pt")
    w = CkptWorker(path, 20, 2, ckpt_file=file, ckpt_at=2)
    monkeypatch.setenv("EDL_SOCKET", path)
    m, opt = model_opt()
    after = train(et.init(), m, opt)
    assert os.path.exists(file) and not os.path.exists(file + ".tmp") and not os.path.exists(file + ".err")
    assert len(w.steps) == 6  # partitions of 10: batches of 4, 4, 2
    d = torch.load(file)
    assert d["format"] == ckpt.FORMAT and d["applied"] == 2
    d = d["state"]
    params, mom = after[2]  # the batch of applied step 2
    for k, p in zip(["weight", "bias"], params):
        assert torch.equal(d["model"][k], p), "the checkpoint holds step 2's model, not a later one"
    assert all(torch.equal(d["optimizer"]["state"][i]["momentum_buffer"], mom[i]) for i in range(2))

    # A program that restores it starts from step 2's state.
    path2 = str(tmp_path / "b.sock")
    CkptWorker(path2, 20, 2, restore=file, applied=2)
    monkeypatch.setenv("EDL_SOCKET", path2)
    torch.manual_seed(123)
    m2 = torch.nn.Linear(3, 2)
    opt2 = torch.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
    seen = []
    ctx = et.init()
    train(ctx, m2, opt2, on_first=lambda: seen.append([p.detach().clone() for p in m2.parameters()]))
    assert all(torch.equal(a, b) for a, b in zip(seen[0], params)), "restored before the first step"


def test_host_copy_is_a_copy():
    m, opt = model_opt()
    st = et.State(model=m, optimizer=opt)
    snap = ckpt.host_copy(st.state_dict())
    with torch.no_grad():
        m.weight.add_(1.0)
    assert not torch.equal(snap["model"]["weight"], m.weight), "training goes on while the copy is written"


class Unpicklable:
    def state_dict(self):
        return {"f": lambda: 0}

    def load_state_dict(self, d):
        pass


def test_failed_write_leaves_the_error_for_the_worker(tmp_path):
    m, opt = model_opt()
    st = et.State(model=m, optimizer=opt, odd=Unpicklable())
    file = str(tmp_path / "x.pt")
    s = ckpt.Saver()
    s.save(st, file, 0)
    s.wait()
    assert not os.path.exists(file) and not os.path.exists(file + ".tmp")
    with open(file + ".err") as f:
        assert "pickle" in f.read().lower()


class RestartWorker(FakeWorker):
    """Answers the first "gen" with restart mode's action restart."""

    def __init__(self, path, save):
        super().__init__(path, 20, 2)
        self.save = save

    def handle(self, req):
        if req["op"] == "gen":
            return {"action": "restart", "save": self.save, "applied": 7, "have": True, "rank": 0, "root": 0, "epoch": 0}
        return super().handle(req)


PROGRAM = r'''
import sys, torch
sys.path.insert(0, sys.argv[1])
import edl.torch as et
torch.manual_seed(5)
m = torch.nn.Linear(3, 2)
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
ctx = et.init()
data = [(torch.zeros(3), 0)] * 20
for x, y in ctx.steps(et.DataLoader(data, batch_size=4), et.State(model=m, optimizer=opt)):
    pass
print("not reached")
'''


def test_restart_action_saves_the_state_and_exits_75(tmp_path):
    import subprocess
    import sys
    path, save = str(tmp_path / "r.sock"), str(tmp_path / "live-local.pt")
    RestartWorker(path, save)
    pkg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    env = dict(os.environ, EDL_SOCKET=path, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", PROGRAM, pkg], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 75, p.stderr
    assert "not reached" not in p.stdout
    d = torch.load(save)
    assert d["format"] == ckpt.FORMAT and d["applied"] == 7
    torch.manual_seed(5)
    assert torch.equal(d["state"]["model"]["weight"], torch.nn.Linear(3, 2).weight.detach())
    # The restarted program gets it back; a file of another step is refused.
    m, opt = model_opt()
    st = et.State(model=m, optimizer=opt)
    assert ckpt.load(save, st, 7) == 7
    assert torch.equal(m.weight.detach(), d["state"]["model"]["weight"])
    with pytest.raises(et.EdlError, match="holds the state after step 7, the worker expects step 8"):
        ckpt.load(save, st, 8)


def test_store_binds_its_predecessors_port(monkeypatch):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    monkeypatch.setenv("EDL_STORE_PORT", str(port))
    st = et._host_store(5)
    assert st.port == port
    # Taken (by that store): another port, not an error.
    other = et._host_store(5)
    assert other.port != port and other.port > 0


def test_no_test_hooks_in_the_library():
    # Test hooks (a forced re-initialisation failure) live on the tests'
    # side (tests/fail_reinit.py), not in the package users install.
    root = os.path.join(os.path.dirname(__file__), "..", "edl")
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            with open(os.path.join(root, name)) as f:
                assert "EDL_TEST" not in f.read(), name
