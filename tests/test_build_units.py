"""Make.<arch> generation, source patches and apt source parsing (pure functions, no build)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusterbench.build.makearch import BLAS_KINDS, blas_link, make_arch
from clusterbench.build.patches import HPCC_DRIVER_PATCHES, PatchError, patch_text, replace_mpi1_calls
from clusterbench.build.sources import parse_deb822, parse_one_line


def variables(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^(\w+)\s*=(.*)$", text, re.M)}


@pytest.mark.parametrize("kind, lib, cblas", [
    ("generic", "-lblas", False),
    ("openblas", "-lopenblas", True),
    ("blis", "-lblis", True),
    ("mkl", "-lmkl_intel_lp64", True),
])
def test_make_arch_per_blas(kind, lib, cblas):
    text = make_arch("/build/hpl", "clusterbench", "/usr/bin/mpicc", "-O3 -march=native", blas_link(kind, "/opt/mkl"))
    v = variables(text)
    assert v["ARCH"] == "clusterbench" and v["TOPdir"] == "/build/hpl"
    assert v["CC"] == v["LINKER"] == "/usr/bin/mpicc"
    assert v["CCFLAGS"] == "$(HPL_DEFS) -O3 -march=native"
    assert lib in v["LAlib"].split() and v["LAlib"].endswith("-lm")
    assert ("-DHPL_CALL_CBLAS" in v.get("HPL_OPTS", "")) is cblas
    assert v["F2CDEFS"] == "-DAdd_ -DF77_INTEGER=int -DStringSunStyle"  # the Fortran calling convention of gcc
    assert v["HPL_LIBS"] == "$(HPLlib) $(LAlib) $(MPlib)"
    # every variable HPL's Make.top and makes/ use is defined
    for name in ("SHELL", "CD", "CP", "LN_S", "MKDIR", "RM", "TOUCH", "INCdir", "BINdir", "LIBdir", "HPLlib",
                 "HPL_INCLUDES", "HPL_DEFS", "CCNOOPT", "LINKFLAGS", "ARCHIVER", "ARFLAGS", "RANLIB"):
        assert name in v


def test_mkl_uses_mklroot_for_include_and_libs():
    v = variables(make_arch("/t", "a", "mpicc", "-O2", blas_link("mkl", "/opt/intel/mkl")))
    assert v["LAinc"] == "-I/opt/intel/mkl/include"
    assert "-L/opt/intel/mkl/lib/intel64" in v["LAlib"] and "-lmkl_core" in v["LAlib"]


def test_unknown_blas_kind():
    with pytest.raises(ValueError):
        blas_link("atlas")
    assert BLAS_KINDS == ("generic", "openblas", "blis", "mkl")


def test_mpi1_calls_renamed_only_as_calls():
    src = ("ierr = MPI_Address( bufs[n], &disp[n] );\n"
           "ierr = MPI_Type_struct( nbufs, blen, disp, type, &dtype );\n"
           "/* MPI_Address is gone in MPI-3 */ int MPI_Addressable = 1;\n")
    out, count = replace_mpi1_calls(src)
    assert count == 2
    assert "MPI_Get_address( bufs[n]" in out and "MPI_Type_create_struct( nbufs" in out
    assert "/* MPI_Address is gone" in out and "MPI_Addressable" in out


HPCC_PDINFO = '''#define INFILE "hpccinf.txt"
      if( ( infp = fopen( INFILE, "r" ) ) == NULL )
      fid = 8; /* always write to a file */
      strcpy( file, "hpccoutf.txt" );
      if     ( fid == 6 ) TEST->outfp = stdout;
   if( error )
   {
     HPCC_Defaults( TEST, /* use outfp, set threshold */
                    NS, N,
                    MPI_COMM_WORLD );
   }
'''


def test_hpcc_driver_patches():
    out = patch_text(HPCC_PDINFO, HPCC_DRIVER_PATCHES, "HPL_pdinfo.c")
    assert '#define INFILE "HPL.dat"' in out
    assert "hpccoutf.txt" not in out and "fid = 8" not in out
    assert "HPCC_Defaults" not in out and "exit( 1 );" in out and "Illegal input" in out


def test_hpcc_driver_patch_refuses_another_source():
    with pytest.raises(PatchError, match="read HPL.dat"):
        patch_text(HPCC_PDINFO.replace("hpccinf.txt", "other.txt"), HPCC_DRIVER_PATCHES, "HPL_pdinfo.c")


def test_apt_sources_both_formats():
    deb822 = ("Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\n"
              "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
              "Types: deb-src\nURIs: http://x\nSuites: y\nComponents: main\n\n"
              "Types: deb\nURIs: http://off\nSuites: z\nComponents: main\nEnabled: no\n")
    found = parse_deb822(deb822)
    assert len(found) == 1 and found[0].suites == ("bookworm", "bookworm-updates")
    text = found[0].deb_src()
    assert text.startswith("Types: deb-src\n") and "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" in text
    one = parse_one_line("# comment\ndeb [arch=amd64 signed-by=/k.gpg] http://archive.ubuntu.com/ubuntu jammy "
                         "main universe\ndeb-src http://a b c\n")
    assert len(one) == 1 and one[0].components == ("main", "universe") and one[0].signed_by == "/k.gpg"


def test_this_machine_has_a_debian_source():
    from clusterbench.build.sources import system_apt_sources
    if not Path("/etc/apt").is_dir():
        pytest.skip("not a Debian/Ubuntu machine")
    assert any("debian" in uri or "ubuntu" in uri for s in system_apt_sources() for uri in s.uris)
