"""What every benchmark build shares: a private copy of the source, logged commands, staging.

A build runs in a temporary folder under the builds folder, and only a build that passed its
smoke test is moved (renamed) into `<builds>/<name>-<key>/`, so an interrupted or failed build
never leaves a half-made binary where campaigns would find it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from clusterbench.build import registry
from clusterbench.build.sources import SourcePackage, fetch_debian_source, sha256_of, tree_digest, unpack
from clusterbench.errors import UserInputError
from clusterbench.native.build import BuildError

Log = Callable[[str], None]

DEFAULT_CFLAGS = "-O3 -march=native"  # the builders of IMB, OSU, STREAM and LULESH


@dataclass(frozen=True)
class Built:
    binary: Path
    provenance: dict
    rebuilt: bool  # False: the same inputs were already built and the cached binary is returned


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def obtain(source: Path | None, work: Path, log: Log, debian_package: str | None = None,
           what: str = "source") -> tuple[Path, str, SourcePackage | None]:
    """A private copy of the source tree, its checksum, and the Debian package it came from."""
    if source is None:
        if not debian_package:
            raise UserInputError(f"no {what} given", hint="give it with --source PATH (a tree or a tarball)")
        log(f"no --source: fetching Debian's {debian_package} source package")
        package = fetch_debian_source(debian_package, registry.builds_root() / "sources")
        log(f"source: {package.tarball.name} (sha256 {package.sha256[:12]}...)")
        return unpack(package.tarball, work / "src"), package.sha256, package
    if not source.exists():
        raise UserInputError(f"--source {source}: no such file or directory", hint=f"give the {what} tree or tarball")
    if source.is_dir():
        copy = work / "src" / source.name
        shutil.copytree(source, copy, symlinks=True)
        return copy, tree_digest(source), None
    return unpack(source, work / "src"), sha256_of(source), None


def run_logged(cmd: list[str], cwd: Path, logfile: Path, log: Log, what: str) -> None:
    """Run one build step with its output appended to build.log; BuildError with the tail."""
    with open(logfile, "a") as out:
        out.write(f"$ {shlex.join(cmd)}\n")
        out.flush()
        done = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-20:])
        raise BuildError(f"{what} failed (exit code {done.returncode}) in {cwd}:\n$ {shlex.join(cmd)}\n{tail}",
                         hint="see the messages above (build.log); the build options change the build")
    log(f"{what}: done")


def existing_build(name: str, binary_name: str, inputs: dict, force: bool, log: Log) -> tuple[Path, Built | None]:
    """The build folder for these inputs (`<builds>/<name>-<key>`), and its build when already there."""
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]
    final = registry.builds_root() / f"{name}-{key}"
    entry = None if force else cached(final, binary_name)
    if entry is None:
        return final, None
    log(f"already built: {final / binary_name}")
    return final, Built(final / binary_name, entry, rebuilt=False)


def cached(final: Path, binary_name: str) -> dict | None:
    """The provenance of an existing build in `final`, re-registered, or None.

    provenance.json holds one entry, or a list of them when a build installs several binaries
    (OSU: one entry per program); all of them are registered again.
    """
    binary = str(final / binary_name)
    if not (final / binary_name).is_file():
        return None
    try:
        saved = json.loads((final / "provenance.json").read_text())
    except (OSError, ValueError):
        saved = []
    saved = saved if isinstance(saved, list) else [saved]
    entry = registry.provenance(binary) or next((e for e in saved if e.get("binary") == binary), None)
    if entry is None:
        return None
    for other in saved:
        if other is not entry and other.get("binary") != binary and os.path.isfile(other.get("binary", "")):
            registry.register(other)
    registry.register(entry)
    return entry


def install(work: Path, final: Path, files: dict[str, Path], entry: dict | list[dict]) -> None:
    """Stage the binaries, Make file, log and provenance, rename into `final`, register.

    `entry` is the provenance of the one binary, or a list with one entry per installed binary."""
    staged = work / "staged"
    staged.mkdir()
    for name, path in files.items():
        shutil.copy2(path, staged / name)
    (staged / "provenance.json").write_text(json.dumps(entry, indent=2))
    if final.exists():
        shutil.rmtree(final)
    os.replace(staged, final)
    for one in entry if isinstance(entry, list) else [entry]:
        registry.register(one)


@contextmanager
def workspace(name: str) -> Iterator[Path]:
    """A temporary build folder under the builds folder (same file system: the install is a rename)."""
    with tempfile.TemporaryDirectory(prefix=f"{name}-build-", dir=mkdir(registry.builds_root())) as tmp:
        yield Path(tmp)


def find_root(tree: Path, markers: tuple[str, ...], what: str, hint: str, given: Path | None = None) -> Path:
    """The source folder inside an unpacked tree (the tree or one folder down) holding all `markers`;
    UserInputError naming `given` (what the user gave) otherwise."""
    for candidate in (tree, *sorted(tree.glob("*/"))):
        if all((candidate / marker).exists() for marker in markers):
            return candidate
    raise UserInputError(f"no {what} source found in {given or tree}", hint=hint)


def remove_objects(root: Path, log: Log) -> None:
    """Delete object files a tree given as a folder may carry from an earlier build in place (other
    flags, another MPI): make would link them as they are."""
    stale = [path for pattern in ("*.o", "*.lo") for path in root.rglob(pattern) if path.is_file()]
    for path in stale:
        path.unlink()
    if stale:
        log(f"removed {len(stale)} object files of an earlier build from the copy of the source")


def read_version(root: Path, rules: Iterable[tuple[str, str]]) -> str:
    """The version a source tree declares: the first (file, regex) rule whose regex matches
    that file (group 1 is the version), in the order given; "unknown" when none does."""
    for name, pattern in rules:
        path = root / name
        if path.is_file():
            m = re.search(pattern, path.read_text(errors="replace"), re.M)
            if m:
                return m.group(1)
    return "unknown"


def make_jobs() -> str:
    """`-jN` for make: the cores of this node, at most 8 (a login node is shared)."""
    return f"-j{max(1, min(os.cpu_count() or 1, 8))}"


def entry_for(final: Path, name: str, version: str, source: Path, source_sum: str, **fields) -> dict:
    """The provenance every build records, plus the builder's own `fields`."""
    return {"name": name, "binary": str(final / name), "key": final.name.rsplit("-", 1)[1], "version": version,
            "built_at": now(), "source": str(Path(source).resolve()), "source_sha256": source_sum, **fields}


