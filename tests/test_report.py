"""Reports and comparisons from real campaigns (real hpcc, mpirun, our kernels) plus the imported
fixtures, rendered in Debian's headless Chromium. The fixtures are the whole shared outputs folder when
../shared is beside the checkout (as in CI), else our own copy of its redistributable part: the report
then has fewer rows, and the one check on a cloud file skips.

Network requests are caught two ways. A recording HTTP proxy that Chromium must use for
everything (loopback included) sees every request that leaves the browser; Chromium itself
still calls a few of its own service hosts (component updates, network time, accounts) whatever
the flags, so exactly those host names are set apart, and any other host fails the test. The
report's Content-Security-Policy blocks a fetch before it reaches the proxy, so Chromium's
console is read too: a blocked attempt is logged there. Canary pages prove both traps work.
"""

from __future__ import annotations

import csv
import http.server
import json
import math
import shutil
import sqlite3
import statistics
import subprocess
import threading
from pathlib import Path

import pytest
from tests.conftest import OUTPUTS, cli, cli_json, fixture

from clusterbench.analysis.stats import t95

STUDY = """\
name: study
description: tiny HPCC NB sweep, STREAM threads, ping-pong shm vs tcp
tags: {study: tiny}
repeats: 2
timeout: 2m
benchmarks:
  - benchmark: hpcc
    params: {n: 1024, layout: mpi, blas: openblas-serial}
    space:
      nb: [64, 128]
  - benchmark: stream
    params: {n: 2000000}
    space:
      threads: [1, 2]
  - benchmark: pingpong
    params: {max_log2: 14, rounds: 1}
    space:
      interconnect: [shm, tcp]
"""

BLAS = """\
name: blas-{short}
repeats: 3
timeout: 2m
benchmarks:
  - benchmark: hpcc
    params: {{n: 1024, nb: 128, layout: mpi, blas: {blas}}}
"""

SECTIONS = ("system", "hpl", "hpcc", "network", "memory", "energy", "runs")
FIGURES = ("hpl-rmax-vs-nb", "hpl-rmax-vs-nodes", "network-latency", "network-bandwidth", "memory-stream-triad")
HOSTILE = "<script>window.pwned=1</script>"
# Chromium's own background calls, seen here with every --disable-* flag given (not the page's).
CHROMIUM_SERVICE_HOSTS = {"update.googleapis.com", "clients2.google.com", "accounts.google.com",
                          "clients2.googleusercontent.com", "redirector.gvt1.com", "edgedl.me.gvt1.com",
                          "optimizationguide-pa.googleapis.com", "content-autofill.googleapis.com",
                          "safebrowsingohttpgateway.googleapis.com", "www.google.com"}
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-default-apps", "--disable-extensions", "--disable-sync",
                  "--no-first-run", "--metrics-recording-only", "--disable-domain-reliability",
                  "--enable-logging=stderr", "--v=0")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """A store with a campaign run here, two BLAS campaigns and every fixture of OUTPUTS imported."""
    root = tmp_path_factory.mktemp("study")
    db = root / "results.db"
    env = {"CLUSTERBENCH_DB": str(db)}
    specs = {"study": STUDY} | {f"blas-{s}": BLAS.format(short=s, blas=b)
                                 for s, b in (("openblas", "openblas-serial"), ("blis", "blis-openmp"))}
    for name, text in specs.items():
        (root / f"{name}.yaml").write_text(text)
        out = cli("campaign", "run", str(root / f"{name}.yaml"), env=env)
        assert out.returncode == 0, out.stdout + out.stderr
    out = cli("import", "-q", str(OUTPUTS), env=env)
    assert out.returncode == 0, out.stderr
    return db


def report(db: Path, out: Path, *args: str) -> Path:
    result = cli("report", *args, "--out", str(out), env={"CLUSTERBENCH_DB": str(db)})
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_report_has_every_section_with_data(study, tmp_path):
    out = report(study, tmp_path / "r", "--power-watts", "40")
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    for section in SECTIONS:
        assert f'data-section="{section}"' in html, section
    for fig in FIGURES:
        assert f'data-figure="{fig}"' in html and (out / f"{fig}.csv").is_file() and (out / f"{fig}.svg").is_file()
        assert f"({fig}.svg)" in md
    assert "http://" not in html.replace("http://www.w3.org/", "") and "https://" not in html
    summary = rows(out / "energy-summary.csv")
    assert any(r["figure"] == "efficiency (GFlops/W)" for r in summary)
    # Balance = ring bandwidth / HPL per process is in the HPCC table, in byte/flop
    hpcc = rows(out / "hpcc-summary.csv")
    assert any(r["metric"].startswith("Balance") and r["unit"] == "byte/flop" for r in hpcc)


