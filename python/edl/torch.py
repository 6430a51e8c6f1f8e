"""Stop-free elastic PyTorch under an edl worker (trainer.exec.mode "live").

    import edl.torch as et
    ctx = et.init()                                   # connects to the local edl worker
    state = et.State(model=model, optimizer=opt, scheduler=sched)
    loader = et.DataLoader(dataset, batch_size=32)    # the global batch
    for batch in ctx.steps(loader, state, epochs=3):  # one applied step per batch
        loss = lossf(model(batch[0]), batch[1])
        loss.backward()
        ctx.record(loss)                              # optional: the job's progress loss
        opt.step(); opt.zero_grad()                   # step() averages the gradients first
        ctx.report(loss=loss)                         # optional: the job's metric log (sweeps)

What the package does (docs/live.md has the whole story):

- The worker hands out sample index ranges of its data partitions; the
  program reports after every step what every rank consumed; a step counts
  only when its all-reduce completed on every member, and an aborted step's
  samples go back to the pipeline: every sample of an epoch lands in exactly
  one applied step, whatever joins, leaves or dies.
- optimizer.step() is wrapped: it all-reduces the per-step metadata (one
  small float64 vector) and the gradients (weighted by each rank's sample
  count, so the update is that of the global batch), then steps. If a
  collective fails (a peer died or froze: gloo's timeout is bounded), the
  step is discarded, nothing is updated, and the loop goes on in the next
  generation from this process's own state.
- The average happens once per step: in optimizer.step(), or earlier when
  the program edits the gradients first: torch.nn.utils.clip_grad_norm_ /
  clip_grad_value_ on the model's parameters and GradScaler.unscale_ run
  it themselves, so they act on the averaged gradients (as under DDP);
  for any other edit call ctx.average_gradients() first.
- The scheduler, if given, is stepped by the package once per applied step;
  do not call scheduler.step() yourself.
- At every generation switch the process group is rebuilt in process from a
  fresh store prefix; a newcomer (or a member behind) gets model, optimizer,
  scheduler, RNG and data cursor from the root by a broadcast in the new group.
"""

from __future__ import annotations

import copy
import functools
import gc
import math
import numbers
import os
import sys
import time
import types
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch
import torch.distributed as dist

from . import ckpt, protocol
from .group import (MAX_INIT_FAILURES, MAX_PEER_FAILURES, Abandoned, GroupMixin, _host_store, _log,  # noqa: F401
                    _peer_failure, _PeersMissing, _Superseded)
from .protocol import EdlError
from .state import FIXED_GLOBAL, FIXED_LOCAL, DataLoader, State

__all__ = ["init", "State", "DataLoader", "Context", "EdlError", "FIXED_GLOBAL", "FIXED_LOCAL"]

HOW_TO_RUN = (
    "edl.torch.init(): EDL_SOCKET is not set: this program is not running under an edl worker. "
    "Run it as an edl job with trainer.kind \"exec\" and trainer.exec.mode \"live\" "
    "(for example `edl dev` then `edl submit examples/torch/job_live.json`), "
    "or pass standalone=True (or set EDL_STANDALONE=1) to train in this one process."
)

STEPS_TWICE = (
    "ctx.steps() was called a second time (the first one ended: %s): a program runs one ctx.steps() loop, which trains "
    "every epoch of the job: pass epochs=N to that one call (on_epoch_end=f runs code between epochs) "
    "instead of calling it once per epoch"
)

LEFT_LOOP = (
    "the program left its ctx.steps() loop before training ended (a break, a return or an exception in the "
    "loop body; last applied step %d): under edl the loop runs until steps() returns (the job's length is "
    "steps(epochs=...) over trainer.exec.dataset.samples); its worker takes the program's exit for a failure "
    "and restarts it (trainer.exec.max_restarts)"
)

# The Context of this process's worker connection: the worker serves one
# (init() twice would leave its second hello unanswered forever).
_live: Dict[str, "Context"] = {}


def _non_finite_name(v: float) -> str:
    """The protocol's name of a number JSON cannot carry (worker/live/protocol.json)."""
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


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


