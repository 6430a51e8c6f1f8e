"""edl.torch against a fake worker speaking the protocol of worker/live/live.go
(one process, a real gloo group of one)."""

import os
import socket

import pytest
import torch

import edl.torch as et
from edl import protocol

from fakeworker import Data, FakeWorker, model_opt


def test_outside_edl_says_how_to_run(monkeypatch):
    monkeypatch.delenv("EDL_SOCKET", raising=False)
    monkeypatch.delenv("EDL_STANDALONE", raising=False)
    with pytest.raises(et.EdlError, match="not running under an edl worker.*trainer.exec.mode"):
        et.init()


def test_standalone_warns_and_trains_every_sample_once(monkeypatch):
    monkeypatch.delenv("EDL_SOCKET", raising=False)
    monkeypatch.setenv("EDL_PARTITIONS", "3")
    with pytest.warns(RuntimeWarning, match="one process"):
        ctx = et.init(standalone=True)
    m, opt = model_opt()
    seen = []
    for x, y in ctx.steps(et.DataLoader(Data(10), batch_size=4), et.State(model=m, optimizer=opt), epochs=2):
        seen += [int(v) for v in x[:, 0]]
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        opt.zero_grad()
    assert sorted(seen) == sorted(list(range(10)) * 2)
    assert ctx.finished and ctx.ended == "done"


def test_standalone_tail_merges_into_last_batch(monkeypatch):
    # A partition of 25 at batch 12 goes 12, 13 (not 12, 12, 1: BatchNorm
    # refuses a one-sample batch in training mode), as the worker hands it out.
    monkeypatch.delenv("EDL_SOCKET", raising=False)
    monkeypatch.setenv("EDL_PARTITIONS", "2")
    with pytest.warns(RuntimeWarning, match="one process"):
        ctx = et.init(standalone=True)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    sizes, seen = [], []
    for x, y in ctx.steps(et.DataLoader(Data(50), batch_size=12), et.State(model=m, optimizer=opt)):
        sizes.append(len(x))
        seen += [int(v) for v in x[:, 0]]
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        opt.zero_grad()
    assert sizes == [12, 13, 12, 13]
    assert sorted(seen) == list(range(50))


def test_live_tail_merges_into_last_batch(worker):
    worker(samples=25, partitions=1)
    ctx = et.init()
    m, opt = model_opt()
    sizes = []
    for x, y in ctx.steps(et.DataLoader(Data(25), batch_size=12), et.State(model=m, optimizer=opt)):
        sizes.append(len(x))
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        opt.zero_grad()
    assert sizes == [12, 13]


@pytest.mark.parametrize("left,batch,want", [
    (24, 12, 12), (13, 12, 13), (14, 12, 12), (7, 12, 7), (1, 12, 1), (2, 1, 2), (3, 1, 1), (0, 12, 0), (250, 249, 250),
])
def test_share_size_is_the_workers(left, batch, want):
    assert protocol.share_size(left, batch) == want


def test_standalone_report_and_epoch_end(monkeypatch):
    # Without a worker nothing is sent: report() returns False and keeps
    # the values in last_report; on_epoch_end is called after every epoch.
    monkeypatch.delenv("EDL_SOCKET", raising=False)
    with pytest.warns(RuntimeWarning, match="one process"):
        ctx = et.init(standalone=True)
    m, opt = model_opt()
    ends = []
    for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), et.State(model=m, optimizer=opt), epochs=2,
                          on_epoch_end=lambda done: ends.append(done) or {"val_loss": 0.5}):
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        assert ctx.report(loss=loss) is False
    assert ends == [1, 2]
    assert ctx.last_report == {"step": 3, "epoch": 2, "values": {"val_loss": 0.5}}


def test_state_requires_optimizer():
    m, _ = model_opt()
    with pytest.raises(et.EdlError, match="optimizer is required"):
        et.State(model=m)
    with pytest.raises(et.EdlError, match="torch.nn.Module"):
        et.State(model=None, optimizer=torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1))
    with pytest.raises(et.EdlError, match="not the model's"):
        et.State(model=m, optimizer=torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1))


def test_dataloader_checks():
    with pytest.raises(et.EdlError, match="map-style"):
        et.DataLoader(iter([1, 2]), batch_size=2)
    with pytest.raises(et.EdlError, match="batch_size"):
        et.DataLoader(Data(3), batch_size=0)


