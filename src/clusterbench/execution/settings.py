"""Apply a run's system settings on its hosts and put the original values back afterwards, even
after a crash.

The order is what makes it safe:

1. `preflight` reads every key on every host in one round trip and refuses (exit 2) before
   anything runs: a key that does not exist there, a value the node cannot take, no root.
2. `apply` takes an exclusive lock (flock on `<journal_dir>/lock`, so two clusterbench processes
   never change settings at once), restores whatever a crashed process left, reads the current
   values, and writes them to a journal file (fsynced, renamed into place, folder fsynced)
   BEFORE the first change. Then it changes them; a failure part-way restores everything.
3. `restore` writes the originals back and removes the journal. If the process is killed in
   between (kill -9, power cut), the journal stays and `restore_pending` (run by the next
   `campaign run`, or `clusterbench system restore`) puts the originals back. Writing an original
   that was never changed is harmless, so a crash between "journal written" and "first change"
   is covered too, and restoring twice does nothing more.

Hosts that share a kernel (same boot id), or a network namespace on it, get each kernel-wide
(namespace-wide) change once. The scripts and their checks are `clusterbench.system.settings`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.errors import EnvironmentProblem, UserInputError
from clusterbench.launch.remote import Answer, run_on
from clusterbench.system import settings as ss

JOURNAL_FORMAT = "clusterbench-settings-journal"
JOURNAL_VERSION = 1
READ_TIMEOUT_S = 30.0
CHANGE_TIMEOUT_S = 60.0
FANOUT = 64
MAX_HOSTS = 4096
MAX_COMBINATIONS = 10_000
MAX_JOURNAL_BYTES = 16 * 1024 * 1024
JOURNAL_FOLDER = "settings-journal"


def journal_dir_for(db_path: Path) -> Path:
    """Where the journal of a results database lives: beside it, so `system restore --db X` finds it."""
    return Path(db_path).parent / JOURNAL_FOLDER


# --- the lock


class SettingsLock:
    """flock on `<journal_dir>/lock`, holding the PID of its holder. The kernel drops it when the
    holder dies, so a crash never leaves it taken; the journal, not the lock, says what to undo."""

    def __init__(self, journal_dir: Path):
        self.path = Path(journal_dir) / "lock"
        self.fd: int | None = None

    def acquire(self) -> SettingsLock:
        _make_folder(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise EnvironmentProblem(f"cannot lock {self.path}: {exc}") from None
            raise EnvironmentProblem(
                f"another clusterbench process (PID {holder}) is changing system settings",
                where=str(self.path),
                hint="wait for it to finish; if that process is gone, the lock is free again and "
                     "`clusterbench system restore` puts back what it changed") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot create the settings journal folder: {exc.strerror}",
                                 where=str(folder)) from None


# --- the journal


class Journal:
    """The original values of everything about to change, per host, in one JSON file. Written and
    fsynced before any change; rewritten with what is left when some hosts could not be restored;
    removed when all are."""

    def __init__(self, path: Path, data: dict):
        self.path = path
        self.data = data

    @classmethod
    def create(cls, journal_dir: Path, settings: dict[str, str], items: dict[str, list[ss.Item]]) -> Journal:
        _make_folder(Path(journal_dir))
        path = Path(journal_dir) / f"journal-{time.time_ns()}-{os.getpid()}.json"
        journal = cls(path, {"format": JOURNAL_FORMAT, "version": JOURNAL_VERSION, "pid": os.getpid(),
                             "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "settings": settings,
                             "hosts": {h: [i.to_dict() for i in its] for h, its in items.items()}})
        journal.save()
        return journal

    @classmethod
    def load(cls, path: Path) -> Journal:
        """A journal file, checked: ValueError if it is not one (its items are checked again, by
        kind and target, when their restore script is built)."""
        if path.stat().st_size > MAX_JOURNAL_BYTES:
            raise ValueError(f"larger than {MAX_JOURNAL_BYTES} bytes")
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("format") != JOURNAL_FORMAT:
            raise ValueError("not a clusterbench settings journal")
        if data.get("version") != JOURNAL_VERSION:
            raise ValueError(f"journal version {data.get('version')!r}, this clusterbench reads {JOURNAL_VERSION}")
        hosts = data.get("hosts")
        if not isinstance(hosts, dict):
            raise ValueError("no hosts")
        ss.check_hosts(hosts)
        for items in hosts.values():
            if not isinstance(items, list):
                raise ValueError("a host's items are not a list")
            for item in items:
                ss.Item.from_dict(item)
        return cls(path, data)

    def items(self) -> dict[str, list[ss.Item]]:
        return {h: [ss.Item.from_dict(i) for i in its] for h, its in self.data["hosts"].items()}

    def keep_only(self, hosts: list[str]) -> None:
        """Forget the hosts that are restored; remove the file when none is left."""
        self.data["hosts"] = {h: its for h, its in self.data["hosts"].items() if h in hosts}
        if self.data["hosts"]:
            self.save()
        else:
            self.remove()

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        try:
            with open(tmp, "w") as f:
                json.dump(self.data, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            _fsync_dir(self.path.parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise EnvironmentProblem(f"cannot write the settings journal: {exc.strerror}",
                                     where=str(self.path),
                                     hint="nothing was changed; free space or fix the folder's permissions") from None

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        _fsync_dir(self.path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pending_journals(journal_dir: Path) -> list[Path]:
    """Journal files left behind, newest first (restored in that order, undoing the last change first)."""
    folder = Path(journal_dir)
    if not folder.is_dir():
        return []
    return sorted(folder.glob("journal-*.json"), key=lambda p: _journal_time(p), reverse=True)


def _journal_time(path: Path) -> int:
    parts = path.stem.split("-")
    return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0


# --- running scripts


def _per_host(scripts: dict[str, str], timeout_s: float) -> dict[str, Answer]:
    """A different script on each host, in parallel."""
    if not scripts:
        return {}
    with ThreadPoolExecutor(max_workers=min(FANOUT, len(scripts))) as pool:
        futures = {h: pool.submit(run_on, h, s, timeout_s) for h, s in scripts.items()}
        return {h: f.result() for h, f in futures.items()}


def _check_inputs(hosts: list[str], peers: list[str] | None) -> tuple[list[str], list[str]]:
    if len(hosts) > MAX_HOSTS or len(peers or []) > MAX_HOSTS:
        raise UserInputError(f"settings on {len(hosts)} hosts at once (at most {MAX_HOSTS})")
    try:
        return ss.check_hosts(dict.fromkeys(hosts)), ss.check_hosts(dict.fromkeys(peers or []), "peer")
    except ValueError as exc:
        raise UserInputError(str(exc), hint="host names are letters, digits and . _ - : @") from None


def _validated(settings: dict, where: str = "system") -> dict[str, str]:
    try:
        return ss.validate(settings)
    except ValueError as exc:
        raise UserInputError(str(exc), where=where,
                             hint="`clusterbench system settings` lists the keys and their values") from None


def _read(hosts: list[str], settings_list: list[dict[str, str]], peers: list[str]) -> dict[str, ss.NodeState]:
    """Every host's current values for all keys of all the settings dicts: one round trip."""
    keys = list(dict.fromkeys(k for s in settings_list for k in ss.machine_keys(s)))
    explicit = list(dict.fromkeys(s["interface"] for s in settings_list if "interface" in s))
    resolve = any("interface" not in s for s in settings_list)
    scripts = {h: ss.read_script(keys, [p for p in peers if p != h], explicit, resolve) for h in hosts}
    answers = _per_host(scripts, READ_TIMEOUT_S)
    failed = {h: a for h, a in answers.items() if not a.ok}
    if failed:
        lines = [f"{h}: {'unreachable' if a.unreachable else f'exit {a.exit_code}'}: "
                 f"{(a.stderr.strip() or a.stdout.strip())[:300]}" for h, a in failed.items()]
        raise EnvironmentProblem("cannot read the system settings of " + ", ".join(failed) + "\n" + "\n".join(lines),
                                 hint="check that the hosts answer over ssh (`clusterbench cluster check`)")
    return {h: ss.parse_read(a.stdout) for h, a in answers.items()}


