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

import math
import numbers
import os
import sys
import time
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch
import torch.distributed as dist

from . import ckpt, protocol
from .group import (MAX_INIT_FAILURES, MAX_PEER_FAILURES, Abandoned, GroupMixin, _host_store, _log,  # noqa: F401
                    _peer_failure, _PeersMissing, _Superseded)
from .protocol import EdlError
from .state import FIXED_GLOBAL, FIXED_LOCAL, DataLoader, State
from .average import AveragingMixin, _Outcome  # noqa: F401 (_Outcome: the tests build one)
from .multiopt import MultiOptimizerMixin
from .grads import (_TORCH_CLIP, _ends_epoch, _guard_other_optimizers, _remove_hooks, _running,  # noqa: F401
                    _unguard, _warn_clips_bound_early)

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


class Context(GroupMixin, AveragingMixin, MultiOptimizerMixin):
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