def test_dataset_length_mismatch_is_the_workers_error(worker):
    worker(fail_hello=lambda req: "data set has %d samples but the job's trainer.exec.dataset.samples is 20" % req["dataset_len"])
    ctx = et.init()
    m, opt = model_opt()
    with pytest.raises(et.EdlError, match="data set has 7 samples but the job's trainer.exec.dataset.samples is 20"):
        for _ in ctx.steps(et.DataLoader(Data(7), batch_size=4), et.State(model=m, optimizer=opt)):
            pass


def test_live_run_every_sample_once_and_scheduler_per_step(worker):
    w = worker(samples=20, partitions=3)
    ctx = et.init()
    m, opt = model_opt()
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
    before = [p.detach().clone() for p in m.parameters()]
    seen = []
    n = 0
    for x, y in ctx.steps(et.DataLoader(Data(20), batch_size=4), et.State(model=m, optimizer=opt, scheduler=sched), epochs=2):
        seen += [int(v) for v in x[:, 0]]
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        ctx.record(loss)
        n += 1
    assert sorted(seen) == sorted(list(range(20)) * 2)
    assert len(w.steps) == n and w.applied == n - 1
    ids = [s for ep, rs in w.steps for (p, a, b) in rs for s in range(w.part(p)[0] + a, w.part(p)[0] + b)]
    assert sorted(ids) == sorted(seen)
    assert sched.last_epoch == n, "the package steps the scheduler once per applied step"
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.9 ** n)
    assert any(not torch.equal(a, b) for a, b in zip(before, m.parameters()))
    assert not torch.distributed.is_initialized(), "the group is destroyed at the end"
    assert ctx.finished, "the job's last epoch ended: a program may evaluate its final model"


def test_report_per_step_and_a_validation_loss_per_epoch(worker):
    # ctx.report in the loop: the step of the batch; on_epoch_end's dict:
    # the epochs done at the epoch's last applied step, the last one sent
    # before the step request that ends training.
    w = worker(samples=12, partitions=2)
    ctx = et.init()
    m, opt = model_opt()
    ends = []

    def validate(done):
        ends.append((done, ctx.applied))
        with torch.no_grad():
            x = torch.stack([Data(12)[i][0] for i in range(4)])
            return {"val_loss": float(m(x).pow(2).mean())}

    kept = []
    for x, y in ctx.steps(et.DataLoader(Data(12), batch_size=4), et.State(model=m, optimizer=opt), epochs=2,
                          on_epoch_end=validate):
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        kept.append(ctx.report(loss=loss, lr=opt.param_groups[0]["lr"]))
    n = w.applied + 1
    per_step = [r for r in w.reports if "loss" in r["values"]]
    assert [r["step"] for r in per_step] == list(range(n)), "the implied step is the batch's applied step"
    assert [r["epoch"] for r in per_step] == [0] * (n // 2) + [1] * (n // 2)
    assert all(set(r["values"]) == {"loss", "lr"} for r in per_step) and all(kept)
    val = [r for r in w.reports if "val_loss" in r["values"]]
    assert ends == [(1, n // 2 - 1), (2, n - 1)]
    assert [(r["epoch"], r["step"]) for r in val] == ends
    assert w.ops.index("report", len(w.ops) - 3) < len(w.ops) - 1 and w.ops[-1] == "step", w.ops[-4:]
    assert ctx.last_report["values"].keys() == {"val_loss"}


def test_report_bad_use(worker):
    w = worker(samples=8, partitions=1)
    ctx = et.init()
    m, opt = model_opt()
    with pytest.raises(et.EdlError, match="only while ctx.steps"):
        ctx.report(loss=1.0)
    for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), et.State(model=m, optimizer=opt)):
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        opt.zero_grad()
        with pytest.raises(et.EdlError, match="no metrics given"):
            ctx.report()
        with pytest.raises(et.EdlError, match=r"report\(loss='x'\): want a number"):
            ctx.report(loss="x")
        with pytest.raises(et.EdlError, match=r"report\(step=-1\): want an int >= 0"):
            ctx.report(step=-1, loss=1.0)
        with pytest.raises(et.EdlError, match="a tensor of 2 elements"):
            ctx.report(loss=torch.ones(2))
        # A diverged value is kept, by name (JSON has no NaN): the sweep
        # judges it the worst there is.
        assert ctx.report(loss=float("nan")) is True
        assert ctx.report(loss=float("inf"), acc=0.5) is True
        assert ctx.report(step=100, epoch=3, acc=1) is True
    sent = [(r["values"], r.get("non_finite")) for r in w.reports]
    assert sent == [({}, {"loss": "NaN"}), ({"acc": 0.5}, {"loss": "Infinity"}), ({"acc": 1.0}, None)] * 2, sent
    assert w.reports[2]["step"] == 100 and w.reports[2]["epoch"] == 3
    with pytest.raises(et.EdlError, match="only while ctx.steps"):
        ctx.report(loss=1.0)


def test_on_epoch_end_must_return_a_dict(worker):
    worker(samples=4, partitions=1)
    ctx = et.init()
    m, opt = model_opt()
    with pytest.raises(et.EdlError, match="want a function"):
        next(iter(ctx.steps(et.DataLoader(Data(4), batch_size=4), et.State(model=m, optimizer=opt), on_epoch_end=3)))
    with pytest.raises(et.EdlError, match=r"on_epoch_end\(1\) returned \[0.5\]: want a dict"):
        for x, y in ctx.steps(et.DataLoader(Data(4), batch_size=4), et.State(model=m, optimizer=opt),
                              on_epoch_end=lambda done: [0.5]):
            torch.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
            opt.zero_grad()


def test_user_scheduler_step_and_missing_optimizer_step_are_errors(worker):
    worker(samples=8, partitions=1)
    ctx = et.init()
    m, opt = model_opt()
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
    with pytest.raises(et.EdlError, match="remove this call"):
        for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), et.State(model=m, optimizer=opt, scheduler=sched)):
            torch.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
            sched.step()


