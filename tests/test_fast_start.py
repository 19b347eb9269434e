"""Issue 32, part 4: `bench` expands its one point without the campaign file's pydantic models, reads
`-p` values without PyYAML when YAML reads them plainly, and prints with rich only when it prints
tables. Each shortcut gives what the long way gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from tests.conftest import main_in_new_python

from clusterbench.campaign.expand import expand
from clusterbench.campaign.point import one_point
from clusterbench.campaign.spec import BenchmarkBlock, Campaign, CampaignError
from clusterbench.cli.shared import yaml_scalar
from clusterbench.errors import UserInputError
from clusterbench.system.discover import discover

VALUES = ["0", "-0", "+5", "12", "012", "0x1f", "1_000", "1e5", "0.5", "-0.0", "01.5", "1.", ".5", ".inf", "yes",
          "Yes", "y", "n", "on", "OFF", "null", "Null", "~", "core", "bind_to", "a.b", "/usr/lib", "a/b", "-core",
          "_x", "True", "tRue", "2026-01-01", "1:20", "a: b", "[1,2]", "{a: 1}", '"q"', "x #c", " 5", "core-2",
          "a..b", "1.5e3", "NULL", "none", "None", "nan", "[", "'", "openmpi", "l3cache", "2", "1000000"]


@pytest.mark.parametrize("raw", VALUES)
def test_a_value_is_read_as_yaml_reads_it(raw):
    try:
        expected = yaml.safe_load(raw)
    except yaml.YAMLError:
        expected = raw
    got = yaml_scalar(raw)
    assert type(got) is type(expected) and (got == expected or got != got and expected != expected), (got, expected)


@pytest.fixture(scope="module")
def system():
    return discover()


@pytest.mark.parametrize(("benchmark", "params", "timeout", "repeats"), [
    ("stream", {"n": 100000, "ranks": 2, "threads": 1}, None, 1),
    ("stream", {"n": 20000}, "90s", 3),
    ("pingpong", {}, "2m", 2),
    ("hpl", {"n": 2000, "nb": 64}, 600, 1),
    ("command", {"command": "true"}, None, 1),
])
def test_one_point_expands_as_the_campaign_of_its_block(system, benchmark, params, timeout, repeats):
    block = BenchmarkBlock(benchmark=benchmark, params=params, timeout=timeout, repeats=repeats)
    long_way = expand(Campaign(name="bench", benchmarks=[block]), None, system)
    short_way = expand(one_point(benchmark, params, timeout, repeats), None, system)
    assert short_way == long_way and len(short_way) == repeats


@pytest.mark.parametrize(("benchmark", "params"), [
    ("stream", {"n": -5}), ("stream", {"nosuch": 1}), ("nosuch", {}), ("hpl", {"nb": "x"}),
])
def test_a_bad_point_is_refused_as_in_a_campaign(system, benchmark, params):
    block = BenchmarkBlock(benchmark=benchmark, params=params)
    with pytest.raises(CampaignError) as long_way:
        expand(Campaign(name="bench", benchmarks=[block]), None, system)
    with pytest.raises(CampaignError) as short_way:
        expand(one_point(benchmark, params), None, system)
    assert (short_way.value.message, short_way.value.hint) == (long_way.value.message, long_way.value.hint)


@pytest.mark.parametrize("timeout", ["soon", "0", "-5s", "nan", "inf", "1e400", ""])
def test_a_bad_timeout_is_refused_naming_the_option_as_the_model_words_it(timeout):
    with pytest.raises(Exception) as model:  # pydantic's ValidationError
        BenchmarkBlock(benchmark="stream", timeout=timeout)
    with pytest.raises(UserInputError) as point:
        one_point("stream", {}, timeout)
    assert point.value.message.startswith("--timeout: ")
    assert model.value.errors()[0]["msg"].removeprefix("Value error, ") == point.value.message.removeprefix(
        "--timeout: ")


def test_bench_json_loads_neither_pydantic_yaml_nor_rich_and_an_error_still_prints(tmp_path):
    env = dict(os.environ) | {"CLUSTERBENCH_DB": str(tmp_path / "r.db")}
    out = main_in_new_python(["bench", "stream", "-p", "n=100000", "-p", "ranks=1", "--json"], env, after=(
        "print('LOADED', sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'yaml', 'rich', 'typer'}))"))
    assert out.returncode == 0, out.stderr
    assert '"status": "ok"' in out.stdout and out.stdout.rstrip().endswith("LOADED []"), out.stdout[-500:]
    bad = subprocess.run([sys.executable, "-m", "clusterbench", "bench", "stream", "--timeout", "soon"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --timeout: invalid duration 'soon'"), bad.stderr


def test_the_probe_writes_its_record_as_json_writes_it():
    from clusterbench.pinning import probe

    record = {"host": "n1", "pid": 12, "rank": None, "env": {"OMP_PLACES": "{0:2}", "X": "é\"\\\n\x01"},
              "threads": [{"tid": 12, "cpus": {"0": 3}, "history": [["0-1", 2]], "first_seen_s": 0.0}],
              "seconds": 1e-05, "exit": -9, "ok": True, "no": False, "odd": [float("nan"), float("inf"), -0.0, 10**30],
              1: "int key", 2.5: "float key", None: "null key", "tuple": (1, 2)}
    assert probe.dumps(record) == json.dumps(record)


def test_kernel_sources_are_where_importlib_resources_finds_them():
    from importlib import resources
    from pathlib import Path

    from clusterbench.native import build

    folder = resources.files("clusterbench.native") / "src"
    kernels = sorted(p.name[:-2] for p in Path(str(folder)).iterdir() if p.name.endswith(".c"))
    assert kernels
    for kernel in kernels:
        assert build.source_path(kernel) == Path(str(folder / f"{kernel}.c"))


def test_is_local_answers_as_the_four_names_do():
    import socket

    from clusterbench.launch.hosts import is_local

    names = ["localhost", "127.0.0.1", socket.gethostname(), socket.getfqdn(), "node-that-is-not-here", ""]
    for name in names:
        assert is_local(name) == (name in ("localhost", "127.0.0.1", socket.gethostname(), socket.getfqdn()))
