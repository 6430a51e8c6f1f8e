#!/usr/bin/env python3
"""A torchrun DDP training script for `edl bench torch`.

An MLP (512 -> 1024 -> 1024 -> 10, about 1.6M parameters) on synthetic
data, batch 24 per rank, gloo. Written for `torchrun --nnodes=MIN:MAX`: it
reads only torchrun's environment, checkpoints (rank 0, every
--ckpt-every steps, atomically) to $EDL_CHECKPOINT_DIR (or
--checkpoint-dir) and resumes from there after a restart. Every rank prints
one JSON line per applied step:

  {"event": "step", "step": N, "time": UNIX_SECONDS, "rank": R, "world_size": W,
   "restart": TORCHELASTIC_RESTART_COUNT, "gen": EDL_GENERATION, "loss": L}
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300, help="train until this global step")
    p.add_argument("--batch", type=int, default=24, help="batch per rank")
    p.add_argument("--features", type=int, default=512)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--ckpt-every", "--checkpoint-every", dest="checkpoint_every", type=int, default=20)
    p.add_argument("--checkpoint-dir", default="")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(a.seed)
    model = nn.Sequential(nn.Linear(a.features, a.hidden), nn.ReLU(),
                          nn.Linear(a.hidden, a.hidden), nn.ReLU(),
                          nn.Linear(a.hidden, a.classes))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    ckdir = os.environ.get("EDL_CHECKPOINT_DIR") or a.checkpoint_dir
    path = os.path.join(ckdir, "ckpt.pt") if ckdir else ""
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "-")
    gen = os.environ.get("EDL_GENERATION", "-")
    step = 0
    if path and os.path.exists(path):
        st = torch.load(path)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step = st["step"]
    ddp = DDP(model)
    loss_fn = nn.CrossEntropyLoss()
    teacher = torch.Generator().manual_seed(a.seed + 1000)
    w_true = torch.randn(a.features, a.classes, generator=teacher)
    while step < a.steps:
        g = torch.Generator().manual_seed(a.seed * 1000003 + step * 1009 + rank)
        x = torch.randn(a.batch, a.features, generator=g)
        y = (x @ w_true).argmax(dim=1)
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        step += 1
        print(json.dumps({"event": "step", "step": step, "time": time.time(), "rank": rank,
                          "world_size": world, "restart": restart, "gen": gen,
                          "loss": round(loss.item(), 4)}), flush=True)
        if path and rank == 0 and step % a.checkpoint_every == 0:
            os.makedirs(ckdir, exist_ok=True)
            tmp = path + ".tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
            os.replace(tmp, path)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