def test_forgotten_optimizer_step_is_an_error(worker):
    worker(samples=8, partitions=1)
    ctx = et.init()
    m, opt = model_opt()
    with pytest.raises(et.EdlError, match="call optimizer.step"):
        for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), et.State(model=m, optimizer=opt)):
            torch.nn.functional.cross_entropy(m(x), y).backward()


@pytest.mark.parametrize("policy,batch,want_sizes,lr_factor", [
    ("fixed_global", 4, [4, 4], 1.0),
    ("fixed_local", 4, [4, 4], 0.5),  # world 1 of an initial 2: half the rate
])
def test_batch_policies(worker, policy, batch, want_sizes, lr_factor):
    worker(samples=8, partitions=1, initial_world=2)
    ctx = et.init()
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    sizes = []
    for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=batch, policy=policy), et.State(model=m, optimizer=opt)):
        sizes.append(len(x))
        torch.nn.functional.cross_entropy(m(x), y).backward()
        before = m.weight.detach().clone()
        grad = m.weight.grad.detach().clone()
        opt.step()
        assert torch.allclose(m.weight.detach(), before - 0.1 * lr_factor * grad, atol=1e-6)
        assert opt.param_groups[0]["lr"] == 0.1, "the scheduler-visible rate is unchanged"
        opt.zero_grad()
    assert sizes == want_sizes


def test_unknown_policy():
    with pytest.raises(et.EdlError, match="policy"):
        et.DataLoader(Data(3), batch_size=1, policy="fixed")


@pytest.mark.parametrize("set_to_none", [False, True])
def test_update_is_plain_sgd_and_gradients_are_not_copied(worker, set_to_none):
    """The live step is plain SGD with momentum on the batch (world 1: the
    mean gradient is the rank's own); the gradients become views of one
    flat buffer, the all-reduce's, so no step copies them in or out (with
    set_to_none=True they are copied in once per step)."""
    w = worker(samples=20, partitions=3)
    ctx = et.init()
    m, opt = model_opt()
    ref, ref_opt = model_opt()
    n, losses = 0, []
    for x, y in ctx.steps(et.DataLoader(Data(20), batch_size=4), et.State(model=m, optimizer=opt)):
        loss = torch.nn.functional.cross_entropy(m(x), y)
        losses.append(loss.item() * len(x))
        ctx.record(loss)  # before step(): this step's loss rides in the gradient all-reduce
        loss.backward()
        opt.step()
        bases = {id(p.grad._base) for p in m.parameters()}
        assert len(bases) == 1 and None not in {p.grad._base for p in m.parameters()}, "one flat buffer"
        opt.zero_grad(set_to_none=set_to_none)
        torch.nn.functional.cross_entropy(ref(x), y).backward()
        ref_opt.step()
        ref_opt.zero_grad()
        for a, b in zip(m.parameters(), ref.parameters()):
            assert torch.allclose(a, b, atol=1e-6), "step %d differs from plain SGD" % n
        n += 1
    assert n == 6
    assert w.losses[:n] == pytest.approx(losses, rel=1e-5), "every step reports its summed loss"
    assert w.losses[n:] == [0.0], "the epoch-end step without samples"