def mpi_fields(stack, toolchain: dict, **wrappers: str) -> dict:
    """The provenance of the MPI a build used: its name and version, the wrappers, the toolchain."""
    return {**wrappers, "mpi": stack.name, "mpi_version": stack.version, "toolchain": toolchain}


def smoke_run(program: list[str], what: str, check: Callable[[str], str | None], ranks: int | None = 1,
              mpi: str | None = None, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    """Run a new binary once on a tiny case, through `mpi`'s mpirun on `ranks` ranks (oversubscribed
    if the node has fewer cores; no binding), or directly when `ranks` is None; its output.

    `check(output)` says what is wrong with the output (None: it is what the program prints when
    it works). BuildError when it fails, times out or cannot start: such a build is never installed."""
    from clusterbench.launch.mpirun import MpiLaunch, mpirun_command

    env = env or {}
    cmd = program if ranks is None else mpirun_command(
        MpiLaunch(ranks=ranks, env=env, bind_to="none", oversubscribe=ranks > 1, mpi=mpi), program)
    with tempfile.TemporaryDirectory(prefix="smoke-") as tmp:
        try:
            done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=timeout,
                                  env=dict(os.environ) | env, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            reason, output = f"not finished in {timeout:.0f} s", ""
        except OSError as exc:
            reason, output = f"cannot start: {exc}", ""
        else:
            output = done.stdout + done.stderr
            reason = f"exit code {done.returncode}" if done.returncode != 0 else check(done.stdout)
    if reason:
        raise BuildError(f"the new {what} failed its smoke test ({reason}):\n$ {shlex.join(cmd)}\n"
                         + output.strip()[-1500:], hint="the build is not installed; see build.log for the build")
    return done.stdout
