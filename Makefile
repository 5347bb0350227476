# Every target installs what it needs into .venv; a fresh machine needs only Python 3.11.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup lab lab-zh demo lint sources test test-integration bench build release site clean hub hub-setup lti-platform-setup

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# JupyterLab refuses to run as root unless told (containers, CI machines).
lab: setup
	$(BIN)/jupyter lab course/ $(if $(filter 0,$(shell id -u)),--allow-root)

lab-zh: setup
	$(BIN)/jupyter lab course/zh/ $(if $(filter 0,$(shell id -u)),--allow-root)

demo: sources
	$(BIN)/grader demo

# ruff's linter (configured in pyproject.toml; never its formatter): `make test` runs it first.
lint: setup
	$(BIN)/ruff check .

# The nbgrader source folders grader/source*/ are generated from chapters/, not committed: built here,
# once, before anything reads them (only the stale ones: about a second when all are fresh, 25 s from
# nothing). Test workers only check them (tests/conftest.py); a `grader` command builds what it lacks.
sources: setup
	$(BIN)/grader build --quiet

# Two workers on a 2-core machine: one file's tests stay on one worker (module fixtures); the notebook runs
# are two files (English, translated) so that both workers share them. (`--dist loadgroup` cannot split a
# file here: pytest 9 ignores the group suffix pytest-xdist 3.8 writes into each test's id.)
test: setup lint sources
	$(BIN)/python -m pytest -q -n $(or $(JOBS),2) --dist loadfile -m "not integration"

# The class end to end on real servers (JupyterHub, PostgreSQL, a Dask cluster): minutes each, so
# kept out of `make test`, as are the website's cold build (tests/test_site.py, which runs the 18 reference
# notebooks), the LTI platform's tests, `make lab` in Chromium (tests/test_browser.py) and the red team's class
# batches under real time limits (tests/adversarial: the class of attacks, the rush, the stopped clocks: about
# 5 min of one worker); .ci/run runs both.
test-integration: sources hub-setup lti-platform-setup
	$(BIN)/python -m pytest -q -n $(or $(JOBS),2) --dist loadfile -m integration

# JupyterHub from PyPI into .venv, configurable-http-proxy from npm into .hub/ (the npm and node
# of the system: .ci/run installs them where they are missing).
HUB_STAMP := $(VENV)/.hub-installed
PROXY     := .hub/node_modules/.bin/configurable-http-proxy
CHP_VERSION := 5.1.0  # Node.js 18 or later (Debian 12 packages 18)

hub-setup: $(HUB_STAMP) $(PROXY)

$(HUB_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,hub]'
	touch $(HUB_STAMP)

$(PROXY):
	mkdir -p .hub
	npm install --prefix .hub --no-audit --no-fund --loglevel=error configurable-http-proxy@$(CHP_VERSION)

# The LTI 1.3 platform the integration tests launch the hub from (tests/lti_platform.py): Open edX's
# lti-consumer-xblock from PyPI, pinned, in its own virtualenv (its Django stays out of .venv). About 40 s to
# install once; each test's platform then starts in about 6 s (migrations of a fresh SQLite database).
LTI_PLATFORM_VENV  := .lti-platform/venv
LTI_PLATFORM_STAMP := $(LTI_PLATFORM_VENV)/.installed
LTI_PLATFORM_REQS  := tests/lti_platform_site/requirements.txt

lti-platform-setup: $(LTI_PLATFORM_STAMP)

$(LTI_PLATFORM_STAMP): $(LTI_PLATFORM_REQS)
	test -x $(LTI_PLATFORM_VENV)/bin/python || $(PYTHON) -m venv $(LTI_PLATFORM_VENV)
	$(LTI_PLATFORM_VENV)/bin/python -m pip install -q --upgrade pip
	$(LTI_PLATFORM_VENV)/bin/python -m pip install -q --no-deps -r $(LTI_PLATFORM_REQS)
	touch $(LTI_PLATFORM_STAMP)

# A try-out class on this machine: deploy/jupyterhub/ with the simple spawner and one password, on a
# free port (HUB_PORT=8000 to choose; the hub's API on HUB_API_PORT, default 8081), learners HUB_LEARNERS,
# graders HUB_GRADERS (default ta1: the shared Formgrader at /services/formgrader/). Not for a real
# class: every learner can read the answers (guides/teaching.md: A try-out is not a class; deploy/jupyterhub/setup-class.sh).
# `exec`: the hub is make's own child, so stopping make (Ctrl-C, kill) stops the hub, which stops its
# proxy, servers and grading service.
HUB_STATE ?= $(CURDIR)/.hub/state
hub: sources hub-setup
	mkdir -p $(HUB_STATE)/exchange && chmod 1777 $(HUB_STATE)/exchange
	cd $(HUB_STATE) && exec env COURSE_HUB_PORT=$${HUB_PORT:-$$($(CURDIR)/$(BIN)/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')} \
	    COURSE_HUB_API_PORT=$${HUB_API_PORT:-8081} \
	    COURSE_HUB_STATE=$(HUB_STATE) COURSE_EXCHANGE_ROOT=$(HUB_STATE)/exchange COURSE_HUB_SPAWNER=simple \
	    COURSE_HUB_AUTHENTICATOR=dummy COURSE_HUB_PASSWORD=$${HUB_PASSWORD:-try-out} \
	    COURSE_LEARNERS=$${HUB_LEARNERS:-learner1,learner2} COURSE_GRADERS=$${HUB_GRADERS:-ta1} $(CURDIR)/$(BIN)/jupyterhub -f $(CURDIR)/deploy/jupyterhub/jupyterhub_config.py

bench: sources
	$(BIN)/python benchmarks/bench.py

build: setup
	$(BIN)/grader build

release: sources
	$(BIN)/grader release

# The course as a static website, offline (grader.website): site/_build/html/ (English; zh/ the Chinese
# edition). The reference runs that draw the demo cells' plots are cached in site/_cache/ by content: a
# fresh build runs all 18 notebooks (SITE_JOBS at a time, default 2), the Chinese ones putting the English
# runs' trainings in place (grader.website.share): 280-350 CPU-s, 5-6 min on 2 loaded cores, about 3 on 2
# quiet ones (benchmarks/website.py); a rebuild runs only what changed.
site: sources  # the reference runs execute the built source notebooks
	$(BIN)/python -m grader.website

clean:
	rm -rf $(VENV) build .pytest_cache test-output .hub .lti-platform site grader/source grader/source-* grader/.build.lock
