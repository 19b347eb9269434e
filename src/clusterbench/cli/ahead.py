"""What `bench` starts in the background first thing, so that it overlaps the imports and the
expansion of the point instead of adding to each run: reading this machine's state, and
discovering the node.

- The state read (execution/observe.py, ~0.15 s, a clock measurement of 50 ms in it) starts only
  with the clock kernel already built: bad input builds nothing. The run takes this read when its
  nodes and environment match (the same script), else reads again.
- Discovery (system/discover.py) asks `mpirun --version`, `ldconfig -p` and `cc --version`, then the
  default MPI's compiler wrappers (`--showme`, and `mpicc --version` for the kernels' build cache):
  tens of ms of subprocesses in series, which the thread waits for while the main thread imports
  (waiting releases the GIL). `discovered()` hands the command that answer (the same call, made a
  little earlier), or discovers itself when none was started or it failed. The MPI's answers are
  cached for the process by system/mpi.py and native/build.py.
"""

from __future__ import annotations

import threading

_discovery: dict = {}  # "done": threading.Event, "info": SystemInfo once found


def start() -> None:
    """Start both in a background thread (the state read first). The modules are imported here, on
    the main thread, which imports them for the run anyway; the thread only waits on subprocesses."""
    import os

    from clusterbench.execution import observe
    from clusterbench.native.build import built_clock_binary, toolchain_identity
    from clusterbench.system.discover import discover
    from clusterbench.system.mpi import mpi_stack

    done = threading.Event()
    _discovery["done"] = done
    env = dict(os.environ)

    def work() -> None:
        try:
            clock = built_clock_binary()  # `cc --version` for the build cache's key
            if clock is not None:
                observe.prefetch_state(["localhost"], env, str(clock))
            _discovery["info"] = discover()
            stack = mpi_stack()  # the run asks for it next (launch, compiler), and it is cached for the process
            if stack.mpicc:  # the key of a kernel built with MPI: `mpicc --version`, `--showme` (cached too)
                toolchain_identity(stack.mpicc)
        except Exception:  # noqa: BLE001 - asked again where the command needs it, which reports the error
            pass
        finally:
            done.set()

    # a daemon thread: a command that fails before it asks does not wait for it at exit
    threading.Thread(target=work, name="clusterbench-ahead", daemon=True).start()


def discovered():
    """This node's SystemInfo: the one discovered ahead when it was, else discovered now."""
    from clusterbench.system.discover import discover

    done = _discovery.pop("done", None)
    if done is not None and done.wait() and "info" in _discovery:
        return _discovery.pop("info")
    return discover()
