"""The one build cache: clusterbench's own kernels and the official benchmarks are made the same way.

An entry is a folder `<root>/<name>-<key>`, where `key()` digests every input that decides the
binary (toolchain identity, flags, source checksum, ...): the same inputs find the same folder,
and a change to any of them is a new entry beside the old one. An entry is made under the lock of
its name (`claim`), in a staging folder on the same file system, and renamed into place whole
(`publish`). So two processes making the same entry build it once (the second waits, then finds
it), a reader never sees a half-written binary, and a failed build leaves nothing behind but its
lock file. A hit takes no lock, so a cache shared read-only still serves its binaries.

Where the entries live is each kind's own (`cache_dir`): kernels in `native/`, official builds in
`builds/` with their registry.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from clusterbench.errors import EnvironmentProblem, UserInputError

T = TypeVar("T")

KEY_LENGTH = 16  # hex digits of the sha256: short folder names, and 64 bits keep distinct inputs apart
CACHE_HINT = "the build cache must be writable: set CLUSTERBENCH_CACHE to a folder you can write"


class BuildError(UserInputError):
    """A build did not make its program (a compile or make step failed, or its smoke test did):
    the command and the tail of its messages, exit code 2. Nothing is installed."""


def cache_dir(folder: str, override_folder: str | None = None) -> Path:
    """`$CLUSTERBENCH_CACHE/<override_folder>` when that variable is set (default: `folder`), else
    `$XDG_CACHE_HOME/clusterbench/<folder>` (`~/.cache` when unset)."""
    if os.environ.get("CLUSTERBENCH_CACHE"):
        return Path(os.environ["CLUSTERBENCH_CACHE"]) / (folder if override_folder is None else override_folder)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "clusterbench" / folder


def key(inputs: dict) -> str:
    """The cache key of a build: a digest of its inputs (JSON, keys sorted, so their order does not matter)."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:KEY_LENGTH]


def entry(root: Path, name: str, inputs: dict) -> Path:
    """The folder of the build of `name` from `inputs`: `<root>/<name>-<key>`."""
    return root / f"{name}-{key(inputs)}"


def key_of(folder: Path) -> str:
    """The key part of an entry's folder name (names may hold '-', keys do not)."""
    return folder.name.rsplit("-", 1)[1]


def mkdir(path: Path) -> Path:
    """`path`, created with its parents; EnvironmentProblem (not a traceback) when it cannot be."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot create {path}: {exc.strerror or exc}", hint=CACHE_HINT) from None
    return path


@contextmanager
def locked(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive lock on `lock_file` (created if missing), waiting for whoever has it.

    flock: the kernel drops it when its holder exits, even killed, so a crashed build never leaves a
    lock that blocks the next one. The file stays: removing it would let a waiter and a newcomer
    lock two different files of the same name."""
    mkdir(lock_file.parent)
    try:
        handle = open(lock_file, "a")  # closed (and so unlocked) by the `with` below
    except OSError as exc:
        raise EnvironmentProblem(f"cannot open the lock file {lock_file}: {exc.strerror or exc}",
                                 hint=CACHE_HINT) from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def lock_file(final: Path) -> Path:
    """The lock of one entry: a hidden file beside its folder (the folder itself is renamed in whole)."""
    return final.parent / f".{final.name}.lock"


@contextmanager
def claim(final: Path, lookup: Callable[[], T | None], force: bool = False) -> Iterator[T | None]:
    """Make entry `final` at most once: yields what `lookup()` finds there, or None when the caller
    must build it, with the entry's lock held until the block ends.

    `lookup` is asked first without the lock (a hit costs nothing) and again once the lock is held:
    another process may have built the entry while this one waited. `force` skips both: rebuild."""
    if not force:
        found = lookup()
        if found is not None:
            yield found
            return
    with locked(lock_file(final)):
        yield None if force else lookup()


@contextmanager
def workspace(root: Path, prefix: str) -> Iterator[Path]:
    """A private temporary folder under `root`, removed at the end whatever happened: a build runs
    and stages there, on the entries' file system, so that `publish` is a rename."""
    with tempfile.TemporaryDirectory(prefix=prefix, dir=mkdir(root)) as tmp:
        yield Path(tmp)


def publish(staged: Path, final: Path) -> None:
    """Rename `staged` (a file, or a folder, on `final`'s file system) to `final`, replacing what is there.

    A file replaces atomically. A folder cannot be renamed onto a non-empty one, so an older entry
    (a forced rebuild, a leftover) is renamed aside first and deleted after: a reader finds the old
    entry or the new one whole, never a mix. Call it with the entry's lock held (`claim`)."""
    if not (staged.is_dir() and final.exists()):
        os.replace(staged, final)
        return
    aside = final.with_name(f".{final.name}.old-{os.getpid()}")
    shutil.rmtree(aside, ignore_errors=True)
    os.replace(final, aside)
    os.replace(staged, final)
    shutil.rmtree(aside, ignore_errors=True)
