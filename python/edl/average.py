"""The gradient average of a step under edl.torch: the flat buffers, the
all-reduces (the step's metadata, then the gradients with the loss), a
failed collective's discarded step, and the update. A mixin of Context
(edl/torch.py), which holds the step's state.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist

from . import protocol
from .protocol import EdlError
from .state import FIXED_LOCAL
from .grads import _backward_after_average, _edit_source, _remove_hooks, _scatter_grads, _trained_params


class _Outcome:
    def __init__(self) -> None:
        self.stepped = False
        self.failed = None  # the exception of a failed collective
        self.meta = None
        self.loss = 0.0
        # The metadata all-reduce, started before the batch is yielded (it
        # completes while the program computes): its tensor and work, or the
        # error of its start.
        self.meta_t, self.meta_work, self.meta_err = None, None, None
        self.total = 0  # the step's samples over all ranks
        self.loss_reduced = False  # the loss rode in the all-reduce (recorded before step())
        # The gradient all-reduce completed (in step(), or before it: a clip,
        # GradScaler.unscale_, ctx.average_gradients()); step() then does
        # not average again.
        self.averaged = False
        self.called = False  # optimizer.step() was called for this batch
        # GradScaler found an inf or NaN in the averaged gradients (so on
        # every rank alike) and skipped optimizer.step(): the batch counts,
        # with no update, as under DDP.
        self.skip = False
        self.hooks: List[Any] = []  # the gradient hooks that refuse a backward after an early average
        # Some rank averaged early (so edits its gradients) and some rank
        # has no samples in this step (so runs none of the program's code):
        # at the step the lowest rank with samples broadcasts its edited
        # gradients; this is that rank, else None.
        self.sync_src: Optional[int] = None
        # Several optimizers (State(optimizer=[...])): the phases (one per
        # optimizer, in the State's order) averaged so far and done
        # (stepped, or skipped by GradScaler) so far; the phases GradScaler
        # skipped; per phase that needs the edited gradients' broadcast
        # (some rank averaged early and some rank has no samples) its
        # source rank and the gradients it stepped on; and how to undo the
        # phases updated before a later collective of the step failed.
        self.n_avg, self.n_done = 0, 0
        self.skips: set = set()
        self.sync_srcs: Dict[int, int] = {}
        self.snaps: Dict[int, torch.Tensor] = {}
        self.undo: List[Any] = []


class AveragingMixin:
    """Context's gradient average and update (see the module's doc)."""

    def _grads_flat(self, params, zero, slot=0):
        """The gradients as views of one flat buffer with two more elements
        (the early-average mark and the loss) at its end, so the all-reduce needs no copy in or out;
        None when the parameters differ in dtype or device, or a gradient
        is sparse (then _collective concatenates). A gradient that is not
        its view (the first step, zero_grad(set_to_none=True)) is copied
        in once and replaced by the view; backward then accumulates into
        the view in place."""
        buf = self._grad_bufs.get(slot)
        if buf is None or len(buf[0]) != len(params) or any(a is not b for a, b in zip(buf[0], params)):
            p0 = params[0]
            if any(p.dtype != p0.dtype or p.device != p0.device or (p.grad is not None and p.grad.is_sparse) for p in params):
                return None
            flat = torch.zeros(sum(p.numel() for p in params) + 2, dtype=p0.dtype, device=p0.device)
            views, off = [], 0
            for p in params:
                views.append(flat[off:off + p.numel()].view_as(p))
                off += p.numel()
            buf = self._grad_bufs[slot] = (list(params), flat, views)
        _, flat, views = buf
        if zero:
            flat.zero_()
        for p, v in zip(params, views):
            if p.grad is not v:
                if p.grad is None or zero:
                    v.zero_()
                elif p.grad.is_sparse:
                    self._grad_bufs.pop(slot, None)
                    return None
                else:
                    v.copy_(p.grad)
                p.grad = v
        return flat

    def _detach_grads(self, params: List[torch.Tensor]) -> None:
        """After a failed step: an abandoned gradient all-reduce still runs
        in the old group's thread and may write into the flat buffer, so
        the gradients get buffers of their own (the next step makes a new
        flat one)."""
        bufs, self._grad_bufs = self._grad_bufs, {}
        for buf in bufs.values():  # every optimizer's (several: State(optimizer=[...]))
            views = {id(v) for v in buf[2]}
            for p in buf[0]:
                if p.grad is not None and id(p.grad) in views:
                    p.grad = p.grad.detach().clone()

    def _collective(self, state, zero, index=0):
        """The step's all-reduces (unless the gradients were averaged
        before step(): _average), then the update if both completed. Only
        a failed collective discards the step (a peer died, froze or left):
        an error of the program's own tensors (this process's bug, the
        same at every retry) is raised to the program, not reported as a
        failed generation, which would only form the next one to fail the
        same way. index: which of the State's optimizers stepped (several:
        _multi_step; zero, a rank without samples: every one, _multi_empty)."""
        if len(state.optimizers) > 1:
            return self._multi_empty(state) if zero else self._multi_step(state, index)
        meta, n, out = self._pending
        if out.called:
            raise EdlError("optimizer.step() called twice for one batch")
        out.called = True
        _remove_hooks(out)
        if not self._average(state, out, zero=zero):
            return None
        if out.sync_src is not None:
            skip = self._sync_edits(state, out, skip=False)
            if skip is None:
                return None
            if skip:  # the ranks with samples skipped the update (GradScaler): so does this one
                out.skip = out.stepped = True
                for sched in state.schedulers:
                    sched._edl_inner_step()
                return None
        out.stepped = True
        if out.total > 0:
            self._update(state)
        return None

    def _average(self, state, out, zero=False, early=False, upto=None) -> bool:
        """The step's metadata and gradient all-reduces, once per step:
        in optimizer.step(), or earlier (early) when the program edits the
        gradients first (a clip, GradScaler.unscale_,
        ctx.average_gradients()), so the edit acts on the averaged
        gradients as under DDP. Every rank runs the same two collectives
        whichever of the two places it runs them in. Returns whether the
        gradients are averaged; False when a collective failed (now or
        earlier in the step: the step is discarded).

        With several optimizers, one gradient all-reduce per optimizer, in
        the State's order: those of the optimizers before upto (default:
        up to the one whose step comes next) that are not averaged yet."""
        if out.failed is not None:
            return False
        opts = state.optimizers
        if upto is None:
            upto = out.n_done + 1
        upto = min(upto, len(opts))
        if out.n_avg >= upto:
            return True
        meta, n, _ = self._pending
        if out.meta is None:
            try:
                self._await_meta(meta, out)
            except RuntimeError as e:
                self._step_failed(out, e, _trained_params(opts[out.n_avg]))
                return False
        total = out.total
        if total == 0:  # no samples on any rank (an epoch's end): nothing to average
            out.n_avg = len(opts)
        while out.n_avg < upto:
            j = out.n_avg
            params = _trained_params(opts[j])
            flat, grads, sparse = self._grad_vector(params, zero, n, total, early, slot=j)
            try:
                if not self.standalone:
                    self._await(dist.all_reduce(flat, async_op=True), "the gradient all-reduce")
            except RuntimeError as e:
                self._step_failed(out, e, params)
                return False
            edited, out.loss = flat[-2:].tolist()
            if edited > 0.5:
                if len(opts) == 1:
                    out.sync_src = _edit_source(out.meta)
                else:
                    src = _edit_source(out.meta)
                    if src is not None:
                        out.sync_srcs[j] = src
            out.loss_reduced = out.loss != 0.0  # some rank recorded before the average
            if grads is not None:
                _scatter_grads(params, grads, flat, sparse)
            out.n_avg = j + 1
            if early:
                # A backward after the average would add this rank's own
                # gradients, which no rank averages (and a second average on
                # some ranks only would not match the others' collectives).
                hook = functools.partial(_backward_after_average, self, out, j)
                out.hooks.extend((j, p.register_hook(hook)) for p in params)
        out.averaged = out.n_avg > out.n_done or out.n_avg == len(opts)
        return True

    def _await_meta(self, meta, out) -> int:
        """Waits for the step's metadata all-reduce; returns the step's
        samples over all ranks."""
        if out.meta_err is not None:
            raise out.meta_err
        mt = out.meta_t
        if out.meta_work is not None:
            self._await(out.meta_work, "the metadata all-reduce")
            out.meta_work = None
        elif mt is None:  # standalone
            mt = torch.tensor(meta, dtype=torch.float64)
        total = int(round(mt[protocol.COUNT].item()))
        out.meta, out.loss, out.total = mt.tolist(), 0.0, total
        return total

    def _grad_vector(self, params, zero, n, total, early=False, slot=0):
        """The vector the gradient all-reduce sums: each rank's gradients
        weighted by its share n/total, then 1 if this rank averages before
        step() (the sum says whether any did), then the loss times n in the
        last element (the sum is the global batch's mean gradient and its
        summed loss). Returns (flat, grads, sparse): grads is None when flat's
        elements are the gradients themselves (views), else the dense
        gradients concatenated into flat, and sparse the indexes of those
        that were sparse (an nn.Embedding(sparse=True)) with their sparse
        dimensions, made sparse again after the all-reduce."""
        flat = self._grads_flat(params, zero, slot)
        grads, sparse = None, {}
        if flat is None:
            grads = []
            for i, p in enumerate(params):
                if p.grad is None or zero:
                    p.grad = torch.zeros_like(p)
                elif p.grad.is_sparse:
                    sparse[i] = p.grad.sparse_dim()
                    p.grad = p.grad.to_dense()
                grads.append(p.grad)
            flat = torch.cat([g.reshape(-1) for g in grads] + [grads[0].new_zeros(2)])
        flat.mul_(n / total)
        flat[-2] = 1.0 if early else 0.0
        flat[-1] = self._loss * n
        return flat, grads, sparse

    def _step_failed(self, out, e, params) -> None:
        """A collective of the step failed: the step is discarded."""
        # No reference to the step's works may outlive it (the exception's
        # frames hold them): they keep the group's connections open, and
        # a peer waiting on this rank would wait for its timeout.
        out.meta_work = None
        e.__traceback__ = None
        out.failed = e
        self._detach_grads(params)
        # Several optimizers: the ones updated before this collective are
        # put back, so that this rank holds the state before the step.
        undo, out.undo = out.undo, []
        for u in reversed(undo):
            u()

    def _update(self, state, index=0, schedulers=True) -> None:
        """The optimizer's own step (with fixed_local's scaled rate), then
        the scheduler's (schedulers: every one of the State's)."""
        opt = state.optimizers[index]
        scale = self.world / self.initial_world if self._policy == FIXED_LOCAL else 1.0
        saved = [g["lr"] for g in opt.param_groups]
        if scale != 1.0:
            for g in opt.param_groups:
                g["lr"] = g["lr"] * scale
        try:
            opt._edl_inner_step()
        finally:
            for g, lr in zip(opt.param_groups, saved):
                g["lr"] = lr
        if schedulers:
            for sched in state.schedulers:
                sched._edl_inner_step()
