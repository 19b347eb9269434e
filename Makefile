# The two commands a user needs: `make run` and `make test`.
# Both run `make setup` first, so they work on a fresh Debian 12 machine as root.
VENV   ?= .venv
PY     := $(VENV)/bin/python
CB     := $(VENV)/bin/clusterbench
STAMP  := $(VENV)/.installed

.PHONY: setup run test lint clean

setup:
	@scripts/setup-system.sh
	@$(MAKE) --no-print-directory $(STAMP)

$(STAMP): pyproject.toml
	@scripts/setup-python.sh $(VENV)
	@touch $(STAMP)

run: setup
	$(CB) run $(ARGS)

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