def _refuse(problems: list[tuple[str, str]]) -> None:
    """UserInputError listing (host, problem) pairs, hosts with the same problem on one line."""
    if not problems:
        return
    hosts_of: dict[str, list[str]] = {}
    for host, text in problems:
        if host not in hosts_of.setdefault(text, []):
            hosts_of[text].append(host)
    lines = [f"{', '.join(hosts)}: {text}" for text, hosts in hosts_of.items()]
    needs_root = any("needs root" in text for text in hosts_of)
    hint = ("run clusterbench as root (or with sudo) on the hosts named, or drop those keys from the system: section"
            if needs_root else
            "drop the keys the hosts cannot take from the system: section, or name the interface with interface:")
    raise UserInputError("system settings cannot be applied:\n" + "\n".join(lines[:50])
                         + (f"\n... and {len(lines) - 50} more" if len(lines) > 50 else ""), hint=hint)


def _plan(states: dict[str, ss.NodeState],
          settings: dict[str, str]) -> tuple[dict[str, list[ss.Item]], list[tuple[str, str]]]:
    """Items per host, with changes shared by hosts on one kernel (or one namespace of it) kept once."""
    plans: dict[str, list[ss.Item]] = {}
    problems: list[tuple[str, str]] = []
    seen: set[tuple] = set()
    for host, state in states.items():
        items, trouble = ss.plan_node(state, settings)
        problems += [(host, p) for p in trouble]
        kept = []
        for item in items:
            scope = ss.lookup(item.key).scope
            where = (state.boot_id or host,) + ((state.netns or host,) if scope == "netns" else ())
            if (where, item.key, item.target) not in seen:
                seen.add((where, item.key, item.target))
                kept.append(item)
        if kept:
            plans[host] = kept
    return plans, problems


