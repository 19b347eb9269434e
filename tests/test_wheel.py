"""The package works outside the source tree: a wheel installed into a fresh venv, run elsewhere.

`pip wheel .` builds it (setuptools from PyPI in pip's isolated build environment) and pip
installs it into a new venv (without a pip of its own: `pip --python` installs into it). Its
dependencies are not unpacked again (pandas, SciPy and matplotlib took most of this module's
minute): the new venv sees, through a .pth file, a folder of links to exactly the distributions
that the wheel's own metadata requires, with theirs, as pip would resolve them, taken from the
venv that runs the tests; `pip check` then proves the wheel's requirements are met there, and an
import the wheel does not declare fails as in a fresh install. Then, from a folder that is not the
checkout, the installed command must find everything it ships: the C kernel sources (`bench
stream` compiles them), the report templates and the TOP500 lists (`report --list`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path

import pytest
from tests.conftest import LOCAL_FIXTURES, ROOT

pytestmark = pytest.mark.slow


def run(cmd: list[str], cwd: Path, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=(env or dict(os.environ)) | {"COLUMNS": "200"})
    assert done.returncode == 0, f"$ {' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _not_source(folder: str, names: list[str]) -> set[str]:
    """What `pip wheel` must not see of the checkout: its venv, git, earlier build outputs and caches (only at the
    top for build/ and dist/: src/clusterbench/build is a package)."""
    top = {".venv", ".git", "build", "dist", ".pytest_cache"} if Path(folder) == ROOT else set()
    return {n for n in names if n in top or n == "__pycache__" or n.endswith(".egg-info")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh venv's clusterbench command, an unrelated working folder)."""
    base = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools rewrites <tree>/src/clusterbench.egg-info while it builds, and the checkout's
    # copy is on sys.path of the tests running beside this one (pytest-xdist), which read its entry points.
    tree = base / "tree"
    shutil.copytree(ROOT, tree, ignore=_not_source)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(base / "dist"), str(tree)], cwd=base)
    wheels = list((base / "dist").glob("clusterbench-*.whl"))
    assert len(wheels) == 1, wheels
    venv.create(base / "venv")  # without pip of its own: the tests' pip installs into it (`pip --python`)
    python = str(base / "venv" / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python]
    run([*pip, "install", "-q", "--no-deps", str(wheels[0])], cwd=base)
    deps = base / "deps"
    link_distributions(deps, required_closure(wheel_requirements(wheels[0])))
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=base).stdout.strip()
    Path(site, "clusterbench-test-deps.pth").write_text(f"{deps}\n")
    run([*pip, "check"], cwd=base)  # every requirement of the wheel (and of its requirements) met
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return base / "venv" / "bin" / "clusterbench", elsewhere


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_requirements(wheel: Path) -> list[str]:
    """Requires-Dist of the built wheel's METADATA: what it declares, not what the checkout's venv has."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(zf.read(name).decode()).get_all("Requires-Dist") or []


def required_closure(requirements: list[str]) -> list[metadata.Distribution]:
    """The distributions that pip would install for `requirements` (no extras), found in this venv."""
    from packaging.requirements import Requirement

    found: dict[str, metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        req = Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = _normal(req.name)
        if key in found:
            continue
        dist = metadata.distribution(req.name)  # PackageNotFoundError: the test venv lacks a declared requirement
        found[key] = dist
        todo += dist.requires or []
    return list(found.values())


def link_distributions(folder: Path, dists: list[metadata.Distribution]) -> None:
    """`folder` with a link to each top-level file or package of `dists` (and their .dist-info)."""
    folder.mkdir()
    for dist in dists:
        for top in {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            source = Path(dist.locate_file(top))
            if source.exists() and not (folder / top).exists() and top != "__pycache__":
                (folder / top).symlink_to(source)


def env_for(folder: Path) -> dict:
    """The fresh install alone: no source tree on PYTHONPATH, its own store and caches."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return env | {"CLUSTERBENCH_DB": str(folder / "results.db"), "CLUSTERBENCH_CACHE": str(folder / "cache"),
                  "XDG_DATA_HOME": str(folder / "xdg")}


def test_the_installed_package_is_not_the_source_tree(installed):
    command, elsewhere = installed
    python = command.parent / "python"
    where = run([str(python), "-c", "import clusterbench, sys; print(clusterbench.__file__)"], cwd=elsewhere,
                env=env_for(elsewhere)).stdout.strip()
    assert "site-packages" in where and not where.startswith(str(ROOT / "src"))


def test_only_what_the_wheel_declares_can_be_imported(installed):
    command, elsewhere = installed
    python = str(command.parent / "python")  # the requirements import: the report test below draws with them
    dev = subprocess.run([python, "-c", "import pytest"], cwd=elsewhere, env=env_for(elsewhere),
                         capture_output=True, text=True)  # a dev tool of the checkout's venv, not a requirement
    assert dev.returncode != 0 and "No module named 'pytest'" in dev.stderr, dev.stderr


def test_system_from_the_wheel(installed):
    command, elsewhere = installed
    out = run([str(command), "system", "--json"], cwd=elsewhere, env=env_for(elsewhere))
    facts = json.loads(out.stdout)
    assert facts["topology"]["cores"] >= 1


def test_stream_kernel_compiles_from_the_packaged_sources(installed):
    command, elsewhere = installed
    out = run([str(command), "bench", "stream", "-p", "n=2000000", "-p", "ntimes=3", "--json"], cwd=elsewhere,
              env=env_for(elsewhere))
    runs = json.loads(out.stdout)
    triad = [m["value"] for m in runs[0]["metrics"] if m["name"] == "stream_triad"]
    assert runs[0]["valid"] and triad and triad[0] > 100
    assert list((elsewhere / "cache").glob("stream-*/stream"))  # built into the cache, not the tree


def test_report_with_templates_and_list_data_from_the_wheel(installed):
    command, elsewhere = installed
    env = env_for(elsewhere)
    run([str(command), "import", "-q", str(LOCAL_FIXTURES / "outputs" / "this-machine")], cwd=elsewhere, env=env)
    run([str(command), "report", "--out", str(elsewhere / "report"), "--list", "2024-11", "--power-watts", "100"],
        cwd=elsewhere, env=env)
    html = (elsewhere / "report" / "report.html").read_text()
    assert "<svg" in html and "HPL" in html and "TOP500" in html
