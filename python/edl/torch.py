"""Stop-free elastic PyTorch under an edl worker (trainer.exec.mode "live").

    import edl.torch as et
    ctx = et.init()                                   # connects to the local edl worker
    state = et.State(model=model, optimizer=opt, scheduler=sched)
    loader = et.DataLoader(dataset, batch_size=32)    # the global batch
    for batch in ctx.steps(loader, state, epochs=3):  # one applied step per batch
        loss = lossf(model(batch[0]), batch[1])
        loss.backward()
        opt.step(); opt.zero_grad()                   # step() averages the gradients first
        ctx.record(loss)                              # optional: the job's progress loss

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
- The scheduler, if given, is stepped by the package once per applied step;
  do not call scheduler.step() yourself.
- At every generation switch the process group is rebuilt in process from a
  fresh store prefix; a newcomer (or a member behind) gets model, optimizer,
  scheduler, RNG and data cursor from the root by a broadcast in the new group.
"""

import datetime
import os
import pickle
import random
import sys
import time
import warnings

import torch
import torch.distributed as dist

from . import ckpt, protocol
from . import store as store_mod
from .protocol import EdlError

__all__ = ["init", "State", "DataLoader", "Context", "EdlError"]

# Consecutive failures to build a group in process with every member
# present, after which the program asks its worker to restart it (the
# fallback to restart mode); a setup that lacked a peer does not count.
MAX_INIT_FAILURES = 3

# Consecutive failures that a peer explains (on gloo: a store or socket
# timeout, a connection reset, refused or closed: a peer died or froze
# between the barrier and the end of the setup, or the machine is
# overloaded) count toward this larger bound only: they are not the
# backend failing to re-initialise, and under load or repeated kills three
# of them in a row switched whole jobs to restart mode.
MAX_PEER_FAILURES = 10

_PEER_ERRORS = ("timeout", "timed out", "connection reset", "connection refused", "connection closed",
                "broken pipe", "end of file")


def _peer_failure(backend, e):
    """Whether a failed setup is explained by a peer (gloo only: with NCCL
    every failure counts, since its re-initialisation is what is fragile)."""
    if backend == "nccl":
        return False
    s = repr(e).lower()
    return any(k in s for k in _PEER_ERRORS)

HOW_TO_RUN = (
    "edl.torch.init(): EDL_SOCKET is not set: this program is not running under an edl worker. "
    "Run it as an edl job with trainer.kind \"exec\" and trainer.exec.mode \"live\" "
    "(for example `edl dev` then `edl submit examples/torch/job_live.json`), "
    "or pass standalone=True (or set EDL_STANDALONE=1) to train in this one process."
)


# The scheduler attributes edl patches (Context._wrap); a scheduler's
# state_dict is its __dict__, so they are left out of the hand-over.
_SCHED_PATCHED = ("step", "_edl_inner_step")


def _log(msg):
    sys.stderr.write("edl: %s\n" % msg)
    sys.stderr.flush()


