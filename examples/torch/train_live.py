#!/usr/bin/python3
"""The restart-mode example's model (examples/torch/train.py) written with the edl package.

The same MLP of about 1.6M parameters (256 -> 1024 -> 1024 -> 256 -> 10, ReLU),
SGD with momentum, on a synthetic seeded classification task (labels from a
fixed random teacher), but the data is a fixed data set of --samples samples
(sample i drawn from seed (seed, i)), of which edl hands out index ranges,
and --batch is the global batch. Run it as an edl job with
trainer.exec.mode "live" (examples/torch/job_live.json); it keeps running
through every resize and failure, without a restart:

    edl submit examples/torch/job_live.json

Outside edl: EDL_STANDALONE=1 /usr/bin/python3 examples/torch/train_live.py
trains in one process (the static reference).

Output, one line per event on stdout (tests parse these; keep the format):

    STEP step=<n> time=<t> rank=<r> world=<w> gen=<g> loss=<loss of this rank's batch> applied=<a>
        printed after this rank's batch n (counted from 1 in this process) went
        through opt.step(); a is the job's last applied step before it (from 0;
        -1 before the first), so this batch's step is a+1 once it counts.
    SAMPLES step=<n> gen=<g> ids=<first>-<last> (with --log-samples: this rank's ids)
    DONE step=<n> time=<t> rank=<r> loss=<mean loss over this rank's last 50 batches>
    EVAL loss=<x> (rank 0 when training finished, not a leaver: the final model's mean loss on 1024 fixed
        held-out samples, ids --samples .. --samples+1023; same for every rank)
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import edl.torch as et  # noqa: E402

FEATURES, CLASSES = 256, 10


def add_training_args(p):
    """The options of the batch, the optimizer and the model (steady_ddp.py
    takes them from here)."""
    p.add_argument("--batch", type=int, default=48, help="global batch")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--hidden", type=str, default="1024,1024,256", help="hidden layer widths")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--samples", type=int, default=60000, help="data set size (the job's trainer.exec.dataset.samples)")
    p.add_argument("--epochs", type=int, default=1)
    add_training_args(p)
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds to sleep after each step (tests)")
    p.add_argument("--step-sleep-while", default="", help="with --step-sleep: sleep only while this file exists (tests: slow while the test acts, full speed after)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--log-samples", action="store_true", help="print the sample ids of every step")
    p.add_argument("--report", action="store_true",
                   help="report the loss of every step and a validation loss (val_loss) per epoch to the job's metric log (sweeps)")
    p.add_argument("--val-samples", type=int, default=512, help="with --report: held-out samples of the validation loss")
    p.add_argument("--device", type=str, default="cpu", help="cpu, or cuda: the model and batches on the GPU (scripts/gpu-check.sh)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="the model's and the batches' float type (tests: with float64 the same steps in another summation order end at the same model)")
    p.add_argument("--backend", type=str, default=None, help="gloo or nccl (default: nccl for a model on the GPU, else gloo)")
    p.add_argument("--batchnorm", action="store_true",
                   help="a BatchNorm1d after every hidden layer (it refuses a one-sample batch in training mode)")
    return p.parse_args()


def make_model(hidden, batchnorm=False):
    dims = [FEATURES] + hidden + [CLASSES]
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            if batchnorm:
                layers.append(nn.BatchNorm1d(dims[i + 1]))
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Synthetic:
    """Sample i: features drawn from seed (seed, i), label from the teacher."""

    def __init__(self, n, seed):
        self.n, self.seed = n, seed
        self.teacher = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(seed + 1))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x, y = self.batch(range(i, i + 1))
        return x[0], y[0]

    def batch(self, ids):
        self.last_ids = ids  # for --log-samples
        g = torch.Generator()
        x = torch.empty(len(ids), FEATURES)
        for k, i in enumerate(ids):
            g.manual_seed(self.seed * 1_000_003 + i)
            x[k] = torch.randn(FEATURES, generator=g)
        return x, (x @ self.teacher).argmax(dim=1)


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    ctx = et.init(backend=args.backend)
    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    model = make_model([int(h) for h in args.hidden.split(",") if h], args.batchnorm).to(device=dev, dtype=dtype)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    state = et.State(model=model, optimizer=opt)
    train = Synthetic(args.samples, args.seed)
    loader = et.DataLoader(train, batch_size=args.batch)
    lossf = nn.CrossEntropyLoss()
    step, recent = 0, []
    held_out = Synthetic(args.samples + args.val_samples, args.seed)  # the samples after the training set's

    def validate(done):
        # Rank 0 alone (the others' reports are dropped anyway), on its model.
        if not args.report or ctx.rank != 0:
            return None
        with torch.no_grad():
            x, y = held_out.batch(range(args.samples, args.samples + args.val_samples))
            return {"val_loss": lossf(model(x.to(dev, dtype)), y.to(dev)).item()}

    for x, y in ctx.steps(loader, state, epochs=args.epochs, on_epoch_end=validate):
        x, y = x.to(dev, dtype), y.to(dev)
        loss = lossf(model(x), y)
        loss.backward()
        ctx.record(loss)  # before step(): the global batch's mean loss rides in the all-reduce
        opt.step()
        opt.zero_grad()
        if args.report:
            ctx.report(loss=loss)
        step += 1
        recent = (recent + [loss.item()])[-50:]
        if args.log_samples:
            ids = train.last_ids
            print("SAMPLES step=%d gen=%d ids=%d-%d" % (step, ctx.generation, ids[0], ids[-1]), flush=True)
        print("STEP step=%d time=%.6f rank=%d world=%d gen=%d loss=%.4f applied=%d" % (step, time.time(), ctx.rank, ctx.world, ctx.generation, loss.item(), ctx.applied), flush=True)
        if args.step_sleep > 0 and (not args.step_sleep_while or os.path.exists(args.step_sleep_while)):
            time.sleep(args.step_sleep)
    mean = sum(recent) / max(len(recent), 1)
    print("DONE step=%d time=%.6f rank=%d loss=%.4f" % (step, time.time(), ctx.rank, mean), flush=True)
    if ctx.rank == 0 and ctx.finished:  # a leaver that was rank 0 does not evaluate
        data = Synthetic(args.samples + 1024, args.seed)
        with torch.no_grad():
            x, y = data.batch(range(args.samples, args.samples + 1024))
            x, y = x.to(dev, dtype), y.to(dev)
            print("EVAL loss=%.6f" % lossf(model(x), y).item(), flush=True)


if __name__ == "__main__":
    main()
