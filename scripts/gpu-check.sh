#!/usr/bin/env bash
# scripts/gpu-check.sh: the one short GPU check of live mode (issue 16; docs/live.md "GPU check").
#
# Run it from the repository root on a machine with an NVIDIA GPU, torch 2.x and NCCL:
#
#     scripts/gpu-check.sh            # everything under one timeout (GPU_CHECK_TIMEOUT, default 280 s)
#
# It prints one JSON line per check ({"check": ..., "ok": ...}):
#   env          Python, torch, CUDA, NCCL, the GPUs torch sees
#   nvidia-smi   the NVML read-out by nvidia-smi (GPU, memory, utilisation, power, driver)
#   edl-gpus     the same through edl's own go-nvml reading (`edl gpus`, what a worker reports)
#   reinit       one line per generation: edl.torch's own group rebuild (Context._build_group:
#                destroy, then init_process_group from a fresh store prefix) at a world of one,
#                NCCL with the model on the GPU, then one training step through the package's
#                all-reduces, timed (destroy_ms, init_ms, first_step_ms, step_ms)
#   live-shared  several live workers sharing the one GPU over gloo with the model's tensors on
#                CUDA: `edl bench torch-live --scenario join` (2 -> 3 workers, a hand-over in the
#                new group), its stall and the sample accounting (samples_missed/repeated), and
#                the GPU's compute processes sampled meanwhile
#   summary      ok, and why not
# Exit status: 0 every check passed on a GPU; 2 no CUDA device or no NVML (the GPU parts did
# not run: said so in the summary; the CPU parts ran: reinit over gloo, live-shared on the CPU);
# 1 a check failed; 124 the timeout ended it.
#
# Environment: PYTHON (a Python with torch; default: the first of python3, /usr/bin/python3 that
# imports torch), EDL (the edl binary; default bin/edl, else built with go into a temp folder),
# GPU_CHECK_TIMEOUT (seconds, default 280), GPU_CHECK_GENS (generations of reinit, default 5).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

if [ -z "${GPU_CHECK_INNER:-}" ]; then
	exec timeout --kill-after=10 "${GPU_CHECK_TIMEOUT:-280}" env GPU_CHECK_INNER=1 "$0" "$@"
fi

py="${PYTHON:-}"
if [ -z "$py" ]; then
	for c in python3 /usr/bin/python3; do
		if command -v "$c" >/dev/null && "$c" -c 'import torch' 2>/dev/null; then
			py="$c"
			break
		fi
	done
fi
if [ -z "$py" ]; then
	echo '{"check": "summary", "ok": false, "reason": "no Python with torch (set PYTHON)"}'
	exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
edl="${EDL:-}"
if [ -z "$edl" ] && [ -x bin/edl ]; then
	edl=bin/edl
fi
if [ -z "$edl" ] && command -v go >/dev/null; then
	if go build -o "$tmp/edl" ./cmd/edl 2>"$tmp/build.err"; then
		edl="$tmp/edl"
	else
		echo "gpu-check: go build ./cmd/edl failed: $(tail -3 "$tmp/build.err")" >&2
	fi
fi

export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 EDL_BIN="$edl" GPU_CHECK_TMP="$tmp"
"$py" - <<'EOF'
import json, os, shutil, subprocess, sys, threading, time

root = os.getcwd()
sys.path.insert(0, os.path.join(root, "python"))
sys.path.insert(0, os.path.join(root, "examples", "torch"))
failed, gpu_missing = [], []


def say(**kv):
    print(json.dumps(kv), flush=True)


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return 124, e.stdout or "", "timed out after %d s" % timeout
    except OSError as e:
        return 127, "", str(e)


import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
nccl_version = None
if cuda and dist.is_nccl_available():
    v = torch.cuda.nccl.version()
    nccl_version = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
say(check="env", ok=True, python=sys.version.split()[0], torch=torch.__version__, cuda_build=torch.version.cuda,
    cuda=cuda, devices=torch.cuda.device_count() if cuda else 0,
    gpu=torch.cuda.get_device_name(0) if cuda else None,
    nccl=dist.is_nccl_available(), nccl_version=nccl_version)
if not cuda:
    gpu_missing.append("torch sees no CUDA device (torch.cuda.is_available() is false)")

# --- NVML ---------------------------------------------------------------
smi = shutil.which("nvidia-smi")
if smi is None:
    say(check="nvidia-smi", ok=False, error="nvidia-smi not found: no NVIDIA driver here")
    gpu_missing.append("no nvidia-smi")
else:
    q = "index,name,uuid,driver_version,memory.used,memory.total,utilization.gpu,power.draw,temperature.gpu"
    rc, out, err = run([smi, "--query-gpu=" + q, "--format=csv,noheader,nounits"], 30)
    rows = [dict(zip(q.split(","), [v.strip() for v in line.split(",")])) for line in out.splitlines() if line.strip()]
    say(check="nvidia-smi", ok=rc == 0 and bool(rows), gpus=rows, error=err.strip()[-500:] or None)
    if rc != 0 or not rows:
        gpu_missing.append("nvidia-smi read no GPU")
edl = os.environ.get("EDL_BIN")
if not edl:
    say(check="edl-gpus", ok=False, error="no edl binary (set EDL, or build bin/edl: go build -o bin/edl ./cmd/edl)")
    failed.append("edl-gpus")