def test_a_selection_limits_the_sections(study, tmp_path):
    out = report(study, tmp_path / "r", "source:import", "benchmark:imb")
    html = (out / "report.html").read_text()
    assert 'data-section="network"' in html
    assert 'data-section="hpl"' not in html and 'data-section="memory"' not in html
    assert {r["benchmark"] for r in rows(out / "runs.csv")} == {"imb"}
    bad = cli("report", "no-such-thing", "--out", str(tmp_path / "x"), env={"CLUSTERBENCH_DB": str(study)})
    assert bad.returncode == 2 and "neither a campaign" in bad.stderr


def test_csv_holds_the_plotted_values_and_their_runs(study, tmp_path):
    out = report(study, tmp_path / "r")
    con = sqlite3.connect(study)
    stored_runs = {r[0] for r in con.execute("SELECT id FROM runs")}
    listed = {r["runs"] for r in rows(out / "runs.csv")}
    points = rows(out / "hpl-rmax-vs-nb.csv")
    assert len(points) >= 4
    for p in points:
        ids = p["run_ids"].split(";")
        values = [con.execute("SELECT value FROM metrics WHERE run_id=? AND name='hpl_gflops'", (i,)).fetchone()[0]
                  for i in ids]
        assert float(p["Rmax (Gflop/s)"]) == pytest.approx(sum(values) / len(values), rel=1e-12)
        if p["bar"] == "ci95":  # 3 or more repeats of one configuration: the 95% t-interval of their mean (issue 31)
            half = t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
            assert len(values) >= 3 and p["n_values"] == str(len(values))
            assert float(p["y_min"]) == pytest.approx(sum(values) / len(values) - half)
            assert float(p["y_max"]) == pytest.approx(sum(values) / len(values) + half)
        elif len(values) > 1:
            assert float(p["y_min"]) == min(values) and float(p["y_max"]) == max(values)
        assert set(ids) <= stored_runs and set(ids) <= listed
    # every table row names its runs, and they are in the appendix
    for name in ("hpl-best", "hpl-configurations", "network-latency-table", "memory-stream-table"):
        for row in rows(out / f"{name}.csv"):
            assert row["runs"] and set(row["runs"].split(";")) <= listed, name


def test_imb_mib_per_s_are_plotted_as_mb_per_s(study, tmp_path):
    fixture("outputs/imb-cloud/20170323_020501.out")  # the 2-host STFC run, imported by `study` with ../shared
    out = report(study, tmp_path / "r")
    # IMB's MiB/s are plotted as MB/s: the 2-host STFC run's peak 457.94 MiB/s at 2 MiB
    bw = rows(out / "network-bandwidth.csv")
    stfc = [p for p in bw if "import-imb-" in p["run_ids"] and float(p["message size"]) == 2097152
            and "2 nodes" in p["series"]]
    assert stfc and min(abs(float(p["y_max"] or p["bandwidth (MB/s)"]) - 457.94 * 1.048576) for p in stfc) < 0.01


def test_invalid_runs_are_listed_apart_and_never_best(study, tmp_path):
    con = sqlite3.connect(study)
    con.execute("UPDATE runs SET status='invalid', valid=0, reason='HPL residual FAILED (test)' WHERE id = "
                "(SELECT run_id FROM metrics WHERE name='hpl_gflops' ORDER BY value DESC LIMIT 1)")
    con.commit()
    bad = con.execute("SELECT id FROM runs WHERE reason='HPL residual FAILED (test)'").fetchone()[0]
    try:
        out = report(study, tmp_path / "r")
        assert [r["runs"] for r in rows(out / "hpl-invalid.csv")] == [bad]
        for name in ("hpl-best", "hpl-configurations", "hpl-rmax-vs-nb", "energy-summary"):
            assert bad not in (out / f"{name}.csv").read_text(), name
    finally:
        con.execute("UPDATE runs SET status='ok', valid=1, reason=NULL WHERE id=?", (bad,))
        con.commit()


def test_june_2020_places_103_41_gflops_at_65_w_170th_by_efficiency(study, tmp_path):
    out = report(study, tmp_path / "r", "--rmax", "103.41", "--power-watts", "65", "--list", "2020-06")
    table = rows(out / "energy-green500-neighbours.csv")
    assert [r["position"] for r in table] == ["169", "170", "171"]
    assert table[1]["system"] == "this system" and abs(float(table[1]["GFlops/W"]) - 1.5909) < 1e-3
    assert table[0]["system"] == "ISystem" and table[2]["system"] == "MCSystem"
    html = (out / "report.html").read_text()
    assert "ISystem" in html and "MCSystem" in html and "170 (among 206 systems" in html
    assert "TOP500, June 2020" in html


