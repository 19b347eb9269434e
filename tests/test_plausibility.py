"""Impossible results are flagged, not drawn (issue 31, point 3).

A truncated HPL file whose node count nobody states used to be put at 1 node and shown above
100% of Rpeak. Now % of Rpeak needs a stated node count and a peak: unknown nodes give no % (and
no verdict); a stated node count that puts Rmax above the peak makes the run `suspect`, with
what was compared, and out of everything that counts. The file is the real HPL 2.3 sweep of
tests/fixtures cut before its 'Finished' summary (a truncated run), imported by the real CLI;
the Rpeak is this VM's: 2 cores x 2.445 GHz x 16 flop/cycle = 78.24 Gflop/s per node, which
its Rmax of 81.7-84.0 Gflop/s (boost clock) beats on 1 node.
"""

from __future__ import annotations

import os

from tests.conftest import cli, fixture

from clusterbench.analysis import flags
from clusterbench.analysis.dataset import load
from clusterbench.analysis.peak import Peak, run_peak
from clusterbench.analysis.plausibility import NO_PEAK, NODE_COUNT_UNKNOWN, percent_of_peak
from clusterbench.analysis.select import Selection
from clusterbench.store.db import Store

SWEEP = "outputs/this-machine/hpl-nbsweep-N13440-1x2.log"
RPEAK_VM = 78.24


def _truncated(tmp_path):
    """The sweep cut before HPL's closing summary ('Finished 7 tests'): 7 result lines, truncated."""
    lines = fixture(SWEEP).read_bytes().splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if line.startswith(b"Finished"))
    target = tmp_path / "hpl-truncated.log"
    target.write_bytes(b"".join(lines[:end - 1]))
    return target


def _import(path, *tags: str) -> None:
    out = cli("import", str(path), "-q", *[a for t in tags for a in ("--tag", t)])
    assert out.returncode == 0, out.stdout + out.stderr


def _load(rpeak: float | None):
    with Store(os.environ["CLUSTERBENCH_DB"], read_only=True) as store:
        return load(store, Selection(), {"hpl_gflops"}, rpeak_node_gflops=rpeak)


def _rmax(data) -> dict[str, float]:
    rows = data.of("hpl_gflops")
    return dict(zip(rows["run_id"], rows["value"].astype(float), strict=True))


def test_above_rpeak_on_a_stated_node_is_suspect_and_never_counts(tmp_path):
    _import(_truncated(tmp_path), "nodes=1")
    data = _load(RPEAK_VM)
    rmax = _rmax(data)
    assert len(rmax) == 7
    above = {rid for rid, value in rmax.items() if value > RPEAK_VM}
    assert 0 < len(above) < 7  # 6 lines at 81.7-84.0 Gflop/s, the NB=128 one at 60.8
    for rid, value in rmax.items():
        run_flags = data.flags(rid)
        assert "truncated" in run_flags
        assert ("suspect" in run_flags) == (rid in above)
        pct, why = percent_of_peak(data.runs[rid], value, RPEAK_VM)
        assert pct is not None and abs(pct - 100 * value / RPEAK_VM) < 1e-9 and "1 node" in why
    reason = data.runs[max(rmax, key=rmax.get)]["suspect"]
    assert "% of Rpeak" in reason and "1 node" in reason and "78.24" in reason and "tag nodes" in reason
    assert data.counted_ids().isdisjoint(above) and not flags.counts(data.runs[next(iter(above))])


def test_unknown_node_count_gives_no_percent_and_no_verdict(tmp_path):
    _import(_truncated(tmp_path))
    data = _load(RPEAK_VM)
    for rid, value in _rmax(data).items():
        assert "suspect" not in data.flags(rid) and "suspect" not in data.runs[rid]
        assert percent_of_peak(data.runs[rid], value, RPEAK_VM) == (None, NODE_COUNT_UNKNOWN)


def test_the_same_file_on_eight_stated_nodes_is_plausible(tmp_path):
    _import(_truncated(tmp_path), "nodes=8")
    data = _load(RPEAK_VM)
    for rid, value in _rmax(data).items():
        pct, _why = percent_of_peak(data.runs[rid], value, RPEAK_VM)
        assert 5 < pct < 20 and "suspect" not in data.flags(rid)


def test_no_peak_no_verdict(tmp_path):
    _import(_truncated(tmp_path), "nodes=1")
    data = _load(None)  # an imported file, no system description, no --rpeak-node
    assert all("suspect" not in data.flags(rid) for rid in data.runs)
    run = next(iter(data.runs.values()))
    assert data.peak_of(run) is None and percent_of_peak(run, 80.0, None) == (None, NO_PEAK)


def test_a_measured_peak_wins_over_rpeak():
    """Where the clock benchmark measured the nodes, Rmax is held against what they did, not the nominal figure."""
    run = {"system_id": "s1", "params": {"nodes": 1}, "tags": {}, "source": "run"}
    measured = {"s1": Peak(99.2, "measured: 49.6 Gflop/s per core (clock) x 2 cores", measured=True)}
    peak = run_peak(run, {}, RPEAK_VM, measured)
    assert peak.measured and peak.node_gflops == 99.2
    pct, why = percent_of_peak(run, 83.991, peak)
    assert 80 < pct < 90 and why.startswith(f"{pct:.0f}% of measured peak")
    assert run_peak(run, {}, RPEAK_VM, {}).node_gflops == RPEAK_VM