else:
    rc, out, err = run([edl, "gpus"], 30)
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    say(check="edl-gpus", ok=rc == 0 and bool(lines), gpus=lines, error=err.strip()[-500:] or None)
    if rc != 0 or not lines:
        gpu_missing.append("edl gpus: " + (err.strip().splitlines() or ["no GPU"])[-1])

# --- reinit: edl.torch's group rebuild at a world of one, a few generations ---
import edl.torch as et  # noqa: E402
from edl import protocol  # noqa: E402
from train_live import Synthetic, make_model  # noqa: E402

backend = "nccl" if cuda and dist.is_nccl_available() else "gloo"
dev = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
try:
    ctx = et.Context(None, 30, backend=backend)  # hosts its TCPStore, as a live program does
    torch.manual_seed(7)
    model = make_model([1024, 1024, 256]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    state = et.State(model=model, optimizer=opt)
    ctx._wrap(state)
    data, lossf = Synthetic(4800, 7), torch.nn.CrossEntropyLoss()

    def one_step(k):
        share = {"part": 0, "start": 48 * k, "end": 48 * (k + 1), "first": 0}
        meta = [0.0] * protocol.meta_len(1)
        n = protocol.fill_meta(meta, 0, share)
        out = et._Outcome()
        ctx._pending, ctx._loss = (meta, n, out), 0.0
        ctx._start_meta(meta, out, state)
        x, y = data.batch(protocol.sample_ids(share))
        loss = lossf(model(x.to(dev)), y.to(dev))
        ctx.record(loss)
        loss.backward()
        opt.step()
        opt.zero_grad()
        ctx._pending = None
        if out.failed is not None:
            raise out.failed
        if dev.type == "cuda":
            torch.cuda.synchronize()

    k = 0
    gens = int(os.environ.get("GPU_CHECK_GENS") or 5)
    for gen in range(1, gens + 1):
        t0 = time.perf_counter()
        ctx._destroy()
        t1 = time.perf_counter()
        ctx.generation, ctx.rank, ctx.world = gen, 0, 1
        ctx._build_group({"rank": 0, "world": 1, "gen": gen, "master_addr": "127.0.0.1", "master_port": ctx._store.port})
        t2 = time.perf_counter()
        one_step(k)  # NCCL creates its communicator at the first collective
        k += 1
        t3 = time.perf_counter()
        steps = []
        for _ in range(5):
            s = time.perf_counter()
            one_step(k)
            k += 1
            steps.append(time.perf_counter() - s)
        say(check="reinit", ok=True, backend=backend, device=str(dev), world=1, gen=gen,
            destroy_ms=round(1000 * (t1 - t0), 2), init_ms=round(1000 * (t2 - t1), 2),
            first_step_ms=round(1000 * (t3 - t2), 2), step_ms=round(1000 * sorted(steps)[2], 2),
            max_memory_mb=round(torch.cuda.max_memory_allocated() / 2**20, 1) if dev.type == "cuda" else None)
    ctx._destroy()
except Exception as e:  # noqa: BLE001: report any failure of the path as the check's result
    say(check="reinit", ok=False, backend=backend, error=repr(e)[-800:])
    failed.append("reinit")

# --- live-shared: several live workers on the one GPU, gloo, CUDA tensors ---
if not edl:
    say(check="live-shared", ok=False, error="no edl binary")
    failed.append("live-shared")
elif shutil.which("redis-server") is None and not os.path.exists("/usr/bin/redis-server"):
    say(check="live-shared", ok=False, error="redis-server not found: live workers keep their state in Redis (apt-get install redis-server)")
    failed.append("live-shared")
else:
    args = [edl, "bench", "torch-live", "--scenario", "join", "--workers", "2", "--samples", "9600", "--warmup", "20",
            "--python", sys.executable, "--json"]
    if cuda:
        args += ["--script-args", "--device cuda --backend gloo"]
    apps, stop = [], threading.Event()

    def sample_apps():
        while not stop.wait(5):
            rc, out, _ = run([smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"], 10)
            if rc == 0:
                apps.append(len([l for l in out.splitlines() if l.strip()]))

    th = None
    if cuda and smi:
        th = threading.Thread(target=sample_apps, daemon=True)
        th.start()
    t0 = time.time()
    rc, out, err = run(args, 170)
    stop.set()
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    line = lines[0] if lines else {}
    ok = rc == 0 and line.get("samples_missed") == 0 and line.get("samples_repeated") == 0
    say(check="live-shared", ok=ok, device="cuda" if cuda else "cpu", backend="gloo", workers="2->3",
        stall_s=line.get("stall_s"), step_s=line.get("step_s"), samples_missed=line.get("samples_missed"),
        samples_repeated=line.get("samples_repeated"), gpu_processes_max=max(apps) if apps else None,
        wall_s=round(time.time() - t0, 1), error=None if ok else (err.strip()[-800:] or "exit %d" % rc))
    if not ok:
        failed.append("live-shared")

if gpu_missing:
    say(check="summary", ok=False, gpu=False, failed=failed,
        reason="no GPU here: " + "; ".join(gpu_missing) + ": the GPU parts (NCCL, CUDA tensors, NVML) did not run; "
               "reinit ran over gloo and live-shared on the CPU")
    sys.exit(1 if failed else 2)
say(check="summary", ok=not failed, gpu=True, failed=failed)
sys.exit(1 if failed else 0)
EOF
