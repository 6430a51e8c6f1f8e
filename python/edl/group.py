"""The generation's process group: its setup, the hand-over, its collectives.

Context (edl.torch) builds one group per generation in process: it
destroys the old one, meets the other ranks at a barrier in the
generation's store (edl.store.WorkerStore, kept by its own worker), calls
init_process_group, then hands the root's state to whoever lacks it.

Every collective on gloo is started asynchronously and waited for in
slices of POLL_S: between two, the program asks its worker ("latest")
whether the generation can still complete a collective. A dead peer's
generation is over for the worker within milliseconds (a survivor reported
it broken, or the leader replaced it without the dead one), so every
survivor leaves the collective it waits in at once (Abandoned) instead of
waiting for gloo's timeout, and the step in flight is discarded as after
any failed collective. A frozen peer raises nothing: gloo's timeout (the
group's, --live-timeout) still bounds the wait.

A collective left this way is still running in one of the old group's
threads (gloo cannot cancel it), and destroying that group would join the
thread, that is wait for the timeout after all: the old group is kept
alive (a zombie) until its abandoned work has ended, then released.
"""

from __future__ import annotations

import datetime
import os
import pickle
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from . import store as store_mod
from .protocol import EdlError

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

# How often a rank waiting in a collective asks its worker whether the
# generation is over (seconds). A collective that completes sooner asks
# nothing: the wait wakes at its completion.
POLL_S = 0.02

_PEER_ERRORS = ("timeout", "timed out", "connection reset", "connection refused", "connection closed",
                "broken pipe", "end of file")


def _log(msg: str) -> None:
    sys.stderr.write("edl: %s\n" % msg)
    sys.stderr.flush()


def _peer_failure(backend: Optional[str], e: BaseException) -> bool:
    """Whether a failed setup is explained by a peer (gloo only: with NCCL
    every failure counts, since its re-initialisation is what is fragile)."""
    if backend == "nccl":
        return False
    s = repr(e).lower()
    return any(k in s for k in _PEER_ERRORS)


class _Superseded(Exception):
    """A newer generation replaced the one being set up."""


class _PeersMissing(RuntimeError):
    """A generation's setup failed for want of a peer (dead, or elsewhere):
    not a failure of the in-process re-initialisation itself."""


class Abandoned(_PeersMissing):
    """The worker said the generation is over while this rank waited in one
    of its collectives (a peer died, left or froze): the collective was
    left without waiting for the backend's timeout."""


