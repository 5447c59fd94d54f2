# Every target creates .venv and installs what it needs; nothing else is assumed on the machine
# but Python 3.11, Java 17 (for embedded PySpark) and Node 20 (for the CDK CLI).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
CHECKOV_VENV := .venv-checkov
DEMO_WORKSPACE ?= .lakeline-demo
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: demo test check lint typecheck pytest install synth checkov clean

$(BIN)/python:
	@echo "make: creating $(VENV); the first install builds PySpark from its ~456 MB source archive (minutes), then pip caches it"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The local runtime, exactly what `pip install 'lakeline[local]'` gives a user: what `make demo` needs.
# constraints.txt pins the versions the tests passed with.
$(VENV)/.installed-run: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[local]'
	touch $@

# Everything: the runtime plus test, lint and type-check tools.
$(VENV)/.installed-dev: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@ $(VENV)/.installed-run

# The CDK CLI (pinned to the 2.x line), the lineage viewer's layout library (vendored into the package:
# tests/unit/test_lineage_html.py keeps the copy equal), ESLint (lints its JS and CSS) and the ASL interpreter
# the rehearsal runs the synthesized state machines with (aws-local-stepfunctions), all in package.json.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# checkov (scans the synthesized templates, tests/infrastructure/test_cdk_synth.py) in a venv of its own: it pins
# boto3 1.35.x, which conflicts with constraints.txt. Its own pins are in constraints-checkov.txt.
$(CHECKOV_VENV)/.installed: constraints-checkov.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -c constraints-checkov.txt checkov
	touch $@

checkov: $(CHECKOV_VENV)/.installed

install: $(VENV)/.installed-dev node_modules/.installed $(CHECKOV_VENV)/.installed

synth: $(VENV)/.installed-dev node_modules/.installed
	npx cdk synth --quiet

# The system users deploy, stood up on this machine: synth, a local AWS endpoint, the state machines run by
# the ASL interpreter from node_modules.
demo: $(VENV)/.installed-run node_modules/.installed
	$(BIN)/lakeline demo --workspace $(DEMO_WORKSPACE)

# ESLint checks the lineage viewer's JS and CSS and the rehearsal's Node script (eslint.config.mjs; the vendored
# layout library left out).
lint: $(VENV)/.installed-dev node_modules/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	npx --no-install eslint --max-warnings 0 lakeline/lineage/viewer/assets lakeline/runtimes/deployed/local_aws eslint.config.mjs

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

# Two tests at a time (pytest-xdist): the suite mostly waits (process, JVM and Node start-ups, the local
# deployment's stand-ups), so two workers on the 2-core machine take about half the wall time. Each worker runs
# whole units (tests/conftest.py: a module, the rehearsal tier, the handler and infrastructure tiers together).
# PYTEST_WORKERS=0 runs in one process. pytest's exit code stands: 5 when no test ran, 1 when any worker's failed.
PYTEST_WORKERS ?= 2
pytest: $(VENV)/.installed-dev node_modules/.installed $(CHECKOV_VENV)/.installed
	bash scripts/ensure-chromium.sh
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadscope

check: lint typecheck

test: check pytest

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(DEMO_WORKSPACE) .pytest_cache .mypy_cache .ruff_cache cdk.out
