#!/usr/bin/python3
"""A data-parallel (DDP) training script written for torchrun; edl runs it unchanged.

An MLP of about 1.6M parameters (256 -> 1024 -> 1024 -> 256 -> 10, ReLU),
trained with SGD and momentum on a synthetic, seeded classification task
(labels from a fixed random teacher), batch 24 per process, gloo (CPU) or
NCCL (GPU). Run it as any torchrun script:

    /usr/bin/python3 -m torch.distributed.run --nnodes 1:3 --nproc_per_node 1 \
        --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:29400 --rdzv_id demo \
        --redirects 1 --tee 1 --log_dir /tmp/tr-logs \
        examples/torch/train.py --steps 300

(torchrun on Python 3.11 needs --redirects/--tee/--log_dir), or under edl
with examples/torch/job.json.

Checkpoints: rank 0 writes <dir>/ckpt.pt (torch.save to a temporary file,
then os.replace, so a reader never sees half a file) every --ckpt-every
steps, and also when it is stopped (SIGTERM) or a collective fails, with the
state of the last step every rank applied. <dir> is $EDL_CHECKPOINT_DIR when
set, else --ckpt-dir (default ./checkpoints). Every rank resumes from
<dir>/ckpt.pt when it exists. The data of step s on rank r is drawn from
seed (seed, s, r), so a resumed run sees the same data as an unbroken one.

Output, one line per event on stdout, flushed at once (benches and tests
parse these; keep the format):

    STEP step=<n> time=<unix seconds, 6 decimals> rank=<r> world=<w> restart=<c> gen=<g> loss=<loss>
        printed by every rank after it applied step n (n counts from 1:
        the number of steps applied so far, a resumed run goes on from the
        checkpoint's n); c is TORCHELASTIC_RESTART_COUNT, g is
        EDL_GENERATION ("-" outside edl).
    CKPT step=<n> time=<t> reason=<periodic|stop|failure|final>
        rank 0 committed a checkpoint of step n.
    RESUME step=<n> time=<t> rank=<r>
        this process starts from a checkpoint of step n (0: from scratch).
    DONE step=<n> time=<t> rank=<r>
        training reached --steps; the process exits 0.

With TRAIN_DUMP_ENV=<dir> every process first writes its whole
environment as JSON to <dir>/env.rank<RANK>.<pid>.json (the torchrun
environment test compares them).
"""

import argparse
import datetime
import json
import os
import signal
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

FEATURES, CLASSES = 256, 10


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300, help="train until this many steps were applied")
    p.add_argument("--batch", type=int, default=24, help="batch per process")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--hidden", type=str, default="1024,1024,256", help="hidden layer widths")
    p.add_argument("--ckpt-every", type=int, default=20, help="checkpoint every N steps (0: only at stop and end)")
    p.add_argument("--ckpt-dir", type=str, default="checkpoints", help="used when EDL_CHECKPOINT_DIR is not set")
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds to sleep after each step (tests)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--fail-at-step", type=int, default=0, help="rank 0 exits 3 after applying this step (tests)")
    p.add_argument("--timeout", type=float, default=120, help="collective timeout, seconds")
    return p.parse_args()


def now():
    return "%.6f" % time.time()


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def make_model(hidden):
    dims = [FEATURES] + hidden + [CLASSES]
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def batch(seed, step, rank, n, teacher):
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1_009 + rank)
    x = torch.randn(n, FEATURES, generator=g)
    y = (x @ teacher).argmax(dim=1)
    return x, y


def save(path, step, model, opt, reason):
    tmp = path + ".tmp"
    torch.save({"step": step, "model": model.state_dict(), "optim": opt.state_dict()}, tmp)
    os.replace(tmp, path)
    say("CKPT step=%d time=%s reason=%s" % (step, now(), reason))


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    if os.environ.get("TRAIN_DUMP_ENV"):
        d = os.environ["TRAIN_DUMP_ENV"]
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "env.rank%s.%d.json" % (os.environ.get("RANK", "x"), os.getpid())), "w") as f:
            json.dump(dict(os.environ), f, indent=1, sort_keys=True)

    stopping = {"flag": False}

    def on_term(signum, frame):
        stopping["flag"] = True

    signal.signal(signal.SIGTERM, on_term)

    use_cuda = torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "") != ""
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if use_cuda else torch.device("cpu")
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    gen = os.environ.get("EDL_GENERATION", "-")

    ckdir = os.environ.get("EDL_CHECKPOINT_DIR") or args.ckpt_dir
    os.makedirs(ckdir, exist_ok=True)
    path = os.path.join(ckdir, "ckpt.pt")

    torch.manual_seed(args.seed)
    teacher = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(args.seed + 1))
    model = make_model([int(h) for h in args.hidden.split(",") if h]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    step = 0
    if os.path.exists(path):
        ck = torch.load(path, map_location=device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        step = ck["step"]
    say("RESUME step=%d time=%s rank=%d" % (step, now(), rank))
    ddp = DDP(model, device_ids=[device.index] if use_cuda else None)
    lossf = nn.CrossEntropyLoss()

    while step < args.steps:
        if stopping["flag"]:
            if rank == 0:
                save(path, step, model, opt, "stop")
            os._exit(143)  # no interpreter teardown: a restart waits for this exit
        x, y = batch(args.seed, step, rank, args.batch, teacher)
        x, y = x.to(device), y.to(device)
        try:
            opt.zero_grad(set_to_none=True)
            loss = lossf(ddp(x), y)
            loss.backward()  # the gradient all-reduce: fails if a peer is gone
        except Exception:
            # The parameters are still those of the last applied step.
            if rank == 0:
                save(path, step, model, opt, "stop" if stopping["flag"] else "failure")
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(143 if stopping["flag"] else 1)
        opt.step()
        step += 1
        say("STEP step=%d time=%s rank=%d world=%d restart=%s gen=%s loss=%.4f" % (step, now(), rank, world, restart, gen, loss.item()))
        if rank == 0 and args.ckpt_every > 0 and step % args.ckpt_every == 0:
            save(path, step, model, opt, "periodic")
        if args.fail_at_step and step == args.fail_at_step and rank == 0:
            sys.stderr.write("injected failure at step %d\n" % step)
            sys.stderr.flush()
            sys.exit(3)
        if args.step_sleep > 0:
            time.sleep(args.step_sleep)

    if rank == 0 and not (args.ckpt_every > 0 and step % args.ckpt_every == 0):
        save(path, step, model, opt, "final")
    say("DONE step=%d time=%s rank=%d" % (step, now(), rank))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
