"""What every benchmark build shares: a private copy of the source, logged commands, staging.

A build runs in a temporary folder under the builds folder, and only a build that passed its
smoke test is moved (renamed) into `<builds>/<name>-<key>/`, so an interrupted or failed build
never leaves a half-made binary where campaigns would find it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from clusterbench.build import registry
from clusterbench.build.sources import SourcePackage, fetch_debian_source, sha256_of, tree_digest, unpack
from clusterbench.errors import UserInputError
from clusterbench.native.build import BuildError

Log = Callable[[str], None]


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
    """The provenance of an existing build in `final`, re-registered, or None."""
    if not (final / binary_name).is_file():
        return None
    entry = registry.provenance(str(final / binary_name))
    if entry is None:
        try:
            entry = json.loads((final / "provenance.json").read_text())
        except (OSError, ValueError):
            return None
    registry.register(entry)
    return entry


def install(work: Path, final: Path, files: dict[str, Path], entry: dict) -> None:
    """Stage the binary, Make file, log and provenance, rename into `final`, register."""
    staged = work / "staged"
    staged.mkdir()
    for name, path in files.items():
        shutil.copy2(path, staged / name)
    (staged / "provenance.json").write_text(json.dumps(entry, indent=2))
    if final.exists():
        shutil.rmtree(final)
    os.replace(staged, final)
    registry.register(entry)


