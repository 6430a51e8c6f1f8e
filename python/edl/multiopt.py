"""Several optimizers in one State (a GAN's, an encoder's and a decoder's):
each optimizer's gradients are averaged at its own step, in the State's
order on every rank, and a failed collective after an earlier update undoes
it. A mixin of Context (edl/torch.py).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.distributed as dist

from .protocol import EdlError
from .grads import MULTI_ORDER, _dense_grads, _remove_hooks, _scatter_grads, _trained_params, _undo_record


class MultiOptimizerMixin:
    """Context's steps of several optimizers (see the module's doc)."""

    def _multi_step(self, state, i) -> None:
        """Optimizer i's step() on a rank with samples: the optimizers step
        in the State's order, once each per batch; each averages its own
        parameters' gradients (unless an edit before its step averaged
        them), then updates. An update that a collective of the same step
        follows can be undone (_step_failed), so a failed step leaves this
        rank with the state before it, as with one optimizer."""
        meta, n, out = self._pending
        opts = state.optimizers
        if out.called:
            raise EdlError("optimizer.step() called twice for one batch (optimizer %d of the State's %d)" % (i, len(opts)))
        while out.n_done < i and out.n_done in out.skips:  # GradScaler skipped that one's step
            self._phase_done(state, out, out.n_done, skipped=True)
        if i < out.n_done:
            raise EdlError("optimizer.step() called twice for one batch (optimizer %d of the State's %d)" % (i, len(opts)))
        if i > out.n_done:
            raise EdlError(MULTI_ORDER % (i, len(opts), out.n_done))
        _remove_hooks(out, phase=i)
        if self._average(state, out, upto=i + 1) and out.total > 0:
            if i in out.sync_srcs:
                out.snaps[i] = _dense_grads(_trained_params(opts[i]))
            if out.n_avg < len(opts) or out.sync_srcs:  # a collective of this step follows the update
                out.undo.append(_undo_record(opts[i]))
            self._update(state, i, schedulers=False)
            out.stepped = True
        self._phase_done(state, out, i, skipped=False)
        return None

    def _phase_done(self, state, out, j, skipped) -> None:
        """Optimizer j is done for this batch (stepped, or skipped by
        GradScaler)."""
        if skipped and j in out.sync_srcs and out.failed is None:
            out.snaps[j] = _dense_grads(_trained_params(state.optimizers[j]))
        _remove_hooks(out, phase=j)
        out.n_done = j + 1
        if out.n_done == len(state.optimizers):
            out.called = True
        out.averaged = out.n_avg > out.n_done or out.n_avg == len(state.optimizers)

    def _multi_batch_done(self, state, out) -> None:
        """After the program's work on a batch: every optimizer stepped (or
        was skipped by GradScaler); the edited gradients' broadcast when
        some rank has no samples; then the schedulers."""
        if out.failed is None:
            while out.n_done < len(state.optimizers) and out.n_done in out.skips:
                self._phase_done(state, out, out.n_done, skipped=True)
        _remove_hooks(out)
        if out.failed is not None:
            return
        if out.n_done < len(state.optimizers):
            raise EdlError("steps(): call every optimizer's step() once for every batch (each averages its "
                           "gradients), in the State's order: optimizer %d of %d was not stepped in this batch"
                           % (out.n_done, len(state.optimizers)))
        if out.sync_srcs and self._broadcast_edits(state, out) is None:
            return  # the broadcast failed: the step is discarded (the updates undone)
        out.undo = []
        if out.total > 0:
            for sched in state.schedulers:
                sched._edl_inner_step()

    def _multi_empty(self, state) -> None:
        """A rank without samples in a step with several optimizers: every
        optimizer's gradient all-reduce (zeros), in the State's order, as
        the ranks with samples run them, and the same updates; when some
        rank edited its gradients early, the edited ones come from the
        lowest rank with samples at the batch's end."""
        meta, n, out = self._pending
        opts = state.optimizers
        if out.called:
            raise EdlError("optimizer.step() called twice for one batch")
        for j in range(len(opts)):
            if not self._average(state, out, zero=True, upto=j + 1):
                return None
            if out.total > 0 and j not in out.sync_srcs:
                if out.n_avg < len(opts) or out.sync_srcs:
                    out.undo.append(_undo_record(opts[j]))
                self._update(state, j, schedulers=False)
            out.n_done = j + 1
        out.called = out.stepped = True
        if out.total == 0:
            return None
        if out.sync_srcs:
            skipped = self._broadcast_edits(state, out)
            if skipped is None:
                return None
            for j in sorted(out.sync_srcs):
                if j not in skipped:
                    self._update(state, j, schedulers=False)
        out.undo = []
        for sched in state.schedulers:
            sched._edl_inner_step()
        return None

    def _broadcast_edits(self, state, out) -> Optional[set]:
        """Several optimizers, a step with an early average and a rank
        without samples: one broadcast at the batch's end, from the lowest
        rank with samples, of the gradients every such optimizer stepped
        on and whether GradScaler skipped it; a rank without samples takes
        them (the others stepped on the same ones). Returns the skipped
        optimizers, None when the broadcast failed (the step is discarded,
        the updates undone)."""
        phases = sorted(out.sync_srcs)
        src = out.sync_srcs[phases[0]]
        params = {j: _trained_params(state.optimizers[j]) for j in phases}
        dev = params[phases[0]][0].device
        parts = []
        for j in phases:
            snap = out.snaps.get(j)
            if snap is None:  # this rank has no samples: it receives them
                snap = torch.zeros(sum(p.numel() for p in params[j]), dtype=torch.float64, device=dev)
            parts.append(snap.to(device=dev, dtype=torch.float64))
        flags = torch.tensor([1.0 if j in out.skips else 0.0 for j in phases], dtype=torch.float64, device=dev)
        flat = torch.cat(parts + [flags])
        try:
            self._await(dist.broadcast(flat, src, async_op=True), "the edited gradients' broadcast")
        except RuntimeError as e:
            self._step_failed(out, e, [p for j in phases for p in params[j]])
            return None
        skipped, off = set(), 0
        for k, j in enumerate(phases):
            if flat[-len(phases) + k].item() > 0.5:
                skipped.add(j)
            if j not in out.snaps:
                for p in params[j]:
                    sparse = p.grad.sparse_dim() if p.grad is not None and p.grad.is_sparse else 0
                    g = flat[off:off + p.numel()].view_as(p).to(p.dtype)
                    p.grad = g.to_sparse(sparse) if sparse else g.clone()
                    off += p.numel()
            else:
                off += sum(p.numel() for p in params[j])
        return skipped

    def _sync_edits(self, state, out, skip) -> Optional[bool]:
        """A step with an early average and a rank without samples: the
        lowest rank with samples (out.sync_src) broadcasts its edited
        gradients and whether it skipped the update (GradScaler), so the
        rank that ran none of the program's code applies the same update.
        Returns the source's skip, None when the broadcast failed (the step
        is discarded)."""
        params = _trained_params(state.optimizer)
        dense, sparse = [], {}
        for i, p in enumerate(params):
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            elif p.grad.is_sparse:
                sparse[i] = p.grad.sparse_dim()
                p.grad = p.grad.to_dense()
            dense.append(p.grad)
        flat = torch.cat([g.reshape(-1) for g in dense] + [dense[0].new_full((1,), 1.0 if skip else 0.0)])
        try:
            self._await(dist.broadcast(flat, out.sync_src, async_op=True), "the edited gradients' broadcast")
        except RuntimeError as e:
            self._step_failed(out, e, params)
            return None
        _scatter_grads(params, dense, flat, sparse)
        return flat[-1].item() > 0.5