WORLD2 = r"""
import datetime, os, sys
import torch, torch.distributed as dist
import edl.torch as et
from edl import protocol
rank, port = int(sys.argv[1]), int(sys.argv[2])
store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=20))
dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=20))
torch.manual_seed(0)
m = torch.nn.Linear(3, 2)
opt = torch.optim.SGD(m.parameters(), lr=1.0)
state = et.State(model=m, optimizer=opt)
ctx = et.Context(None, 20, standalone=True)  # no worker: drive one step by hand
ctx.standalone, ctx.rank, ctx.world = False, rank, 2
ctx._wrap(state)
x = torch.arange(12.0).reshape(4, 3) / 10
y = torch.tensor([0, 1, 1, 0])
mine = slice(0, 3) if rank == 0 else slice(3, 4)  # unequal shares: 3 and 1 samples
share = {"part": rank, "start": 0, "end": 3 if rank == 0 else 1, "first": 0}
meta = [0.0] * protocol.meta_len(2)
n = protocol.fill_meta(meta, rank, share)
out = et._Outcome()
ctx._pending = (meta, n, out)
ctx._start_meta(meta, out, state)
loss = torch.nn.functional.cross_entropy(m(x[mine]), y[mine])
ctx.record(loss)
loss.backward()
opt.step()
assert out.failed is None, out.failed
assert int(out.meta[protocol.COUNT]) == 4, out.meta
torch.manual_seed(0)
ref = torch.nn.Linear(3, 2)
torch.nn.functional.cross_entropy(ref(x), y).backward()  # the global batch's mean gradient
assert torch.allclose(m.weight.grad, ref.weight.grad, atol=1e-6), (m.weight.grad, ref.weight.grad)
assert torch.allclose(m.bias.grad, ref.bias.grad, atol=1e-6)
full = torch.nn.functional.cross_entropy(ref(x[0:3]), y[0:3]).item() * 3 + torch.nn.functional.cross_entropy(ref(x[3:4]), y[3:4]).item()
assert abs(out.loss - full) < 1e-4, (out.loss, full)
dist.destroy_process_group()
print("ok", rank)
"""


def test_world_of_two_averages_by_sample_count(tmp_path):
    """Two ranks with 3 and 1 samples: the gradient after step() is the
    4-sample batch's mean gradient, the metadata and the summed loss come
    back from the (asynchronous) metadata and gradient all-reduces."""
    import subprocess
    import sys as _sys
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    p = port.getsockname()[1]
    port.close()
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."), OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([_sys.executable, "-c", WORLD2, str(r), str(p)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) for r in range(2)]
    outs = [pr.communicate(timeout=60)[0].decode() for pr in procs]
    for r, (pr, o) in enumerate(zip(procs, outs)):
        assert pr.returncode == 0 and ("ok %d" % r) in o, o


def test_loss_recorded_after_step_is_reported(worker):
    """ctx.record(loss) after opt.step() (the documented order): the step
    reports this rank's own mean times the step's samples, not 0."""
    w = worker(samples=8, partitions=1)
    ctx = et.init()
    m, opt = model_opt()
    losses = []
    for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), et.State(model=m, optimizer=opt)):
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        ctx.record(loss)
        losses.append(loss.item() * len(x))
    assert w.losses[:2] == pytest.approx(losses, rel=1e-6) and all(v > 0 for v in losses)


def test_diverged_loss_is_sent_by_name(worker):
    """A NaN or infinite loss (a diverged run goes on, as under plain
    torch) travels by name: JSON has no such numbers, and the worker's
    decoder refused the bare NaN that json.dumps writes."""
    w = worker(samples=12, partitions=1)
    ctx = et.init()
    m, opt = model_opt()
    for i, (x, y) in enumerate(ctx.steps(et.DataLoader(Data(12), batch_size=4), et.State(model=m, optimizer=opt))):
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        ctx.record([float("nan"), float("inf"), float("-inf")][i])
    assert w.losses[:3] == ["NaN", "Infinity", "-Infinity"], w.losses
    assert ctx.finished


