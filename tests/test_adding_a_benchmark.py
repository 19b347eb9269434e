"""The one-module benchmark of docs/benchmarks.md, run as written: it runs in a campaign (through
the one run loop, real `dd`), `clusterbench import` recognises a log of old dd runs by its content
and stores each transfer, and the report's memory section draws both, though no import, report or
executor code names the benchmark. Removed from the registry, its log is not recognised."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from tests.conftest import ROOT, query

from clusterbench.analysis.select import Selection
from clusterbench.bench import registry
from clusterbench.campaign.expand import expand
from clusterbench.campaign.spec import parse_campaign
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
