"""The one progress display of the commands that run benchmarks: `campaign run`, `bench`, `run`,
`run -w` (and the tuner's trials, under its own budget bar).

It is the engine's reporter (execution/loop.py `Reporter`, with `phase_started` for plans of
phases): one Rich bar whose description says what runs now (a run's block, repeat and key
parameters, or a phase's label, with the benchmark's own progress line when it prints one), how
many runs are done, the time elapsed and an ETA. The bar measures seconds when the plan's runs
have estimates (corrected as measured durations come in: loop.Eta), else runs. Nothing is drawn
with --json (`quiet`), and rich is not even imported then (`bench --json` starts without it); failed
runs and resume notices are printed above the bar.

Why one class: the same engine runs every plan, so the same events mean the same thing on the
screen whichever command started it; and an interrupt leaves through the `with` block, which
stops the bar before the CLI's one handler says what was stored.
"""

from __future__ import annotations

from collections.abc import Callable

SKIPPED_PARAMS = {"command", "metrics", "threshold", "binary", "valid_if", "invalid_if"}  # too long to show


def key_params(params: dict) -> str:
    """A run's parameters in one short line (long texts such as a command left out)."""
    return " ".join(f"{k}={v}" for k, v in params.items() if k not in SKIPPED_PARAMS)[:120] if params else ""


def _bar():
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from clusterbench.cli.shared import console

    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[runs]}"),
                    TimeElapsedColumn(), TextColumn("{task.fields[eta]}"), console=console, transient=True)


def escape(text: str) -> str:
    """Rich markup escaped (rich imported only when a bar is drawn)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def fmt_duration(seconds: float | None) -> str:
    """A duration as the CLI shows it; "?" when unknown."""
    from clusterbench.units import format_duration

    return "?" if seconds is None else format_duration(seconds)


class RunProgress:
    """execution.loop.Reporter drawn as one bar (see the module docstring). Use as a context manager."""

    def __init__(self, quiet: bool = False, label: Callable[[object], str] | None = None,
                 planned_s: float | None = None) -> None:
        self.quiet = quiet
        self.label = label or (lambda run: f"{run.block} r{run.repeat}: {key_params(run.recorded_params)}")
        self.planned_s = planned_s  # a time budget's estimate (run, run -w); else learned from the runs
        self.progress = None if quiet else _bar()
        self.task = None
        self.total_runs = 0
        self.finished = 0
        self.done_s = 0.0  # seconds of the runs or phases finished
        self.current = "starting"
        self.detail = ""
        self.remaining_s: float | None = None
        self.phased = False  # a plan of phases (run -w): the phase, not each of its runs, is shown

    def __enter__(self) -> RunProgress:
        if self.progress is not None:
            self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)

    def print(self, text: str) -> None:
        """A line above the bar (nothing with --json)."""
        if self.progress is not None:
            self.progress.console.print(text)

    # ------------------------------------------------------------------ the engine's events

    def start(self, pending, done, eta) -> None:
        self.total_runs = len(pending)
        self.remaining_s = eta.seconds()
        if self.progress is not None:
            self.task = self.progress.add_task("starting", total=None, runs="", eta="")
        self._draw(0.0)
        if done:
            self.print(f"resuming: {done} run(s) already stored are skipped")

    def phase_started(self, phase, done_s: float, planned_s: float) -> None:
        if self.progress is None:  # --json: nothing drawn, rich not imported
            return
        self.phased = True
        self.current, self.detail = escape(phase.label), ""
        self.done_s, self.planned_s = done_s, planned_s
        self._draw(0.0)

    def run_started(self, run) -> None:
        if self.progress is None:  # --json: nothing drawn, rich not imported
            return
        if not self.phased:
            self.current, self.detail = escape(self.label(run))[:70], ""
        self._draw(0.0)

    def tick(self, run, elapsed: float, detail: str | None) -> None:
        if self.progress is None:  # --json: nothing drawn, rich not imported
            return
        if detail:
            self.detail = escape(detail)
        self._draw(elapsed)

    def run_finished(self, run, result, eta) -> None:
        if self.progress is None:  # --json: nothing drawn, rich not imported
            return
        self.finished += 1
        self.remaining_s = eta.seconds()
        if not self.phased:  # a phase's seconds come with the next phase_started
            self.done_s += result.duration_s or 0.0
        if result.status != "ok":
            self.print(f"[yellow]{result.status}[/] {run.id}: {escape(result.reason or '')}")
        self._draw(0.0)

    def waiting(self, seconds: float, reason: str) -> None:
        if self.progress is None:  # --json: nothing drawn, rich not imported
            return
        self.current, self.detail = f"waiting {fmt_duration(seconds)} ({escape(reason)})", ""
        self._draw(0.0)

    def notice(self, text: str) -> None:
        if self.progress is None:  # --json: nothing drawn, rich not imported
            return
        self.print(f"[yellow]resumed[/] {escape(text)}")

    # ------------------------------------------------------------------ drawing

    def _draw(self, elapsed: float) -> None:
        if self.task is None:
            return
        done = self.done_s + elapsed
        if self.planned_s is not None:  # a budgeted job: seconds against its plan
            total, left = max(self.planned_s, done * 1.05), max(0.0, self.planned_s - done)
        elif self.remaining_s is not None:  # every run has an estimate: seconds, corrected by the measured
            total, left = done + self.remaining_s, self.remaining_s
        else:  # runs, the ETA unknown until each benchmark has a measured run
            total, done, left = float(self.total_runs or 1), float(self.finished), None
        runs = f"{self.finished}/{self.total_runs} runs" if self.total_runs > 1 else ""
        description = self.current + (f" · {self.detail}" if self.detail else "")
        self.progress.update(self.task, description=description[:70], completed=done, total=total, runs=runs,
                             eta=f"ETA {fmt_duration(left)}")
