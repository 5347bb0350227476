# Every target installs what it needs into .venv; a fresh machine needs only Python 3.11.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup lab demo test test-integration bench build release clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# JupyterLab refuses to run as root unless told (containers, CI machines).
lab: setup
	$(BIN)/jupyter lab course/ $(if $(filter 0,$(shell id -u)),--allow-root)

demo: setup
	$(BIN)/grader demo

# Two workers on a 2-core machine: one file's tests stay on one worker (module fixtures), and
# the long nbgrader class run overlaps with the notebooks.
test: setup
	$(BIN)/python -m pytest -q -n $(or $(JOBS),2) --dist loadfile -m "not integration"

# The class end to end on real servers (JupyterHub, PostgreSQL, a Dask cluster): minutes each, so
# kept out of `make test`'s 15-minute budget; .ci/run runs both.
test-integration: setup
	$(BIN)/python -m pytest -q -n $(or $(JOBS),2) --dist loadfile -m integration

bench: setup
	$(BIN)/python benchmarks/bench.py

build: setup
	$(BIN)/grader build

release: setup
	$(BIN)/grader release

clean:
	rm -rf $(VENV) build .pytest_cache test-output
