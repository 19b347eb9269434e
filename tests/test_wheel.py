"""The package works outside the source tree: a wheel installed into a fresh venv, run elsewhere.

`pip wheel .` builds it (setuptools from PyPI in pip's isolated build environment); a new venv
gets it with its dependencies from PyPI (pip's cache makes the second time quick). Then, from a
folder that is not the checkout, the installed command must find everything it ships: the C
kernel sources (`bench stream` compiles them), the report templates and the TOP500 lists
(`report --list`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
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
    venv.create(base / "venv", with_pip=True)
    run([str(base / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", str(wheels[0])], cwd=base)
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return base / "venv" / "bin" / "clusterbench", elsewhere


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