def preflight(hosts: list[str], wanted: list[dict[str, str]], peers: list[str] | None = None) -> None:
    """Check every distinct settings dict a campaign will apply, on every host, in one round trip,
    before anything runs: the key exists there, the value is acceptable, root where the kernel
    requires it. Raises UserInputError (exit 2) saying what is needed on which host."""
    hosts, peers = _check_inputs(hosts, peers)
    if len(wanted) > MAX_COMBINATIONS:
        raise UserInputError(f"{len(wanted):,} distinct system settings combinations (at most {MAX_COMBINATIONS:,})",
                             hint="sweep fewer system: keys at once")
    wanted = list({json.dumps(v, sort_keys=True): v for v in (_validated(w) for w in wanted)}.values())
    machine = [w for w in wanted if ss.machine_keys(w)]
    if not machine or not hosts:
        return
    states = _read(hosts, machine, peers if peers else hosts)
    problems: list[tuple[str, str]] = []
    for settings in machine:
        problems += [p for p in _plan(states, settings)[1] if p not in problems]
    _refuse(problems)


# --- apply and restore


@dataclass
class Applied:
    """What `apply` changed, where, and the lock it holds until `restore`."""

    settings: dict[str, str]
    items: dict[str, list[ss.Item]] = field(default_factory=dict)
    journal: Journal | None = None
    lock: SettingsLock | None = None
    messages: list[str] = field(default_factory=list)
    restored: bool = False

    @property
    def env(self) -> dict[str, str]:
        """The MPI environment variables of the settings (OMPI_MCA_*, MPIR_CVAR_*)."""
        return ss.mpi_env(self.settings)


def _restore_items(items: dict[str, list[ss.Item]]) -> tuple[list[str], list[str]]:
    """Write every host's originals back; (messages, hosts that are not fully restored)."""
    scripts, messages, failed = {}, [], []
    for host, its in items.items():
        try:
            scripts[host] = ss.change_script(its, restore=True)
        except ValueError as exc:
            messages.append(f"{host}: will not restore: {exc}")
            failed.append(host)
    for host, answer in _per_host(scripts, CHANGE_TIMEOUT_S).items():
        its = items[host]
        results = ss.parse_results(answer.stdout, len(its)) if answer.ok else {}
        bad = [(i, results.get(i, "no answer")) for i in range(len(its)) if results.get(i, "no answer") is not None]
        if answer.unreachable:
            failed.append(host)
            messages.append(f"{host}: unreachable, nothing restored ({answer.stderr.strip()[:200]})")
        elif bad:
            failed.append(host)
            messages.append(f"{host}: could not restore "
                            + "; ".join(f"{ss.describe(its[i], True)}: {why}" for i, why in bad))
        else:
            messages.append(f"{host}: restored " + ", ".join(ss.describe(i, True) for i in reversed(its)))
    return messages, failed


def _restore_journal(journal: Journal) -> tuple[list[str], bool]:
    messages, failed = _restore_items(journal.items())
    journal.keep_only(failed)
    if failed:
        messages.append(f"kept {journal.path} for {', '.join(failed)}: run `clusterbench system restore` once "
                        "they answer, or put the values back by hand and delete the file")
    return messages, not failed


def _restore_pending_locked(journal_dir: Path) -> tuple[list[str], list[str]]:
    """(messages, hosts still pending)."""
    messages, still = [], []
    for path in pending_journals(journal_dir):
        try:
            journal = Journal.load(path)
        except (OSError, ValueError) as exc:
            messages.append(f"{path}: cannot read this journal ({exc}); check the hosts' settings by hand, "
                            "then delete it")
            still.append(str(path))
            continue
        text, ok = _restore_journal(journal)
        messages += [f"{path.name}: {m}" for m in text]
        if not ok:
            still += list(journal.data["hosts"])
    return messages, still


