"""Several optimizers (a GAN's generator and discriminator, an encoder and a
decoder): State(optimizer=[...]) averages each one's gradients at its step,
hands every one's state over and checkpoints it; an optimizer that is not
the State's and steps the model's parameters inside the loop is an error."""

import pytest
import torch

import edl.torch as et
from fakeworker import Data, FakeWorker  # noqa: F401
from worlds import world_of_two


def _world_of_two(mode):
    return world_of_two("multi_opt_world.py", mode)


@pytest.mark.parametrize("mode", ["gan", "joint", "gan_zero", "joint_zero"])
def test_two_optimizers_match_ddp(mode):
    """Two gloo ranks (3 and 1 samples of every batch; _zero: 4 and 0) with
    two optimizers: after every step each rank's model and both
    optimizers' state equal plain PyTorch on the global batch (each
    optimizer steps on its parameters' mean gradient, as under DDP).
    Before, State took one optimizer: the second stepped on each rank's own
    gradients and the ranks' models drifted apart."""
    procs, outs = _world_of_two(mode)
    for r, (pr, o) in enumerate(zip(procs, outs)):
        assert pr.returncode == 0 and ("ok %d" % r) in o, o


def test_a_failed_collective_after_the_first_update_undoes_it():
    """Rank 1 dies after D's gradient all-reduce: rank 0 has updated D, then
    G's all-reduce fails. The step is discarded (failed) and rank 0's model
    and both optimizers' state are those of before the step, as with one
    optimizer (a failed step updates nothing)."""
    procs, outs = _world_of_two("fail")
    assert procs[0].returncode == 0 and "ok 0 failed:" in outs[0], outs[0]


def _gan():
    torch.manual_seed(0)
    m = torch.nn.ModuleDict({"g": torch.nn.Linear(3, 3), "d": torch.nn.Linear(3, 2)})
    return (m, torch.optim.SGD(m["d"].parameters(), lr=0.1, momentum=0.9),
            torch.optim.Adam(m["g"].parameters(), lr=0.01))


def _two_steps(m, od, og, x, y):
    od.zero_grad()
    torch.nn.functional.cross_entropy(m["d"](x), y).backward()
    od.step()
    og.zero_grad()
    torch.nn.functional.cross_entropy(m["d"](m["g"](x)), y).backward()
    og.step()


def test_second_optimizer_outside_the_state_is_an_error(worker):
    """A second optimizer on the model's parameters stepping in the loop
    (passed as an extra, or just used): an EdlError saying to list it in
    the State, never a silent drift. The same optimizer outside the loop,
    and an optimizer of another model inside it, are torch's own."""
    m, od, og = _gan()
    with pytest.raises(et.EdlError, match=r"optimizer=\[opt, opt_g\]"):
        et.State(model=m, optimizer=od, opt_g=og)
    other = torch.nn.Linear(3, 2)
    o_other = torch.optim.SGD(other.parameters(), lr=0.1)
    x, y = torch.ones(2, 3), torch.tensor([0, 1])
    torch.nn.functional.cross_entropy(m["d"](m["g"](x)), y).backward()
    og.step()  # before the loop: torch's own
    w = worker(samples=8, partitions=1)
    ctx = et.init()
    with pytest.raises(et.EdlError, match=r"not the State's.*optimizer=\[opt_a, opt_b\]"):
        for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), et.State(model=m, optimizer=od)):
            torch.nn.functional.cross_entropy(other(x), y).backward()
            o_other.step()  # another model's optimizer: fine
            od.zero_grad()
            torch.nn.functional.cross_entropy(m["d"](x), y).backward()
            od.step()
            og.zero_grad()
            torch.nn.functional.cross_entropy(m["d"](m["g"](x)), y).backward()
            og.step()
    assert w.applied == -1
    assert "step" not in og.__dict__, "the guard is gone with the loop"
    og.step()  # after the loop: torch's own again


