"""The supervisor between clusterbench and a run's command: a run's processes never outlive clusterbench.

clusterbench (the harness) starts this file as a script, `python -I -S supervise.py CTL STATUS HARNESS_PID`:
standard library only and no clusterbench import, so it costs one bare interpreter start (about 10 ms).
The supervisor

- makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`): every process of the run that loses its
  parent, including one that moved to its own session with `setsid` or daemonised, is re-parented to
  the supervisor instead of init, so the whole tree stays findable under it;
- watches the harness through a pipe (CTL) only the harness can write to: when the harness dies, even
  by kill -9, the kernel closes its end and the supervisor reads end-of-file. `PR_SET_PDEATHSIG` wakes it
  up as well, but is only a hint, re-checked with getppid(): the kernel sends it when the parent *thread*
  that forked exits, which is not always the process;
- reads the command (executable, argv, environment) from CTL, starts it in a new session
  (`posix_spawn`, with SIGPIPE and SIGXFSZ back to their defaults), and waits for it;
- on a stop request (`t` on CTL: a timeout or Ctrl-C in the harness; SIGTERM, SIGINT or SIGHUP to the
  supervisor) or the harness's death, signals every descendant (found by walking /proc from its own
  PID) with SIGTERM, then SIGKILL after a grace period, until it has no child left;
- when the command ends by itself, stops anything it left behind the same way;
- writes `<exit code or -signal> <seconds>` to the STATUS pipe and exits.

cgroups would track the tree too, but they need a writable cgroup v2 hierarchy (this VM has the v1/hybrid
layout, many clusters do not delegate it to users); subreaper + /proc works for any user on Linux >= 3.4.
The functions below (`descendants`, `kill_tree`, the record helpers) are also used by the harness, to stop
a supervisor that does not answer and, on resume, to find out whether a run's processes are still alive.
"""

# Start-up time matters (it is paid by every run): no `from __future__` (2 ms), `_signal` rather
# than `signal` (whose enums cost 10 ms), `_ctypes` rather than `ctypes` for prctl (5 ms).
import _signal as signal
import os
import select
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_GRACE_S = 3.0  # SIGTERM -> SIGKILL on a timeout or an interrupt (mpirun gets to stop its ranks)
ORPHAN_GRACE_S = 0.5  # the same after the harness died: everything gone well within 2 s
LEFTOVER_GRACE_S = 1.0  # for what the command left running when it exited
KILL_LIMIT_S = 10.0  # give up SIGKILLing after this (a process stuck in the kernel)
RECORD = "supervisor.json"  # in the run directory: who supervises the run


# ---------------------------------------------------------------- the process table


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent PID, start time in clock ticks since boot) from /proc, None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2:].split()
    return fields[0].decode(), int(fields[1]), int(fields[19])


def descendants(root: int) -> list[int]:
    """Every process below `root` (zombies included), parents before children."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = proc_stat(int(name))
            if stat:
                children.setdefault(stat[1], []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _living(pids: list[int]) -> list[int]:
    return [p for p in pids if (s := proc_stat(p)) and s[0] not in "ZX"]


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def kill_tree(root: int, include_root: bool = True, limit_s: float = KILL_LIMIT_S) -> bool:
    """SIGKILL every living descendant of `root` (a supervisor that does not answer, or one left by a
    dead clusterbench), then `root`. For callers that are not root's parent. True if all are gone."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        alive = _living(descendants(root))
        if not alive:
            break
        _signal(alive, signal.SIGKILL)
        time.sleep(0.01)
    if include_root:
        _signal([root], signal.SIGKILL)
        while time.monotonic() < deadline and _living([root]):
            time.sleep(0.01)
    return not _living(descendants(root)) and not (include_root and _living([root]))


