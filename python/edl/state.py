"""What a live program hands over: its State, and the DataLoader of its data set.

A newcomer (or a member behind) receives the State from the generation's
root; the DataLoader turns the worker's sample ranges into batches.
"""

from __future__ import annotations

import inspect
import random
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from .protocol import EdlError

__all__ = ["State", "DataLoader", "FIXED_GLOBAL", "FIXED_LOCAL"]

# The scheduler attributes edl patches (Context._wrap); a scheduler's
# state_dict is its __dict__, so they are left out of the hand-over.
_SCHED_PATCHED = ("step", "_edl_inner_step")


class State:
    """What a newcomer receives at a hand-over: model, optimizer(s),
    scheduler(s), the RNG states (torch, Python's random, numpy's when
    imported) and any extra objects with state_dict/load_state_dict.

    Several optimizers (a GAN's generator and discriminator, an encoder
    and a decoder): State(model=nn.ModuleDict({"g": g, "d": d}),
    optimizer=[opt_d, opt_g]) (or optimizers=[...]). Each one's step()
    averages its own parameters' gradients over the ranks first; every
    batch steps each of them once, in this order (docs/live.md, "Several
    optimizers"). scheduler= may be a list too: every scheduler is stepped
    once per applied step, after the batch's last optimizer step."""

    def __init__(self, model: Optional[torch.nn.Module] = None, optimizer: Any = None,
                 scheduler: Any = None, optimizers: Optional[Sequence[torch.optim.Optimizer]] = None,
                 **extra: Any) -> None:
        if model is None or not isinstance(model, torch.nn.Module):
            raise EdlError("State(model=...): want a torch.nn.Module, got %r" % (type(model).__name__,))
        if optimizers is not None:
            if optimizer is not None:
                raise EdlError("State(optimizer=..., optimizers=...): give one of them (optimizers= is the list of "
                               "every optimizer)")
            optimizer = list(optimizers) if isinstance(optimizers, (list, tuple)) else optimizers
        if optimizer is None:
            raise EdlError("State(optimizer=...): the optimizer is required: it holds state (momentum) a newcomer "
                           "must receive, and its step() is where edl averages the gradients")
        opts = list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]
        if not opts:
            raise EdlError("State(optimizer=[]): the optimizer is required: give at least one")
        for o in opts:
            if not isinstance(o, torch.optim.Optimizer):
                raise EdlError("State(optimizer=...): want a torch.optim.Optimizer, got %r" % (type(o).__name__,))
        if len({id(o) for o in opts}) != len(opts):
            raise EdlError("State(optimizer=[...]): an optimizer is listed twice")
        owned = {id(p) for p in model.parameters()}
        held: Dict[int, int] = {}
        for i, o in enumerate(opts):
            for g in o.param_groups:
                for p in g["params"]:
                    if id(p) not in owned:
                        if len(opts) > 1:
                            raise EdlError("State: optimizer %d holds a parameter that is not the model's: with several "
                                           "models (a GAN's generator and discriminator) pass them as one, "
                                           "model=torch.nn.ModuleDict({\"g\": g, \"d\": d})" % i)
                        raise EdlError("State: the optimizer holds a parameter that is not the model's")
                    if held.get(id(p), i) != i:
                        raise EdlError("State: optimizers %d and %d both hold one parameter: edl averages each "
                                       "optimizer's gradients at its step, so a parameter belongs to one optimizer"
                                       % (held[id(p)], i))
                    held[id(p)] = i
        scheds = [s for s in (scheduler if isinstance(scheduler, (list, tuple)) else [scheduler]) if s is not None]
        for s in scheds:
            if not hasattr(s, "state_dict"):
                raise EdlError("State(scheduler=...): want an LR scheduler with state_dict(), got %r" % (type(s).__name__,))
            if _needs_argument(s.step):
                raise EdlError(PLATEAU % (type(s).__name__,))
        for k, v in extra.items():
            if not (hasattr(v, "state_dict") and hasattr(v, "load_state_dict")):
                raise EdlError("State(%s=...): extra state needs state_dict() and load_state_dict()" % k)
            if isinstance(v, torch.optim.Optimizer) and any(id(p) in owned for g in v.param_groups for p in g["params"]):
                raise EdlError(EXTRA_OPTIMIZER % (k, k))
        self.model, self.optimizer, self.extra = model, opts[0], extra
        self.scheduler = scheds[0] if scheds else None
        # Every optimizer (the first is .optimizer) and every scheduler (the
        # first is .scheduler), in the order given.
        self.optimizers: List[torch.optim.Optimizer] = opts
        self.schedulers: List[Any] = scheds

    def state_dict(self) -> Dict[str, Any]:
        d = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
             "rng": {"torch": torch.get_rng_state(), "random": random.getstate()}}
        if len(self.optimizers) > 1:
            d["more_optimizers"] = [o.state_dict() for o in self.optimizers[1:]]
        if self.scheduler is not None:
            d["scheduler"] = _sched_state(self.scheduler)
        if len(self.schedulers) > 1:
            d["more_schedulers"] = [_sched_state(s) for s in self.schedulers[1:]]
        if "numpy" in sys.modules:
            d["rng"]["numpy"] = sys.modules["numpy"].random.get_state()
        d["extra"] = {k: v.state_dict() for k, v in self.extra.items()}
        return d

    def load_state_dict(self, d: Dict[str, Any]) -> None:
        more = d.get("more_optimizers", [])
        if len(more) != len(self.optimizers) - 1:
            raise EdlError("State.load_state_dict: the state holds %d optimizers, this State has %d"
                           % (1 + len(more), len(self.optimizers)))
        self.model.load_state_dict(d["model"])
        self.optimizer.load_state_dict(d["optimizer"])
        for o, od in zip(self.optimizers[1:], more):
            o.load_state_dict(od)
        if self.scheduler is not None and "scheduler" in d:
            self.scheduler.load_state_dict({k: v for k, v in d["scheduler"].items() if k not in _SCHED_PATCHED})
        for s, sd in zip(self.schedulers[1:], d.get("more_schedulers", [])):
            s.load_state_dict({k: v for k, v in sd.items() if k not in _SCHED_PATCHED})
        torch.set_rng_state(d["rng"]["torch"])
        random.setstate(d["rng"]["random"])
        if "numpy" in d["rng"] and "numpy" in sys.modules:
            sys.modules["numpy"].random.set_state(d["rng"]["numpy"])
        for k, v in self.extra.items():
            if k in d.get("extra", {}):
                v.load_state_dict(d["extra"][k])


