"""What every official benchmark build shares: its start, a private copy of the source, logged
commands, the smoke test, installation with provenance.

A recipe (`bench/<benchmark>/build.py`) is a `Recipe` (names, source markers, version rules) and
its own steps; `build(RECIPE, source, inputs, steps, ...)` does the rest. The source is copied into
a temporary folder under the builds folder, its root found, the inputs keyed, and the build cache
(`cache.py`) asked for that key under the key's lock. A hit returns the existing build; a miss
runs the steps in the temporary folder, and only a build that passed its smoke test is renamed
into `<builds>/<name>-<key>/` (`Job.install`), so an interrupted or failed build never leaves a
half-made binary where campaigns would find it, and two processes building the same inputs build
them once.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from clusterbench.build import cache, registry
from clusterbench.build.cache import BuildError  # raised by every step here, and imported from here by recipes
from clusterbench.build.sources import SourcePackage, fetch_debian_source, sha256_of, tree_digest, unpack
from clusterbench.errors import UserInputError

Log = Callable[[str], None]

DEFAULT_CFLAGS = "-O3 -march=native"  # the builders of IMB, OSU, STREAM and LULESH


@dataclass(frozen=True)
class Built:
    binary: Path
    provenance: dict
    rebuilt: bool  # False: the same inputs were already built and the cached binary is returned


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


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
    """Stage the binaries, Make file, log and provenance in `work`, publish them as `final`, register.

    `entry` is the provenance of the one binary, or a list with one entry per installed binary.
    Called inside `start`, which holds the entry's lock that `cache.publish` wants."""
    staged = work / "staged"
    staged.mkdir()
    for name, path in files.items():
        shutil.copy2(path, staged / name)
    (staged / "provenance.json").write_text(json.dumps(entry, indent=2))
    cache.publish(staged, final)
    for one in entry if isinstance(entry, list) else [entry]:
        registry.register(one)


def workspace(name: str) -> AbstractContextManager[Path]:
    """A temporary build folder under the builds folder (same file system: the install is a rename)."""
    return cache.workspace(registry.builds_root(), f"{name}-build-")


@dataclass(frozen=True)
class Recipe:
    """What the start of a build needs to know of one benchmark: its names, and how to find its source."""

    name: str  # the build folder is <builds>/<name>-<key>
    binary: str  # the program whose presence in that folder means the build is there
    what: str  # the benchmark in messages: "no <what> source found", "building <what> <version>"
    versions: tuple[tuple[str, str], ...]  # (file, regex) rules for the version the tree declares (read_version)
    hint: str = ""  # how to give the right source, said when the given one is not it
    markers: tuple[str, ...] = ()  # files (or folders) the source root holds, for find_root
    locate: Callable[[Path], Path] | None = None  # the benchmark's own finder instead of markers (HPL)
    debian_package: str | None = None  # the Debian source package fetched when no source is given
    format: int = 1  # in the key: bump when the build steps change in a way that changes the binary


@dataclass(frozen=True)
class Job:
    """One build under way, as `start` sets it up: the workspace, the source copy, the key's folder."""

    recipe: Recipe
    work: Path  # the private temporary folder: source copy, build.log, staging
    root: Path  # the source root inside the copy
    version: str  # the version the source declares
    origin: str  # where the source came from, for the provenance: the path given, or the Debian package
    source_sum: str
    inputs: dict  # what the key digests
    final: Path  # where the build is installed: <builds>/<name>-<key>
    cached: Built | None  # the build of these inputs already there: return it, build nothing

    @property
    def logfile(self) -> Path:
        return self.work / "build.log"

    def made(self, path: Path, step: str) -> Path:
        """`path`, which `step` (make, the compiler) should have made; BuildError with the end of
        build.log when it did not (the log goes with the workspace)."""
        if not path.is_file():
            logged = self.logfile.read_text(errors="replace") if self.logfile.is_file() else ""
            tail = "\n".join(logged.splitlines()[-20:])
            raise BuildError(f"{step} finished but {path} is missing:\n{tail}",
                             hint="the build options (--cflags, --mpi) or the source tree may not fit this recipe")
        return path

    def entry(self, name: str, **fields) -> dict:
        """The provenance of one installed program (`entry_for` with this job's source, version and folder)."""
        return entry_for(self.final, name, self.version, self.origin, self.source_sum, **fields)

    def install(self, files: dict[str, Path], entry: dict | list[dict], log: Log) -> Built:
        """Install `files` and build.log (if a step wrote one) with the provenance `entry` (one per
        program, or a list); the build of the recipe's binary."""
        logged = {"build.log": self.logfile} if self.logfile.is_file() else {}
        install(self.work, self.final, {**files, **logged}, entry)
        entries = entry if isinstance(entry, list) else [entry]
        if len(entries) == 1:
            log(f"registered {entries[0]['binary']}")
        else:
            log(f"registered {len(entries)} programs in {self.final}: {', '.join(e['name'] for e in entries)}")
        main = next(e for e in entries if e["name"] == self.recipe.binary)
        return Built(self.final / self.recipe.binary, main, rebuilt=True)


