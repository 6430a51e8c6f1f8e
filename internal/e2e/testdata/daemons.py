"""An exec program that leaves processes outside its own group: a setsid()
daemon (double fork) and a child with a process group of its own, both
ignoring SIGTERM and holding stdout/stderr. Each process writes its pid to
argv[1]/<generation>-<rank>-<world>-<tag>; the program then waits for ever."""
import os, signal, sys, time

out = sys.argv[1]
pre = "%s-%s-%s-" % (os.environ["EDL_GENERATION"], os.environ["RANK"], os.environ["WORLD_SIZE"])


def note(tag):
    p = os.path.join(out, pre + tag)
    with open(p + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(p + ".tmp", p)


def linger(tag):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note(tag)
    while True:
        time.sleep(0.1)


if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        linger("daemon")
    os._exit(0)
if os.fork() == 0:
    os.setpgid(0, 0)
    linger("group")
note("main")
print("STARTED", pre, flush=True)
while True:
    time.sleep(0.1)
