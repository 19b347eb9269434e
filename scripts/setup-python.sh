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
# Byte-compile clusterbench on every set-up: with PYTHONDONTWRITEBYTECODE set (as in some CI images) an
# editable install would otherwise compile ~130 modules at every CLI start (about 0.2 s of each run's fixed
# cost). Python still checks each .pyc against its source, so an edited module is never run stale.
compile_sources() { "$venv/bin/python" -m compileall -q -j 0 src >/dev/null || true; }
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ]; then
  compile_sources
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e "$spec"
compile_sources
touch "$stamp"
