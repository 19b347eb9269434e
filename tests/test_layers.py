"""The import contracts in pyproject.toml ([tool.importlinter]) hold, and they would catch a cycle coming back.

Runs the real lint-imports (the dev extra import-linter), as `make lint` does: once on the tree, then on copies
of src/clusterbench with one upward import added, each of which must break the layers contract and name that
import. docs/architecture.md explains the layers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LINT_IMPORTS = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
LAYERS = "Top-level packages are layered: a package imports only the packages below it"

pytestmark = pytest.mark.skipif(LINT_IMPORTS is None, reason="lint-imports not installed (pip install -e '.[dev]')")


def lint_imports(src: Path, config: Path, cwd: Path) -> subprocess.CompletedProcess:
    """lint-imports on the clusterbench package under src, with the contracts in config."""
    env = {**os.environ, "PYTHONPATH": str(src), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([LINT_IMPORTS, "--config", str(config), "--no-cache"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_tree_keeps_every_contract(tmp_path):
    result = lint_imports(ROOT / "src", ROOT / "pyproject.toml", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{LAYERS} KEPT" in result.stdout
    assert "0 broken" in result.stdout


# (module that gains the import, the import it gains): the cycles issue 16 removed, one per direction.
UPWARD = [
    ("bench/metrics.py", "clusterbench.store.db"),           # bench never reaches the store
    ("launch/site.py", "clusterbench.cluster.facts"),        # launch is below the multi-node checks
    ("campaign/spec.py", "clusterbench.suite.characterise"),  # campaigns do not know `clusterbench run`
    ("execution/request.py", "clusterbench.campaign.spec"),  # the executor does not know campaigns
    ("build/common.py", "clusterbench.bench.registry"),      # builds are below the benchmarks
]


@pytest.mark.parametrize(("module", "target"), UPWARD, ids=[m.split("/")[0] for m, _ in UPWARD])
def test_an_upward_import_breaks_the_layers_contract(tmp_path, module, target):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "clusterbench", src / "clusterbench", ignore=shutil.ignore_patterns("__pycache__"))
    path = src / "clusterbench" / module
    with path.open("a") as f:
        f.write(f"\nimport {target}  # the cycle, back\n")
    line = path.read_text().count("\n")
    config = tmp_path / "pyproject.toml"
    shutil.copy(ROOT / "pyproject.toml", config)
    # The copy, not the checkout, is what lint-imports will find as clusterbench.
    found = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                            "print(u.find_spec('clusterbench').submodule_search_locations[0])"],
                           env={**os.environ, "PYTHONPATH": str(src)}, capture_output=True, text=True, check=True)
    assert Path(found.stdout.strip()) == src / "clusterbench"

    result = lint_imports(src, config, tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert f"{LAYERS} BROKEN" in out
    importer = "clusterbench." + module.removesuffix(".py").replace("/", ".")
    assert f"{importer} -> {target} (l.{line})" in out, out


BENCHMARK_PACKAGES = "Only bench/ imports a benchmark's own modules: the rest asks the registry for its declarations"

# (module that gains the import, the benchmark module it imports): each allowed by the layers (the importer
# is above bench), each a benchmark's knowledge leaking out of its package, as issue 33 removed.
LEAKS = [
    ("suite/characterise.py", "clusterbench.bench.hpl.planner"),  # HPL's NB default, outside HPL
    ("cli/plan_cmd.py", "clusterbench.bench.hpl.model"),          # the CLI running HPL's model
    ("tune/search.py", "clusterbench.bench.hpl.benchmark"),       # the tuner knowing HPL by name
    ("report/memory.py", "clusterbench.bench.stream.kernel"),     # a report section knowing STREAM
]


def test_importing_a_benchmark_module_from_outside_bench_breaks_its_contract(tmp_path):
    """All four leaks in one copy of the tree (one lint-imports run): each is named, by line."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "clusterbench", src / "clusterbench", ignore=shutil.ignore_patterns("__pycache__"))
    lines = {}
    for module, target in LEAKS:
        path = src / "clusterbench" / module
        with path.open("a") as f:
            f.write(f"\nimport {target}  # a benchmark's own module, from outside bench/\n")
        lines[module] = path.read_text().count("\n")
    config = tmp_path / "pyproject.toml"
    shutil.copy(ROOT / "pyproject.toml", config)

    result = lint_imports(src, config, tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert f"{BENCHMARK_PACKAGES} BROKEN" in out
    assert f"{LAYERS} KEPT" in out  # the layers allow each of them: only the new contract sees them
    for module, target in LEAKS:
        importer = "clusterbench." + module.removesuffix(".py").replace("/", ".")
        assert f"{importer} -> {target} (l.{lines[module]})" in out, out


# ---------------------------------------------------------------- no cycle at any depth

# Run in a clean interpreter on the `src` given: pairs of siblings that reach each other.
MUTUAL = """
import grimp, itertools, json
g = grimp.build_graph("clusterbench")
siblings = (pair for m in sorted(g.modules) for pair in itertools.combinations(sorted(g.find_children(m)), 2))
print(json.dumps([(a, b) for a, b in siblings
                  if g.chain_exists(a, b, as_packages=True) and g.chain_exists(b, a, as_packages=True)]))
"""


def mutual_imports(src: Path) -> list[tuple[str, str]]:
    """Pairs of sibling packages or modules, at every depth (clusterbench.bench.hpl and
    clusterbench.bench.placement; clusterbench.system.mpi and clusterbench.system.software), that
    import each other directly or through others, function-level imports included (grimp, which
    import-linter uses)."""
    pytest.importorskip("grimp", reason="grimp comes with import-linter (pip install -e '.[dev]')")
    out = subprocess.run([sys.executable, "-c", MUTUAL], env={**os.environ, "PYTHONPATH": str(src)},
                         capture_output=True, text=True, timeout=120, check=True)
    return [tuple(pair) for pair in json.loads(out.stdout)]


def test_no_two_packages_or_modules_import_each_other_at_any_depth():
    assert mutual_imports(ROOT / "src") == []


def test_a_cycle_between_two_benchmark_packages_is_found(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "clusterbench", src / "clusterbench", ignore=shutil.ignore_patterns("__pycache__"))
    back = "\n\ndef _suite():\n    from clusterbench.bench.hpcc import budget  # HPL into HPCC\n    return budget\n"
    with (src / "clusterbench" / "bench" / "hpl" / "planner.py").open("a") as f:
        f.write(back)
    assert ("clusterbench.bench.hpcc", "clusterbench.bench.hpl") in mutual_imports(src)
