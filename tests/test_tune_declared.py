"""The tuner tunes any benchmark that declares its tuning (bench/declare.py's `Tuning`), not only HPL:
a toy benchmark whose figure of merit is its knob, run for real (a `true` process per trial) and stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.bench import registry
from clusterbench.bench.base import Benchmark
from clusterbench.bench.declare import Tuning, TuningSpace
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.bench.params import Param
from clusterbench.errors import UserInputError
from clusterbench.store.db import Store
from clusterbench.system.discover import discover


class ToyTuning(Tuning):
    benchmark = "toy-tuned"
    merit = "toy_merit"
    merit_unit = "points"
    fidelity = "size"
    config_keys = ("knob",)
    cost_keys = ("knob",)
    startup_s = 0.05
    best_input = ("toy_input", "toy.txt")

    def space(self, system, nodes, user, *, option, fixed=None):
        if set(user) - {"knob"}:
            raise UserInputError(f"{option(next(iter(user)))}: toy-tuned has no such knob")
        return TuningSpace({"knob": list(user.get("knob", [1, 2, 3, 4]))}), dict(fixed or {})

    def levels(self, space, system, nodes, given, budget_s, inputs, levels, eta, option, where):
        return [10, given or 20][:levels]

    def model_inputs(self, stored, system, nodes, *, interconnect=None):
        return {"per_size_s": 0.001}, "toy rates (assumed)"

    def inputs_dict(self, inputs):
        return dict(inputs)

    def inputs_from(self, kept):
        return {"per_size_s": float(kept["per_size_s"])}

    def solve_s(self, point, nodes, inputs, *, blas_threads=False):
        return inputs["per_size_s"] * point["size"]

    def predicted_merit(self, point, seconds):
        return float(point["knob"])

    def render_input(self, point):
        return f"size={point['size']} knob={point['knob']}\n"


class ToyTuned(Benchmark):
    """A toy with a tuning declaration: its merit is its knob."""

    name = "toy-tuned"
    tuning = ToyTuning()
    parameters = (Param("size", int, 10, "problem size", minimum=1), Param("knob", int, 1, "the knob", minimum=1),
                  Param("nodes", int, 1, "nodes", minimum=1))

    def __init__(self, point: dict):
        self.point = point

    @classmethod
    def from_point(cls, point: dict) -> ToyTuned:
        return cls(dict(point))

    def params(self) -> dict:
        return dict(self.point)

    def command(self) -> list[str]:
        return ["true"]

    def parse(self, workdir: Path) -> Outcome:
        return Outcome([Metric("toy_merit", float(self.point["knob"]), "points")])


@pytest.fixture
def toy():
    registry.register(ToyTuned)
    try:
        yield ToyTuned
    finally:
        registry._registered.pop("toy-tuned", None)
        if "BENCHMARKS" in vars(registry):
            registry.BENCHMARKS.pop("toy-tuned", None)


def test_a_declared_benchmark_is_tuned_stored_and_resumed(toy, isolated_db, tmp_path):
    from clusterbench.tune.session import TuneOptions, prepare, summary, write_outputs

    system = discover()
    options = TuneOptions(budget_s=60, levels=2, eta=2, repeats=2, tuning=toy.tuning, space={"knob": [1, 2, 3, 4]})
    with Store(isolated_db) as store:
        store.remember_system(system)
        session = prepare(store, options, system, system_id=system.fingerprint())
        assert session.name.startswith("tune-toy-tuned-") and session.tspace.fidelities == [10, 20]
        result = session.run()
        assert result.best is not None and result.best.config.as_dict() == {"knob": 4}
        info = summary(session, result)
        assert info["best"]["n"] == 20 and info["best"]["params"] == {"knob": 4}
        paths = write_outputs(session, result, tmp_path / "out")
        assert paths["toy_input"].read_text() == "size=20 knob=4\n"
        stored = {r["benchmark"] for r in store.find_runs(("id", "benchmark"))}
        assert stored == {"toy-tuned"}
        again = prepare(store, options, system, system_id=system.fingerprint())
        assert again.name == session.name
        replay = again.run()
        assert again.evaluator.ran == 0 and again.evaluator.replayed == len(replay.trials) > 0
    with pytest.raises(UserInputError, match="no such knob"):
        prepare(None, TuneOptions(tuning=toy.tuning, space={"other": [1]}), system)
