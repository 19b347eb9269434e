"""The pandas API reads what the store holds."""

from __future__ import annotations

from clusterbench import api
from clusterbench.bench.metrics import Metric
from clusterbench.store.db import Store
from clusterbench.store.records import RunRecord


def test_metrics_dataframe(isolated_db):
    with Store() as store:
        for i, nb in enumerate((64, 128)):
            store.begin_run(RunRecord(id=f"r{i}", benchmark="hpl", params={"nb": nb}))
            store.finish_run(f"r{i}", "ok", True, None, 0, 1.0,
                             [Metric("hpl_gflops", 10.0 + i, "Gflop/s", labels={"nb": nb})])
    df = api.metrics(name="hpl_gflops", valid_only=True)
    assert list(df["value"]) == [10.0, 11.0]
    assert list(df["param.nb"]) == [64, 128] and list(df["run_id"]) == ["r0", "r1"]
    runs = api.runs(benchmark="hpl")
    assert set(runs["id"]) == {"r0", "r1"} and runs["params"][0]["nb"] in (64, 128)