class State:
    """What a newcomer receives at a hand-over: model, optimizer, scheduler,
    the RNG states (torch, Python's random, numpy's when imported) and any
    extra objects with state_dict/load_state_dict."""

    def __init__(self, model=None, optimizer=None, scheduler=None, **extra):
        if model is None or not isinstance(model, torch.nn.Module):
            raise EdlError("State(model=...): want a torch.nn.Module, got %r" % (type(model).__name__,))
        if optimizer is None:
            raise EdlError("State(optimizer=...): the optimizer is required: it holds state (momentum) a newcomer "
                           "must receive, and its step() is where edl averages the gradients")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise EdlError("State(optimizer=...): want a torch.optim.Optimizer, got %r" % (type(optimizer).__name__,))
        owned = {id(p) for p in model.parameters()}
        for g in optimizer.param_groups:
            for p in g["params"]:
                if id(p) not in owned:
                    raise EdlError("State: the optimizer holds a parameter that is not the model's")
        if scheduler is not None and not hasattr(scheduler, "state_dict"):
            raise EdlError("State(scheduler=...): want an LR scheduler with state_dict(), got %r" % (type(scheduler).__name__,))
        for k, v in extra.items():
            if not (hasattr(v, "state_dict") and hasattr(v, "load_state_dict")):
                raise EdlError("State(%s=...): extra state needs state_dict() and load_state_dict()" % k)
        self.model, self.optimizer, self.scheduler, self.extra = model, optimizer, scheduler, extra

    def state_dict(self):
        d = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
             "rng": {"torch": torch.get_rng_state(), "random": random.getstate()}}
        if self.scheduler is not None:
            d["scheduler"] = {k: v for k, v in self.scheduler.state_dict().items() if k not in _SCHED_PATCHED}
        if "numpy" in sys.modules:
            d["rng"]["numpy"] = sys.modules["numpy"].random.get_state()
        d["extra"] = {k: v.state_dict() for k, v in self.extra.items()}
        return d

    def load_state_dict(self, d):
        self.model.load_state_dict(d["model"])
        self.optimizer.load_state_dict(d["optimizer"])
        if self.scheduler is not None and "scheduler" in d:
            self.scheduler.load_state_dict({k: v for k, v in d["scheduler"].items() if k not in _SCHED_PATCHED})
        torch.set_rng_state(d["rng"]["torch"])
        random.setstate(d["rng"]["random"])
        if "numpy" in d["rng"] and "numpy" in sys.modules:
            sys.modules["numpy"].random.set_state(d["rng"]["numpy"])
        for k, v in self.extra.items():
            if k in d.get("extra", {}):
                v.load_state_dict(d["extra"][k])


FIXED_GLOBAL, FIXED_LOCAL = "fixed_global", "fixed_local"


class DataLoader:
    """Batches of a map-style data set (len and [i]) whose indices come from
    edl's partitions. policy is the built-in trainer's batch policy:
    fixed_global (default): batch_size is the global batch, split over the
    current world each step, the learning rate unchanged; fixed_local:
    every rank takes batch_size, and the optimizer's learning rate is scaled
    by world / initial world (the job's workers.min) for the update only
    (the scheduler keeps seeing the unscaled rate)."""

    def __init__(self, dataset, batch_size, collate_fn=None, policy=FIXED_GLOBAL):
        if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
            raise EdlError("DataLoader: the data set needs __len__ and __getitem__ (a map-style data set)")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise EdlError("DataLoader(batch_size=%r): want an int >= 1" % (batch_size,))
        if policy not in (FIXED_GLOBAL, FIXED_LOCAL):
            raise EdlError("DataLoader(policy=%r): want %r or %r" % (policy, FIXED_GLOBAL, FIXED_LOCAL))
        self.dataset, self.batch_size, self.policy = dataset, batch_size, policy
        self.collate_fn = collate_fn or torch.utils.data.default_collate

    def batch(self, ids):
        if hasattr(self.dataset, "batch"):
            return self.dataset.batch(ids)  # a data set may fetch a range at once
        return self.collate_fn([self.dataset[i] for i in ids])


class _Superseded(Exception):
    """A newer generation replaced the one being set up."""


class _PeersMissing(RuntimeError):
    """A generation's setup failed for want of a peer (dead, or elsewhere):
    not a failure of the in-process re-initialisation itself."""


class _Outcome:
    def __init__(self):
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


