"""Issue 36, "sharp edges filed off": one test per edge, each through the real command line (exit code and
message). --version; flags shown without a type; `benchmarks NAME` with each parameter's help, default and
range; the `benchmarks` listing whole at 80 columns; "did you mean" for benchmarks, parameters, strategies and
BLAS variants; a value swept twice refused where it is written; no placement mismatch is an empty answer
(exit 0), not an error; STREAM's headline is its Triad."""

from __future__ import annotations

import json
import re
import textwrap

import pytest
from tests.conftest import LOCAL_FIXTURES, cli, cli_json

from clusterbench.bench.metrics import Metric
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord


def _flat(text: str) -> str:
    """Output with its line breaks and runs of blanks as one blank (Rich wraps messages)."""
    return " ".join(text.split())


# ---------------------------------------------------------------- --version


def test_version_is_answered_first_and_after_the_main_options(tmp_path):
    answers = [cli(*argv) for argv in (["--version"], ["-V"], ["--db", str(tmp_path / "x.db"), "--version"])]
    for out in answers:
        assert out.returncode == 0, out.stderr
        assert re.fullmatch(r"clusterbench \d+\.\d+\S*", out.stdout.strip()), out.stdout
    assert len({out.stdout for out in answers}) == 1  # the same version, however it is asked
    top = cli("--help")
    assert top.returncode == 0 and "-V, --version" in top.stdout


# ---------------------------------------------------------------- flags take no value


@pytest.mark.parametrize("command", ["bench", "benchmarks", "pin", "run", "import"])
def test_a_flag_is_shown_without_a_type(command):
    out = cli(command, "--help", env={"COLUMNS": "120"})
    assert out.returncode == 0, out.stderr
    assert "--json" in out.stdout  # a flag of the command
    assert "<bool>" not in out.stdout, out.stdout
    if command in ("bench", "pin"):  # options that do take a value still say what they take
        assert "<int" in out.stdout, out.stdout


# ---------------------------------------------------------------- benchmarks NAME


def test_benchmarks_name_gives_each_parameter_its_help_default_and_range():
    entry = cli_json("benchmarks", "hpl", "--json")
    assert entry["name"] == "hpl" and entry["parameters"]
    out = cli("benchmarks", "hpl", env={"COLUMNS": "400"})  # wide: each cell on one line
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for p in entry["parameters"]:
        assert re.search(rf"(?<![\w-]){re.escape(p['name'])}\*?(?![\w-])", text), p["name"]
        if p["help"]:
            assert p["help"] in text, p["name"]
        if p["required"]:
            assert f"{p['name']}*" in text
        if p["choices"]:
            assert "range: one of " + ", ".join(p["choices"]) in text, p["name"]
    by_name = {p["name"]: p for p in entry["parameters"]}
    assert by_name["n"]["required"] and "default: required" in text
    threshold = by_name["swap_threshold"]
    assert (threshold["minimum"], threshold["maximum"]) == (0, 100_000) and "range: 0 to 100,000" in text
    assert by_name["n"]["minimum"] == 1 and "range: at least 1" in text
    nb = by_name["nb"]
    assert nb["default"] is not None and f"default: {nb['default']}" in text
    assert by_name["pmap"]["choices"]  # row / column major
    narrow = cli("benchmarks", "hpl", env={"COLUMNS": "80"})
    assert narrow.returncode == 0 and max(map(len, narrow.stdout.splitlines())) <= 80, narrow.stdout


def test_benchmarks_name_refuses_an_unknown_one_with_the_close_name():
    out = cli("benchmarks", "hpll")
    assert out.returncode == 2, out.stdout + out.stderr
    err = _flat(out.stderr)
    assert "unknown benchmark 'hpll'" in err and "did you mean 'hpl'" in err and "Traceback" not in out.stderr


# ---------------------------------------------------------------- the listing at 80 columns


