#!/usr/bin/python3
"""One rank of a 2-rank gloo group that edits its gradients between
backward and optimizer.step() (tests only; test_grad_edit.py runs it).

    /usr/bin/python3 python/tests/grad_edit_world.py RANK PORT MODE

The package's step is driven by hand (no worker), as in test_torch.py's
WORLD2: rank 0 has 3 samples of every 4-sample global batch, rank 1 one
(MODE "zero": rank 0 all 4, rank 1 none, so rank 1 takes part in the step
without a batch, as _generation does). After every step both ranks compare
their model with plain PyTorch doing what DistributedDataParallel does on
the global batch: the mean gradient first, then the edit, then the step.
Prints "ok RANK" at the end.

MODEs: "norm" clip_grad_norm_, "value" clip_grad_value_, "accum" two
backwards per batch then clip_grad_norm_, "explicit" ctx.average_gradients()
then a hand edit of p.grad, "zero" as "norm" with rank 1 empty, "scaler"
GradScaler's unscale_ then clip_grad_norm_ (a CPU stand-in for CUDA's
unscale kernel, the package's hook is the real one), "overflow" as
"scaler" with an infinite gradient on rank 1 only at step 1 (both ranks
skip that update, as under DDP), "zero_overflow" the same on rank 0 with
rank 1 empty (it skips with rank 0), "backward_after" a backward after the
clip (an EdlError), "fail" rank 1 dies after the metadata all-reduce of
the first step: rank 0's clip meets the failed gradient all-reduce.
"""

import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.cuda.amp.grad_scaler import _refresh_per_optimizer_state  # noqa: E402

import edl.torch as et  # noqa: E402
from worlds import hand_driven, join, start_step, step_without_batch  # noqa: E402

# The habit "from torch.nn.utils import clip_grad_norm_" after edl.torch's import.
from torch.nn.utils import clip_grad_norm_  # noqa: E402

rank, mode = join()

SCALED = ("scaler", "overflow", "zero_overflow")
STEPS, MAX_NORM, MAX_VALUE, LR = 4, 0.05, 0.02, 0.5
torch.manual_seed(1)
X = torch.randn(4 * STEPS, 5) * 3
Y = torch.randint(0, 3, (4 * STEPS,))


def make():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    return m, torch.optim.SGD(m.parameters(), lr=LR, momentum=0.9)


class CPUScaler(torch.cuda.amp.GradScaler):
    """GradScaler with its CUDA kernels done on the CPU: unscale_, step and
    update are torch's own (with the package's hook on unscale_)."""

    def __init__(self):
        super().__init__(enabled=False)  # enabled=True without CUDA warns and disables itself
        self._enabled, self._init_scale, self._scale = True, 1024.0, None
        self._growth_factor, self._backoff_factor, self._growth_interval = 2.0, 0.5, 2000
        self._init_growth_tracker, self._growth_tracker = 0, None
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def scale(self, loss):
        if self._scale is None:
            self._lazy_init_scale_growth_tracker(loss.device)
        return loss * self._scale

    def _unscale_grads_(self, optimizer, inv_scale, found_inf, allow_fp16):
        for g in optimizer.param_groups:
            for p in g["params"]:
                if p.grad is not None:
                    if not torch.isfinite(p.grad).all():
                        found_inf.fill_(1.0)
                    p.grad.mul_(inv_scale)
        return {found_inf.device: found_inf}

    def update(self, new_scale=None):
        found = sum(v.item() for s in self._per_optimizer_states.values() for v in s["found_inf_per_device"].values())
        self._scale.fill_(self._scale.item() / 2 if found else self._scale.item())
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)


def edit(model, opt, scaler, ctx):
    """What the program does between backward and step."""
    if mode == "value":
        torch.nn.utils.clip_grad_value_(model.parameters(), MAX_VALUE)
    elif mode == "explicit":
        if ctx is not None:
            ctx.average_gradients()
        for p in model.parameters():
            p.grad.copy_(torch.sign(p.grad) * p.grad.abs().sqrt() * 0.01)
    else:
        if scaler is not None:
            scaler.unscale_(opt)
        clip_grad_norm_(model.parameters(), MAX_NORM)


def lossf(m, x, y, scale=None, poison=False):
    loss = torch.nn.functional.cross_entropy(m(x), y)
    if poison:
        loss = loss * float("inf")
    return loss if scale is None else scale(loss)


def reference():
    """Plain PyTorch on the global batch: what DDP computes (the mean
    gradient over the 4 samples, then the edit, then the step)."""
    m, opt = make()
    scaler = CPUScaler() if mode in SCALED else None
    out = []
    for s in range(STEPS):
        x, y = X[4 * s:4 * s + 4], Y[4 * s:4 * s + 4]
        if mode.endswith("overflow") and s == 1:  # DDP: the averaged gradient is infinite on every rank
            lossf(m, x, y, scaler.scale, poison=True).backward()
        else:
            lossf(m, x, y, scaler.scale if scaler else None).backward()
        edit(m, opt, scaler, None)
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad()
        out.append([p.detach().clone() for p in m.parameters()])
    return out


ref = reference()
m, opt = make()
state = et.State(model=m, optimizer=opt)
ctx = hand_driven(state, rank)
scaler = CPUScaler() if mode in SCALED else None
for s in range(STEPS):
    x, y = X[4 * s:4 * s + 4], Y[4 * s:4 * s + 4]
    mine, n, out = start_step(ctx, state, rank, zero=mode.startswith("zero"))
    k = mine.stop - mine.start
    if mode == "fail":
        before = [p.detach().clone() for p in m.parameters()]
        if rank == 1:
            out.meta_work.wait()
            os._exit(0)  # dies between the two collectives
        lossf(m, x[mine], y[mine]).backward()
        total = clip_grad_norm_(m.parameters(), MAX_NORM)
        assert math.isfinite(float(total)), total
        assert out.failed is not None, "the early average should have failed"
        assert opt.step() is None
        assert all(torch.equal(a, b) for a, b in zip(before, m.parameters())), "a failed step updates nothing"
        print("ok", rank, "failed:", type(out.failed).__name__)
        sys.exit(0)
    if n == 0:
        step_without_batch(ctx, state)
    else:
        if mode == "accum":
            for part in (slice(mine.start, mine.start + 1), slice(mine.start + 1, mine.stop)):
                if part.stop > part.start:
                    w = (part.stop - part.start) / k
                    (lossf(m, x[part], y[part]) * w).backward()
        else:
            lossf(m, x[mine], y[mine], scaler.scale if scaler else None,
                  poison=(mode.endswith("overflow") and s == 1 and rank == (0 if mode == "zero_overflow" else 1))).backward()
        edit(m, opt, scaler, ctx)
        if mode == "backward_after":
            try:
                lossf(m, x[mine], y[mine]).backward()
            except et.EdlError as e:
                assert "after" in str(e), e
                print("ok", rank, "refused:", e)
                sys.exit(0)
            raise AssertionError("a backward after the average was not refused")
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        ctx._batch_done(out)
    assert out.failed is None, out.failed
    ctx._pending = None
    opt.zero_grad()
    for a, b in zip(m.parameters(), ref[s]):
        assert torch.allclose(a, b, atol=1e-6), "rank %d step %d differs from DDP's average-then-edit:\n%s\n%s" % (
            rank, s, a, b)
dist.destroy_process_group()
print("ok", rank)