def test_compare_blas_variants_with_and_without_enough_repeats(study, tmp_path):
    env = {"CLUSTERBENCH_DB": str(study)}
    found = cli_json("compare", "blas-openblas", "blas-blis", "-m", "hpl_gflops", "--json", env=env)
    result = found["rows"]  # the verdict over all pairs comes first (issue 31)
    assert len(result) == 1 and found["verdict"]["pairs"] == 1
    row = result[0]
    assert row["a"]["n"] == 3 and row["b"]["n"] == 3
    assert row["p_value"] is not None and 0 <= row["p_value"] <= 1
    assert abs(row["change_pct"] - 100 * (row["b"]["mean"] - row["a"]["mean"]) / row["a"]["mean"]) < 1e-9
    assert row["verdict"] in ("better", "worse", "no significant difference")
    mw = cli_json("compare", "blas-openblas", "blas-blis", "-m", "hpl_gflops", "--test", "mannwhitney", "--json",
                  env=env)
    assert mw["rows"][0]["p_value"] is not None
    two = [r[0] for r in sqlite3.connect(study).execute(
        "SELECT id FROM runs WHERE campaign='blas-blis' ORDER BY id LIMIT 2")]
    few = cli_json("compare", "blas-openblas", ",".join(f"run:{i}" for i in two), "-m", "hpl_gflops", "--json",
                   env=env)
    few = few["rows"]
    assert few[0]["b"]["n"] == 2 and few[0]["verdict"].startswith("not enough repeats")
    shown = cli("compare", "blas-openblas", "blas-blis", "-m", "hpl_gflops", "--out", str(tmp_path / "c"), env=env)
    assert shown.returncode == 0, shown.stderr
    table = rows(tmp_path / "c" / "comparison.csv")
    assert table[0]["n baseline"] == "3" and table[0]["verdict"] == row["verdict"]
    assert len(rows(tmp_path / "c" / "runs.csv")) == 6
    assert cli("compare", "blas-openblas", "tag:none=here", env=env).returncode == 2


# ----------------------------------------------------------------------------- Chromium


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def _record(self) -> None:
        _Recorder.seen.append(f"{self.command} {self.path}")
        self.send_response(404)
        self.end_headers()

    do_GET = do_POST = do_HEAD = do_CONNECT = _record

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def proxy():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Recorder.seen = []
    yield server.server_address[1], _Recorder.seen
    server.shutdown()


def chromium(page: Path, port: int, *args: str) -> subprocess.CompletedProcess:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("chromium is not installed: `make setup` installs Debian's chromium package")
    return subprocess.run([binary, *CHROMIUM_FLAGS, f"--proxy-server=http://127.0.0.1:{port}",
                           "--proxy-bypass-list=<-loopback>", *args, page.as_uri()],
                          capture_output=True, text=True, timeout=120)


def page_requests(seen: list[str]) -> list[str]:
    """Requests that are not Chromium's own service calls."""
    from urllib.parse import urlsplit

    def host(request: str) -> str:
        target = request.split(" ", 1)[1]
        return (urlsplit(target).hostname if "://" in target else target.rsplit(":", 1)[0]) or ""

    return [r for r in seen if host(r) not in CHROMIUM_SERVICE_HOSTS]


def csp_blocks(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line and "Content Security Policy" in line]


def test_the_network_traps_catch_a_page_that_fetches(proxy, tmp_path):
    port, seen = proxy
    page = tmp_path / "canary.html"
    page.write_text('<html><body><img src="http://example.invalid/pixel.png"></body></html>')
    chromium(page, port, "--dump-dom")
    assert any("example.invalid" in r for r in page_requests(seen)), seen
    guarded = tmp_path / "guarded.html"
    guarded.write_text('<html><head><meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
                       '</head><body><img src="http://example.invalid/pixel.png"></body></html>')
    assert csp_blocks(chromium(guarded, port, "--dump-dom").stderr)


def test_report_renders_in_chromium_offline_with_hostile_strings_escaped(study, proxy, tmp_path):
    port, seen = proxy
    con = sqlite3.connect(study)  # an attacker's host name and tag, as if stored by a run
    con.execute("UPDATE systems SET hostname=?", ("<img src=x onerror=alert(1)>",))
    victim = con.execute("SELECT id FROM runs WHERE benchmark='imb' AND source='import' LIMIT 1").fetchone()[0]
    con.execute("UPDATE runs SET tags=? WHERE id=?", (json.dumps({"placement": HOSTILE}), victim))
    con.commit()
    out = report(study, tmp_path / "r")
    page = out / "report.html"
    shot = tmp_path / "report.png"
    result = chromium(page, port, f"--screenshot={shot}", "--window-size=1280,6000")
    assert shot.is_file() and shot.stat().st_size > 50_000, result.stderr[-2000:]
    rendered = chromium(page, port, "--dump-dom")
    dom = rendered.stdout
    assert csp_blocks(rendered.stderr) == [] and csp_blocks(result.stderr) == []
    for section in SECTIONS:
        assert f'data-section="{section}"' in dom, section
    for fig in FIGURES:
        start = dom.index(f'data-figure="{fig}"')
        assert "<svg" in dom[start:start + 2000], fig
    assert page_requests(seen) == [], f"the report made network requests: {seen}"
    assert "<script" not in dom and "<img" not in dom
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in dom  # shown as text, in a legend or table
    assert "&lt;img src=x onerror=alert(1)&gt;" in dom
    assert "<script" not in (out / "report.md").read_text()
