"""Make.<arch> generation, source patches, apt source parsing, the version readers of the official trees and
the builders' shared helpers (pure functions and crafted trees, no build)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusterbench.bench.hpcg.build import hpcg_version
from clusterbench.bench.hpl.build import hpl_version
from clusterbench.bench.hpl.makearch import BLAS_KINDS, blas_link, make_arch
from clusterbench.bench.hpl.patches import HPCC_DRIVER_PATCHES, PatchError, patch_text, replace_mpi1_calls
from clusterbench.bench.imb.build import imb_version, optimization, used_flags
from clusterbench.bench.lulesh.build import lulesh_figures, lulesh_version
from clusterbench.bench.osu.build import osu_version
from clusterbench.bench.stream.build import code_model_flags, default_array_size, stream_version
from clusterbench.build.common import read_version
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


# --- versions of the official trees, and the helpers the builders share ---------------------------------------

def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_read_version_takes_the_first_rule_that_matches(tmp_path):
    tree(tmp_path, {"a.txt": "nothing here", "b.txt": "Version 1.2\nVersion 9.9"})
    rules = (("missing.txt", r"(\d+)"), ("a.txt", r"Version (\S+)"), ("b.txt", r"Version (\S+)"),
             ("a.txt", r"(nothing)"))
    assert read_version(tmp_path, rules) == "1.2"
    assert read_version(tmp_path, rules[:2]) == "unknown"


def test_hpl_version_from_configure_ac_or_the_banner(tmp_path):
    banner = "/*\n *    HPL - 2.3 - December 2, 2018\n */\n"
    assert hpl_version(tree(tmp_path / "git", {"configure.ac": "AC_PREREQ(2.69)\nAC_INIT(hpl, 2.3, hpl@icl.utk.edu)\n",
                                               "include/hpl.h": banner.replace("2.3", "9.9")})) == "2.3"
    assert hpl_version(tree(tmp_path / "release", {"include/hpl.h": banner})) == "2.3"
    # the HISTORY of 2.3 lists every release: "Version 1.0" must not win over the banner
    assert hpl_version(tree(tmp_path / "history", {"HISTORY": " HPL - 2.3 - December 2, 2018\n - 09/09/00 Public "
                                                              "release of Version 1.0\n"})) == "2.3"
    assert hpl_version(tree(tmp_path / "hpcc", {"README": "This is HPL Version 2.0 as used by HPCC\n"})) == "2.0"
    assert hpl_version(tree(tmp_path / "none", {"README": "a linear solver"})) == "unknown"


def test_hpcg_version_is_the_reports_not_mpis_or_an_example(tmp_path):
    root = tree(tmp_path, {
        "src/ReportResults.cpp": '    OutputFile doc("HPCG-Benchmark", "3.1");\n',
        "src/OutputFile.hpp": "  version=3.2.1alpha\n",
        "README.md": "Revision: 3.0\n\nAn implementation compliant with MPI version 1.1 is sufficient.\n",
    })
    assert hpcg_version(root) == "3.1"
    (root / "src" / "ReportResults.cpp").unlink()
    assert hpcg_version(root) == "3.0"  # README's Revision, never "MPI version 1.1"
    (root / "configure.ac").write_text("AC_INIT(hpcg, 3.1, info@hpcg-benchmark.org)\n")
    assert hpcg_version(root) == "3.1"
    assert hpcg_version(tree(tmp_path / "plain", {"README": ":Revision: 3.1\n"})) == "3.1"


def test_versions_of_imb_osu_stream_lulesh(tmp_path):
    assert imb_version(tree(tmp_path / "imb", {
        "src_cpp/imb.cpp": '    const char *program_name = "Intel(R) MPI Benchmarks 2021.11";\n',
        "ReadMe_IMB.txt": "Intel(R) MPI Benchmarks 2021.10\n"})) == "2021.11"
    readme = {"ReadMe_IMB.txt": "Intel(R) MPI Benchmarks 2019.6\n"}
    assert imb_version(tree(tmp_path / "imb-readme", readme)) == "2019.6"
    assert osu_version(tree(tmp_path / "osu", {
        "configure.ac": "AC_INIT([OSU-Micro-Benchmarks], [7.4], [mvapich-discuss@cse.ohio-state.edu])\n"})) == "7.4"
    assert osu_version(tree(tmp_path / "osu-generated", {"configure": "PACKAGE_VERSION='5.9'\n"})) == "5.9"
    assert stream_version(tree(tmp_path / "stream", {
        "stream.c": '/* Revision: $Id: stream.c,v 5.10 2013/01/17 16:01:06 mccalpin Exp mccalpin $ */\n'
                    '    printf("STREAM version $Revision: 5.10 $\\n");\n'})) == "5.10"
    assert stream_version(tree(tmp_path / "stream-id", {"stream.c": "/* $Id: stream.c,v 5.9 2009/04/11 */\n"})) == "5.9"
    assert lulesh_version(tree(tmp_path / "lulesh", {
        "lulesh.cc": "  This is a Version 2.0 MPI + OpenMP implementation of LULESH\n"
                     "This file is part of LULESH, Version 2.0.\n   gnewdt = domain.dtcourant() / Real_t(2.0) ;\n"}
    )) == "2.0"


def real_tree(tarball: str, tmp_path: Path, members: tuple[str, ...]) -> Path:
    """Only `members` of a tarball from ../shared/sources, unpacked; skip without it."""
    import tarfile

    from tests.conftest import SHARED
    path = SHARED / "sources" / tarball
    if not path.is_file():
        pytest.skip(f"needs ../shared/sources/{tarball} (CI has it)")
    top = tarball.removesuffix(".tar.gz")
    with tarfile.open(path) as tar:
        wanted = [m for m in tar.getmembers() if m.name.removeprefix(f"{top}/") in members]
        tar.extractall(tmp_path, members=wanted, filter="data")
    return tmp_path / top


@pytest.mark.parametrize("tarball, reader, version", [
    ("hpl-2.3.tar.gz", hpl_version, "2.3"),
    ("hpcg-3.1.tar.gz", hpcg_version, "3.1"),
    ("imb-2021.11.tar.gz", imb_version, "2021.11"),
    ("osu-micro-benchmarks-7.4.tar.gz", osu_version, "7.4"),
    ("stream-5.10.tar.gz", stream_version, "5.10"),
    ("lulesh-2.0.tar.gz", lulesh_version, "2.0"),
])
def test_versions_of_the_real_trees(tarball, reader, version, tmp_path):
    files = ("configure.ac", "configure", "include/hpl.h", "include/hpl_misc.h", "HISTORY", "README", "README.md",
             "src/ReportResults.cpp", "src/OutputFile.hpp", "src_cpp/imb.cpp", "src_c/P2P/imb_p2p.c",
             "ReadMe_IMB.txt", "stream.c", "lulesh.cc")
    assert reader(real_tree(tarball, tmp_path, files)) == version


def test_imb_flags_used_are_read_from_the_build_log():
    log = ("make -C src_cpp -f Makefile TARGET=MPI1\n"
           "/usr/bin/mpicxx -DOMPI_SKIP_MPICXX=1 -I. -O3 -march=native -g -O0 -Wall -Werror -c -o imb.o imb.cpp\n"
           "/usr/bin/mpicc.mpich -O3 -g -O0 -Wall -Werror -DMPI1 -I. -c -o MPI1/CPU/IMB_bcast.o ../src_c/IMB_bcast.c\n")
    c, cxx = used_flags(log)
    assert c == "-O3 -g -O0 -Wall -Werror -DMPI1 -I." and cxx.startswith("-DOMPI_SKIP_MPICXX=1")
    assert optimization(c) == optimization(cxx) == "-O0" and optimization("-g") is None
    assert used_flags("nothing compiled") == (None, None)


def test_stream_array_size_rule_and_code_model():
    from types import SimpleNamespace

    def node(llc):
        return SimpleNamespace(topology=SimpleNamespace(last_level_cache_bytes=lambda: llc))

    assert default_array_size(node(8 * 2**20)) == 10_000_000  # 4 x 8 MiB is 4.2M doubles: stream.c's 10M
    assert default_array_size(node(32 * 2**20)) == 16_777_216
    assert default_array_size(node(None)) == 10_000_000
    assert default_array_size(node(260 * 2**20)) == 4 * 260 * 2**20 // 8  # the 2-core VM here: 136,314,880
    assert default_array_size(node(100_000_001)) == 50_000_001  # rounded up to whole elements
    assert code_model_flags(10_000_000, "x86_64") == []
    assert code_model_flags(136_314_880, "x86_64") == ["-mcmodel=medium"]
    assert code_model_flags(136_314_880, "aarch64") == ["-mcmodel=large"]


def test_lulesh_figures():
    out = ("Run completed:\n   Problem size        =  5\n\nElapsed time         =     0.0015 (s)\n"
           "Grind time (us/z/c)  =   6.175404 (per dom)  (0.001543851 overall)\n"
           "FOM                  =  161.93273 (z/s)\n")
    assert lulesh_figures(out) == {"elapsed_s": 0.0015, "fom": 161.93273}
    assert lulesh_figures("MPI_Abort") == {}


def test_smoke_run_refuses_what_fails(tmp_path):
    from clusterbench.build.common import smoke_run
    from clusterbench.native.build import BuildError

    assert smoke_run(["echo", "Solution Validates"], "echo", lambda out: None, ranks=None) == "Solution Validates\n"
    with pytest.raises(BuildError, match=r"failed its smoke test \(exit code 1\)"):
        smoke_run(["false"], "false", lambda out: None, ranks=None)
    with pytest.raises(BuildError, match=r"\(no FOM\)"):
        smoke_run(["echo", "hello"], "echo", lambda out: None if "FOM" in out else "no FOM", ranks=None)
    with pytest.raises(BuildError, match="cannot start"):
        smoke_run([str(tmp_path / "missing")], "missing", lambda out: None, ranks=None)
    with pytest.raises(BuildError, match="not finished in 1 s"):
        smoke_run(["sleep", "5"], "sleep", lambda out: None, ranks=None, timeout=1)


def test_a_build_of_several_programs_is_registered_again_whole(tmp_path, monkeypatch):
    """OSU's build folder holds one provenance entry per program; finding it cached re-registers all."""
    from clusterbench.build import common, registry

    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "cache"))
    final = registry.builds_root() / "osu-0123456789abcdef"
    with common.workspace("osu") as work:
        files = {}
        for name in ("osu_latency", "osu_bw"):
            files[name] = work / name
            files[name].write_text("#!/bin/sh\n")
            files[name].chmod(0o755)
        entries = [common.entry_for(final, name, "7.4", tmp_path / "osu.tar.gz", "0" * 64, mpi="openmpi")
                   for name in files]
        common.install(work, final, files, entries)
    assert [e["name"] for e in registry.load()] == ["osu_latency", "osu_bw"]
    assert entries[0]["key"] == "0123456789abcdef" and entries[0]["source"] == str(tmp_path / "osu.tar.gz")
    (registry.builds_root() / "registry.json").unlink()
    entry = common.cached(final, "osu_latency")
    assert entry == entries[0] and sorted(e["name"] for e in registry.load()) == ["osu_bw", "osu_latency"]
    assert common.cached(final, "osu_bibw") is None


def test_objects_of_an_earlier_build_in_place_are_removed(tmp_path):
    from clusterbench.build.common import remove_objects

    root = tree(tmp_path, {"lulesh.o": "", "c/util/osu_util.lo": "", "lulesh.cc": "int main;", "Makefile": ""})
    said = []
    remove_objects(root, said.append)
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == ["Makefile", "lulesh.cc"]
    assert said == ["removed 2 object files of an earlier build from the copy of the source"]
