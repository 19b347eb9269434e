"""The process behind tests/cli_fork.py: imports the heavy third-party libraries once, then forks one child per
request, and each child becomes `python -m clusterbench ARGS` in the environment, folder and files it is given.

Why not clusterbench's own modules too: some of them read the environment when imported (the CLI's Rich consoles
fix their width from COLUMNS, for one), and every request brings its own environment. The libraries below do not
depend on what a request changes, and they are most of the start-up time (pandas, SciPy and matplotlib alone:
about 1 s of a 1.3 s `clusterbench report` start on this machine).

Protocol, one line each on stdin/stdout: a JSON request {args, env, cwd, stdin, stdout, stderr, memory}; the
answer "pid N" as soon as the child exists, then "status S" (the raw wait status) when it has ended.
"""

import gc
import importlib
import io
import json
import os
import sys

PRELOAD = ("typer", "click", "rich.console", "rich.table", "rich.progress", "rich.markup", "pydantic", "yaml",
           "sqlite3", "numpy", "pandas", "scipy.stats", "scipy.special", "scipy.optimize", "matplotlib",
           "matplotlib.figure", "matplotlib.backends.backend_agg", "jinja2", "ClusterShell.NodeSet")


def _preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # a library this checkout does not have: the child imports what it needs itself
            pass


def _serve() -> dict:
    """Answer requests until stdin closes; return (in the child only) the request it is to carry out."""
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = requests.readline()
        if not line:
            os._exit(0)
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return request
        answers.write(f"pid {pid}\n".encode())
        answers.flush()
        _, status = os.waitpid(pid, 0)
        answers.write(f"status {status}\n".encode())
        answers.flush()


def _become(request: dict) -> None:
    """Make this child look like a fresh `python -m clusterbench ARGS`: its files, folder, environment, argv,
    sys.path[0] (the current folder, as `-m` puts it) and, when asked, an address-space limit."""
    for fd, path, flags in ((0, request["stdin"], os.O_RDONLY),
                            (1, request["stdout"], os.O_WRONLY | os.O_TRUNC),
                            (2, request["stderr"], os.O_WRONLY | os.O_TRUNC)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding=sys.stdin.encoding,
                                 errors=sys.stdin.errors)  # not the server's reader, which may hold read-ahead
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("memory"):
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (request["memory"], request["memory"]))
    sys.path[0] = os.getcwd()
    sys.argv = ["clusterbench", *request["args"]]


def _run_and_exit() -> None:
    """Run the command, then end as the interpreter would (non-daemon threads joined, atexit handlers run, the
    standard streams flushed, the exit code of SystemExit, a traceback and 1 for an uncaught exception, death by
    SIGINT for an uncaught KeyboardInterrupt), but without tearing down the server's libraries object by object:
    that teardown touched every page they share with the server and cost more than importing them anew."""
    import atexit
    import runpy
    import signal
    import threading

    code: int = 0
    interrupted = False
    try:
        runpy.run_module("clusterbench", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except KeyboardInterrupt:
        interrupted = True
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # what the interpreter does at exit: wait for non-daemon threads
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 120  # as Python does when it cannot flush its standard streams at exit
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def _exit_code(value) -> int:
    """The exit status of `sys.exit(value)`: None is 0, an int itself, anything else is printed and is 1."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


_preload()
gc.freeze()  # what is imported here stays out of the children's collections: they need not touch its pages
_become(_serve())
_run_and_exit()
