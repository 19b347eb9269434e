#!/usr/bin/env bash
# Create the virtual environment and install clusterbench into it (editable), once per level:
#   run   the package and its dependencies
#   test  the same plus the dev extras (pytest, ruff, import-linter, build)
# A stamp per level, newer than pyproject.toml, skips the pip step on the next call.
set -euo pipefail
venv=${1:-.venv}
level=${2:-test}
python=${PYTHON:-python3}
case "$level" in
  run) spec="." ;;
  test) spec=".[dev]" ;;
  *) echo "setup-python: unknown level '$level' (use: run or test)" >&2; exit 2 ;;
esac
stamp="$venv/.installed-$level"
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ]; then
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e "$spec"
touch "$stamp"
