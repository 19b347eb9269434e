"""Official benchmark adapters: parsing real outputs, crafted failures, discovery, the run path.

The parsers are tested on the real outputs in tests/fixtures/outputs/this-machine and on crafted
failures. The real programs, built from their official sources, run through these adapters in
test_build_official.py (when ../shared/sources is beside the checkout). Discovery is tested here
with empty executables named like the real ones; iperf3 runs for real.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from tests.conftest import cli, cli_json, fixture

from clusterbench.bench.hpcg.benchmark import Hpcg
from clusterbench.bench.imb.benchmark import Imb
from clusterbench.bench.iperf3 import iperf3_outcome
from clusterbench.bench.official import find_binary
from clusterbench.bench.osu.benchmark import Osu
from clusterbench.bench.stream.binary import StreamBinary

HERE = fixture("outputs/this-machine")
IMB_TEXT = (HERE / "imb-pingpong-bindcore.txt").read_text()
HPCG_TEXT = (HERE / "HPCG-Benchmark_3.1_2rank_nx64_rt60.txt").read_text()


def parse(cls, text: str, tmp_path: Path, point: dict | None = None, files: dict | None = None):
    bench = cls(point=point or {}, binary=Path("/bin/true"))
    (tmp_path / "stdout.txt").write_text(text)
    for name, content in (files or {}).items():
        (tmp_path / name).write_text(content)
    return bench.parse(tmp_path)


def metric(out, name, **labels):
    return next(m for m in out.metrics if m.name == name and all(m.labels.get(k) == v for k, v in labels.items()))


def test_imb_real_output(tmp_path):
    out = parse(Imb, IMB_TEXT, tmp_path)
    assert out.valid
    assert metric(out, "latency_us").value == 0.17
    assert metric(out, "imb_bandwidth", bytes=1048576).value == 9679.44
    assert metric(out, "imb_bandwidth", bytes=1048576).unit == "MiB/s"
    assert len([m for m in out.metrics if m.name == "imb_time_us"]) == 24  # 0 and 2^0..2^22


def test_imb_truncated_and_aborted_are_invalid(tmp_path):
    cut = IMB_TEXT[: IMB_TEXT.index("      1048576")]
    out = parse(Imb, cut, tmp_path)
    assert not out.valid and "MPI_Finalize" in out.reasons[-1] and not any(m.valid for m in out.metrics)
    aborted = cut + ("--------------------------------------------------------------------------\n"
                     "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\nwith errorcode 1.\n")
    assert not parse(Imb, aborted, tmp_path).valid
    assert not parse(Imb, "", tmp_path).valid


def test_osu_real_outputs_and_truncation(tmp_path):
    lat = parse(Osu, (HERE / "osu_latency-bindcore-r1.txt").read_text(), tmp_path,
                {"test": "latency", "max_bytes": 4194304})
    assert lat.valid and metric(lat, "latency_us").value == 0.19 and metric(lat, "latency_us").labels["bytes"] == 1
    bw = parse(Osu, (HERE / "osu_bw-bindcore-r1.txt").read_text(), tmp_path, {"test": "bw", "max_bytes": 4194304})
    assert bw.valid and metric(bw, "peak_bandwidth").unit == "MB/s"
    text = (HERE / "osu_latency-bindcore-r1.txt").read_text()
    cut = text[: text.index("1048576")]
    short = parse(Osu, cut, tmp_path, {"test": "latency", "max_bytes": 4194304})
    assert not short.valid and "stops at 524288 bytes" in short.reasons[0]


def test_stream_binary_real_and_failed_validation(tmp_path):
    text = (HERE / "stream-omp2.txt").read_text()
    ok = parse(StreamBinary, text, tmp_path)
    assert ok.valid and metric(ok, "stream_triad").value == 31121.4
    failed = text.replace("Solution Validates", "Failed Validation on array a[]")
    bad = parse(StreamBinary, failed, tmp_path)
    assert not bad.valid and not any(m.valid for m in bad.metrics)


def test_hpcg_report_valid_invalid_and_missing(tmp_path):
    report = {"HPCG-Benchmark_3.1_2026-11-20_10-00-00.txt": HPCG_TEXT}
    out = parse(Hpcg, "", tmp_path, files=report)
    assert out.valid and out.metrics[0].name == "hpcg_gflops"
    assert out.facts["list_eligible"] is False  # a 60 s run, not the official 1800 s
    assert (tmp_path / "hpcg-report.txt").read_text() == HPCG_TEXT
    invalid = HPCG_TEXT.replace("HPCG result is VALID", "HPCG result is INVALID")
    for f in tmp_path.glob("HPCG-Benchmark*"):
        f.unlink()
    bad = parse(Hpcg, "", tmp_path, files={"HPCG-Benchmark_3.1_x.txt": invalid})
    assert not bad.valid and "INVALID" in bad.reasons[0]
    for f in tmp_path.glob("HPCG-Benchmark*"):
        f.unlink()
    none = parse(Hpcg, "MPI_ABORT was invoked on rank 0", tmp_path)
    assert not none.valid and "no HPCG-Benchmark" in none.reasons[0]


def test_iperf3_json_errors():
    assert not iperf3_outcome("").valid
    err = iperf3_outcome(json.dumps({"start": {}, "end": {}, "error": "unable to connect to server"}))
    assert not err.valid and "unable to connect" in err.reasons[0]


def test_iperf3_real_run_over_loopback():
    (run,) = cli_json("bench", "iperf3", "-p", "time=1", "-p", "port=5299", "--json")
    assert run["status"] == "ok", run["reason"]
    gbits = {m["name"]: m["value"] for m in run["metrics"]}["tcp_throughput"]
    assert 0.1 < gbits < 1000  # loopback: Gbit/s, not bit/s or Tbit/s


def stand_in(folder: Path, name: str, output: str, report: str | None = None) -> Path:
    """An executable named like the real binary that records its arguments and prints a real output."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.out").write_text(output)
    rank0 = [f'cat "{folder / (name + ".out")}"']
    if report:
        (folder / "report.txt").write_text(report)
        rank0.append(f'cp "{folder / "report.txt"}" HPCG-Benchmark_3.1_standin.txt')
    # like the real codes, only rank 0 prints and writes the report (two cp's racing could fail)
    lines = ["#!/bin/sh", 'echo "$@" > "args.$$"',
             f'if [ "${{OMPI_COMM_WORLD_RANK:-0}}" = 0 ]; then {"; ".join(rank0)}; fi']
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_discovery_order(tmp_path, monkeypatch):
    a, b = stand_in(tmp_path / "a", "IMB-MPI1", ""), stand_in(tmp_path / "b", "IMB-MPI1", "")
    monkeypatch.setenv("CLUSTERBENCH_PATH", str(tmp_path / "a"))
    monkeypatch.setenv("PATH", f"{tmp_path / 'b'}:{os.environ['PATH']}")
    assert find_binary(("IMB-MPI1",)).how == "$CLUSTERBENCH_PATH" and find_binary(("IMB-MPI1",)).path == str(a)
    monkeypatch.delenv("CLUSTERBENCH_PATH")
    monkeypatch.setenv("LOADEDMODULES", "imb/2021:openmpi/4.1")
    found = find_binary(("IMB-MPI1",))
    assert found.path == str(b) and "imb/2021, openmpi/4.1" in found.how
    monkeypatch.setenv("CLUSTERBENCH_IMB", str(a))
    assert find_binary(("IMB-MPI1",), "CLUSTERBENCH_IMB").how == "$CLUSTERBENCH_IMB"


