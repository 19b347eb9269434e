"""The HPL calculator: the memory formula, grids, layouts, validation, input files."""

from __future__ import annotations

import pytest

from clusterbench.bench.hpl import planner as H
from clusterbench.bench.hpl.input import HplInput, render_hpccinf, render_hpl_dat
from clusterbench.errors import UserInputError
from clusterbench.plan.ranges import parse_int_values
from conftest import cli, cli_json

GIB = 2**30


def test_formula_applies_fraction_to_elements():
    assert H.n_for_memory(4 * GIB, 0.8, 32) == 20704
    # the Pi study's table: 0.8 applied to sqrt(N) is 0.64 of the memory
    assert H.n_for_memory(4 * GIB, 0.64, 32) == 18528
    assert H.n_for_memory(4 * GIB, 0.64, 256) == 18432


def test_cli_prints_the_table():
    data = cli_json("plan", "hpl", "--nodes", "1", "--memory", "4GiB", "--nb", "32..256:8",
                    "--fraction", "0.8", "--json")
    by_nb = {r["nb"]: r["n"] for r in data["rows"]}
    assert sorted(by_nb) == list(range(32, 257, 8))
    assert by_nb[32] == 20704
    assert all(n % nb == 0 for nb, n in by_nb.items())
    pi = cli_json("plan", "hpl", "--nodes", "1", "--memory", "4GiB", "--nb", "32..256:8",
                  "--fraction", "0.64", "--json")
    by_nb = {r["nb"]: r["n"] for r in pi["rows"]}
    assert (by_nb[32], by_nb[256]) == (18528, 18432)
    text = cli("plan", "hpl", "--memory", "4GiB", "--nb", "32", "--fraction", "0.8")
    assert "20704" in text.stdout


def test_multi_node_uses_smallest_node():
    assert H.usable_memory([8 * GIB, 4 * GIB]) == 8 * GIB
    data = cli_json("plan", "hpl", "--nodes", "8", "--memory", "4GiB", "--nb", "192", "--json")
    assert data["rows"][0]["n"] == H.n_for_memory(32 * GIB, 0.8, 192)


def test_grids_ranked():
    assert H.grids(16) == [(4, 4), (2, 8), (1, 16)]
    assert H.grids(16, ethernet=True) == [(1, 16), (2, 8), (4, 4)]
    assert H.grids(7) == [(1, 7)]
    assert all(p <= q and p * q == 12 for p, q in H.grids(12))


def test_layouts():
    lay = H.layouts(nodes=4, sockets=2, cores_per_socket=8)
    assert (lay["mpi"].ranks, lay["mpi"].threads_per_rank) == (64, 1)
    assert (lay["hybrid-socket"].ranks, lay["hybrid-socket"].threads_per_rank) == (8, 8)
    assert (lay["hybrid-node"].ranks, lay["hybrid-node"].threads_per_rank) == (4, 16)
    assert lay["hybrid-node"].env()["OMP_NUM_THREADS"] == "16"
    assert lay["mpi"].env()["OPENBLAS_NUM_THREADS"] == "1"


def test_time_budget_sizing():
    n = H.n_for_time(60, rpeak_gflops=100, efficiency=0.8, nb=128)
    assert n % 128 == 0
    assert H.hpl_flops(n) / 80e9 <= 60 < H.hpl_flops(n + 128) / 80e9


def test_check_problem_memory():
    # 40128 = 209 x 192: a 12 GiB matrix does not fit in 4 GiB; the hint names the largest N that does
    with pytest.raises(UserInputError, match="needs") as err:
        H.check_problem(40128, 192, 1, 2, 2, 4 * GIB)
    biggest = int((0.9 * 4 * GIB / 8) ** 0.5 // 192 * 192)
    assert f"N is {biggest}" in str(err.value) or str(biggest) in str(err.value)
    H.check_problem(biggest, 192, 1, 2, 2, 4 * GIB)


def test_check_problem_grid_and_multiple():
    with pytest.raises(UserInputError, match="does not equal"):
        H.check_problem(1920, 192, 2, 2, 2, None)
    with pytest.raises(UserInputError, match="not a multiple"):
        H.check_problem(2000, 192, 1, 2, 2, None)
    H.check_problem(1920, 192, 1, 2, 2, 4 * GIB)


def test_ranges():
    assert parse_int_values("32..64:16") == [32, 48, 64]
    assert parse_int_values("64,128") == [64, 128]
    assert parse_int_values("1..3") == [1, 2, 3]
    for bad in ("64..32", "a", "1..4:0", ""):
        with pytest.raises(UserInputError):
            parse_int_values(bad)


def test_hpl_dat_line_format():
    inp = HplInput(ns=[1000, 2000], nbs=[64, 128], grids=[(1, 2), (2, 1)])
    lines = render_hpl_dat(inp).splitlines()
    assert len(lines) == 31
    assert lines[4].split()[0] == "2" and lines[5].split()[:2] == ["1000", "2000"]
    assert lines[7].split()[:2] == ["64", "128"]
    assert lines[10].split()[:2] == ["1", "2"] and lines[11].split()[:2] == ["2", "1"]
    assert lines[12].startswith("16.0")
    assert inp.test_count == 8
    hpcc = render_hpccinf(inp).splitlines()
    assert len(hpcc) == 36 and hpcc[31].startswith("#####")


def test_hpl_dat_matches_the_debian_example_layout():
    """Our file and Debian's sample hpccinf.txt agree line by line on the labels."""
    from pathlib import Path

    sample = Path("/usr/share/doc/hpcc/examples/_hpccinf.txt")
    if not sample.exists():
        pytest.skip("hpcc example not installed")
    ours = render_hpccinf(HplInput(ns=[1000], nbs=[80], grids=[(2, 2)], device_out=8)).splitlines()
    theirs = sample.read_text().splitlines()
    assert len(ours) == len(theirs)
    for a, b in zip(ours[2:31], theirs[2:31], strict=True):
        assert a.split()[0] == b.split()[0], (a, b)


def test_writes_input_files(tmp_path):
    dat, inf = tmp_path / "HPL.dat", tmp_path / "hpccinf.txt"
    out = cli("plan", "hpl", "--memory", "1GiB", "--nb", "128,192", "--write-hpl-dat", str(dat),
              "--write-hpccinf", str(inf))
    assert out.returncode == 0, out.stderr
    lines = dat.read_text().splitlines()
    assert lines[7].split()[:2] == ["128", "192"]
    assert inf.read_text().count("\n") == 36


@pytest.mark.parametrize("args,needle", [
    (["--memory", "4GiB", "--nb", "192", "--n", "40320"], "needs"),
    (["--memory", "4GiB", "--nb", "192", "--n", "1920", "--p", "2", "--q", "2"], "does not equal"),
    (["--memory", "4GiB", "--nb", "192", "--n", "2000"], "not a multiple"),
    (["--memory", "4GiB", "--fraction", "1.5"], "--fraction"),
    (["--memory", "four"], "invalid --memory"),
    (["--nb", "256..32"], "invalid NB range"),
    (["--layout", "diagonal"], "diagonal"),
    (["--interconnect", "carrier-pigeon"], "carrier-pigeon"),
    (["--p", "2"], "both --p and --q"),
])
def test_bad_input_exit_2(args, needle):
    out = cli("plan", "hpl", *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert needle in out.stderr


def test_unknown_plan_target():
    out = cli("plan", "linpack")
    assert out.returncode == 2 and "unknown plan target" in out.stderr