class Context:
    """The program's link to its worker; made by init()."""

    def __init__(self, client, timeout, standalone=False, partitions=1, backend=None):
        self.client = client
        self.timeout = timeout
        self.standalone = standalone
        self.partitions = partitions
        self.rank, self.world, self.generation = 0, 1, 0
        self.applied = -1  # the job's last applied step (counted from 0), as the worker says
        self.backend = backend  # None: nccl when the model is on a GPU, else gloo (set in steps)
        self._store = None
        self._wstore = None  # the current generation's edl.store.WorkerStore
        self._clients = {}
        self._loss = 0.0
        self._pending = None
        self._grad_buf = None  # (params, flat, views): the gradients as views of one flat buffer
        # ended says why steps() returned: "done" (the job's last epoch
        # ended), "leave" (this worker left) or "stop" (cancelled).
        self.ended = None
        self._state = None
        self.initial_world, self._policy = 1, FIXED_GLOBAL
        self.stats = {"switches": 0, "failures": 0, "handovers": 0}
        self._saver = ckpt.Saver()  # the checkpoints the worker asks for (edl/ckpt.py)
        if not standalone:
            # Every program hosts a store server; rank 0's serves its group
            # (a fresh prefix per generation).
            self._store = _host_store(timeout)

    # --- the step loop -------------------------------------------------

    def record(self, loss):
        """Records this rank's loss of the current batch (a mean over it)
        for the job's progress. Before optimizer.step() it rides in the
        gradient all-reduce (the progress shows the global batch's mean);
        after it, this rank's own mean stands in for it."""
        self._loss = float(loss.detach().item() if torch.is_tensor(loss) else loss)
        out = self._pending[2] if self._pending is not None else None
        if out is not None and out.stepped and out.total > 0 and not out.loss_reduced:
            out.loss = self._loss * out.total

    @property
    def finished(self):
        """True once steps() returned because training reached its end (not
        because this worker left or the job was cancelled)."""
        return self.ended == "done"

    def steps(self, loader, state, epochs=1):
        """Yields this rank's batch of every step until the job ends or this
        worker leaves; every yielded batch must end in one optimizer.step()."""
        if not isinstance(loader, DataLoader):
            raise EdlError("steps(loader=...): want an edl.torch.DataLoader, got %r" % (type(loader).__name__,))
        if not isinstance(state, State):
            raise EdlError("steps(state=...): want an edl.torch.State, got %r" % (type(state).__name__,))
        if not isinstance(epochs, int) or epochs < 1:
            raise EdlError("steps(epochs=%r): want an int >= 1" % (epochs,))
        self._wrap(state)
        if self.backend is None:
            self.backend = "nccl" if next(state.model.parameters()).is_cuda else "gloo"
        if self.standalone:
            yield from self._standalone_steps(loader, state, epochs)
            self.ended = "done"
            return
        hello = self.client.call("hello", dataset_len=len(loader.dataset), store_port=self._store.port,
                                 epochs=epochs, pid=os.getpid())
        self.timeout = hello.get("timeout_s") or self.timeout
        self.initial_world = hello.get("initial_world") or 1
        self._policy = loader.policy
        after, init_failures, peer_failures = 0, 0, 0
        try:
            while True:
                g = self.client.call("gen", after=after)
                if g["action"] == "restart":  # the job is in restart mode (docs/live.md, "Fallback")
                    self._exit_for_restart(g.get("save"), g["applied"], state, "the next generation")
                if g["action"] != "run":
                    self.ended = g["action"]
                    return
                after = g["gen"]
                self.generation, self.rank, self.world = g["gen"], g["rank"], g["world"]
                if g.get("restore"):  # nobody held the state: the worker's checkpoint
                    self._restore(g, state)
                try:
                    self._build_group(g)
                    self._sync_state(g, state)
                    init_failures, peer_failures = 0, 0
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
                        os._exit(75)  # LiveExitRestart in worker/live.go
                    self.client.call("failed", gen=after, error=repr(e))
                    continue
                action = yield from self._generation(loader, state)
                if action in ("leave", "done", "stop"):
                    self.ended = action
                    return
                self.stats["switches"] += 1
        finally:
            self._saver.wait()
            self._destroy()

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
                if not out.stepped and out.failed is None:
                    raise EdlError("steps(): call optimizer.step() once for every batch (it averages the gradients)")
            else:
                # No samples for this rank: it still takes part in the step.
                state.optimizer.zero_grad(set_to_none=False)
                self._collective(state, zero=True)
            self._pending = None
            if out.failed is not None:
                self.stats["failures"] += 1
                # Close this rank's connections now, not at the next setup: a
                # peer blocked on this rank in the same collective then fails
                # at once instead of when its timeout ends.
                self._destroy()
                self.client.call("failed", gen=self.generation, error=repr(out.failed))
                return "failed"
            rep = self.client.call("step", gen=self.generation, meta=[int(round(v)) for v in out.meta],
                                   loss=out.loss)
            self.applied = rep["applied"]
            if rep.get("checkpoint"):
                self._saver.save(state, rep["checkpoint"], rep["applied"])
            if rep["action"] != "continue":
                return rep["action"]

    def _wrap(self, state):
        if self._state is state:
            return
        self._state = state
        opt, ctx = state.optimizer, self
        inner = opt.step

        def step(closure=None):
            if ctx._pending is None:
                raise EdlError("optimizer.step() outside ctx.steps(): edl steps only the batches it hands out")
            if closure is not None:
                raise EdlError("optimizer.step(closure): closures are not supported under edl")
            return ctx._collective(state, zero=False)

        opt.step = step
        opt._edl_inner_step = inner
        sched = state.scheduler
        if sched is not None:
            sched._edl_inner_step = sched.step

            def no_user_step(*a, **k):
                raise EdlError("scheduler.step(): edl steps the scheduler once per applied step; remove this call")

            sched.step = no_user_step

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

    def _grads_flat(self, params, zero):
        """The gradients as views of one flat buffer with one more element
        (the loss) at its end, so the all-reduce needs no copy in or out;
        None when the parameters differ in dtype or device, or a gradient
        is sparse (then _collective concatenates). A gradient that is not
        its view (the first step, zero_grad(set_to_none=True)) is copied
        in once and replaced by the view; backward then accumulates into
        the view in place."""
        buf = self._grad_buf
        if buf is None or len(buf[0]) != len(params) or any(a is not b for a, b in zip(buf[0], params)):
            p0 = params[0]
            if any(p.dtype != p0.dtype or p.device != p0.device or (p.grad is not None and p.grad.is_sparse) for p in params):
                return None
            flat = torch.zeros(sum(p.numel() for p in params) + 1, dtype=p0.dtype, device=p0.device)
            views, off = [], 0
            for p in params:
                views.append(flat[off:off + p.numel()].view_as(p))
                off += p.numel()
            buf = self._grad_buf = (list(params), flat, views)
        _, flat, views = buf
        if zero:
            flat.zero_()
        for p, v in zip(params, views):
            if p.grad is not v:
                if p.grad is None or zero:
                    v.zero_()
                elif p.grad.is_sparse:
                    self._grad_buf = None
                    return None
                else:
                    v.copy_(p.grad)
                p.grad = v
        return flat

    def _collective(self, state, zero):
        """The step's all-reduces, then the update if both completed."""
        meta, n, out = self._pending
        if out.stepped or out.failed is not None:
            raise EdlError("optimizer.step() called twice for one batch")
        params = [p for g in state.optimizer.param_groups for p in g["params"]]
        try:
            if out.meta_err is not None:
                raise out.meta_err
            mt = out.meta_t
            if out.meta_work is not None:
                out.meta_work.wait()
            elif mt is None:  # standalone
                mt = torch.tensor(meta, dtype=torch.float64)
            total = int(round(mt[protocol.COUNT].item()))
            out.meta, out.loss, out.total = mt.tolist(), 0.0, total
            if total > 0:
                # Each rank's gradients weighted by its share n/total, the
                # loss times n in the last element: the sum is the global
                # batch's mean gradient and its summed loss.
                flat = self._grads_flat(params, zero)
                grads = None
                if flat is None:
                    grads = []
                    for p in params:
                        if p.grad is None or zero:
                            p.grad = torch.zeros_like(p)
                        grads.append(p.grad)
                    flat = torch.cat([g.reshape(-1) for g in grads] + [grads[0].new_zeros(1)])
                flat.mul_(n / total)
                flat[-1] = self._loss * n
                if not self.standalone:
                    dist.all_reduce(flat)
                out.loss = flat[-1].item()
                out.loss_reduced = out.loss != 0.0  # some rank recorded before step()
                if grads is not None:
                    off = 0
                    for g in grads:
                        k = g.numel()
                        g.copy_(flat[off:off + k].view_as(g))
                        off += k
        except RuntimeError as e:
            out.failed = e
            return None
        out.stepped = True
        if total > 0:
            scale = self.world / self.initial_world if self._policy == FIXED_LOCAL else 1.0
            saved = [g["lr"] for g in state.optimizer.param_groups]
            if scale != 1.0:
                for g in state.optimizer.param_groups:
                    g["lr"] = g["lr"] * scale
            try:
                state.optimizer._edl_inner_step()
            finally:
                for g, lr in zip(state.optimizer.param_groups, saved):
                    g["lr"] = lr
            if state.scheduler is not None:
                state.scheduler._edl_inner_step()
        return None

    # --- groups and hand-over ------------------------------------------

    def _build_group(self, g):
        ckpt.test_fail_reinit(self)
        t0 = time.perf_counter()
        self._destroy()
        t1 = time.perf_counter()
        t = datetime.timedelta(seconds=self.timeout)
        wstore = None
        try:
            if self.client is not None:
                # The generation's store behind this program's own worker
                # (edl/store.py): no connection to rank 0's program, whose
                # death torch 1.13 could turn into an abort of this one.
                base = wstore = store_mod.WorkerStore(self.client, g["gen"], self.timeout)
                self._wstore = wstore  # referenced while its group lives (edl/store.py)
            elif g["rank"] == 0:  # no worker (scripts/gpu-check.sh): this program's TCPStore
                base = self._store
            else:
                key = (g["master_addr"], g["master_port"])
                base = self._clients.get(key)
                if base is None:
                    base = dist.TCPStore(g["master_addr"], g["master_port"], is_master=False, timeout=t)
                    self._clients = {key: base}
            store = dist.PrefixStore("edl/gen/%d" % g["gen"], base)
            self._arrive(store, g)
            t2 = time.perf_counter()
        except (_Superseded, EdlError):
            raise
        except store_mod.StoreSuperseded:
            raise _Superseded()
        except (RuntimeError, OSError) as e:  # the store failed, or (TCPStore) rank 0's is gone or frozen
            # A timed-out request's late answer would desynchronise the
            # connection: a new one next time.
            self._clients = {}
            if isinstance(e, _PeersMissing):
                raise
            raise _PeersMissing("generation %d: rank 0's store %s:%s: %r" % (g["gen"], g["master_addr"], g["master_port"], e)) from e
        try:
            dist.init_process_group(self.backend, store=store, rank=g["rank"], world_size=g["world"], timeout=t)
        except RuntimeError:
            if wstore is not None and wstore.superseded:
                raise _Superseded()
            raise
        if os.environ.get("EDL_LOG_SETUP") == "1":  # the setup's cost, for measurements (docs/live.md)
            t3 = time.perf_counter()
            _log("setup of generation %d rank %d/%d: destroy %.1f ms, barrier %.1f ms, init %.1f ms (%s store)"
                 % (g["gen"], g["rank"], g["world"], 1000 * (t1 - t0), 1000 * (t2 - t1), 1000 * (t3 - t2),
                    "worker" if wstore is not None else "tcp"))

    def _arrive(self, store, g):
        """Waits until every rank of generation g has reached its setup, so
        init_process_group starts together; gives up at once when a newer
        generation replaced g (a member skipped it: waiting for it would
        only time out, and the members would keep missing each other's
        setups), and after the timeout when a rank never came."""
        world, gen = g["world"], g["gen"]
        # torch 1.13 sets a store connection's receive timeout only in a
        # wait: before one, an add to a frozen store (SIGSTOP) would block
        # forever. A wait on this rank's own key sets it (at once, or after
        # the timeout when the store does not answer).
        mine = "edl_rank/%d" % g["rank"]
        store.set(mine, "1")
        store.wait([mine], datetime.timedelta(seconds=self.timeout))
        store.add("edl_arrived", 1)
        deadline = time.monotonic() + self.timeout
        asked = 0.0
        while store.add("edl_arrived", 0) < world:
            now = time.monotonic()
            if now >= deadline:
                raise _PeersMissing("generation %d: %d of %d ranks reached the setup within %.0f s"
                                    % (gen, store.add("edl_arrived", 0), world, self.timeout))
            if now - asked >= 0.05:
                asked = now
                if self.client.call("latest", gen=gen).get("gen", 0) > gen:
                    raise _Superseded()
            time.sleep(0.005)

    def _destroy(self):
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except RuntimeError:
                pass

    def _sync_state(self, g, state):
        """Every member at the same applied step keeps its state; otherwise
        (a newcomer, a member behind, the first generation) the root's state
        is broadcast, with the worker's training counters."""
        world, rank, root = g["world"], g["rank"], g["root"]
        dev = next(state.model.parameters()).device if self.backend == "nccl" else torch.device("cpu")
        v = torch.zeros(2 * world, dtype=torch.float64, device=dev)
        if g["have"]:
            v[2 * rank], v[2 * rank + 1] = g["applied"] + 2, 1
        dist.all_reduce(v)
        steps = {int(v[2 * r].item()) for r in range(world)}
        same = all(v[2 * r + 1].item() == 1 for r in range(world)) and len(steps) == 1 and g["applied"] >= 0
        if same:
            return
        start = time.time()
        obj = [None]
        if rank == root:
            obj = [pickle.dumps({"state": state.state_dict(), "progress": g["progress"]})]
        dist.broadcast_object_list(obj, src=root)
        if rank != root:
            d = pickle.loads(obj[0])
            state.load_state_dict(d["state"])
            self.client.call("adopt", progress=d["progress"])
            self.stats["handovers"] += 1
            _log("state received in generation %d (step %d, %.0f ms)" % (g["gen"], d["progress"]["applied"], 1000 * (time.time() - start)))

    def _exit_for_restart(self, save, applied, state, why):
        """Restart mode: the state goes to the worker's file, then the
        process exits and its worker starts it again."""
        self._saver.wait()
        if save:
            self._saver.save(state, save, applied, background=False)
        _log("restart mode: exiting for %s (state of step %d %s)" % (why, applied, "saved" if save else "none"))
        self.client.close()
        os._exit(75)  # LiveExitRestart in worker/live.go

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
                for s in range(first, last, loader.batch_size):
                    e = min(s + loader.batch_size, last)
                    share = {"part": p, "start": s - first, "end": e - first, "first": first, "fin": e == last}
                    meta = [0.0] * protocol.meta_len(1)
                    k = protocol.fill_meta(meta, 0, share)
                    out = _Outcome()
                    self._pending, self._loss = (meta, k, out), 0.0
                    yield loader.batch(range(s, e))
                    self.applied += 1
                    if not out.stepped:
                        raise EdlError("steps(): call optimizer.step() once for every batch (it averages the gradients)")
                    self._pending = None


def _host_store(timeout):
    """This program's TCPStore server; a program restarted in place binds
    its predecessor's port (EDL_STORE_PORT), which its generation names."""
    t = datetime.timedelta(seconds=timeout)
    port = int(os.environ.get("EDL_STORE_PORT") or 0)
    if port:
        try:
            return dist.TCPStore("0.0.0.0", port, is_master=True, wait_for_workers=False, timeout=t)
        except RuntimeError as e:
            _log("store port %d is taken (%s): another one (the worker re-registers)" % (port, e))
    return dist.TCPStore("0.0.0.0", 0, is_master=True, wait_for_workers=False, timeout=t)


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
    return Context(protocol.Client(path), timeout, backend=backend)