def test_two_optimizers_in_one_process_and_their_order(worker):
    """Under a (fake) worker, world of one: both optimizers step as in plain
    PyTorch; the scheduler of the second steps once per applied step; a
    step out of the State's order or a missing one is an EdlError."""
    m, od, og = _gan()
    sched = torch.optim.lr_scheduler.StepLR(og, step_size=1, gamma=0.5)
    worker(samples=8, partitions=1)
    ctx = et.init()
    for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), et.State(model=m, optimizer=[od, og], scheduler=sched)):
        _two_steps(m, od, og, x, y)
    ref, rd, rg = _gan()
    rs = torch.optim.lr_scheduler.StepLR(rg, step_size=1, gamma=0.5)
    for s in range(2):
        x, y = torch.utils.data.default_collate([Data(8)[i] for i in range(4 * s, 4 * s + 4)])
        _two_steps(ref, rd, rg, x, y)
        rs.step()
    for a, b in zip(ref.parameters(), m.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
    assert og.param_groups[0]["lr"] == rg.param_groups[0]["lr"] == 0.0025


def test_two_optimizers_out_of_order_is_an_error(tmp_path, monkeypatch):
    m, od, og = _gan()
    path = str(tmp_path / "edl.sock")
    FakeWorker(path, 8, 1)
    monkeypatch.setenv("EDL_SOCKET", path)
    ctx = et.init()
    with pytest.raises(et.EdlError, match="out of order"):
        for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), et.State(model=m, optimizer=[od, og])):
            torch.nn.functional.cross_entropy(m["d"](m["g"](x)), y).backward()
            og.step()
            od.step()


def test_state_checks_several_optimizers():
    m, od, og = _gan()
    with pytest.raises(et.EdlError, match="both hold one parameter"):
        et.State(model=m, optimizer=[od, torch.optim.SGD(m["d"].parameters(), lr=0.1)])
    with pytest.raises(et.EdlError, match="ModuleDict"):
        et.State(model=m["d"], optimizer=[od, og])
    with pytest.raises(et.EdlError, match="one of them"):
        et.State(model=m, optimizer=od, optimizers=[od, og])
    # An optimizer of another model as an extra stays allowed (it travels with the state).
    other = torch.nn.Linear(2, 2)
    et.State(model=m, optimizer=[od, og], other_opt=torch.optim.SGD(other.parameters(), lr=0.1))


def test_both_optimizers_travel_in_the_state_and_checkpoints(tmp_path):
    """A newcomer's hand-over and a checkpoint are State.state_dict(): both
    optimizers' state (and both schedulers') go in and come back."""
    from edl import ckpt
    m, od, og = _gan()
    sd = torch.optim.lr_scheduler.StepLR(od, step_size=1, gamma=0.5)
    sg = torch.optim.lr_scheduler.StepLR(og, step_size=1, gamma=0.1)
    st = et.State(model=m, optimizer=[od, og], scheduler=[sd, sg])
    x, y = torch.ones(4, 3), torch.tensor([0, 1, 1, 0])
    for _ in range(2):
        _two_steps(m, od, og, x, y)
        sd.step()
        sg.step()
    saver = ckpt.Saver()
    path = str(tmp_path / "c.pt")
    saver.save(st, path, 1, background=False)
    m2, od2, og2 = _gan()
    sd2 = torch.optim.lr_scheduler.StepLR(od2, step_size=1, gamma=0.5)
    sg2 = torch.optim.lr_scheduler.StepLR(og2, step_size=1, gamma=0.1)
    st2 = et.State(model=m2, optimizer=[od2, og2], scheduler=[sd2, sg2])
    assert ckpt.load(path, st2, 1) == 1
    for a, b in zip(m.parameters(), m2.parameters()):
        assert torch.equal(a, b)
    for o, o2 in ((od, od2), (og, og2)):
        assert o.param_groups[0]["lr"] == o2.param_groups[0]["lr"]
        for p, p2 in zip(m.parameters(), m2.parameters()):
            for k, v in o.state.get(p, {}).items():
                assert torch.equal(torch.as_tensor(v), torch.as_tensor(o2.state[p2][k])), k
    assert og2.state and od2.state, "both optimizers' state came back"
    assert sg2.last_epoch == 2 and sd2.last_epoch == 2
    m1 = _gan()[0]
    one = et.State(model=m1, optimizer=torch.optim.SGD(m1.parameters(), lr=0.1))
    with pytest.raises(et.EdlError, match="holds 2 optimizers, this State has 1"):
        ckpt.load(path, one, 1)
