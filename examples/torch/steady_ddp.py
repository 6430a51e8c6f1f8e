#!/usr/bin/python3
"""Plain torch DDP on a fixed world, no edl: the baseline of `edl bench torch --scenarios steady`.

The model, data set, optimizer and batch, and their options, are
train_live.py's (imported from it, so they cannot drift apart): the
1.6M-parameter MLP, SGD with momentum, the fixed synthetic data set,
--batch the global batch split over the ranks as edl's fixed_global policy
does (the first batch % world ranks one more).
Step s on rank r takes the next contiguous ids of the data set. Gradients
are averaged by DistributedDataParallel (gloo on CPU, NCCL with
--device cuda), started by torchrun or by any launcher that sets RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT (init_process_group's env://, a
plain TCPStore):

    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 examples/torch/steady_ddp.py --steps 200 &
    RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 examples/torch/steady_ddp.py --steps 200

Output: train_live.py's step line, one per applied step, so one parser
reads both:

    STEP step=<n> time=<t> rank=<r> world=<w> gen=0 loss=<loss> applied=<n-1>
    DONE step=<n> time=<t> rank=<r> loss=<mean loss over the last 50 batches>
"""

import argparse
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from train_live import Synthetic, add_training_args, make_model  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--samples", type=int, default=60000, help="data set size")
    add_training_args(p)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--device", type=str, default="cpu", help="cpu, or cuda (NCCL; the model and batches on the GPU)")
    p.add_argument("--timeout", type=float, default=60, help="collective timeout, seconds")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cuda = args.device.startswith("cuda")
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    torch.manual_seed(args.seed)
    model = make_model([int(h) for h in args.hidden.split(",") if h]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    ddp = DDP(model, device_ids=[dev.index] if cuda else None)
    data = Synthetic(args.samples, args.seed)
    lossf = nn.CrossEntropyLoss()
    # fixed_global: this rank's share of every global batch.
    shares = [args.batch // world + (1 if r < args.batch % world else 0) for r in range(world)]
    off, n = sum(shares[:rank]), shares[rank]
    recent = []
    for step in range(args.steps):
        s = (step * args.batch + off) % max(args.samples - n, 1)
        x, y = data.batch(range(s, s + n))
        x, y = x.to(dev), y.to(dev)
        loss = lossf(ddp(x), y)
        loss.backward()  # DDP's bucketed gradient all-reduce, overlapped with the backward pass
        opt.step()
        opt.zero_grad()
        recent = (recent + [loss.item()])[-50:]
        print("STEP step=%d time=%.6f rank=%d world=%d gen=0 loss=%.4f applied=%d"
              % (step + 1, time.time(), rank, world, loss.item(), step), flush=True)
    print("DONE step=%d time=%.6f rank=%d loss=%.4f" % (args.steps, time.time(), rank, sum(recent) / max(len(recent), 1)), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
