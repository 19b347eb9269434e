"""What the commands share besides typer: the consoles, the main options, the results store, and
`key=value` options.

Here rather than in cli/app.py so that what runs without typer (cli/plain.py, the error messages
of cli.main) does not import typer to reach them; cli/app.py re-exports them for the commands.

`console` and `err_console` are made when first asked for (`from clusterbench.cli.shared import
console` asks): a command that prints no rich output, such as `bench --json`, never imports rich
(about 0.06 s of CPU at every start).
"""

import re

# a `-p`/`--tag` value YAML reads plainly: a decimal integer or fraction without leading zeros, or a word
_YAML_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_YAML_FLOAT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\.[0-9]+")
_YAML_WORD = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*")
# the words among those that YAML 1.1 (PyYAML's safe_load) reads as true, false or null
_YAML_WORDS = {w: True for w in ("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")} | {
    w: False for w in ("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")} | {
    w: None for w in ("null", "Null", "NULL")}


def __getattr__(name: str):
    """The consoles, made on first use (PEP 562)."""
    if name in ("console", "err_console"):
        from rich.console import Console

        made = globals().setdefault(name, Console(stderr=name == "err_console"))
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def modules_loaded() -> None:
    """The command's modules are loaded (cli.main turned the collector off for the imports: what they
    make lives to the end, and each collection over it found nothing, 20-40 ms of every start here):
    exempt all of it from the collector (gc.freeze) and collect from here on, over what the command
    makes. Harmless where the collector was on (typer's path)."""
    import gc

    gc.freeze()
    gc.enable()


def apply_main_options(db: str | None, limit: list[str] | None, quiet_check: str | None = None) -> None:
    """What the main options do (cli/app.py main_options, and cli/plain.py): --db PATH
    sets $CLUSTERBENCH_DB, each --limit NAME=VALUE overrides one bound for this command,
    --quiet-check LIMIT sets $CLUSTERBENCH_QUIET_CHECK (seconds) for execution/quiet.py."""
    import os

    from clusterbench import limits
    from clusterbench.errors import UserInputError

    if db:
        os.environ["CLUSTERBENCH_DB"] = db
    for item in limit or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserInputError(f"invalid --limit {item!r}",
                                 hint="write --limit NAME=VALUE, e.g. --limit max_runs=200000; limits: "
                                      + ", ".join(sorted(limits.LIMITS)))
        limits.override(name.strip(), value.strip())
    if quiet_check is not None:
        from clusterbench.units import parse_duration

        seconds = parse_duration(quiet_check, "--quiet-check")
        if not 0 <= seconds <= 86400:
            raise UserInputError(f"--quiet-check {quiet_check!r} is not within 0 s .. 24 h",
                                 hint="give the longest wait for quiet nodes, e.g. --quiet-check 2m")
        os.environ["CLUSTERBENCH_QUIET_CHECK"] = repr(seconds)


def open_store(read_only: bool = False):
    """The results database. Read commands pass read_only=True: SQLite's read-only mode, which also
    reads a database on a read-only mount, and never creates a database that does not exist."""
    from clusterbench.store.db import Store

    return Store(read_only=read_only)


def parse_assignments(items: list[str], option: str = "-p", example: str = "n=2000") -> dict:
    """['n=2000', 'bind_to=core'] -> {'n': 2000, 'bind_to': 'core'}: values read as YAML scalars,
    as they would be in a campaign file."""
    from clusterbench.errors import UserInputError

    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UserInputError(f"invalid {option} {item!r}",
                                 hint=f"write {option} key=value, e.g. {option} {example}")
        out[key.strip()] = yaml_scalar(raw) if raw.strip() else ""
    return out


def yaml_scalar(raw: str):
    """`raw` read as YAML reads it (yaml.safe_load; the text itself when it is not valid YAML). The usual
    values (n=100000, bind_to=core, ratio=0.5, on/off) are read without importing PyYAML, which costs
    about 0.03 s of CPU at every start; anything else is left to it."""
    if _YAML_INT.fullmatch(raw):
        return int(raw)
    if _YAML_FLOAT.fullmatch(raw):
        return float(raw)
    if _YAML_WORD.fullmatch(raw):
        return _YAML_WORDS.get(raw, raw)
    import yaml

    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw
