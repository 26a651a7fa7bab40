# The two commands a new user needs: `make lab` and `make test`.
# Everything is installed from this repository's own files into .venv.

VENV        := .venv
BIN         := $(CURDIR)/$(VENV)/bin
PY          := $(BIN)/python
PIP         := $(PY) -m pip --disable-pip-version-check -q
STAMPS      := .stamps
NOTEBOOK    := examples/gradient-check-notebook.ipynb
export PATH := $(BIN):$(PATH)
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD := 1

TS_SOURCES  := $(shell find src style schema -type f 2>/dev/null) package.json tsconfig.json

.PHONY: setup lab test lint test-python test-js test-ui test-hub test-wheel bench bench-quick bench-opinfo bench-load fuzz clean

setup: $(STAMPS)/install

# torch first and pinned: an unpinned torch resolves to a multi-GB CUDA build.
$(STAMPS)/venv:
	python3 -m venv $(VENV)
	$(PIP) install torch==2.13.0 numpy
	$(PIP) install 'jupyterlab>=4.5,<5' 'jupyter-builder>=1.2,<2' hatchling hatch-nodejs-version \
		'hatch-jupyter-builder>=0.5' editables
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/node: $(STAMPS)/venv package.json
	jlpm install
	@touch $@

# Build the prebuilt lab extension first, then install (see docs/development.md).
labextension/package.json: $(STAMPS)/node $(TS_SOURCES)
	jlpm build:prod

$(STAMPS)/install: labextension/package.json pyproject.toml
	$(PIP) install --no-build-isolation -e '.[test,grading]'
	@touch $@

# Extra options for `jupyter lab`, e.g. LAB_OPTS="--no-browser --port 8890".
LAB_OPTS    ?=
ROOT_OPT    := $(if $(filter 0,$(shell id -u)),--allow-root,)

# The server root is examples/; JupyterLab opens on the English notebook.
lab: setup
	jupyter lab $(ROOT_OPT) --ServerApp.root_dir=$(dir $(NOTEBOOK)) \
		--LabApp.default_url=/lab/tree/$(notdir $(NOTEBOOK)) $(LAB_OPTS)

test: setup lint test-python test-js test-wheel test-ui test-hub bench-quick

# The field's habits, with 0 findings: ruff lints and formats the Python; stylelint, prettier and
# eslint (jlpm lint:check, configured as the JupyterLab extension template does) the front end; and
# every message of the Python and the front end has its Spanish (scripts/i18n_catalog.py --check).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	jlpm lint:check
	$(PY) scripts/i18n_catalog.py --check

# Chromium first: the HTML report's rendering test needs it, and would only be skipped without it.
# The suite runs on PYTEST_WORKERS processes, each taking one test file at a time (module fixtures
# stay in one process); PYTEST_WORKERS=0 runs it in this process.
PYTEST_WORKERS ?= 2
test-python: setup
	bash scripts/install-chromium.sh
	$(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile

test-js: setup
	jlpm test

test-wheel: setup
	bash scripts/check-wheel.sh

test-ui: setup
	bash scripts/ui-tests.sh

test-hub: setup
	bash scripts/hub-tests.sh

bench: setup
	$(PY) -m benchmarks

bench-quick: setup
	$(PY) -m benchmarks --quick

# B5 alone: PyTorch's OpInfo database through our check and gradcheck, three families (about 6-12 min);
# writes benchmarks/opinfo.md with every disagreement. `make bench` runs B5 with the others.
bench-opinfo: setup
	$(PY) -m benchmarks.bench_opinfo

# B7 alone: load and faults on a real jupyter server (about 7 min); writes benchmarks/load.md.
# `make bench` runs B7 with the others.
bench-load: setup
	$(PY) -m benchmarks.bench_load

fuzz: setup
	$(PIP) install -e '.[test,fuzz]' --no-build-isolation
	bash scripts/fuzz.sh

clean:
	rm -rf $(STAMPS) $(VENV) node_modules lib labextension ui-tests/node_modules
