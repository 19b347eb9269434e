"""`clusterbench build hpcg` on a crafted tree laid out like HPCG 3.x (the real source is not
available here: not packaged, no internet beyond the package registries). The crafted tree
checks our part: the generated setup/Make file is what HPCG's Makefile includes, the build
runs, the smoke test, installation, registration, caching, and that campaigns then find it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import cli_json

from clusterbench.bench.hpcg.build import build_hpcg

MAIN = r'''#include <mpi.h>
#include <cstdio>
#include <cstring>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#ifdef HPCG_NO_OPENMP
  const char *mode = "MPI only";
#else
  const char *mode = "MPI + OpenMP";
#endif
  if (rank == 0) {
    FILE *f = fopen("HPCG-Benchmark_3.1_crafted.txt", "w");
    fprintf(f, "HPCG-Benchmark\nversion=3.1\nMachine Summary::Threads per processes=1 (%s)\n"
               "Benchmark Time Summary::Total=2.0\n"
               "Final Summary::Official results execution time (sec) must be at least=1800\n"
               "Final Summary::HPCG result is VALID with a GFLOP/s rating of=1.5\n", mode);
    fclose(f);
  }
  MPI_Finalize();
  return 0;
}
'''
MAKEFILE = """include setup/Make.$(arch)
bin/xhpcg: src/main.cpp
\t$(MKDIR) bin
\t$(CXX) $(CXXFLAGS) -o bin/xhpcg src/main.cpp
"""


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "hpcg-3.1"
    (root / "src").mkdir(parents=True)
    (root / "setup").mkdir()
    (root / "src" / "main.cpp").write_text(MAIN)
    (root / "Makefile").write_text(MAKEFILE)
    return root


def test_build_register_cache_and_run(tree):
    built = build_hpcg(tree, openmp=False)
    assert built.rebuilt and built.binary.is_file()
    make = (built.binary.parent / "Make.clusterbench").read_text()
    assert "HPCG_OPTS    = -DHPCG_NO_OPENMP" in make and "CXX          = /" in make
    assert not build_hpcg(tree, openmp=False).rebuilt
    assert build_hpcg(tree, openmp=True).rebuilt  # another configuration, another build
    listed = {r["name"]: r for r in cli_json("benchmarks", "--json")}
    assert listed["hpcg"]["available"] and "built by clusterbench" in listed["hpcg"]["detail"]
    (run,) = cli_json("bench", "hpcg", "-p", "nx=16", "-p", "rt=1", "-p", "ranks=1", "--json")
    assert run["valid"] and run["facts"]["list_eligible"] is False
    report = (Path(run["workdir"]) / "hpcg-report.txt").read_text()
    assert "MPI + OpenMP" in report  # the newest build is the one used


def test_not_an_hpcg_tree(tmp_path, monkeypatch):
    from clusterbench.errors import UserInputError
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "x").mkdir()
    with pytest.raises(UserInputError, match="no HPCG source"):
        build_hpcg(tmp_path / "x")