def _sched_state(s: Any) -> Dict[str, Any]:
    return {k: v for k, v in s.state_dict().items() if k not in _SCHED_PATCHED}


EXTRA_OPTIMIZER = (
    "State(%s=<optimizer>): an optimizer passed as an extra would step on each rank's own gradients (edl averages "
    "only the State's optimizers' gradients), so the model's copies would drift apart; list it with the others: "
    "State(optimizer=[opt, %s]) (each one's step() then averages its own parameters' gradients)"
)


PLATEAU = (
    "State(scheduler=%s): its step() takes a metric (scheduler.step(val_loss)), and edl steps State's "
    "scheduler once per applied step with none; keep it out of scheduler=: pass it as an extra "
    "(State(..., plateau=sched), so a newcomer receives it) and call sched.step(metric) yourself, in "
    "on_epoch_end, with the same value on every rank (all-reduce it, or the ranks' learning rates part)"
)


def _needs_argument(step: Callable[..., Any]) -> bool:
    """Whether a scheduler's step() has a parameter without a default
    (ReduceLROnPlateau's metrics)."""
    try:
        params = inspect.signature(step).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


FIXED_GLOBAL, FIXED_LOCAL = "fixed_global", "fixed_local"

# torch.utils.data.DataLoader's arguments, and why edl's DataLoader has none
# of them (a program moved from torch's passes them out of habit).
_TORCH_ONLY = {
    "shuffle": "edl decides which samples every step takes (its partitions, in order), so that every sample "
               "of an epoch is used exactly once whatever joins or leaves",
    "sampler": "edl's partitions are the sampler",
    "batch_sampler": "edl's partitions are the sampler",
    "drop_last": "every sample of an epoch is in exactly one step, the short last batch of a partition "
                 "included",
    "num_workers": "the batch of a step is known only when the step starts; it is built in this process "
                   "(give the data set a batch(ids) method to fetch a whole range at once)",
    "pin_memory": "the batch is built in this process; call .pin_memory() on it yourself",
    "persistent_workers": "there are no loader worker processes (num_workers)",
    "prefetch_factor": "there are no loader worker processes (num_workers)",
    "worker_init_fn": "there are no loader worker processes (num_workers)",
    "timeout": "there are no loader worker processes (num_workers)",
    "multiprocessing_context": "there are no loader worker processes (num_workers)",
    "generator": "there is no shuffling to seed",
}


class DataLoader:
    """Batches of a map-style data set (len and [i]) whose indices come from
    edl's partitions. policy is the built-in trainer's batch policy:
    fixed_global (default): batch_size is the global batch, split over the
    current world each step, the learning rate unchanged; fixed_local:
    every rank takes batch_size, and the optimizer's learning rate is scaled
    by world / initial world (the job's workers.min) for the update only
    (the scheduler keeps seeing the unscaled rate)."""

    def __init__(self, dataset: Any, batch_size: int, collate_fn: Optional[Callable[[list], Any]] = None,
                 policy: str = FIXED_GLOBAL, **torch_args: Any) -> None:
        for k in torch_args:
            if k in _TORCH_ONLY:
                raise EdlError("DataLoader(%s=...): edl's DataLoader has no %s: %s; remove it" % (k, k, _TORCH_ONLY[k]))
            raise EdlError("DataLoader(%s=...): unknown argument; edl's DataLoader takes dataset, batch_size, "
                           "collate_fn and policy" % (k,))
        if isinstance(dataset, torch.utils.data.IterableDataset):
            raise EdlError("DataLoader: %s is an IterableDataset: edl hands out sample indices (ranges of "
                           "0..len-1, every sample once per epoch), so the data set must be map-style: "
                           "__len__ and __getitem__(i)" % (type(dataset).__name__,))
        if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
            raise EdlError("DataLoader: the data set needs __len__ and __getitem__ (a map-style data set)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise EdlError("DataLoader(batch_size=%r): want an int >= 1" % (batch_size,))
        if policy not in (FIXED_GLOBAL, FIXED_LOCAL):
            raise EdlError("DataLoader(policy=%r): want %r or %r" % (policy, FIXED_GLOBAL, FIXED_LOCAL))
        self.dataset, self.batch_size, self.policy = dataset, batch_size, policy
        self.collate_fn = collate_fn or torch.utils.data.default_collate

    def batch(self, ids: Sequence[int]) -> Any:
        if callable(getattr(self.dataset, "batch", None)):
            return self.dataset.batch(ids)  # a data set may fetch a range at once
        return self.collate_fn([self.dataset[i] for i in ids])
