#!/usr/bin/python3
"""Replays the applied steps of an elastic examples/torch/train_live.py run in one process.

Reads the workers' debug records on stdin, one applied step a line in step
order: "<step> <epoch>|<partition>:<start>:<end>,..." (ranges of partition
offsets, the partitions those of edl's exec data sets: partition p of
--parts starts at sample samples*p//parts). Each step is one optimizer step
on the mean loss of all its samples, which is what the elastic run's
all-reduce of each rank's gradients weighted by its share computes. Prints
"EVAL loss=<x>" as train_live.py does: the final model's loss on the same
held-out samples. So an elastic run that applied exactly the steps it
recorded, on consistent replicas, ends where this replay does, whatever its
resizes and failures did to the batches' make-up. Run both in float64
(--dtype): in float32 the two summation orders (one batch here, the ranks'
weighted means summed there) sometimes flip a ReLU near zero, and that
alone moves the final loss by 0.1-0.4 %.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "torch"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import train_live as tl  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--samples", type=int, required=True)
    p.add_argument("--parts", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--hidden", type=str, required=True)
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    args, _ = p.parse_known_args()  # train_live.py's other flags do not matter here
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    dtype = getattr(torch, args.dtype)
    model = tl.make_model([int(h) for h in args.hidden.split(",") if h]).to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    data = tl.Synthetic(args.samples, args.seed)
    lossf = nn.CrossEntropyLoss()
    steps = 0
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        _, rec = line.split(" ", 1)
        _, ranges = rec.split("|", 1)
        ids = []
        for seg in ranges.split(","):
            if seg:
                part, start, end = (int(v) for v in seg.split(":"))
                first = args.samples * part // args.parts
                ids.extend(range(first + start, first + end))
        if not ids:
            continue  # a step without samples updates nothing
        x, y = data.batch(ids)
        lossf(model(x.to(dtype)), y).backward()
        opt.step()
        opt.zero_grad()
        steps += 1
    held = tl.Synthetic(args.samples + 1024, args.seed)
    with torch.no_grad():
        x, y = held.batch(range(args.samples, args.samples + 1024))
        x = x.to(dtype)
        print("REPLAYED steps=%d" % steps)
        print("EVAL loss=%.6f" % lossf(model(x), y).item(), flush=True)


if __name__ == "__main__":
    main()