def test_hpcg_refuses_bad_dimensions():
    out = cli("bench", "hpcg", "-p", "nx=20", "--json", env={"CLUSTERBENCH_HPCG": "/bin/true"})
    assert out.returncode == 2 and "multiples of 8" in out.stderr
    out = cli("bench", "hpcg", "-p", "nx=16", "-p", "ny=16", "-p", "nz=256", env={"CLUSTERBENCH_HPCG": "/bin/true"})
    assert out.returncode == 2 and "more than 8 x" in out.stderr


def test_missing_binary_says_how_to_get_it(monkeypatch, tmp_path):
    # an empty build cache: builds the user (or another test) registered would be found
    out = cli("bench", "osu", "-p", "test=bw", env={"PATH": "/usr/bin:/bin", "CLUSTERBENCH_PATH": "",
                                                    "CLUSTERBENCH_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 2 and "osu_bw not found" in out.stderr and "CLUSTERBENCH_PATH" in out.stderr


@pytest.mark.parametrize("dims, ranks", [((64, 64, 64), 2), ((160, 160, 168), 2)])
def test_hpcg_planner_respects_rules(dims, ranks):
    from clusterbench.bench.hpcg.sizing import HPCG_BYTES_PER_POINT, hpcg_dims, hpcg_dims_problem
    memory = dims[0] * dims[1] * dims[2] * ranks * HPCG_BYTES_PER_POINT * 4  # so that 25% holds `dims`
    planned = hpcg_dims(memory, ranks)
    assert hpcg_dims_problem(planned) is None
    assert planned[0] * planned[1] * planned[2] * ranks * HPCG_BYTES_PER_POINT <= memory * 0.25
    assert planned[0] >= dims[0] - 8


def test_imagemagick_stream_on_path_is_not_taken_for_stream(tmp_path, monkeypatch):
    """Debian's ImageMagick puts /usr/bin/stream -> stream-im6.q16 on PATH."""
    real = tmp_path / "im" / "stream-im6.q16"
    real.parent.mkdir()
    real.write_text("#!/bin/sh\necho ImageMagick\n")
    real.chmod(0o755)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "stream").symlink_to(real)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CLUSTERBENCH_PATH", raising=False)
    assert find_binary(("stream",)) is None
