"""edl.torch with the habits of PyTorch programs written elsewhere: frozen
and sparse parameters, schedulers, loops left early, torch DataLoader
arguments (against the fake worker, as test_torch.py)."""

import warnings

import pytest
import torch

import edl.torch as et

from fakeworker import Data, model_opt


def _plain_torch_steps(make, data, batch, steps):
    """The same model trained by plain PyTorch on the same batches."""
    m, opt = make()
    for s in range(steps):
        x, y = torch.utils.data.default_collate([data[i] for i in range(s * batch, (s + 1) * batch)])
        m(x, y).backward()
        opt.step()
        opt.zero_grad()
    return m


class FrozenBackbone(torch.nn.Module):
    """A fine-tuned model: a frozen backbone (and an integer parameter,
    frozen by nature) under a trained head."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.backbone, self.head = torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)
        self.backbone.requires_grad_(False)
        self.vocab = torch.nn.Parameter(torch.arange(5), requires_grad=False)

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.head(self.backbone(x)), y)


def test_frozen_parameters_stay_frozen(worker):
    """Parameters with requires_grad False get no gradient, as in plain
    PyTorch: weight decay and momentum leave them alone (before, edl gave
    them zero gradients, so weight decay shrank the frozen backbone and
    SGD failed on the integer parameter)."""
    def make():
        m = FrozenBackbone()
        return m, torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)

    w = worker(samples=12, partitions=1)
    ctx = et.init()
    m, opt = make()
    frozen = [p.detach().clone() for p in (m.backbone.weight, m.backbone.bias, m.vocab)]
    for x, y in ctx.steps(et.DataLoader(Data(12), batch_size=4), et.State(model=m, optimizer=opt)):
        m(x, y).backward()
        opt.step()
        opt.zero_grad()
    assert w.applied == 2
    for a, b in zip(frozen, (m.backbone.weight, m.backbone.bias, m.vocab)):
        assert torch.equal(a, b) and b.grad is None
    ref = _plain_torch_steps(make, Data(12), 4, 3)
    for a, b in zip(ref.parameters(), m.parameters()):
        assert torch.allclose(a, b), "the trained head moves as under plain PyTorch"


class SparseData(Data):
    def __getitem__(self, i):
        return torch.tensor([i % 7, (i * 3) % 7]), torch.tensor(i % 2)


class SparseBag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.EmbeddingBag(7, 2, sparse=True)

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.emb(x), y)


@pytest.mark.parametrize("optim", ["sgd", "sparse_adam"])
def test_sparse_gradients_are_averaged(worker, optim):
    """An nn.Embedding(sparse=True) gets sparse gradients: edl averages
    them (dense in the all-reduce) and hands them back sparse, so SGD and
    SparseAdam step as under plain PyTorch. Before, the flattening raised
    inside the step's collective, the step counted as failed, and under a
    worker the job formed new generations thousands of times a second."""
    def make():
        m = SparseBag()
        if optim == "sgd":
            return m, torch.optim.SGD(m.parameters(), lr=0.5)
        return m, torch.optim.SparseAdam(list(m.parameters()), lr=0.1)

    w = worker(samples=12, partitions=1)
    ctx = et.init()
    m, opt = make()
    for x, y in ctx.steps(et.DataLoader(SparseData(12), batch_size=4), et.State(model=m, optimizer=opt)):
        m(x, y).backward()
        opt.step()
        assert m.emb.weight.grad.is_sparse
        opt.zero_grad()
    assert w.applied == 2 and "failed" not in w.ops
    ref = _plain_torch_steps(make, SparseData(12), 4, 3)
    assert torch.allclose(ref.emb.weight, m.emb.weight, atol=1e-6)


def test_steps_twice_and_init_twice_are_errors(worker):
    """One loop per program, one init() per worker connection: a second
    steps() (an epoch loop around steps(epochs=1)) raised BrokenPipeError
    at its hello under a real worker, or hung; a second init() left its
    hello unanswered forever."""
    worker(samples=8, partitions=1)
    ctx = et.init()
    with pytest.raises(et.EdlError, match=r"init\(\) was called a second time.*pass the Context"):
        et.init()
    m, opt = model_opt()
    state = et.State(model=m, optimizer=opt)
    for epoch in range(2):
        if epoch == 1:
            with pytest.raises(et.EdlError, match=r"steps\(\) was called a second time \(the first one ended: done\).*epochs=N"):
                next(iter(ctx.steps(et.DataLoader(Data(8), batch_size=4), state)))
            break
        for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), state):
            torch.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
            opt.zero_grad()


def test_leaving_the_loop_early_says_so(worker, capfd):
    """A break out of ctx.steps() (a max-steps habit) ends the program's
    part before the job ends: its worker takes the exit for a failure, so
    the program says why on stderr (the job's reason quotes its tail)."""
    worker(samples=16, partitions=1)
    ctx = et.init()
    m, opt = model_opt()
    for i, (x, y) in enumerate(ctx.steps(et.DataLoader(Data(16), batch_size=4), et.State(model=m, optimizer=opt))):
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        opt.zero_grad()
        if i == 1:
            break
    err = capfd.readouterr().err
    assert "left its ctx.steps() loop before training ended (a break" in err and "last applied step 0" in err, err
    assert ctx.ended is None and not ctx.finished


def test_scheduler_sees_no_overridden_optimizer_step(worker):
    """edl wraps optimizer.step(); the wrapper carries the marks an LR
    scheduler checks, so torch does not warn at every run that
    "optimizer.step() has been overridden after learning rate scheduler
    initialization" (the program did nothing wrong)."""
    worker(samples=8, partitions=1)
    ctx = et.init()
    m, opt = model_opt()
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for x, y in ctx.steps(et.DataLoader(Data(8), batch_size=4), et.State(model=m, optimizer=opt, scheduler=sched)):
            torch.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
            opt.zero_grad()
    assert not [str(w.message) for w in seen if "optimizer.step()" in str(w.message)]
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5 ** 2)