def test_the_benchmarks_listing_keeps_every_name_whole_at_80_columns():
    rows = cli_json("benchmarks", "--json")
    out = cli("benchmarks", env={"COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(map(len, lines)) <= 80, out.stdout
    for row in rows:
        for name in [row["name"], *(p["name"] for p in row["parameters"])]:
            assert re.search(rf"(?<![\w-]){re.escape(name)}\*?(?![\w-])", out.stdout), (row["name"], name)
    for line in lines:  # no cell goes on with the rest of a name cut off the line before
        for cell in line.split("│")[1:-1]:
            assert not cell.strip().startswith(","), line
    assert "swap_threshold" in out.stdout and "pmap" in out.stdout


# ---------------------------------------------------------------- did you mean


def test_a_misspelt_benchmark_parameter_or_strategy_gets_the_close_name():
    cases = [
        (["bench", "hpll"], "unknown benchmark 'hpll'", "did you mean 'hpl'"),
        (["bench", "stream", "-p", "ntims=3"], "stream has no parameter 'ntims'", "did you mean 'ntimes'"),
        (["pin", "--strategy", "cors"], "unknown pinning strategy 'cors'", "did you mean 'cores'"),
    ]
    for argv, message, hint in cases:
        out = cli(*argv)
        err = _flat(out.stderr)
        assert out.returncode == 2, (argv, out.stdout, out.stderr)
        assert message in err and hint in err, (argv, err)
        assert "Traceback" not in out.stderr


def test_a_misspelt_blas_variant_gets_the_close_name():
    from clusterbench.system.software import blas_variant_dirs

    installed = sorted(blas_variant_dirs())
    if not installed:
        pytest.skip("no BLAS variant installed here (make setup installs OpenBLAS and BLIS)")
    variant = installed[0]
    typo = variant[:-1]
    out = cli("bench", "dgemm", "-p", f"blas={typo}")
    err = _flat(out.stderr)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"BLAS variant {typo!r} is not installed" in err and "did you mean" in err and repr(variant) in err, err


# ---------------------------------------------------------------- a value swept twice


def _plan(tmp_path, text: str):
    path = tmp_path / "dup.yaml"
    path.write_text(textwrap.dedent(text))
    return path, cli("plan", str(path))


def test_a_value_swept_twice_is_refused_with_its_file_line_and_field(tmp_path):
    path, out = _plan(tmp_path, """\
        name: dup
        benchmarks:
          - benchmark: stream
            params:
              n: 100000
            space:
              ntimes:
                - 3
                - 4
                - 3
        """)
    err = _flat(out.stderr)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{path}:10: benchmarks[0].space.ntimes[2]: 3 is swept twice (items 0 and 2)" in err, err
    assert "repeats:" in err and "Traceback" not in out.stderr
    # 3 and 3.0 are one value of an integer parameter
    path, out = _plan(tmp_path, "name: dup\nbenchmarks:\n  - benchmark: stream\n    params: {n: 100000}\n"
                                "    space: {ntimes: [3, 3.0]}\n")
    assert out.returncode == 2 and f"{path}:5: benchmarks[0].space.ntimes[1]" in _flat(out.stderr), out.stderr
    # a swept system setting too, where it is written
    path, out = _plan(tmp_path, "name: dup\nsystem:\n  thp: [never, never]\nbenchmarks:\n"
                                "  - benchmark: stream\n    params: {n: 100000}\n")
    assert out.returncode == 2 and f"{path}:3: system.thp[1]" in _flat(out.stderr), out.stderr


def test_zip_may_repeat_a_value_of_one_list_but_not_a_whole_point(tmp_path):
    _, fine = _plan(tmp_path, """\
        name: zipped
        benchmarks:
          - benchmark: stream
            params: {n: 100000}
            space: {ntimes: [3, 3], threads: [1, 2]}
            combine: zip
        """)
    assert fine.returncode == 0, fine.stdout + fine.stderr
    path, twice = _plan(tmp_path, """\
        name: zipped
        benchmarks:
          - benchmark: stream
            params: {n: 100000}
            space: {ntimes: [3, 3], threads: [1, 1]}
            combine: zip
        """)
    assert twice.returncode == 2, twice.stdout + twice.stderr
    assert f"{path}:5: benchmarks[0].space.ntimes[1]: point 1 (ntimes=3, threads=1) is point 0 again" in \
        _flat(twice.stderr)


# ---------------------------------------------------------------- no mismatch is an answer


def _runs_with_verdicts(db, verdicts: dict[str, str | None]) -> None:
    with Store(db) as store:
        for i, (run_id, verdict) in enumerate(verdicts.items()):
            store.begin_run(RunRecord(run_id, "stream", {"threads": 1}, campaign="pinned"))
            facts = {"pinning": {"verdict": verdict, "problems": []}} if verdict else {}
            store.finish_run(run_id, "ok", True, None, 0, 1.0 + i, [Metric("stream_triad", 1000.0 + i, "MB/s")],
                             facts=facts)


def test_asking_for_placement_mismatches_when_there_are_none_exits_0(isolated_db):
    _runs_with_verdicts(isolated_db, {"r1": "match", "r2": "match", "r3": None})
    asked = ["results", "--select", "fact:pinning.verdict=mismatch"]
    listed = cli(*asked, "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    table = cli(*asked)
    assert table.returncode == 0 and "Traceback" not in table.stderr, table.stderr
    # a typo is still refused, with what is stored; so is a campaign that is not there
    typo = cli("results", "--select", "fact:pinning.verdict=mismtach")
    assert typo.returncode == 2 and "fact:pinning.verdict: match" in _flat(typo.stderr), typo.stderr
    elsewhere = cli(*asked, "--select", "campaign:nosuch")
    assert elsewhere.returncode == 2 and "nosuch" in elsewhere.stderr, elsewhere.stderr
    # and a mismatch, once there is one, is listed
    _runs_with_verdicts(isolated_db, {"r4": "mismatch"})
    found = cli_json(*asked, "--format", "json")
    assert {record["run_id"] for record in found} == {"r4"}


def test_an_empty_answer_says_what_matched_nothing_not_that_nothing_is_stored(isolated_db):
    _runs_with_verdicts(isolated_db, {"r1": "match", "r2": "match"})
    table = cli("results", "--select", "fact:pinning.verdict=mismatch", env={"COLUMNS": "80"})
    assert table.returncode == 0, table.stderr
    text = _flat(table.stdout)
    assert "no run matches fact:pinning.verdict=mismatch (0 of 2 runs)" in text and "stored yet" not in text, text


# ---------------------------------------------------------------- STREAM's headline


def test_streams_headline_is_its_triad():
    source = LOCAL_FIXTURES / "outputs" / "this-machine" / "stream-omp1.txt"
    triad = float(re.search(r"^Triad:\s+([\d.]+)", source.read_text(), re.M).group(1))
    imported = cli("import", str(source))
    assert imported.returncode == 0, imported.stderr
    listing = cli("results", env={"COLUMNS": "250"})
    assert listing.returncode == 0, listing.stderr
    shown = re.search(r"(?<![\w.])Triad (\d+(?:\.\d+)?) GB/s", listing.stdout)  # however the listing rounds it
    assert shown and abs(float(shown.group(1)) - triad / 1000) <= 0.01 * triad / 1000, listing.stdout
    assert "stream_copy" not in listing.stdout
    records = cli_json("results", "--benchmark", "stream", "--format", "json")
    run_id = records[0]["run_id"]
    detail = cli_json("results", run_id, "--format", "json")
    assert detail["metrics"][0]["name"] == "stream_triad"  # first of the four, as `bench stream` prints them
