# edl's warm start (worker/warm): run by the job's own interpreter, with the
# job's own interpreter options, as `python [OPTS] edl-warm-boot.py SPEC`. It imports
# what SPEC preloads (torch, by default) ahead of need, says "ready" on one
# pipe, waits on the other for the generation's environment, then runs the
# program exactly as `python [OPTS] SCRIPT ARGS` (or `-m MODULE ARGS`) would:
# a fresh __main__, sys.argv, sys.path[0], __file__, the same traceback. One process runs the
# program once: no fork, so nothing of one run reaches the next.
import sys


def _edl_comm(name):
    # The process's name in ps and top: "edl-warm" while it waits, so that
    # nobody takes an idle interpreter for the program; the interpreter's
    # own again when the program runs.
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except Exception:
        pass


def _edl_warm():
    import json
    import os

    spec = json.loads(sys.argv[1])
    # sys.path[0] is this file's folder: make it what the program's own
    # start gives (its script's folder, or the working directory for -m),
    # so that preloads import as the program's imports would.
    if not getattr(sys.flags, "safe_path", False):
        if spec.get("module"):
            sys.path[0] = os.getcwd()
        else:
            sys.path[0] = os.path.dirname(os.path.realpath(spec["script"]))
    ctl = os.fdopen(spec["ctl"], "rb", buffering=0)
    ready = os.fdopen(spec["ready"], "wb", buffering=0)
    failed = []
    for name in spec.get("preload", []):
        try:
            __import__(name)
        except BaseException as e:  # the program's own import fails the same way, cold or warm
            failed.append("%s (%s: %s)" % (name, type(e).__name__, e))
    try:
        with open("/proc/self/comm") as f:
            comm = f.read().strip()
    except OSError:
        comm = None
    if comm:
        _edl_comm("edl-warm")
    ready.write(("ready %s\n" % json.dumps(failed)).encode())
    ready.close()
    data = ctl.read()
    ctl.close()
    if not data:  # the worker gave this interpreter up
        os._exit(0)
    if comm:
        _edl_comm(comm)
    msg = json.loads(data)
    if "cwd" in msg:
        os.chdir(msg["cwd"])
    spec["omp_loaded"] = os.environ.get("OMP_NUM_THREADS")  # what the preloads saw
    os.environ.clear()
    os.environ.update(msg["env"])
    return spec


def _edl_importer(path):
    # PyImport_GetImporter, as CPython asks it of the script's path: a
    # folder's or zip file's importer, else None (cached either way),
    # without importing pkgutil into the program's modules.
    if path in sys.path_importer_cache:
        return sys.path_importer_cache[path]
    importer = None
    for hook in sys.path_hooks:
        try:
            importer = hook(path)
            break
        except ImportError:
            pass
    sys.path_importer_cache[path] = importer
    return importer


def _edl_run(spec):
    # How `python [OPTS] SCRIPT` and `python -m MODULE` set up __main__
    # (CPython 3.11's pymain_run_file and runpy), in a fresh module: boot.py's
    # own names stay out of the program's globals.
    import builtins
    import importlib.machinery
    import os
    import types

    main = types.ModuleType("__main__")
    main.__annotations__ = {}  # what CPython's own __main__ starts with (add_main_module)
    sys.modules["__main__"] = main
    safe = getattr(sys.flags, "safe_path", False)
    if spec.get("module"):
        import runpy

        sys.argv = ["-m"] + spec["args"]
        if not safe:
            sys.path[0] = os.getcwd()
        return lambda: runpy._run_module_as_main(spec["module"], alter_argv=True)
    # CPython 3.9+ makes the script's name absolute without normalising it
    # (_Py_abspath): `./x.py` is CWD/./x.py in __file__ and tracebacks.
    given = spec["script"]
    path = given if os.path.isabs(given) else os.path.join(os.getcwd(), given)
    sys.argv = [given] + spec["args"]
    if _edl_importer(path) is not None:
        # A folder or zip file: its __main__.py, with the folder first on
        # sys.path (pymain_run_python's main_importer_path), -P or not.
        if safe:
            sys.path.insert(0, path)
        else:
            sys.path[0] = path
        import runpy

        return lambda: runpy._run_module_as_main("__main__", alter_argv=False)
    if not safe:
        sys.path[0] = os.path.dirname(os.path.realpath(path))
    main.__dict__.update(__builtins__=builtins, __file__=path, __cached__=None,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", path))

    def go():
        try:
            f = open(path, "rb")
        except OSError as e:  # pymain_run_file_obj's message and exit status
            prog = (getattr(sys, "orig_argv", None) or [sys.executable])[0]
            sys.stderr.write("%s: can't open file %r: [Errno %d] %s\n" % (prog, path, e.errno, e.strerror))
            sys.stderr.flush()
            sys.exit(2)
        with f:
            code = compile(f.read(), path, "exec", dont_inherit=True)
        exec(code, main.__dict__)

    return go


def _edl_threads(spec):
    # A program that sets OMP_NUM_THREADS before its first `import torch`
    # gets that many threads cold: the OpenMP runtime reads it when torch
    # loads it. Warm, torch was loaded before, with the value the preloads
    # saw; so at the program's first import of torch, a value other than
    # that one is applied as that load would have applied it.
    import builtins
    import os

    torch = sys.modules.get("torch")
    if torch is None:
        return
    before = spec.get("omp_loaded")
    real = builtins.__import__

    def hook(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (name == "torch" or name.startswith("torch.")):
            if builtins.__import__ is hook:
                builtins.__import__ = real
            now = os.environ.get("OMP_NUM_THREADS")
            if now != before and now is not None:
                try:
                    n = int(now)
                except ValueError:
                    n = 0
                if n > 0:
                    torch.set_num_threads(n)
        return real(name, globals, locals, fromlist, level)

    builtins.__import__ = hook


_edl_spec = _edl_warm()
_edl_go = _edl_run(_edl_spec)
_edl_threads(_edl_spec)
del _edl_warm, _edl_run, _edl_importer, _edl_comm, _edl_threads, _edl_spec
try:
    _edl_go()
except (SystemExit, KeyboardInterrupt):
    raise
except BaseException as _edl_e:
    # The traceback a cold run prints: without boot.py's frames, the runner's
    # at its head and the import hook's wherever an import failed through it
    # (the exception's own __traceback__: Python 3.12's excepthook prints
    # that one, whatever it is given).
    import types

    _edl_tbs = []
    _edl_tb = _edl_e.__traceback__
    while _edl_tb is not None:
        if _edl_tb.tb_frame.f_code.co_filename != __file__:
            _edl_tbs.append(_edl_tb)
        _edl_tb = _edl_tb.tb_next
    _edl_tb = None
    for _edl_t in reversed(_edl_tbs):
        _edl_tb = types.TracebackType(_edl_tb, _edl_t.tb_frame, _edl_t.tb_lasti, _edl_t.tb_lineno)
    sys.excepthook(type(_edl_e), _edl_e.with_traceback(_edl_tb), _edl_tb)
    sys.exit(1)
