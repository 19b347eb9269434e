# The two commands a user needs: `make run` and `make test`.
# Both set up what they need first, so they work on a fresh Debian 12 machine as root:
#   make run    installs only what `clusterbench run` needs (compiler, Open MPI, BLAS variants, hpcc, hwloc)
#   make test   adds what the tests need (MPICH, Slurm, munge, sshd, Chromium, ...), all left disabled
VENV   ?= .venv
PY     := $(VENV)/bin/python
CB     := $(VENV)/bin/clusterbench

.PHONY: setup setup-run run test lint clean

setup-run:
	@scripts/setup-system.sh run
	@scripts/setup-python.sh $(VENV) run

setup:
	@scripts/setup-system.sh test
	@scripts/setup-python.sh $(VENV) test

run: setup-run
	$(CB) run $(ARGS)

# The tests run on every core (pytest-xdist, --dist loadgroup): the virtual cluster's tests go to one worker
# in order, the local real runs and builds (mpirun, timing) to another, the rest spread over the workers;
# the tests that compare the cluster's nodes run alone (tests/conftest.py). One pytest run, so its last
# line counts every test; the 25 slowest are listed above it. TEST_WORKERS=0: one process.
TEST_WORKERS ?= auto
test: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25 $(PYTEST_ARGS)

# ruff, then the import contracts in pyproject.toml ([tool.importlinter]; docs/architecture.md)
lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports --no-cache

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
