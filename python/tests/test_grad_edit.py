"""Editing the gradients between backward and optimizer.step(): clipping
(clip_grad_norm_, clip_grad_value_, GradScaler.unscale_ first) and
ctx.average_gradients() act on the averaged gradients, as under
DistributedDataParallel, which averages during backward."""

import pytest
import torch

import edl.torch as et
from fakeworker import Data, FakeWorker
from worlds import world_of_two


def _world_of_two(mode):
    return world_of_two("grad_edit_world.py", mode)


@pytest.mark.parametrize("mode", ["norm", "value", "accum", "explicit", "zero", "scaler", "overflow", "zero_overflow"])
def test_edits_between_backward_and_step_see_the_averaged_gradients(mode):
    """Two gloo ranks with 3 and 1 samples of every batch (mode zero: 4 and
    0) edit their gradients before step(); after every step each rank's
    model equals plain PyTorch doing what DDP does on the global batch:
    average, then clip (or the edit), then step. Before, the clip acted on
    each rank's own gradients and the models differed from the first
    step."""
    procs, outs = _world_of_two(mode)
    for r, (pr, o) in enumerate(zip(procs, outs)):
        assert pr.returncode == 0 and ("ok %d" % r) in o, o


def test_a_backward_after_the_average_is_refused():
    """One average per step: a backward after the clip (the gradients are
    averaged already) would add this rank's own gradients that no rank
    averages: an EdlError, on every rank that does it."""
    procs, outs = _world_of_two("backward_after")
    for r, (pr, o) in enumerate(zip(procs, outs)):
        assert pr.returncode == 0 and ("ok %d refused" % r) in o, o


def test_a_peer_dying_during_the_early_average_discards_the_step():
    """Rank 1 dies between the metadata and the gradient all-reduce: rank
    0's clip_grad_norm_ meets the failed collective; it returns (the clip
    acts on this rank's own gradients, harmlessly), opt.step() updates
    nothing, no hang and no exception: the step is discarded as when the
    collective fails in step()."""
    procs, outs = _world_of_two("fail")
    assert procs[0].returncode == 0 and "ok 0 failed:" in outs[0], outs[0]


class FailOnce(FakeWorker):
    """A FakeWorker that answers `failed` and then runs a second
    generation (the survivors go on from their own state)."""

    def handle(self, req):
        op = req["op"]
        if op == "failed":
            self.failed = req
            return {}
        if op == "gen" and req["after"] == 1 and not hasattr(self, "gen2"):
            self.gen2 = True
            return {"action": "run", "gen": 2, "rank": 0, "world": 1, "root": 0, "master_addr": "127.0.0.1",
                    "master_port": self.port, "have": True, "applied": self.applied, "epoch": self.epoch,
                    "progress": {"applied": self.applied, "epoch": self.epoch}}
        if op == "gen" and req["after"] >= 2:
            return {"action": "done"}
        return super().handle(req)


def _make():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    return m, torch.optim.SGD(m.parameters(), lr=0.5, momentum=0.9)


