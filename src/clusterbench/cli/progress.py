"""The one progress display of the commands that run benchmarks: `campaign run`, `bench`, `run`,
`run -w` (and the tuner's trials, under its own budget bar).

It is the engine's reporter (execution/loop.py `Reporter`, with `phase_started` for plans of
phases): one Rich bar whose description says what runs now (a run's block, repeat and key
parameters, or a phase's label, with the benchmark's own progress line when it prints one), how
many runs are done, the time elapsed and an ETA. The bar measures seconds when the plan's runs
have estimates (corrected as measured durations come in: loop.Eta), else runs. Nothing is drawn
with --json (`quiet`), and rich is not even imported then (`bench --json` starts without it); failed
runs and resume notices are printed above the bar. On any terminal the bar (a quarter of its
width), the count, the elapsed time and the ETA keep their width, and the description is shortened
to the columns left (`bar_column`, `room`): Rich's own shrinking took the bar first, down to nothing,
when a description was long (issue 36).

Why one class: the same engine runs every plan, so the same events mean the same thing on the
screen whichever command started it; and an interrupt leaves through the `with` block, which
stops the bar before the CLI's one handler says what was stored.
"""

from __future__ import annotations

from collections.abc import Callable

SKIPPED_PARAMS = {"command", "metrics", "threshold", "binary", "valid_if", "invalid_if"}  # too long to show
BAR_WIDTH = (10, 40)  # the bar's width: a quarter of the terminal, within these
LEAST_TEXT = 12  # a description is never shortened below this (a terminal narrower than ~60 columns wraps it)


def key_params(params: dict) -> str:
    """A run's parameters in one short line (long texts such as a command left out)."""
    return " ".join(f"{k}={v}" for k, v in params.items() if k not in SKIPPED_PARAMS)[:120] if params else ""


def bar_column(width: int):
    """The bar of a progress display on a terminal `width` wide: of a fixed width (a quarter of the
    terminal, 10 to 40), in a column Rich never shrinks. Why: Rich's progress table shrinks the columns
    it may wrap when a row is too wide, the bar first, down to nothing: a long description (a campaign
    run's every parameter, a tuner trial's configuration) made the bar and the count disappear."""
    from rich.progress import BarColumn
    from rich.table import Column

    size = max(BAR_WIDTH[0], min(BAR_WIDTH[1], width // 4))
    return BarColumn(bar_width=size, table_column=Column(no_wrap=True, width=size))


def text_column(template: str, shrinks: bool = False):
    """A text column of a progress display; `shrinks`: the description, the one column Rich may wrap
    when the line is still too wide (a terminal narrower than the bar and the counts), so the bar stays."""
    from rich.progress import TextColumn
    from rich.table import Column

    return TextColumn(template, table_column=Column(no_wrap=not shrinks, overflow="fold"))


def room(width: int, bar: int, *beside: str) -> int:
    """How many columns a description may take on a line `width` wide, beside a bar `bar` wide and the
    texts `beside` (counts, elapsed time, ETA), each column with the one-space gap Rich puts after it
    (an empty one still takes one column), and one column spare."""
    return max(LEAST_TEXT, width - bar - sum(max(1, len(text)) for text in beside) - (len(beside) + 1) - 1)


def shortened(text: str, most: int) -> str:
    """`text` in at most `most` terminal columns: its end cut and marked with '…' when longer (a wide
    character, such as a CJK one, counts as two)."""
    from rich.cells import cell_len, set_cell_size

    return text if cell_len(text) <= most else set_cell_size(text, max(0, most - 1)) + "…"


def elapsed_text(seconds: float | None) -> str:
    """What Rich's TimeElapsedColumn shows for `seconds` ('0:01:05'; '-:--:--' before the start)."""
    from datetime import timedelta

    return "-:--:--" if seconds is None else str(timedelta(seconds=max(0, int(seconds))))


def _bar():
    from rich.progress import Progress, TimeElapsedColumn

    from clusterbench.cli.shared import console

    return Progress(text_column("{task.description}", shrinks=True), bar_column(console.width),
                    text_column("{task.fields[runs]}"), TimeElapsedColumn(), text_column("{task.fields[eta]}"),
                    console=console, transient=True)


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
        self.current, self.detail = str(phase.label), ""
        self.done_s, self.planned_s = done_s, planned_s
        self._draw(0.0)

    def run_started(self, run) -> None:
        if self.progress is None:  # --json: nothing drawn, rich not imported
            return
        if not self.phased:
            self.current, self.detail = self.label(run), ""
        self._draw(0.0)

    def tick(self, run, elapsed: float, detail: str | None) -> None:
        if self.progress is None:  # --json: nothing drawn, rich not imported
            return
        if detail:
            self.detail = detail
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
        self.current, self.detail = f"waiting {fmt_duration(seconds)} ({reason})", ""
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
        eta = f"ETA {fmt_duration(left)}"
        description = self.current + (f" · {self.detail}" if self.detail else "")
        description = "".join(c if c.isprintable() else " " for c in description)  # one line, whatever a tool printed
        task = next(t for t in self.progress.tasks if t.id == self.task)
        most = room(self.progress.console.width, self.progress.columns[1].bar_width, runs, elapsed_text(task.elapsed),
                    eta)  # the description is what gives way: the bar, the count and the ETA stay whole
        self.progress.update(self.task, description=escape(shortened(description, most)), completed=done,
                             total=total, runs=runs, eta=eta)
