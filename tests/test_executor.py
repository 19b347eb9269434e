"""The executor with real processes: timeouts kill the whole tree, crashes are recorded."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from clusterbench.bench.base import Benchmark
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.execution.executor import RunRequest, execute
from clusterbench.store.db import Store


@dataclass
class Shell(Benchmark):
    """A stand-in benchmark: a shell script whose stdout is its metric."""

    script: str
    name: str = "shell"

    def params(self) -> dict:
        return {"script": self.script}

    def command(self) -> list[str]:
        return ["bash", "-c", self.script]

    def parse(self, workdir: Path) -> Outcome:
        text = (workdir / "stdout.txt").read_text().strip()
        out = Outcome()
        try:
            out.metrics.append(Metric("value", float(text.splitlines()[-1]), "x"))
        except (ValueError, IndexError):
            out.invalidate("no number printed")
        return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}").exists() else "X"
    return status != "Z"


def test_ok_run(tmp_path):
    with Store(tmp_path / "r.db") as store:
        res = execute(store, RunRequest(Shell("echo 42")))
        assert res.status == "ok" and res.valid
        assert store.metrics(res.id)[0]["value"] == 42
        assert (res.workdir / "run.json").is_file()


def test_timeout_kills_the_process_tree(tmp_path):
    pidfile = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {pidfile}; wait"
    with Store(tmp_path / "r.db") as store:
        t0 = time.monotonic()
        res = execute(store, RunRequest(Shell(script), timeout_s=1.5))
        assert time.monotonic() - t0 < 15
        assert res.status == "timeout" and not res.valid
        assert "timeout" in store.run(res.id)["reason"]
    child = int(pidfile.read_text())
    assert not _alive(child)


def test_crash_is_recorded(tmp_path):
    with Store(tmp_path / "r.db") as store:
        res = execute(store, RunRequest(Shell("echo boom >&2; exit 3")))
        row = store.run(res.id)
        assert (row["status"], row["exit_code"], row["valid"]) == ("failed", 3, 0)
        assert "boom" in row["reason"]
