# Every install step lives here: `make test` and `make demo` work on a fresh clone, and
# offline once .venv exists (the stamp below only re-installs when the pins change).
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv test demo lint fmt plan bench clean

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (Python 3.11) on PATH"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

test: venv
	$(PY) -m ruff check .
	$(PY) -m pytest -q

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

fmt: venv
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

demo: venv
	$(PY) -m trainforge demo

plan: venv
	$(PY) -m trainforge plan --stack dev --out build/plan/dev --json build/plan/dev.json

bench: venv
	$(PY) bench/throughput.py

clean:
	rm -rf $(VENV) build .pytest_cache