def test_failed_early_average_follows_the_step_failure_path(tmp_path, monkeypatch):
    """Under a (fake) worker: the gradient all-reduce that clip_grad_norm_
    starts fails at the second batch. The program goes on (clip and step
    return), the package reports `failed`, the next generation redoes that
    batch, and the model is that of plain PyTorch clipping every batch once:
    the failed step left no trace."""
    path = str(tmp_path / "edl.sock")
    w = FailOnce(path, 12, 1)
    monkeypatch.setenv("EDL_SOCKET", path)
    real, calls = et.dist.all_reduce, []

    def all_reduce(t, *a, **k):
        if t.dtype == torch.float32:  # the gradient all-reduce (the metadata's is float64)
            calls.append(t.numel())
            if len(calls) == 2:
                raise RuntimeError("Connection closed by peer (injected)")
        return real(t, *a, **k)

    monkeypatch.setattr(et.dist, "all_reduce", all_reduce)
    ctx = et.init()
    m, opt = _make()
    seen = []
    for x, y in ctx.steps(et.DataLoader(Data(12), batch_size=4), et.State(model=m, optimizer=opt)):
        seen.append([int(v) for v in x[:, 0]])
        torch.nn.functional.cross_entropy(m(x), y).backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 0.05)
        opt.step()
        opt.zero_grad()
    assert seen == [[0, 1, 2, 3], [4, 5, 6, 7], [4, 5, 6, 7], [8, 9, 10, 11]], seen
    assert "Connection closed" in w.failed["error"] and ctx.stats["failures"] == 1
    assert len(calls) == 4, "one gradient all-reduce per batch (the clip's), none in step()"
    ref, ref_opt = _make()
    for s in range(3):
        x, y = torch.utils.data.default_collate([Data(12)[i] for i in range(4 * s, 4 * s + 4)])
        torch.nn.functional.cross_entropy(ref(x), y).backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.05)
        ref_opt.step()
        ref_opt.zero_grad()
    for a, b in zip(ref.parameters(), m.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


def test_clip_of_other_parameters_and_outside_the_loop_is_plain_torch(worker_sock):
    """The clip functions stay torch's own outside a step or on tensors
    that the wrapped optimizer does not train (no collective)."""
    m, _ = _make()
    other = torch.nn.Linear(2, 2)
    other(torch.ones(1, 2)).sum().backward()
    g = other.weight.grad.clone()
    n = torch.nn.utils.clip_grad_norm_(other.parameters(), 1e-3)
    assert float(n) > 1e-3 and not torch.equal(g, other.weight.grad)
    ctx = et.init()
    m, opt = _make()
    avg = []
    for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), et.State(model=m, optimizer=opt)):
        torch.nn.functional.cross_entropy(m(x), y).backward()
        out = ctx._pending[2]
        torch.nn.utils.clip_grad_value_(other.parameters(), 0.1)
        avg.append(out.averaged)
        torch.nn.utils.clip_grad_value_(iter(m.parameters()), 0.1)  # a generator, as model.parameters()
        avg.append(out.averaged)
        torch.nn.utils.clip_grad_value_(m[0].weight, 0.1)  # a single tensor: averaged already, no second one
        opt.step()
        opt.zero_grad()
    assert avg == [False, True, False, True]


def test_average_gradients_bad_use(worker_sock):
    ctx = et.init()
    m, opt = _make()
    with pytest.raises(et.EdlError, match=r"average_gradients\(\): only inside"):
        ctx.average_gradients()
    for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), et.State(model=m, optimizer=opt)):
        torch.nn.functional.cross_entropy(m(x), y).backward()
        assert ctx.average_gradients() is True
        assert ctx.average_gradients() is True  # once per step: the second does nothing
        opt.step()
        with pytest.raises(et.EdlError, match=r"after optimizer.step\(\)"):
            ctx.average_gradients()
        opt.zero_grad()


def test_clip_bound_before_edl_was_imported_is_warned(worker_sock):
    """`from torch.nn.utils import clip_grad_norm_` before `import
    edl.torch` holds torch's own function, which the package cannot see:
    steps() says so (the clip would act on this rank's own gradients)."""
    globals()["early_clip"] = et._TORCH_CLIP["clip_grad_norm_"]
    try:
        ctx = et.init()
        m, opt = _make()
        with pytest.warns(RuntimeWarning, match=r"early_clip.*before edl.torch was imported"):
            for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), et.State(model=m, optimizer=opt)):
                torch.nn.functional.cross_entropy(m(x), y).backward()
                opt.step()
                opt.zero_grad()
    finally:
        del globals()["early_clip"]


@pytest.fixture
def worker_sock(tmp_path, monkeypatch):
    path = str(tmp_path / "edl.sock")
    w = FakeWorker(path, 8, 1)
    monkeypatch.setenv("EDL_SOCKET", path)
    return w