# ---------------------------------------------------------------- the record in the run directory


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def make_record(pid: int) -> dict:
    """What identifies a supervisor beyond its PID (which the kernel reuses): host, boot, start time."""
    stat = proc_stat(pid)
    try:  # with the boot id, the process table the run's processes are in (system/disturbance.py)
        pid_ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pid_ns = ""
    return {"pid": pid, "host": os.uname().nodename, "boot_id": boot_id(), "pid_ns": pid_ns,
            "start_ticks": stat[2] if stat else None, "harness_pid": os.getpid(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def read_record(path: str | os.PathLike) -> dict | None:
    import json

    try:
        with open(path) as f:
            record = json.load(f)
        return record if isinstance(record, dict) and isinstance(record.get("pid"), int) else None
    except (OSError, ValueError):
        return None


def record_alive(record: dict) -> bool | None:
    """Is the supervisor of this record still running? None when it cannot be told from here
    (another host)."""
    if record.get("host") != os.uname().nodename:
        return None
    if record.get("boot_id") and record["boot_id"] != boot_id():
        return False
    stat = proc_stat(record["pid"])
    return bool(stat and stat[0] not in "ZX" and stat[2] == record.get("start_ticks"))


# ---------------------------------------------------------------- the supervisor itself


def _prctl(option: int, arg: int) -> bool:
    try:
        import _ctypes

        prctl = _ctypes.dlsym(_ctypes.dlopen(None), "prctl")
        return _ctypes.call_function(prctl, (option, arg, 0, 0, 0)) == 0
    except (ImportError, AttributeError, OSError):  # not glibc/Linux, or a ctypes without these internals
        try:
            import ctypes

            return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
        except (OSError, AttributeError):
            return False


def _reap(child: int, status: list[int | None]) -> bool:
    """Reap every exited child (the command, and orphans adopted as subreaper); False when no
    child is left at all."""
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        if pid == child:
            status[0] = os.waitstatus_to_exitcode(code)


def _stop(child: int, status: list[int | None], grace_s: float, wake: int) -> None:
    """SIGTERM every descendant, SIGKILL after `grace_s`, until no child is left."""
    me = os.getpid()
    start = time.monotonic()
    signalled: set[int] = set()
    sig = signal.SIGTERM
    while _reap(child, status):
        elapsed = time.monotonic() - start
        if elapsed > grace_s + KILL_LIMIT_S:
            return
        if sig == signal.SIGTERM and elapsed > grace_s:
            sig = signal.SIGKILL
            signalled.clear()
        pids = [p for p in _living(descendants(me)) if sig == signal.SIGKILL or p not in signalled]
        if status[0] is None and child not in signalled:  # the group of the command, while it exists
            try:
                os.killpg(child, sig)
            except OSError:
                pass
        signalled.update(pids)
        signalled.add(child)
        _signal(pids, sig)
        select.select([wake], [], [], 0.02)  # a SIGCHLD ends the wait early
        _drain(wake)


def _drain(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except (BlockingIOError, InterruptedError):
        return b""


def _read_spec(ctl: int) -> tuple[bytes, list[bytes], dict[bytes, bytes], bytes] | None:
    """`<length>\\n` then executable, argc, argv..., KEY=VALUE... separated by NUL; None on EOF."""
    data = b""
    while b"\n" not in data:
        chunk = os.read(ctl, 65536)
        if not chunk:
            return None
        data += chunk
    head, _, data = data.partition(b"\n")
    size = int(head)
    while len(data) < size:
        chunk = os.read(ctl, 65536)
        if not chunk:
            return None
        data += chunk
    items, rest = data[:size].split(b"\0"), data[size:]
    argc = int(items[1])
    argv = items[2:2 + argc]
    env = dict(item.partition(b"=")[::2] for item in items[2 + argc:])
    return items[0], argv, env, rest


def main(argv: list[str]) -> int:
    ctl, status_fd, harness = int(argv[1]), int(argv[2]), int(argv[3])
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2):
        signal.signal(sig, lambda *_: None)  # the wakeup fd carries the signal numbers
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGUSR2)
    if os.getppid() != harness:  # the harness died before PDEATHSIG was armed
        return 0
    spec = _read_spec(ctl)
    if spec is None:  # the harness gave up (or died) before the command started
        return 0
    executable, args, env, pending = spec
    os.set_inheritable(ctl, False)
    os.set_inheritable(status_fd, False)
    start = time.monotonic()
    try:
        child = os.posix_spawn(executable, args, env, setsid=True,
                               setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    except OSError as exc:
        os.write(2, f"clusterbench: cannot start {os.fsdecode(executable)}: {exc.strerror}\n".encode())
        os.write(status_fd, b"127 0\n")
        return 127
    status: list[int | None] = [None]
    grace: float | None = None
    ended: float | None = None
    poller = select.poll()
    poller.register(ctl, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    try:
        if pending:
            grace = STOP_GRACE_S
        while grace is None:
            for fd, _ in poller.poll(1000):
                if fd == ctl:
                    data = os.read(ctl, 64)
                    if not data:  # the harness is gone: nobody will ever read this run
                        grace = ORPHAN_GRACE_S
                        poller.unregister(ctl)
                    elif b"t" in data:
                        grace = STOP_GRACE_S
                else:
                    sigs = _drain(wake_r)
                    if any(s in sigs for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)):
                        grace = STOP_GRACE_S
            if grace is None and os.getppid() != harness:
                grace = ORPHAN_GRACE_S
            _reap(child, status)
            if status[0] is not None and ended is None:
                ended = time.monotonic()
                grace = LEFTOVER_GRACE_S if grace is None else grace  # stop whatever it left running
    finally:
        _stop(child, status, grace if grace is not None else 0.0, wake_r)
    seconds = (ended or time.monotonic()) - start
    code = status[0] if status[0] is not None else -signal.SIGKILL
    try:
        os.write(status_fd, f"{code} {seconds:.6f}\n".encode())
    except OSError:
        pass
    return code if 0 <= code < 256 else 128 + (-code % 128)


if __name__ == "__main__":  # python -I -S supervise.py CTL STATUS HARNESS_PID
    os._exit(main(sys.argv))