class Context(GroupMixin):
    """The program's link to its worker; made by init()."""

    def __init__(self, client: Optional[protocol.Client], timeout: float, standalone: bool = False, partitions: int = 1,
                 backend: Optional[str] = None) -> None:
        self.client = client
        self.timeout = timeout
        self.standalone = standalone
        self.partitions = partitions
        self.rank, self.world, self.generation = 0, 1, 0
        self.applied = -1  # the job's last applied step (counted from 0), as the worker says
        self.epoch = 0  # the epochs done (the index of the epoch in progress), as the worker says
        # The last report(): {"step", "epoch", "values"} (None: none yet).
        self.last_report: Optional[Dict[str, Any]] = None
        self._serving = False  # between the hello and the end of steps(): report() reaches the worker
        self._steps_started = False  # steps() runs once per program (its hello starts the worker's part)
        self._on_epoch_end: Optional[Callable[[int], Any]] = None
        self.backend = backend  # None: nccl when the model is on a GPU, else gloo (set in steps)
        self._store = None
        self._wstore = None  # the current generation's edl.store.WorkerStore
        self._clients = {}
        # Collectives left because the generation was over, and the groups
        # kept until those end (edl/group.py: _destroy).
        self._abandoned: List[Any] = []
        self._zombies: List[Tuple[Any, List[Any], Any]] = []
        self._loss = 0.0
        self._pending = None
        # Per optimizer of the State (its index): (params, flat, views), the
        # gradients as views of one flat buffer (_grad_buf is the first's).
        self._grad_bufs: Dict[int, Any] = {}
        # ended says why steps() returned: "done" (the job's last epoch
        # ended), "leave" (this worker left) or "stop" (cancelled).
        self.ended: Optional[str] = None
        self._state: Optional[State] = None
        self.initial_world, self._policy = 1, FIXED_GLOBAL
        self.stats: Dict[str, int] = {"switches": 0, "failures": 0, "handovers": 0}
        self._saver = ckpt.Saver()  # the checkpoints the worker asks for (edl/ckpt.py)
        if not standalone:
            # Every program hosts a store server; rank 0's serves its group
            # (a fresh prefix per generation).
            self._store = _host_store(timeout)

    @property
    def _grad_buf(self):
        return self._grad_bufs.get(0)

    @_grad_buf.setter
    def _grad_buf(self, v):
        if v is None:
            self._grad_bufs.pop(0, None)
        else:
            self._grad_bufs[0] = v

    # --- the step loop -------------------------------------------------

    def record(self, loss: Any) -> None:
        """Records this rank's loss of the current batch (a mean over it)
        for the job's progress. Before optimizer.step() it rides in the
        gradient all-reduce (the progress shows the global batch's mean);
        after it, this rank's own mean stands in for it."""
        self._loss = float(loss.detach().item() if torch.is_tensor(loss) else loss)
        out = self._pending[2] if self._pending is not None else None
        if out is not None and out.averaged and out.total > 0 and not out.loss_reduced:
            out.loss = self._loss * out.total

    def report(self, step: Optional[int] = None, epoch: Optional[int] = None, **metrics: Any) -> bool:
        """Reports metric values (numbers or one-element tensors) to the
        job's metric log, what a sweep judges its trials by:
        ctx.report(loss=0.3, val_loss=0.4). step is the applied step they
        belong to (default: the step of the current batch inside the loop,
        else the last applied one); epoch the epochs done (default: the
        current count). Any rank may call it; rank 0's values are kept (the
        return value says whether they were). A value that is not finite
        (a diverged loss) is a real observation and is kept (a sweep judges
        it the worst there is); JSON has no number for it, so it travels
        by name ("NaN", "Infinity", "-Infinity")."""
        if not metrics:
            raise EdlError("report(): no metrics given; call it as ctx.report(loss=0.3, val_loss=0.4)")
        for name, v in (("step", step), ("epoch", epoch)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise EdlError("report(%s=%r): want an int >= 0" % (name, v))
        values = {}
        for k, v in metrics.items():
            if len(k) > 64:
                raise EdlError("report(%s=...): a metric name has at most 64 characters" % k[:20])
            if torch.is_tensor(v):
                if v.numel() != 1:
                    raise EdlError("report(%s=...): a tensor of %d elements; want one number" % (k, v.numel()))
                v = v.detach().item()
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise EdlError("report(%s=%r): want a number" % (k, v))
            values[k] = float(v)
        if step is None:
            step = self.applied + 1 if self._pending is not None else max(self.applied, 0)
        if epoch is None:
            epoch = self.epoch
        self.last_report = {"step": step, "epoch": epoch, "values": values}
        if not values or self.standalone:
            return False
        if not self._serving:
            raise EdlError("report(): only while ctx.steps() runs (in its loop or its on_epoch_end): the worker "
                           "ends the job's life when the loop ends")
        finite = {k: v for k, v in values.items() if math.isfinite(v)}
        non_finite = {k: _non_finite_name(v) for k, v in values.items() if not math.isfinite(v)}
        return bool(self.client.call("report", step=step, epoch=epoch, values=finite,
                                     non_finite=non_finite or None).get("kept"))

    def average_gradients(self, optimizer: Any = None) -> bool:
        """Averages this batch's gradients over the ranks now, as
        DistributedDataParallel has by the end of backward: the collective
        optimizer.step() would do, done once; step() then does not average
        again. Call it after the batch's last backward and before any edit
        of the gradients (a hand-made clip, noise, a norm you log):
        torch.nn.utils.clip_grad_norm_ / clip_grad_value_ and
        GradScaler.unscale_ call it themselves. Returns True once the
        gradients are averaged, False when the collective failed (a peer
        died, left or froze): the program goes on as usual, its edits act on
        this rank's own gradients, and its optimizer.step() is discarded
        with the step, as when the collective fails in step().

        With several optimizers (State(optimizer=[...])): the gradients of
        the optimizer whose step comes next, or of every one up to
        optimizer (given: one of the State's) in the State's order."""
        if self._pending is None or self._state is None:
            raise EdlError("average_gradients(): only inside the ctx.steps() loop, after the batch's backward and "
                           "before optimizer.step()")
        out = self._pending[2]
        if out.called:
            raise EdlError("average_gradients(): called after optimizer.step() for this batch; call it between the "
                           "last backward and optimizer.step()")
        upto = None
        if optimizer is not None:
            idx = [j for j, o in enumerate(self._state.optimizers) if o is optimizer]
            if not idx:
                raise EdlError("average_gradients(optimizer=...): not one of the State's optimizers")
            if idx[0] < out.n_done:
                raise EdlError("average_gradients(optimizer=...): that optimizer stepped already in this batch")
            upto = idx[0] + 1
        return self._average(self._state, out, early=True, upto=upto)

    @property
    def finished(self) -> bool:
        """True once steps() returned because training reached its end (not
        because this worker left or the job was cancelled)."""
        return self.ended == "done"

    def steps(self, loader: DataLoader, state: State, epochs: int = 1,
              on_epoch_end: Optional[Callable[[int], Any]] = None) -> Iterator[Any]:
        """Yields this rank's batch of every step until the job ends or this
        worker leaves; every yielded batch must end in one optimizer.step().

        on_epoch_end(epochs_done), when given, is called on every rank at
        the end of every epoch (at the same point of the step loop on every
        rank, before the next epoch's first batch); a dict it returns is
        reported (report(), at the last applied step), so that a
        validation loss per epoch reaches the job's metric log. The other
        ranks wait for it in their next collective: keep it shorter than
        the live timeout, or share the evaluation between the ranks."""
        if not isinstance(loader, DataLoader):
            raise EdlError("steps(loader=...): want an edl.torch.DataLoader, got %r" % (type(loader).__name__,))
        if not isinstance(state, State):
            raise EdlError("steps(state=...): want an edl.torch.State, got %r" % (type(state).__name__,))
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise EdlError("steps(epochs=%r): want an int >= 1" % (epochs,))
        if on_epoch_end is not None and not callable(on_epoch_end):
            raise EdlError("steps(on_epoch_end=%r): want a function of the epochs done" % (on_epoch_end,))
        self._once()
        self._on_epoch_end = on_epoch_end
        self._wrap(state)
        _warn_clips_bound_early(sys._getframe(1).f_globals)
        if self.backend is None:
            self.backend = "nccl" if next(state.model.parameters()).is_cuda else "gloo"
        _running.append(self)  # the clip functions and GradScaler.unscale_ look for a pending step here
        guarded = _guard_other_optimizers(state)
        try:
            if self.standalone:
                yield from self._standalone_steps(loader, state, epochs)
                self.ended = "done"
                return
            yield from self._serve(loader, state, epochs)
        finally:
            _running.remove(self)
            _unguard(guarded)

    def _serve(self, loader: DataLoader, state: State, epochs: int) -> Iterator[Any]:
        """steps() under a worker: the generations until the job ends or
        this worker leaves."""
        hello = self.client.call("hello", dataset_len=len(loader.dataset), store_port=self._store.port,
                                 epochs=epochs, pid=os.getpid())
        self.timeout = hello.get("timeout_s") or self.timeout
        base_timeout = self.timeout
        self.initial_world = hello.get("initial_world") or 1
        self._policy = loader.policy
        self._serving = True
        after, init_failures, peer_failures = 0, 0, 0
        try:
            while True:
                g = self.client.call("gen", after=after)
                if g["action"] == "restart":  # the job is in restart mode (docs/live.md, "Fallback")
                    self._exit_for_restart(g.get("save"), g["applied"], state, "the next generation")
                if g["action"] != "run":
                    if g.get("checkpoint"):  # the last holder of the state leaves: its worker keeps it
                        self._saver.save(state, g["checkpoint"], g["applied"], background=False)
                    self.ended = g["action"]
                    return
                after = g["gen"]
                self.generation, self.rank, self.world = g["gen"], g["rank"], g["world"]
                self.epoch = g["epoch"]
                if g.get("restore"):  # nobody held the state: the worker's checkpoint
                    self._restore(g, state)
                # Setups that timed out in a row say the machine is slower than
                # the live timeout assumes (an overloaded host: every rank
                # imports, builds and serves its store late), not that a peer
                # is gone: each such failure doubles the next setup's timeout,
                # up to SETUP_TIMEOUT_MAX_S, and a setup that succeeds goes
                # back to the job's timeout. Without it, ten 5-s setups in a
                # row on a loaded 2-core machine switched a job to restart mode.
                self.timeout = setup_timeout(base_timeout, peer_failures)
                try:
                    self._build_group(g)
                    self._sync_state(g, state)
                    init_failures, peer_failures = 0, 0
                    self.timeout = base_timeout
                except _Superseded:
                    continue  # a newer generation replaced this one during its setup: join that one
                except EdlError:
                    raise
                except (RuntimeError, OSError) as e:  # a peer died or froze during the switch
                    self.stats["failures"] += 1
                    if not isinstance(e, _PeersMissing):
                        # Every member arrived, and still the group could not
                        # be built: what the fallback is for (NCCL), unless a
                        # peer explains it.
                        if _peer_failure(self.backend, e):
                            peer_failures += 1
                        else:
                            init_failures += 1
                    self._destroy()  # as after a failed step: peers blocked on this rank fail now
                    if init_failures >= MAX_INIT_FAILURES or peer_failures >= MAX_PEER_FAILURES:
                        rep = self.client.call("fallback", gen=after, error=repr(e))
                        if rep.get("save"):  # the job switched to restart mode: keep this state
                            self._exit_for_restart(rep["save"], g["applied"], state, "the fallback")
                        _log("in-process re-initialisation failed %d times (%r); asking the worker to restart this program"
                             % (init_failures + peer_failures, e))
                        os._exit(75)  # LiveExitRestart in worker/live/live.go
                    self.client.call("failed", gen=after, error=repr(e))
                    continue
                action = yield from self._generation(loader, state)
                if action in ("leave", "done", "stop"):
                    self.ended = action
                    return
                self.stats["switches"] += 1
        except GeneratorExit:
            _log(LEFT_LOOP % self.applied)
            raise
        finally:
            self._serving = False
            self._saver.wait()
            self._destroy()

    def _once(self) -> None:
        """steps() trains once per program: its hello is the program's
        whole life at the worker, which ends with the loop."""
        if self._steps_started:
            raise EdlError(STEPS_TWICE % (self.ended or "left before its end",))
        self._steps_started = True

    def _generation(self, loader, state):
        """Runs steps in the current group; returns the action that ended it."""
        while True:
            if loader.policy == FIXED_LOCAL:
                batch = loader.batch_size
            else:
                batch = protocol.local_batch(loader.batch_size, self.world, self.rank)
            share = self.client.call("next", gen=self.generation, batch=batch)
            meta = [0.0] * protocol.meta_len(self.world)
            n = protocol.fill_meta(meta, self.rank, share)
            out = _Outcome()
            self._pending = (meta, n, out)
            self._loss = 0.0
            self._start_meta(meta, out, state)
            if n > 0:
                yield loader.batch(protocol.sample_ids(share))
                self._batch_done(out)
            else:
                # No samples for this rank: it still takes part in the step.
                state.optimizer.zero_grad(set_to_none=False)
                self._collective(state, zero=True)
                self._pending = None
                if out.failed is None and _ends_epoch(out.meta):
                    self._epoch_end(self.epoch + 1)
            self._pending = None
            if out.failed is not None:
                self.stats["failures"] += 1
                # Close this rank's connections now, not at the next setup: a
                # peer blocked on this rank in the same collective then fails
                # at once (unless the collective was abandoned and still runs:
                # then its group is kept, and the peers hear from their
                # workers that the generation is over: edl/group.py).
                self._destroy()
                self.client.call("failed", gen=self.generation, error=repr(out.failed))
                return "failed"
            finite = math.isfinite(out.loss)  # a diverged loss travels by name: JSON has no NaN
            rep = self.client.call("step", gen=self.generation, meta=[int(round(v)) for v in out.meta],
                                   loss=out.loss if finite else None,
                                   loss_non_finite=None if finite else _non_finite_name(out.loss))
            self.applied, self.epoch = rep["applied"], rep["epoch"]
            if rep.get("checkpoint"):
                self._saver.save(state, rep["checkpoint"], rep["applied"])
            if rep["action"] != "continue":
                return rep["action"]

    def _wrap(self, state):
        if self._state is state:
            return
        self._state = state
        for index, opt in enumerate(state.optimizers):
            self._wrap_optimizer(state, opt, index)
        for sched in state.schedulers:
            sched._edl_inner_step = sched.step

            def no_user_step(*a, **k):
                raise EdlError("scheduler.step(): edl steps the scheduler once per applied step; remove this call")

            sched.step = no_user_step

    def _wrap_optimizer(self, state, opt, index):
        ctx, inner = self, opt.step

        def step(closure=None):
            if ctx._pending is None:
                raise EdlError("optimizer.step() outside ctx.steps(): edl steps only the batches it hands out")
            if closure is not None:
                raise EdlError("optimizer.step(closure): closures are not supported under edl")
            return ctx._collective(state, zero=False, index=index)

        # The marks an LR scheduler looks for on optimizer.step (torch 1.13:
        # _with_counter; 2.x: _wrapped_by_lr_sched): without them it warns
        # at its first step that optimizer.step() "has been overridden after
        # learning rate scheduler initialization", which is not the program's
        # doing. The inner step is the one the scheduler wrapped; it counts.
        step._with_counter = True
        step._wrapped_by_lr_sched = True
        opt.step = step
        opt._edl_inner_step = inner

    def _start_meta(self, meta, out, state):
        """Starts the step's metadata all-reduce (float64, exact) before the
        batch is computed: it is known from "next" alone, so its round trip
        overlaps the forward and backward passes; _collective waits for it."""
        if self.standalone:
            return
        dev = next(state.model.parameters()).device if self.backend == "nccl" else torch.device("cpu")
        out.meta_t = torch.tensor(meta, dtype=torch.float64, device=dev)
        try:
            out.meta_work = dist.all_reduce(out.meta_t, async_op=True)
        except RuntimeError as e:  # the group is broken already: the step fails in _collective
            out.meta_err = e

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

    def _batch_done(self, out) -> None:
        """After the program's work on a yielded batch: it called
        optimizer.step(), or its collective failed, or GradScaler skipped
        the step on every rank (inf in the averaged gradients: the batch
        counts without an update, the scheduler steps as in a plain
        loop)."""
        if len(self._state.optimizers) > 1:
            return self._multi_batch_done(self._state, out)
        _remove_hooks(out)
        if out.called or out.failed is not None:
            return
        if out.skip:
            out.called = out.stepped = True
            if out.sync_src is not None and self._sync_edits(self._state, out, skip=True) is None:
                return  # the broadcast failed: the step is discarded
            for sched in self._state.schedulers:
                sched._edl_inner_step()
            return
        raise EdlError("steps(): call optimizer.step() once for every batch (it averages the gradients)")

    # --- several optimizers (State(optimizer=[...])) ---------------------

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

    def _epoch_end(self, done: int) -> None:
        """Calls on_epoch_end(done) and reports what it returns."""
        if self._on_epoch_end is None:
            return
        vals = self._on_epoch_end(done)
        if vals is None:
            return
        if not isinstance(vals, dict):
            raise EdlError("on_epoch_end(%d) returned %r: want a dict of metrics (or None)" % (done, vals))
        if vals:
            self.report(step=max(self.applied, 0), epoch=done, **vals)

    # --- groups and hand-over ------------------------------------------

    def _exit_for_restart(self, save, applied, state, why):
        """Restart mode: the state goes to the worker's file, then the
        process exits and its worker starts it again."""
        self._saver.wait()
        if save:
            self._saver.save(state, save, applied, background=False)
        _log("restart mode: exiting for %s (state of step %d %s)" % (why, applied, "saved" if save else "none"))
        self.client.close()
        os._exit(75)  # LiveExitRestart in worker/live/live.go

    def _restore(self, g, state):
        start = time.time()
        ckpt.load(g["restore"], state, g["applied"])
        self.applied = g["applied"]
        _log("state of step %d loaded from %s (%.0f ms)" % (g["applied"], os.path.basename(g["restore"]), 1000 * (time.time() - start)))

    # --- outside edl ---------------------------------------------------

    def _standalone_steps(self, loader, state, epochs):
        """One process, no worker: partition p's samples in order, the
        partitions in order, every epoch."""
        n = len(loader.dataset)
        for epoch in range(epochs):
            for p in range(self.partitions):
                first, last = n * p // self.partitions, n * (p + 1) // self.partitions
                s = first
                while s < last:  # the worker's shares: the tail merges into the last batch
                    e = s + protocol.share_size(last - s, loader.batch_size)
                    share = {"part": p, "start": s - first, "end": e - first, "first": first, "fin": e == last}
                    meta = [0.0] * protocol.meta_len(1)
                    k = protocol.fill_meta(meta, 0, share)
                    out = _Outcome()
                    self._pending, self._loss = (meta, k, out), 0.0
                    yield loader.batch(range(s, e))
                    self.applied += 1
                    self._batch_done(out)
                    self._pending = None
                    s = e
            self.epoch = epoch + 1
            self._epoch_end(self.epoch)


def _trained_params(optimizer) -> List[torch.Tensor]:
    """The optimizer's parameters that are trained: a frozen one
    (requires_grad False: a fine-tuned model's backbone, an integer
    parameter) gets no gradient, as in plain PyTorch, so the optimizer
    leaves it alone (a zero gradient would let weight decay and momentum
    move it)."""
    return [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]


def _dense_grads(params) -> torch.Tensor:
    """A copy of the parameters' gradients, dense, in one float64 vector."""
    return torch.cat([(p.grad.to_dense() if p.grad.is_sparse else p.grad).reshape(-1).to(torch.float64)
                      if p.grad is not None else torch.zeros(p.numel(), dtype=torch.float64, device=p.device)
                      for p in params])


def _undo_record(opt) -> Callable[[], None]:
    """What puts opt's parameters and state back as they are now: several
    optimizers update one after the other within a step, and a collective
    that fails after an update must leave the rank as before the step."""
    params = [p for g in opt.param_groups for p in g["params"] if p.requires_grad]
    saved_p = [p.detach().clone() for p in params]
    saved_s = {}
    for p in params:
        if p in opt.state:
            saved_s[p] = {k: (v.clone() if torch.is_tensor(v) else copy.deepcopy(v)) for k, v in opt.state[p].items()}

    def undo() -> None:
        with torch.no_grad():
            for p, v in zip(params, saved_p):
                p.copy_(v)
        for p in params:
            if p in saved_s:
                opt.state[p] = saved_s[p]
            else:
                opt.state.pop(p, None)
    return undo


MULTI_ORDER = (
    "optimizer.step() of the State's optimizer %d (of %d) out of order: optimizer %d has not stepped in this "
    "batch yet. With several "
    "optimizers edl averages each one's gradients at its step, and every rank must run those all-reduces in "
    "the same order (a rank without samples in a step runs none of the program's code and follows the State's "
    "order): step each optimizer once per batch, in the order given to State(optimizer=[...])"
)


def _edit_source(meta) -> Optional[int]:
    """The lowest rank with samples in a step's summed metadata, when some
    rank has none (it ran none of the program's edits); else None."""
    world = (len(meta) - protocol.META_HEAD) // protocol.SLOT_WIDTH
    have = []
    for r in range(world):
        b = protocol.META_HEAD + protocol.SLOT_WIDTH * r
        have.append(int(round(meta[b])) > 0 and int(round(meta[b + 2])) > int(round(meta[b + 1])))
    if all(have) or not any(have):
        return None
    return have.index(True)


def _remove_hooks(out, phase=None) -> None:
    """Removes the step's backward-after-average hooks (phase: only those
    of that optimizer's parameters)."""
    keep = [(j, h) for j, h in out.hooks if phase is not None and j != phase]
    hooks, out.hooks = [h for j, h in out.hooks if phase is None or j == phase], keep
    for h in hooks:
        h.remove()


def _backward_after_average(ctx, out, phase, grad):
    if ctx._pending is not None and ctx._pending[2] is out and not out.called and out.n_done <= phase:
        raise EdlError(BACKWARD_AFTER_AVERAGE)
    return None


BACKWARD_AFTER_AVERAGE = (
    "a backward after this batch's gradients were averaged (by clip_grad_norm_, clip_grad_value_, "
    "GradScaler.unscale_ or ctx.average_gradients()): edl averages once per step, as DDP does at the last backward; "
    "run every backward of the batch (gradient accumulation) first, then clip, then optimizer.step()"
)

# The contexts whose steps() runs (one per process in practice): where the
# clip functions and GradScaler.unscale_ look for a pending step.
_running: List["Context"] = []


def _pending_step(tensors=None, optimizer=None):
    """The running context and outcome of a batch that is yielded and not
    yet stepped, whose optimizer is optimizer or trains one of tensors;
    (None, None) if none."""
    ctx, out, _ = _pending_upto(tensors, optimizer)
    return ctx, out


def _pending_upto(tensors=None, optimizer=None):
    """_pending_step, and how many of the State's optimizers (in its order)
    must be averaged for it: up to the last of those not yet stepped in
    this batch that is optimizer or trains one of tensors."""
    for ctx in _running:
        pend, st = ctx._pending, ctx._state
        if pend is None or st is None or pend[2].called:
            continue
        out = pend[2]
        if optimizer is not None:
            for j, o in enumerate(st.optimizers):
                if o is optimizer and j >= out.n_done:
                    return ctx, out, j + 1
            continue
        ids = {id(t) for t in tensors}
        hit = [j for j, o in enumerate(st.optimizers)
               if j >= out.n_done and any(id(p) in ids for p in _trained_params(o))]
        if hit:
            return ctx, out, max(hit) + 1
    return None, None, None


def _average_first(fn):
    """fn (a torch.nn.utils clip function) acting on the averaged gradients
    when its parameters are trained by a wrapped optimizer whose step is
    pending; torch's own otherwise."""
    @functools.wraps(fn)
    def clip(*args, **kwargs):
        if _running:
            args = list(args)
            params = args[0] if args else kwargs.get("parameters")
            params = [params] if torch.is_tensor(params) else list(params)
            if args:
                args[0] = params
            else:
                kwargs["parameters"] = params
            ctx, out, upto = _pending_upto(tensors=params)
            if ctx is not None:
                ctx._average(ctx._state, out, early=True, upto=upto)
        return fn(*args, **kwargs)

    clip._edl_torch = fn
    return clip


def _unscale_average_first(fn):
    """GradScaler.unscale_ (called by GradScaler.step when the program did
    not) on the averaged gradients, as under DDP: the inf check then sees
    the same gradients on every rank, so every rank skips the same steps."""
    @functools.wraps(fn)
    def unscale_(self, optimizer):
        ctx, out, upto = (None, None, None)
        if _running and self.is_enabled():
            ctx, out, upto = _pending_upto(optimizer=optimizer)
            if ctx is not None:
                ctx._average(ctx._state, out, early=True, upto=upto)
        r = fn(self, optimizer)
        if ctx is not None and out.n_avg >= upto and out.failed is None:
            st = self._per_optimizer_states.get(id(optimizer))
            if st and sum(v.item() for v in st["found_inf_per_device"].values()):
                if len(ctx._state.optimizers) == 1:
                    out.skip = True
                else:
                    out.skips.add(upto - 1)
        return r

    unscale_._edl_torch = fn
    return unscale_


def _torch_clips() -> Dict[str, Callable]:
    mod = torch.nn.utils.clip_grad
    return {name: getattr(getattr(mod, name), "_edl_torch", getattr(mod, name))
            for name in ("clip_grad_norm_", "clip_grad_value_")}


# torch's own clip functions, before the package wrapped them.
_TORCH_CLIP = _torch_clips()


def _patch_torch() -> None:
    """Wraps torch.nn.utils.clip_grad_norm_ / clip_grad_value_ (where
    torch.nn.utils and torch.nn.utils.clip_grad name them) and
    GradScaler.unscale_ (the class that defines it) so that, on the
    parameters of a pending edl step, they run on the averaged gradients.
    Outside ctx.steps() and on other tensors they are torch's own."""
    for name, fn in _TORCH_CLIP.items():
        for mod in (torch.nn.utils, torch.nn.utils.clip_grad):
            if getattr(mod, name, None) is fn:
                setattr(mod, name, _average_first(fn))
    scalers = [getattr(torch.cuda.amp, "GradScaler", None), getattr(getattr(torch, "amp", None), "GradScaler", None)]
    for cls in scalers:
        fn = cls.__dict__.get("unscale_") if cls is not None else None
        if fn is not None and not hasattr(fn, "_edl_torch"):
            cls.unscale_ = _unscale_average_first(fn)


_patch_torch()


OTHER_OPTIMIZER = (
    "%s.step() inside ctx.steps() on parameters of the State's model, but this optimizer is not the State's: its "
    "step would use this rank's own gradients (edl averages those of the State's optimizers only), and the model's "
    "copies on the ranks would drift apart silently (a newcomer would not get its state either). Give the State "
    "every optimizer, in the order the program steps them: State(model=..., optimizer=[opt_a, opt_b])"
)


def _guard_other_optimizers(state) -> List[Tuple[Any, Any]]:
    """For the loop's duration, the step() of every other optimizer that
    holds a parameter of the State's model raises OTHER_OPTIMIZER when one
    of those parameters requires a gradient. The optimizers are found once,
    when the loop starts (gc), and their own step is wrapped (instance
    attribute, so also the one an LR scheduler wrapped); optimizers of other
    models and all of them outside the loop are left alone. Returns what
    _unguard restores."""
    mine = {id(o) for o in state.optimizers}
    model = {id(p) for p in state.model.parameters()}
    guarded = []
    for o in gc.get_objects():
        try:
            if not isinstance(o, torch.optim.Optimizer) or id(o) in mine:
                continue
            held = [p for g in o.param_groups for p in g["params"] if id(p) in model]
        except Exception:  # noqa: BLE001 (an object that fails isinstance or has no usable param_groups)
            continue
        if not held:
            continue
        own = o.__dict__.get("step")
        inner = o.step

        def step(self, *a, _inner=inner, _held=held, **k):
            if any(p.requires_grad for p in _held):
                raise EdlError(OTHER_OPTIMIZER % (type(self).__name__,))
            return _inner(*a, **k)

        for mark in ("_with_counter", "_wrapped_by_lr_sched"):  # the marks an LR scheduler looks for
            if getattr(inner, mark, False):
                setattr(step, mark, True)
        o.step = types.MethodType(step, o)
        guarded.append((o, own, o.__dict__["step"]))
    return guarded


def _unguard(guarded) -> None:
    for o, own, ours in guarded:
        if o.__dict__.get("step") is ours:
            if own is None:
                del o.__dict__["step"]
            else:
                o.step = own


def _warn_clips_bound_early(names: Dict[str, Any]) -> None:
    """`from torch.nn.utils import clip_grad_norm_` run before `import
    edl.torch` binds torch's own function, which the package cannot see."""
    for name, v in list(names.items()):
        for torch_name, fn in _TORCH_CLIP.items():
            if v is fn:
                warnings.warn(
                    "edl: %s is torch's %s, bound before edl.torch was imported: a clip through it acts on this "
                    "rank's own gradients, not on the averaged ones (DDP's); import edl.torch first, or call "
                    "torch.nn.utils.%s, or call ctx.average_gradients() before it" % (name, torch_name, torch_name),
                    RuntimeWarning, stacklevel=3)


def _scatter_grads(params, grads, flat, sparse) -> None:
    """Copies the summed vector back into the gradients it was
    concatenated from; the ones that were sparse become sparse again."""
    off = 0
    for i, (p, g) in enumerate(zip(params, grads)):
        k = g.numel()
        g.copy_(flat[off:off + k].view_as(g))
        off += k
        if i in sparse:
            p.grad = g.to_sparse(sparse[i])


def _ends_epoch(meta) -> bool:
    """Whether a step's summed metadata ends the epoch: no samples and no
    vote (worker/core/block.go: DecideStep's EpochDone)."""
    return all(int(round(meta[i])) == 0 for i in (protocol.COUNT, protocol.SWITCH, protocol.STOP, protocol.BLOCKED))


# SETUP_TIMEOUT_MAX_S bounds a group setup's timeout after setups that timed
# out in a row (setup_timeout): the bound the worker gives a restarted
# program's setup (worker/live/liverestart.go, liveRestartTimeout).
SETUP_TIMEOUT_MAX_S = 30.0


def setup_timeout(base: float, peer_failures: int) -> float:
    """The timeout of a group setup after peer_failures setups in a row that
    failed for a reason a peer or the load explains: the job's timeout
    doubled per failure, at most SETUP_TIMEOUT_MAX_S (never below base)."""
    return max(base, min(base * 2 ** min(peer_failures, 16), SETUP_TIMEOUT_MAX_S))


def init(timeout=None, standalone=None, backend=None):
    """Connects to the program's edl worker (EDL_SOCKET). Outside edl it
    raises EdlError saying how to run the program, unless standalone (or
    EDL_STANDALONE=1): then it warns and trains in this one process.

    timeout bounds every collective and the process group's setup in
    seconds (default: the worker's, EDL_LIVE_TIMEOUT_S, else 5)."""
    if timeout is None:
        timeout = float(os.environ.get("EDL_LIVE_TIMEOUT_S") or 5)
    path = os.environ.get("EDL_SOCKET")
    if not path:
        if standalone is None:
            standalone = os.environ.get("EDL_STANDALONE") == "1"
        if not standalone:
            raise EdlError(HOW_TO_RUN)
        warnings.warn("edl: not under an edl worker (EDL_SOCKET unset): training in this one process, without elasticity",
                      RuntimeWarning, stacklevel=2)
        return Context(None, timeout, standalone=True, partitions=int(os.environ.get("EDL_PARTITIONS") or 1))
    if path in _live:
        raise EdlError("edl.torch.init() was called a second time in this process: its worker (EDL_SOCKET=%s) serves "
                       "one connection, the first init()'s; call init() once and pass the Context it returned" % path)
    ctx = Context(protocol.Client(path), timeout, backend=backend)
    _live[path] = ctx
    return ctx
