"""What the commands share besides typer: the consoles, the main options, the results store, and
`key=value` options.

Here rather than in cli/app.py so that what runs without typer (cli/plain.py, the error messages
of cli.main) does not import typer to reach them; cli/app.py re-exports them for the commands.
"""

from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def apply_main_options(db: str | None, limit: list[str] | None) -> None:
    """What the main options do (cli/app.py main_options, and cli/plain.py): --db PATH
    sets $CLUSTERBENCH_DB, each --limit NAME=VALUE overrides one bound for this command."""
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


def open_store(read_only: bool = False):
    """The results database. Read commands pass read_only=True: SQLite's read-only mode, which also
    reads a database on a read-only mount, and never creates a database that does not exist."""
    from clusterbench.store.db import Store

    return Store(read_only=read_only)


def parse_assignments(items: list[str], option: str = "-p", example: str = "n=2000") -> dict:
    """['n=2000', 'bind_to=core'] -> {'n': 2000, 'bind_to': 'core'}: values read as YAML scalars,
    as they would be in a campaign file."""
    import yaml

    from clusterbench.errors import UserInputError

    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UserInputError(f"invalid {option} {item!r}",
                                 hint=f"write {option} key=value, e.g. {option} {example}")
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            out[key.strip()] = raw
    return out
