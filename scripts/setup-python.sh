#!/usr/bin/env bash
# Create the virtual environment and install clusterbench with its dev extras (editable).
set -euo pipefail
venv=${1:-.venv}
python=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e ".[dev]"
