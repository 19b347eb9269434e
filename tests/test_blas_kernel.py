"""Which kernels OpenBLAS chose, and the fallback it takes on a CPU it does not know (issue 35).

OPENBLAS_CORETYPE=Prescott stands in for the fallback Debian 12's OpenBLAS takes on a Sapphire Rapids CPU it
does not recognise (that CPU cannot be had here): the same generic SSE3 kernels, chosen by the real library.
"""

from __future__ import annotations

import glob
import json

import pytest
from tests.conftest import cli

from clusterbench.system.blas_kernel import best_core, cpu_flags, judge

SERIAL = sorted(glob.glob("/usr/lib/*/openblas-serial/libopenblas*.so*"))
needs_openblas = pytest.mark.skipif(not SERIAL, reason="needs Debian's libopenblas0-serial (make setup)")


@pytest.mark.parametrize("vendor, flags, core", [
    ("GenuineIntel", "sse3 avx avx2 fma avx512f avx512vl avx512bw avx512_bf16 amx_tile", "Cooperlake"),
    ("GenuineIntel", "sse3 avx avx2 fma avx512f avx512vl avx512bw", "SkylakeX"),
    ("GenuineIntel", "sse3 avx avx2 fma", "Haswell"),
    ("AuthenticAMD", "sse3 avx avx2 fma", "Zen"),
    ("AuthenticAMD", "pni avx avx2 fma avx512f avx512vl avx512bw avx512_bf16", "SkylakeX"),
    ("GenuineIntel", "pni", "Prescott"),
])
def test_the_best_core_follows_the_widest_vectors(vendor, flags, core):
    found_vendor, found_flags = cpu_flags(f"vendor_id\t: {vendor}\nflags\t\t: {flags}\n")
    assert best_core(found_vendor, found_flags) == core


@needs_openblas
def test_a_forced_generic_core_is_a_fallback_with_its_remedy_and_the_native_one_is_not():
    native = judge(SERIAL[0], None)
    assert native is not None and native["verdict"] in ("native", "unknown"), native
    generic = judge(SERIAL[0], "Prescott")
    assert generic["core"] == "Prescott" and generic["openblas_coretype"] == "Prescott"
    if native["verdict"] == "native":
        assert generic["verdict"] == "fallback" and generic["remedy"] == f"OPENBLAS_CORETYPE={native['cpu_best']}"
    assert judge("/nonexistent/libopenblas.so.0", None) is None


@needs_openblas
def test_a_run_records_the_kernel_and_the_users_own_coretype():
    out = cli("bench", "dgemm", "-p", "n=300", "-p", "blas=openblas-serial", "--json",
              env={"OPENBLAS_CORETYPE": "Prescott"})
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)[0]
    kernels = run["facts"]["blas_kernel"]
    kernels = kernels if isinstance(kernels, list) else [kernels]
    assert {k["core"] for k in kernels} == {"Prescott"} and {k["openblas_coretype"] for k in kernels} == {"Prescott"}
    page = cli("results", run["id"]).stdout
    assert "Prescott" in page