@contextmanager
def start(recipe: Recipe, source: Path | None, inputs: dict | Callable[[Path], dict], force: bool, log: Log,
          detail: str = "") -> Iterator[Job]:
    """The start every build shares: obtain the source, find its root, key the inputs, look in the cache.

    `inputs` is what the recipe adds to the key (toolchain identity, flags, ...), or a function of
    the source root giving it (HPL's tree kind); the recipe's format and the source checksum are
    always in it. The block runs with the key's lock held (`cache.claim`), so a second process
    building the same inputs waits and then finds this build. When `job.cached` is set the recipe
    returns it; else "building <what> <version> <detail>" is logged, the copy is cleared of stale
    object files, and the recipe builds and ends with `job.install`."""
    with workspace(recipe.name) as work:
        tree, source_sum, package = obtain(source, work, log, recipe.debian_package, f"{recipe.what} source")
        root = recipe.locate(tree) if recipe.locate else find_root(tree, recipe.markers, recipe.what, recipe.hint,
                                                                   given=source)
        keyed = {"format": recipe.format, "source_sha256": source_sum, **(inputs(root) if callable(inputs) else inputs)}
        final = cache.entry(registry.builds_root(), recipe.name, keyed)
        version = read_version(root, recipe.versions)
        origin = package.origin if package else str(Path(source).resolve())
        with cache.claim(final, lambda: cached(final, recipe.binary), force) as entry:
            if entry is not None:
                log(f"already built: {final / recipe.binary}")
            else:
                log(f"building {recipe.what} {version} {detail}".rstrip())
                remove_objects(root, log)
            yield Job(recipe, work, root, version, origin, source_sum, keyed, final,
                      None if entry is None else Built(final / recipe.binary, entry, rebuilt=False))


def build(recipe: Recipe, source: Path | None, inputs: dict | Callable[[Path], dict], steps: Callable[[Job], Built],
          force: bool, log: Log, detail: str = "") -> Built:
    """A whole build: `start`, then the existing build of these inputs, or what `steps(job)` (the
    recipe's own: configure, make, smoke test, `job.install`) builds."""
    with start(recipe, source, inputs, force, log, detail) as job:
        return job.cached or steps(job)


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


def entry_for(final: Path, name: str, version: str, source: Path | str, source_sum: str, **fields) -> dict:
    """The provenance every build records, plus the builder's own `fields`. `source`: the path given
    (recorded resolved), or already a description of where it came from (`Job.origin`)."""
    origin = source if isinstance(source, str) else str(Path(source).resolve())
    return {"name": name, "binary": str(final / name), "key": cache.key_of(final), "version": version,
            "built_at": now(), "source": origin, "source_sha256": source_sum, **fields}


def mpi_fields(stack, toolchain: dict, **wrappers: str) -> dict:
    """The provenance of the MPI a build used: its name and version, the wrappers, the toolchain."""
    return {**wrappers, "mpi": stack.name, "mpi_version": stack.version, "toolchain": toolchain}


def smoke_run(program: list[str], what: str, check: Callable[[str], str | None], ranks: int | None = 1,
              mpi: str | None = None, env: dict[str, str] | None = None, timeout: float = 300,
              inputs: dict[str, str] | None = None, produces: str | None = None) -> str:
    """Run a new binary once on a tiny case, through `mpi`'s mpirun on `ranks` ranks (oversubscribed
    if the node has fewer cores; no binding), or directly when `ranks` is None; its output.

    `inputs` are files written into its working folder first (HPL.dat); `produces` a file name
    pattern it must write there (HPCG's report). `check(output)` says what is wrong with the
    output (None: it is what the program prints when it works). BuildError when it fails, times
    out or cannot start: such a build is never installed. The mpirun line is the launch model's
    (launch/site.py), the same as for a benchmark run."""
    from clusterbench.launch.site import LOCAL
    from clusterbench.launch.spec import Launch, Placement

    env = env or {}
    placement = None if ranks is None else Placement(ranks=ranks, bind_to="none", mpi=mpi, oversubscribe=ranks > 1)
    cmd = LOCAL.launch_command(Launch(tuple(program), placement, env))
    with tempfile.TemporaryDirectory(prefix="smoke-") as tmp:
        for name, text in (inputs or {}).items():
            Path(tmp, name).write_text(text)
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
            if not reason and produces and not list(Path(tmp).glob(produces)):
                reason = f"it wrote no {produces}"
    if reason:
        raise BuildError(f"the new {what} failed its smoke test ({reason}):\n$ {shlex.join(cmd)}\n"
                         + output.strip()[-1500:], hint="the build is not installed; what the program printed is above")
    return done.stdout
