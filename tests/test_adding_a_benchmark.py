"""The one-module benchmark of docs/benchmarks.md, run as written: it runs in a campaign (through
the one run loop, real `dd`), `clusterbench import` recognises a log of old dd runs by its content
and stores each transfer, the report's memory section draws both, and the tuner finds its best block
size with real trials, stored and replayed, though no import, report, executor or tuner code names the
benchmark. Removed from the registry, its log is not recognised."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from tests.conftest import ROOT, query

from clusterbench.analysis.select import Selection
from clusterbench.bench import registry
from clusterbench.campaign.expand import expand
from clusterbench.campaign.spec import parse_campaign
from clusterbench.errors import UserInputError
from clusterbench.execution.loop import QuietReporter, run_all
from clusterbench.report.build import build
from clusterbench.report.model import Options
from clusterbench.store.db import Store
from clusterbench.store.importer import import_paths
from clusterbench.system.discover import discover


@pytest.fixture
def ddcopy(tmp_path):
    """The docs' code block, imported as the module a user would write."""
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    code = re.search(r"## Example: a new benchmark in one module.*?```python\n(.*?)```", text, re.S).group(1)
    (tmp_path / "ddcopy_doc.py").write_text(code)
    sys.path.insert(0, str(tmp_path))
    try:
        yield __import__("ddcopy_doc")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("ddcopy_doc", None)
        registry._registered.pop("ddcopy", None)
        registry.BENCHMARKS.pop("ddcopy", None)


def _old_log(tmp_path):
    """Three real dd runs' stderr, one after another, as a study kept them."""
    log = tmp_path / "old" / "dd-runs.log"
    log.parent.mkdir()
    with log.open("w") as f:
        for count in (16, 32, 64):
            subprocess.run(["dd", "if=/dev/zero", "of=/dev/null", "bs=1M", f"count={count}"], stderr=f, check=True)
    return log


def test_the_docs_benchmark_runs_imports_and_is_reported(ddcopy, tmp_path, isolated_db):
    campaign, source = parse_campaign("name: dd\nbenchmarks:\n  - benchmark: ddcopy\n"
                                      "    space: {count: [64, 128]}\n", "dd.yaml")
    runs = expand(campaign, source, discover(with_software=False))
    log = _old_log(tmp_path)
    with Store(isolated_db) as store:
        live = run_all(store, runs, QuietReporter())
        imported = import_paths(store, [str(log.parent)])
        report = build(store, Selection(), Options())
    # 1. in a campaign
    assert [r.status for r in live] == ["ok", "ok"]
    assert all(r.outcome.best("dd_rate").value > 0.01 for r in live)
    # 2. its old outputs imported: one run per transfer line, with the size the line states
    (rep,) = imported.files
    assert (rep.kind, rep.stored, rep.invalid, rep.skipped) == ("ddcopy", 3, 0, None)
    rows = query(isolated_db, "SELECT r.params, m.value FROM runs r JOIN metrics m ON m.run_id = r.id "
                              "WHERE r.source = 'import' AND m.name = 'dd_rate' ORDER BY r.params")
    assert sorted(int(r["params"].split(":")[1].strip(" }")) for r in rows) == [16 << 20, 32 << 20, 64 << 20]
    assert all(r["value"] > 0.01 for r in rows)
    # 3. in the report: the memory section's table has a "dd copy" column holding all five runs
    memory = next(s for s in report.sections if s.slug == "memory")
    table = memory.tables[0]
    column = table.columns.index("dd copy")
    assert all(row[column] for row in table.rows)
    reported = {run for row in table.rows for run in row[-1]}
    assert {r.id for r in live} <= reported and len(reported) == 5
    # 4. its figure of merit is what a history of it follows, with no line of the report naming it
    from clusterbench.report import history

    assert history.headlines()["ddcopy"] == "dd_rate" and "dd_rate" in history.metrics()


def test_unregistered_its_log_is_not_recognised(tmp_path, isolated_db):
    log = _old_log(tmp_path)
    with Store(isolated_db) as store:
        (rep,) = import_paths(store, [str(log)]).files
    assert rep.kind is None and rep.stored == 0


def test_the_docs_benchmark_is_tuned_stored_and_resumed(ddcopy, tmp_path, isolated_db, monkeypatch):
    """Its `tuning` declaration, through the generic tuner: real dd trials of at most 32 MiB, at two counts."""
    from clusterbench.tune.session import TuneOptions, prepare, write_outputs

    monkeypatch.setenv("CLUSTERBENCH_OBSERVE", "0")  # no node state read around each of the ~40 short trials
    tuning = ddcopy.DdCopy.tuning
    blocks = ["64K", "256K", "1M", "4M"]
    system = discover(with_software=False)
    options = TuneOptions(budget_s=60, n=8, levels=2, eta=2, repeats=2, tuning=tuning)
    with Store(isolated_db) as store:
        store.remember_system(system)
        session = prepare(store, options, system, system_id=system.fingerprint())
        assert session.name.startswith("tune-ddcopy-") and session.tspace.fidelities == [4, 8]
        assert session.tspace.space.dims == {"block": blocks} and "assumed" in session.rates_source
        result = session.run()
        # a best among the declared block sizes, sampled `repeats` times at the deciding count
        assert result.best is not None and result.best.config.as_dict()["block"] in blocks
        assert len(result.best.samples) >= 2 and result.best.median > 0 and result.stopped == "space exhausted"
        best = result.best.config.as_dict()["block"]
        paths = write_outputs(session, result, tmp_path / "out")
        assert paths["dd_line"].read_text() == f"dd if=/dev/zero of=/dev/null bs={best} count=8\n"
        ran = session.evaluator.ran
        assert ran == len(result.trials) > 0
        # every trial a stored ddcopy run, of a declared block and count, with a valid dd_rate
        rows = query(isolated_db, "SELECT r.benchmark, r.params, m.value, m.valid FROM runs r "
                                  "JOIN metrics m ON m.run_id = r.id AND m.name = 'dd_rate'")
        assert len(rows) == ran and {r["benchmark"] for r in rows} == {"ddcopy"}
        assert all(r["valid"] and r["value"] > 0 for r in rows)
        assert {(p["block"], p["count"]) for p in map(json.loads, (r["params"] for r in rows))} \
            <= {(b, c) for b in blocks for c in (4, 8)}
        # the same call again is the same session: every trial replayed from the store, none run, and
        # the model decides with the inputs it began with, though dd_rate values are stored now
        again = prepare(store, options, system, system_id=system.fingerprint())
        assert again.name == session.name and "as when this session began" in again.rates_source
        assert again.evaluator.rates == session.evaluator.rates
        replay = again.run()
        assert again.evaluator.ran == 0 and again.evaluator.replayed == len(replay.trials) == ran
        assert replay.best is not None and replay.best.config == result.best.config
        assert len(query(isolated_db, "SELECT id FROM runs")) == ran
    # a knob it does not declare, or a block dd would not take, is refused before anything runs
    with pytest.raises(UserInputError, match="ddcopy tunes only block"):
        prepare(None, TuneOptions(tuning=tuning, space={"bs": ["1M"]}), system)
    with pytest.raises(UserInputError, match="not a dd block size"):
        prepare(None, TuneOptions(tuning=tuning, space={"block": "1M,1X"}), system)
