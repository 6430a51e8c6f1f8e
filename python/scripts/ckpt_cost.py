#!/usr/bin/python3
"""What a live checkpoint costs the training loop: the host copy of the
example MLP's State (on the training thread) and its torch.save (beside
training), medians of 5; one JSON line. Run: /usr/bin/python3 python/scripts/ckpt_cost.py"""
import json, os, sys, time, tempfile
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python")); sys.path.insert(0, os.path.join(ROOT, "examples", "torch"))
import torch
torch.set_num_threads(1)
import edl.torch as et
from edl import ckpt
from train_live import make_model, FEATURES
m = make_model([1024, 1024, 256]); opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
x = torch.randn(48, FEATURES); m(x).sum().backward(); opt.step()
st = et.State(model=m, optimizer=opt)
d = tempfile.mkdtemp()
copies, saves = [], []
for i in range(5):
    t0 = time.perf_counter(); snap = ckpt.host_copy(st.state_dict()); t1 = time.perf_counter()
    ckpt._write({"format": ckpt.FORMAT, "applied": i, "state": snap}, os.path.join(d, "f.pt")); t2 = time.perf_counter()
    copies.append(t1 - t0); saves.append(t2 - t1)
print(json.dumps({"params": sum(p.numel() for p in m.parameters()), "bytes": os.path.getsize(os.path.join(d, "f.pt")),
                  "copy_ms_median": round(1000 * sorted(copies)[2], 2), "write_ms_median": round(1000 * sorted(saves)[2], 2)}))
