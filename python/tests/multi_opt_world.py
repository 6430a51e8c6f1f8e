#!/usr/bin/python3
"""One rank of a 2-rank gloo group training with two optimizers (tests
only; test_multi_opt.py runs it).

    /usr/bin/python3 python/tests/multi_opt_world.py RANK PORT MODE

The package's step is driven by hand (no worker), as in grad_edit_world.py:
rank 0 has 3 samples of every 4-sample global batch, rank 1 one (MODEs
ending in "_zero": rank 0 all 4, rank 1 none, so rank 1 takes part in the
step without a batch, as _generation does). After every step both ranks
compare their model and both optimizers' state with plain PyTorch doing
what DistributedDataParallel does on the global batch: each optimizer
steps on the mean gradient of its parameters. Prints "ok RANK" at the end.

MODEs: "gan" a generator and a discriminator, State(optimizer=[opt_d,
opt_g]): D steps (SGD with momentum), then G's loss goes through the
updated D and G steps (Adam); "joint" an encoder and a decoder under one
loss, clip_grad_norm_ of each before the steps (both averaged before the
first step), State(optimizers=[opt_e, opt_d]); "gan_zero", "joint_zero" the
same with rank 1 empty; "fail": rank 1 dies after D's gradient all-reduce,
rank 0's G all-reduce fails and D's update is undone.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import edl.torch as et  # noqa: E402
from worlds import hand_driven, join, start_step, step_without_batch  # noqa: E402

rank, mode = join()

STEPS, MAX_NORM = 4, 0.05
torch.manual_seed(1)
X = torch.randn(4 * STEPS, 5)
Z = torch.randn(4 * STEPS, 3)
bce = torch.nn.functional.binary_cross_entropy_with_logits


def make():
    torch.manual_seed(0)
    m = torch.nn.ModuleDict({
        "g": torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.Tanh(), torch.nn.Linear(6, 5)),
        "d": torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)),
    })
    first = torch.optim.SGD(m["d" if mode.startswith(("gan", "fail")) else "g"].parameters(), lr=0.3, momentum=0.9)
    second = torch.optim.Adam(m["g" if mode.startswith(("gan", "fail")) else "d"].parameters(), lr=0.05)
    return m, first, second


def batch(m, o1, o2, x, z, ctx=None):
    """One batch of the program: both optimizers step once, in order."""
    if mode.startswith(("gan", "fail")):
        o1.zero_grad()
        loss_d = bce(m["d"](x), torch.ones(len(x), 1)) + bce(m["d"](m["g"](z).detach()), torch.zeros(len(x), 1))
        loss_d.backward()
        o1.step()
        if mode == "fail":
            return
        o2.zero_grad()
        bce(m["d"](m["g"](z)), torch.ones(len(x), 1)).backward()  # through the updated D
        o2.step()
    else:
        o1.zero_grad()
        o2.zero_grad()
        torch.nn.functional.mse_loss(m["d"](m["g"](z)), x).backward()
        torch.nn.utils.clip_grad_norm_(m["g"].parameters(), MAX_NORM)
        torch.nn.utils.clip_grad_norm_(m["d"].parameters(), MAX_NORM)
        o1.step()
        o2.step()


def snapshot(m, o1, o2):
    st = [v.clone() for o in (o1, o2) for s in o.state.values() for v in s.values() if torch.is_tensor(v)]
    return [p.detach().clone() for p in m.parameters()] + st


def reference():
    m, o1, o2 = make()
    out = []
    for s in range(STEPS):
        batch(m, o1, o2, X[4 * s:4 * s + 4], Z[4 * s:4 * s + 4])
        out.append(snapshot(m, o1, o2))
    return out


ref = reference()
m, o1, o2 = make()
state = et.State(model=m, optimizer=[o1, o2]) if mode.startswith(("gan", "fail")) else et.State(model=m, optimizers=[o1, o2])
ctx = hand_driven(state, rank)
for s in range(STEPS):
    x, z = X[4 * s:4 * s + 4], Z[4 * s:4 * s + 4]
    mine, n, out = start_step(ctx, state, rank, zero=mode.endswith("_zero"))
    k = mine.stop - mine.start
    if mode == "fail":
        before = snapshot(m, o1, o2)
        if rank == 1:
            batch(m, o1, o2, x[mine], z[mine])  # D's all-reduce and update
            os._exit(0)  # dies before G's all-reduce
        batch(m, o1, o2, x[mine], z[mine])
        assert out.failed is None and out.n_done == 1
        o2.zero_grad()
        bce(m["d"](m["g"](z[mine])), torch.ones(k, 1)).backward()
        o2.step()  # its all-reduce fails: the step is discarded, D's update undone
        assert out.failed is not None, "G's all-reduce should have failed"
        after = snapshot(m, o1, o2)
        assert len(after) == len(before) and all(torch.equal(a, b) for a, b in zip(before, after)), \
            "a failed step leaves the state of before it"
        print("ok", rank, "failed:", type(out.failed).__name__)
        sys.exit(0)
    if n == 0:
        step_without_batch(ctx, state)
    else:
        batch(m, o1, o2, x[mine], z[mine], ctx)
        ctx._batch_done(out)
    assert out.failed is None, out.failed
    got = snapshot(m, o1, o2)
    assert len(got) == len(ref[s]), (len(got), len(ref[s]))
    for a, b in zip(got, ref[s]):
        assert torch.allclose(a, b, atol=1e-5), ("step", s, a, b)
dist.destroy_process_group()
print("ok", rank)
