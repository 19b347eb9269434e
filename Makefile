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

# The tests run in xdist workers (--dist loadgroup): the virtual cluster's tests go to one worker in order,
# the local real runs (mpirun, timing) to another, the builds of the official codes to a third, the
# pure-Python modules to whichever is free; the tests that compare the cluster's nodes run alone, first
# (tests/conftest.py). At least 3 workers, even on 2 cores: a worker takes new modules only when its group is
# nearly done, so with 2 the pure modules all waited for the two groups (5 of the suite's 21 minutes), and
# the cluster's tests spend much of their time waiting on ssh, Slurm and sleeps. One pytest run, so its last line counts every test; the 25 slowest are
# listed above it. TEST_WORKERS=0: one process.
TEST_WORKERS ?= $(shell n=$$(nproc); echo $$(( n < 3 ? 3 : n )))
test: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25 $(PYTEST_ARGS)

# ruff, then the import contracts in pyproject.toml ([tool.importlinter]; docs/architecture.md)
lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports --no-cache

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