def restore_pending(journal_dir: Path) -> list[str]:
    """Put back what a crashed or killed run left: every journal found is restored, newest first.
    A journal whose host is unreachable is kept (and said so). Idempotent. Takes the lock, so it
    never undoes the settings of a run that is still going."""
    if not pending_journals(journal_dir):
        return []
    lock = SettingsLock(journal_dir).acquire()
    try:
        return _restore_pending_locked(journal_dir)[0]
    finally:
        lock.release()


def apply(journal_dir: Path, hosts: list[str], settings: dict[str, str], peers: list[str]) -> Applied:
    """Apply `settings` on `hosts` (peers: the run's nodes, to find the interfaces and routes it
    uses). Reads the originals, journals them, then changes them; on a failure part-way, restores
    what it changed and raises. The returned Applied holds the lock until `restore`."""
    hosts, peers = _check_inputs(hosts, peers)
    settings = _validated(settings)
    applied = Applied(settings)
    machine = ss.machine_keys(settings)
    if not machine or not hosts:
        return applied
    lock = SettingsLock(journal_dir).acquire()
    try:
        messages, still = _restore_pending_locked(journal_dir)
        applied.messages += messages
        blocking = [h for h in still if h in hosts or h.endswith(".json")]
        if blocking:  # their "current" values would be the crashed run's, not the originals
            raise EnvironmentProblem("settings left by an earlier run could not be restored on "
                                     + ", ".join(blocking) + ":\n" + "\n".join(messages),
                                     hint="bring the hosts back and run `clusterbench system restore`")
        states = _read(hosts, [settings], peers if peers else hosts)
        plans, problems = _plan(states, settings)
        _refuse(problems)
        journal = Journal.create(journal_dir, settings, plans)
        applied.items, applied.journal, applied.lock = plans, journal, lock
        try:
            trouble = _change(plans)
        except BaseException:
            with _no_interrupts():
                _restore_journal(journal)
            raise
        if trouble:
            with _no_interrupts():
                undone, _ = _restore_journal(journal)
            raise EnvironmentProblem("a system setting could not be applied:\n" + "\n".join(trouble)
                                     + "\nthen, putting the originals back:\n" + "\n".join(undone),
                                     hint="a node refused a value or stopped answering; fix that, and run "
                                          "`clusterbench system restore` if a host is listed as not restored")
        applied.messages += [f"{h}: set " + ", ".join(ss.describe(i) for i in its) for h, its in plans.items()]
        return applied
    except BaseException:
        lock.release()
        raise


def _change(plans: dict[str, list[ss.Item]]) -> list[str]:
    """Apply every host's items; the first failure of each host, as messages."""
    answers = _per_host({h: ss.change_script(its) for h, its in plans.items()}, CHANGE_TIMEOUT_S)
    trouble = []
    for host, answer in answers.items():
        its = plans[host]
        results = ss.parse_results(answer.stdout, len(its)) if answer.ok else {}
        for i, item in enumerate(its):
            why = results.get(i, (answer.stderr.strip()[:200] or "no answer"))
            if why is not None:
                trouble.append(f"{host}: {ss.describe(item)}: {why}")
                break
    return trouble


def restore(applied: Applied) -> list[str]:
    """Put the originals back, remove the journal (or keep the part for unreachable hosts) and
    release the lock. Calling it again does nothing."""
    if applied.restored:
        return []
    applied.restored = True
    try:
        if applied.journal is None:
            return []
        with _no_interrupts():
            return _restore_journal(applied.journal)[0]
    finally:
        if applied.lock:
            applied.lock.release()


@contextlib.contextmanager
def _no_interrupts() -> Iterator[None]:
    """Hold Ctrl-C off while originals are written back (a second Ctrl-C would leave them half
    restored); the interrupt is delivered afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list = []
    previous = signal.signal(signal.SIGINT, lambda *a: caught.append(a))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught and callable(previous):
            previous(*caught[0])


@contextlib.contextmanager
def applied_settings(journal_dir: Path, hosts: list[str], settings: dict[str, str],
                     peers: list[str]) -> Iterator[Applied]:
    """`with applied_settings(...) as applied:` the settings hold inside the block and are restored
    on normal exit, on an exception and on KeyboardInterrupt."""
    applied = apply(journal_dir, hosts, settings, peers)
    try:
        yield applied
    finally:
        restore(applied)