def test_plateau_scheduler_is_refused_with_what_to_do():
    """ReduceLROnPlateau steps with a metric: as State's scheduler it
    failed at the first applied step with "step() missing 1 required
    positional argument: 'metrics'"; it is refused up front, and as an
    extra (stepped by the program) it is accepted."""
    m, opt = model_opt()
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
    with pytest.raises(et.EdlError, match=r"State\(scheduler=ReduceLROnPlateau\): its step\(\) takes a metric.*extra"):
        et.State(model=m, optimizer=opt, scheduler=plateau)
    et.State(model=m, optimizer=opt, plateau=plateau)


class Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(range(4))

    def __len__(self):
        return 4


class WithBatchSize(Data):
    batch = 4  # an attribute, not the batch(ids) method edl calls


@pytest.mark.parametrize("kwargs,err", [
    ({"shuffle": True}, r"DataLoader\(shuffle=...\): edl's DataLoader has no shuffle: edl decides.*remove it"),
    ({"num_workers": 4}, r"no num_workers: the batch of a step is known only when the step starts"),
    ({"drop_last": True}, r"no drop_last: every sample of an epoch is in exactly one step"),
    ({"pin_memory": True, "persistent_workers": True}, r"no pin_memory"),
    ({"batch_szie": 2}, r"DataLoader\(batch_szie=...\): unknown argument"),
])
def test_dataloader_refuses_torch_habits_saying_why(kwargs, err):
    with pytest.raises(et.EdlError, match=err):
        et.DataLoader(Data(8), batch_size=4, **kwargs)


def test_dataloader_data_set_shapes():
    with pytest.raises(et.EdlError, match="Stream is an IterableDataset.*map-style"):
        et.DataLoader(Stream(), batch_size=2)
    x, y = et.DataLoader(WithBatchSize(8), batch_size=2).batch(range(2, 4))
    assert x[:, 0].tolist() == [2.0, 3.0]
    with pytest.raises(et.EdlError, match=r"batch_size=True"):
        et.DataLoader(Data(8), batch_size=True)