class GroupMixin:
    """Context's group half (edl.torch.Context): the attributes it uses are
    Context's (client, timeout, backend, generation, _store, _wstore,
    _clients, _abandoned, _zombies, stats)."""

    client: Any
    timeout: float
    backend: Optional[str]
    generation: int
    _store: Any
    _wstore: Any
    _clients: Dict[Tuple[str, int], Any]
    _abandoned: List[Any]
    _zombies: List[Tuple[Any, List[Any], Any]]
    stats: Dict[str, int]

    def _await(self, work: Any, what: str) -> None:
        """Waits for an asynchronous collective of the current generation;
        raises Abandoned when the worker says the generation is over, or
        the collective's own error."""
        if self.client is None or self.backend != "gloo":
            work.wait()  # no worker to ask (or NCCL: its own timeout and abort)
            return
        done = threading.Event()
        work.get_future().add_done_callback(lambda _f: done.set())
        # gloo ends the collective with an error at the group's timeout; the
        # deadline only guards against a work that never completes.
        deadline = time.monotonic() + 2 * self.timeout + 5
        while not done.wait(POLL_S):
            rep = self.client.call("latest", gen=self.generation)
            if rep.get("broken") or time.monotonic() > deadline:
                self._abandoned.append(work)
                raise Abandoned("generation %d is over (a peer died, left or froze; newest generation %d): %s left"
                                % (self.generation, rep.get("gen", 0), what))
        work.wait()

    def _build_group(self, g: Dict[str, Any]) -> None:
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
        # The group is named after its generation, the same on every rank.
        # Unnamed, torch names it from a per-process counter that it bumps
        # before the backend connects and resets only when a built group is
        # destroyed: a rank whose setup failed inside init_process_group (a
        # connect timeout) kept a counter one ahead of the others, and from
        # then on every setup waited on keys the others never wrote
        # ("edl/gen/7/6/..." against "edl/gen/7/5/..."), until the job fell
        # back to restart mode. The store-based barrier at the end of
        # init_process_group keys on the same counter: back to torch's own
        # starting value while no group is built.
        c10d = dist.distributed_c10d
        if not dist.is_initialized() and isinstance(getattr(c10d, "_group_count", None), int):
            c10d._group_count = 0
        try:
            dist.init_process_group(self.backend, store=store, rank=g["rank"], world_size=g["world"], timeout=t,
                                    group_name="edl-gen-%d" % g["gen"])
        except RuntimeError:
            if wstore is not None and wstore.superseded:
                raise _Superseded()
            raise
        if os.environ.get("EDL_LOG_SETUP") == "1":  # the setup's cost, for measurements (docs/live.md)
            t3 = time.perf_counter()
            _log("setup of generation %d rank %d/%d: destroy %.1f ms, barrier %.1f ms, init %.1f ms (%s store)"
                 % (g["gen"], g["rank"], g["world"], 1000 * (t1 - t0), 1000 * (t2 - t1), 1000 * (t3 - t2),
                    "worker" if wstore is not None else "tcp"))

    def _arrive(self, store: Any, g: Dict[str, Any]) -> None:
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

    def _destroy(self) -> None:
        """Destroys the current group, which closes its connections (a peer
        blocked on this rank then fails at once), unless one of its
        collectives was abandoned and still runs: that group is kept until
        the collective ends (gloo's timeout at the latest), since destroying
        it would wait for its thread. Releases the zombies whose work ended."""
        if dist.is_initialized():
            pg = dist.distributed_c10d._get_default_group()
            running = [w for w in self._abandoned if not w.is_completed()]
            if running:
                self._zombies.append((pg, running, self._wstore))
            del pg
            try:
                dist.destroy_process_group()
            except RuntimeError:
                pass
        self._abandoned = []
        self._zombies = [z for z in self._zombies if not all(w.is_completed() for w in z[1])]

    def _sync_state(self, g: Dict[str, Any], state: Any) -> None:
        """Every member at the same applied step keeps its state; otherwise
        (a newcomer, a member behind, the first generation) the root's state
        is broadcast, with the worker's training counters."""
        world, rank, root = g["world"], g["rank"], g["root"]
        dev = next(state.model.parameters()).device if self.backend == "nccl" else torch.device("cpu")
        v = torch.zeros(2 * world, dtype=torch.float64, device=dev)
        if g["have"]:
            v[2 * rank], v[2 * rank + 1] = g["applied"] + 2, 1
        self._await(dist.all_reduce(v, async_op=True), "the state check")
        steps = {int(v[2 * r].item()) for r in range(world)}
        same = all(v[2 * r + 1].item() == 1 for r in range(world)) and len(steps) == 1 and g["applied"] >= 0
        if same:
            return
        start = time.time()
        data = b""
        if rank == root:
            data = pickle.dumps({"state": state.state_dict(), "progress": g["progress"]})
        data = self._broadcast_bytes(data, root, dev)
        if rank != root:
            d = pickle.loads(data)
            state.load_state_dict(d["state"])
            self.client.call("adopt", progress=d["progress"])
            self.stats["handovers"] += 1
            _log("state received in generation %d (step %d, %.0f ms)" % (g["gen"], d["progress"]["applied"], 1000 * (time.time() - start)))

    def _broadcast_bytes(self, data: bytes, root: int, dev: torch.device) -> bytes:
        """root's bytes on every rank (broadcast_object_list's two
        broadcasts, each waited for as any collective: _await)."""
        n = torch.tensor([len(data)], dtype=torch.int64, device=dev)
        self._await(dist.broadcast(n, src=root, async_op=True), "the state's size broadcast")
        if data:
            buf = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(dev)
        else:
            buf = torch.empty(int(n.item()), dtype=torch.uint8, device=dev)
        self._await(dist.broadcast(buf, src=root, async_op=True), "the state broadcast")
        return buf.cpu().numpy().tobytes()


def _host_store(timeout: float) -> Any:
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
