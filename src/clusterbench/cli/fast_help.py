"""`clusterbench --help` without typer or rich: the list of commands, printed in plain text.

Why: typer builds every command's options (18 modules, ~80 functions' annotations), then imports
rich's help renderer (markdown, syntax highlighting) and lays the panels out: about 0.3-0.4 s on a
quiet 2-core machine, where the issue asks for 0.2 s. The top-level help needs none of that,
only one line per command. `clusterbench COMMAND --help` is still typer's, in full.

SUMMARIES is the first sentence of each command's own help; tests/test_run_overhead.py checks that
it is exactly what the registered commands say, so an edited docstring fails that test until this
table says the same.
"""

from __future__ import annotations

import shutil
import textwrap

ABOUT = ("Measure, tune and compare the performance of HPC systems: HPL, HPCC, STREAM, DGEMM, ping-pong. "
         "Start with `clusterbench run`.")
OPTIONS = (  # the main options (cli/app.py main_options), in its order
    ("--db PATH", "Results database (default: $CLUSTERBENCH_DB or $XDG_DATA_HOME/clusterbench/results.db)."),
    ("--limit NAME=VALUE", "Raise or lower one of the bounds on what input may make clusterbench build, for this "
                           "command (repeatable), e.g. --limit max_runs=200000."),
    ("--quiet-check LIMIT", "Before each run, wait up to LIMIT (e.g. 2m) for its nodes to be quiet (no other work "
                            "on their CPUs, no steal), else refuse with what keeps them busy (exit 1)."),
    ("-V, --version", "Print the version and exit."),
    ("--help", "Show this message and exit."),
)
# Each command in the order typer lists it, with the first sentence of its help.
SUMMARIES = {
    "benchmarks": "The benchmark modules, whether each can run on this machine, and their parameters.",
    "bench": "Run one benchmark once (or --repeats times), store it like any run, print its metrics.",
    "schema": "Print the JSON Schema of campaign files (for editors and CI validation).",
    "diff": "What differs between two runs: parameters, the nodes' settings, MPI parameters, hardware, software, "
            "environment and launcher.",
    "history": "A metric over time, per configuration, with its change points (E-Divisive means, a permutation test "
               "at p <= 0.01) and one verdict per series: regression, improvement, no change beyond the noise, or "
               "too few values to judge (need at least 10: fewer can never reach p <= 0.01).",
    "import": "Recognise HPL, HPCC, HPCG, IMB, OSU and STREAM outputs by content and store each result.",
    "pin": "Predict where every task and thread of a launch runs: picture, masks or JSON; nothing is run.",
    "plan": "Plan HPL (N per NB, grids, layouts, input files), or list a campaign file's runs and time.",
    "report": "Write an HTML report (self-contained, printable), the same as Markdown, and the CSV behind every "
              "figure and table.",
    "compare": "Baseline against candidate, pair by pair of the same configuration: first one verdict (the geometric "
               "mean of candidate/baseline with its 95% interval, significant changes either way), then per pair "
               "the means, the change in %, a p-value and n.",
    "results": "List stored runs with their key metric, export every metric, or summarise repeats.",
    "run": "Discover this machine, run HPCC sized to the budget, store everything, summarise.",
    "tag": "Set tags on the stored runs a selection holds: clusterbench tag source:import system=pi4-cluster.",
    "untag": "Remove tags from the stored runs a selection holds: clusterbench untag campaign:old system.",
    "exclude": "Keep runs stored but out of bests, baselines, history and the tuner, with a reason.",
    "include": "Count excluded runs again (undoes `clusterbench exclude`).",
    "note": "Add a note to a stored run: `results RUN` and the report show it.",
    "noise": "The noise floor per system, benchmark, configuration and metric, from 3+ counted repeats.",
    "ceilings": "What each stored system can do: FMA peak, DGEMM per cores and BLAS, STREAM Triad per thread count.",
    "explain": "A run against its node's ceilings (DGEMM x cores, FMA peak, Rpeak; Triad) and its bottleneck.",
    "build": "Build official benchmarks (HPL, HPCG, IMB, OSU, STREAM, LULESH) for this cluster, with provenance.",
    "campaign": "Declarative sweeps: run a campaign file, resume it, list campaigns.",
    "cluster": "Nodes of a cluster: facts, preflight checks, a command on all, BLAS.",
    "db": "The results database: check its integrity, back it up, upgrade its schema, delete runs.",
    "system": "This node: topology, MPI, Rpeak (no subcommand); the settings a campaign may change (settings); "
              "restoring them after a crash (restore).",
    "tune": "Find the best configuration of a benchmark within a time budget (HPL).",
}


def _rows(pairs, width: int) -> list[str]:
    """Two columns, the second wrapped to the terminal, as click lays out its help."""
    first = min(max(len(name) for name, _ in pairs), 24) + 4
    out = []
    for name, text in pairs:
        lines = textwrap.wrap(text, max(width - first, 30)) or [""]
        if len(name) + 4 > first:
            out.append(f"  {name}")
            out += [" " * first + line for line in lines]
        else:
            out.append(f"  {name:<{first - 2}}{lines[0]}")
            out += [" " * first + line for line in lines[1:]]
    return out


def text(prog: str = "clusterbench") -> str:
    width = min(shutil.get_terminal_size((100, 24)).columns, 120)
    lines = [f"Usage: {prog} [OPTIONS] COMMAND [ARGS]...", "", *textwrap.wrap(ABOUT, width - 2, initial_indent="  ",
                                                                              subsequent_indent="  "),
             "", "Options:", *_rows(OPTIONS, width), "", "Commands:", *_rows(SUMMARIES.items(), width), "",
             f"  {prog} COMMAND --help: the options of one command."]
    return "\n".join(lines)
