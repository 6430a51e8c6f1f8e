"""Gradient edits under edl.torch: the helpers that let torch's own
clip_grad_norm_ / clip_grad_value_ and GradScaler.unscale_ act on the
averaged gradients (as under DistributedDataParallel), the hooks that refuse
a backward after an early average, and the guard against an optimizer of
the model that the State does not name. Context (edl/torch.py) does the
averaging; this module finds the step a call belongs to (_running).
"""

from __future__ import annotations

import copy
import functools
import gc
import types
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from . import protocol
from .protocol import EdlError


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
_running: List[Any] = []  # edl.torch.Context


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