class ScriptedGens(FakeWorker):
    """A FakeWorker whose generations before the last are of world 2 with a
    peer that never comes (rank 0: this program's own store); latest says
    whether a newer one replaced the one being set up."""

    def __init__(self, path, lonely, superseded, timeout_s):
        super().__init__(path, 12, 2)
        self.lonely, self.superseded, self.timeout_s = lonely, superseded, timeout_s

    def handle(self, req):
        op = req["op"]
        if op == "hello":
            rep = super().handle(req)
            rep["timeout_s"] = self.timeout_s
            return rep
        if op == "latest":
            return {"gen": req["gen"] + 1 if self.superseded else req["gen"]}
        if op in ("failed", "fallback"):
            return {}
        if op == "gen":
            gen = req["after"] + 1
            if gen > self.lonely + 1:
                return {"action": "done"}
            world = 2 if gen <= self.lonely else 1
            return {"action": "run", "gen": gen, "rank": 0, "world": world, "root": 0, "master_addr": "127.0.0.1",
                    "master_port": self.port, "have": True, "applied": self.applied, "epoch": 0,
                    "progress": {"applied": -1, "epoch": 0}}
        return super().handle(req)


def train(ctx):
    m, opt = model_opt()
    seen = []
    for x, y in ctx.steps(et.DataLoader(Data(12), batch_size=4), et.State(model=m, optimizer=opt)):
        seen += [int(v) for v in x[:, 0]]
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        opt.zero_grad()
    return seen


def test_setup_gives_up_at_once_on_a_newer_generation(tmp_path, monkeypatch):
    # A member that skipped generation 1 never comes: the program must not
    # wait out the timeout (the members would keep missing each other's
    # setups) nor report the generation broken, but join the newer one.
    path = str(tmp_path / "edl.sock")
    w = ScriptedGens(path, lonely=1, superseded=True, timeout_s=30)
    monkeypatch.setenv("EDL_SOCKET", path)
    ctx = et.init()
    seen = train(ctx)
    assert sorted(seen) == list(range(12))
    assert "latest" in w.ops and "failed" not in w.ops and "fallback" not in w.ops, w.ops
    assert ctx.stats["failures"] == 0


def test_setups_missing_a_peer_do_not_ask_for_the_fallback(tmp_path, monkeypatch):
    # A peer that never arrives fails the setup after the timeout, reported
    # as broken; it is not the in-process re-initialisation failing, so as
    # many such setups as MAX_INIT_FAILURES do not restart the program.
    path = str(tmp_path / "edl.sock")
    w = ScriptedGens(path, lonely=et.MAX_INIT_FAILURES, superseded=False, timeout_s=1)
    monkeypatch.setenv("EDL_SOCKET", path)
    ctx = et.init()
    seen = train(ctx)
    assert sorted(seen) == list(range(12))
    assert w.ops.count("failed") == et.MAX_INIT_FAILURES and "fallback" not in w.ops, w.ops


@pytest.mark.parametrize("backend,err,peer", [
    ("gloo", RuntimeError("Socket Timeout"), True),
    ("gloo", RuntimeError("[./gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:14726: Connection reset by peer"), True),
    ("gloo", RuntimeError("Connection refused"), True),
    ("gloo", RuntimeError("Timed out waiting 5000ms for send operation to complete"), True),
    ("gloo", RuntimeError("EDL_TEST_FAIL_REINIT: re-initialisation in process disabled (setup 2 of this process)"), False),
    ("gloo", RuntimeError("unexpected backend error"), False),
    ("nccl", RuntimeError("Socket Timeout"), False),
    ("nccl", RuntimeError("NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error"), False),
])
def test_peer_failures_count_toward_the_larger_bound(backend, err, peer):
    # Under load or repeated kills, three gloo setups in a row failing on
    # a store timeout switched whole jobs to restart mode: a failure a
    # peer explains counts toward MAX_PEER_FAILURES, not MAX_INIT_FAILURES.
    assert et._peer_failure(backend, err) is peer
    assert et.MAX_PEER_FAILURES > et.MAX_INIT_FAILURES


def test_setup_timeout_doubles_after_timed_out_setups_and_is_bounded():
    # The job's timeout while setups succeed; doubled per setup in a row that
    # a peer or the load explains; never past SETUP_TIMEOUT_MAX_S, never below
    # the job's own (a job that asks for more keeps it).
    assert et.setup_timeout(5, 0) == 5
    assert [et.setup_timeout(5, n) for n in range(1, 5)] == [10, 20, et.SETUP_TIMEOUT_MAX_S, et.SETUP_TIMEOUT_MAX_S]
    assert et.setup_timeout(5, 1000) == et.SETUP_TIMEOUT_MAX_S
    assert et.setup_timeout(60, 3) == 60
