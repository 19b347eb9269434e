"""A BLAS variant that names its kernels (issue 35, item 3): `openblas-serial@SkylakeX` is openblas-serial's
library with OPENBLAS_CORETYPE=SkylakeX, recorded with the run; the tuner offers it beside the library's own
choice when that choice falls back to generic kernels here. OPENBLAS_CORETYPE=Prescott stands in for a
library that does not know its CPU (what Debian 12's OpenBLAS does on Sapphire Rapids)."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from tests.conftest import cli

from clusterbench.bench.placement import blas_variants, split_blas
from clusterbench.errors import UserInputError


def _last_run(db) -> dict:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        row = con.execute("SELECT params, env, facts FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1").fetchone()
        return {k: json.loads(row[k]) for k in ("params", "env", "facts")}
    finally:
        con.close()


def test_a_variant_names_its_kernels_in_a_plain_word_only():
    assert split_blas("openblas-serial@SkylakeX") == ("openblas-serial", "SkylakeX")
    assert split_blas("openblas-serial") == ("openblas-serial", None)
    for hostile in ("openblas-serial@Sky;rm -rf x", "openblas-serial@", "@SkylakeX", "openblas@$(id)",
                    "openblas-serial@" + "A" * 33):
        with pytest.raises(UserInputError):
            split_blas(hostile)


@pytest.mark.skipif("openblas-serial" not in blas_variants(), reason="openblas-serial is not installed here")
def test_the_remedy_variant_runs_with_its_kernels_and_records_them(isolated_db):
    generic = {"OPENBLAS_CORETYPE": "Prescott"}
    out = cli("bench", "dgemm", "-p", "n=400", "-p", "ranks=1", "-p", "threads=1", "-p", "blas=openblas-serial",
              env=generic)
    assert out.returncode == 0, out.stderr[-2000:]
    run = _last_run(isolated_db)
    assert run["env"]["OPENBLAS_CORETYPE"] == "Prescott"  # the user's own setting is honoured and recorded
    kernel = run["facts"]["blas_kernel"]
    assert kernel["core"] == "Prescott" and kernel["verdict"] == "fallback", kernel
    best = kernel["remedy"].partition("=")[2]
    out = cli("bench", "dgemm", "-p", "n=400", "-p", "ranks=1", "-p", "threads=1", "-p",
              f"blas=openblas-serial@{best}", env=generic)
    assert out.returncode == 0, out.stderr[-2000:]
    run = _last_run(isolated_db)
    assert run["params"]["blas"] == f"openblas-serial@{best}"
    assert run["env"]["OPENBLAS_CORETYPE"] == best  # the variant's kernels win over the environment's
    assert run["facts"]["blas_kernel"]["core"] == best and run["facts"]["blas_kernel"]["verdict"] == "native"
    assert run["facts"]["blas_loaded_variant"] == "openblas-serial"  # the same library, checked as asked
    bad = cli("bench", "dgemm", "-p", "n=400", "-p", "blas=openblas-serial@Sky;id")
    assert bad.returncode == 2 and "core name" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.skipif("openblas-serial" not in blas_variants(), reason="openblas-serial is not installed here")
def test_the_tuner_offers_the_remedy_only_where_the_kernels_fall_back(monkeypatch):
    from clusterbench.bench.hpl.tuning import default_blas
    from clusterbench.system import blas_kernel
    from clusterbench.system.discover import discover

    system = discover()
    library = os.path.join(blas_variants()["openblas-serial"], "libblas.so.3")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")
    offered = default_blas(system)
    remedy = blas_kernel.judge(library, "Prescott")["remedy"].partition("=")[2]
    assert f"openblas-serial@{remedy}" in offered and "openblas-serial" in offered
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    native = blas_kernel.judge(library, None)
    own = default_blas(system)
    if native and native["verdict"] == "native":  # this CPU is known to the library: nothing to offer
        assert not any("@" in b for b in own), own
    else:  # a CPU newer than the library (Sapphire Rapids with Debian 12's OpenBLAS): the remedy is offered
        assert any(b.startswith("openblas-serial@") for b in own), own
