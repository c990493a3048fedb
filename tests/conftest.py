"""Shared fixtures (keep small): the repository root and a mocked run of a stack file."""

import importlib.util
import os
import pathlib
import re
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_script(rel: str, name: str):
    """A repository script that is not a package module (bench/, tools/, mutation/) as a
    module, loaded from its file under ROOT."""
    spec = importlib.util.spec_from_file_location(name, ROOT / rel)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The planner merges the user's calibration file (~/.config/trainforge) into its facts: tests
# read an empty config home, never the developer's own measurements.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="trainforge-test-config-")

# The test process plans stacks in-process and keeps what it imported and planned (shipped_plan
# below): the cyclic collector's default thresholds walked that heap again and again, about a
# third of the CPU of a plan-heavy module (tests/plan/test_check_queues.py: 54 -> 37 CPU s).
# The plan CLI's own thresholds (trainforge.plan.runner.tune_gc; young cycles are still freed).
from trainforge.plan.runner import tune_gc  # noqa: E402 - after the environment above

tune_gc()


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    return ROOT


_SHIPPED_PLANS: dict = {}


def shipped_plan(stack: str):
    """`plan_project(ROOT, stack, standins=False)` of a shipped stack file as committed,
    planned once per test run: about twenty test modules read the same dev and prod plans,
    and each plan costs ~10-20 s on the 2-core machine. The result is shared: read it, never
    change it (a test that needs another config plans its own copy)."""
    if stack not in _SHIPPED_PLANS:
        from trainforge.plan.core import plan_project

        _SHIPPED_PLANS[stack] = plan_project(ROOT, stack, standins=False, echo_warnings=False)
    return _SHIPPED_PLANS[stack]


def once_per_run(tmp_path_factory, name: str, make) -> pathlib.Path:
    """The folder `make(folder)` fills, made once per test run: under xdist both workers use
    the run's shared temporary folder (.../pytest-N, above each worker's popen-gwK), the first
    one makes it under a lock, the other waits and reads it."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    out = base / name
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "done").is_file():
            out.mkdir(exist_ok=True)
            make(out)
            (out / "done").touch()
    return out


@pytest.fixture(scope="session")
def shipped_plan_out(tmp_path_factory):
    """`trainforge plan --stack STACK --no-standins --out DIR` of a shipped stack as committed,
    as a function of STACK: the folder a `--diff` test compares its changed copy with
    (tests/plan: test_plan_review.py, test_review_intent.py, test_plan_cost.py each planned the
    same prod base, ~3 CPU s each), made once per test run. Read it, never write into it."""

    def make(out: pathlib.Path, stack: str) -> None:
        from trainforge.plan import cli

        argv = ["--stack", stack, "--no-standins", "--project-dir", str(ROOT)]
        argv += ["--out", str(out / "plan"), "--report", str(out / "report.txt")]
        assert cli.main(argv) == 0, f"plan {' '.join(argv)} failed"

    def made(stack: str) -> pathlib.Path:
        name = f"shipped-plan-{stack}"
        return once_per_run(tmp_path_factory, name, lambda out: make(out, stack)) / "plan"

    return made


def project_files(dest: pathlib.Path) -> pathlib.Path:
    """A copy of the project as a newcomer has it: the program, every stack file the project
    ships (a fleet's manager plans its worker stacks too) and the examples its jobs run."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    for path in [ROOT / "Pulumi.yaml", *sorted(ROOT.glob("Pulumi.*.yaml")), ROOT / "__main__.py"]:
        shutil.copy(path, dest / path.name)
    shutil.copytree(ROOT / "examples", dest / "examples")
    return dest


def fake_aws(monkeypatch) -> None:
    """moto's stand-in credentials in the environment, and nothing that could send boto3 to a
    real endpoint or profile (the S3 mirror's tests, docs/checkpointing.md's errors)."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def cli_env() -> dict[str, str]:
    """The environment of a documented command (tests/test_docs_run.py): this checkout's
    trainforge, one thread per process, no test fault hooks."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_TEST_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


@pytest.fixture(scope="session")
def shipped_cli_run(tmp_path_factory):
    """`python -m trainforge ARGS...` in its own process, in a fresh copy of the project
    (project_files), as a function of ARGS: run once per test run for the tests that read the
    same command's exit code and output (the README's `trainforge plan --stack dev`: its doc
    test and tests/test_cli.py, each a ~8 CPU s plan process). Returns a CompletedProcess."""
    import hashlib
    import json
    import subprocess

    def make(out: pathlib.Path, args: list[str]) -> None:
        project = project_files(out / "project")
        proc = subprocess.run(
            [sys.executable, "-m", "trainforge", *args],
            cwd=project,
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        ran = {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
        (out / "ran.json").write_text(json.dumps(ran))

    def ran(args: list[str]) -> subprocess.CompletedProcess:
        name = "cli-" + hashlib.sha256("\0".join(args).encode()).hexdigest()[:16]
        out = once_per_run(tmp_path_factory, name, lambda out: make(out, args))
        return subprocess.CompletedProcess(args, **json.loads((out / "ran.json").read_text()))

    return ran


@pytest.fixture
def trainforge_here(monkeypatch, capfd):
    """`python -m trainforge ARGS...` from folder CWD, run in the test process (`cli.main`)
    with the environment such a test gave its process (no TRAINFORGE_* of the caller's, this
    checkout on PYTHONPATH, one thread, plus ENV), as a function of (CWD, *ARGS, env=ENV).
    Returns a CompletedProcess: the exit code, and what the command and everything it started
    (launcher, ranks) wrote to stdout and stderr. For tests whose subject is what the command
    starts and prints, not its own process: a `run-local --stack` process spent ~8 CPU s
    importing the program's libraries (pulumi, the providers) that the test process holds."""
    import subprocess

    from trainforge import cli

    def run(cwd: pathlib.Path, *args: str, env: dict | None = None):
        capfd.readouterr()  # what came before is not this command's
        with monkeypatch.context() as m:
            for key in [k for k in os.environ if k.startswith("TRAINFORGE_")]:
                m.delenv(key)
            for key, value in {
                "PYTHONPATH": str(ROOT),
                "OMP_NUM_THREADS": "1",
                **(env or {}),
            }.items():
                m.setenv(key, value)
            m.chdir(cwd)
            try:
                code = cli.main(list(args))
            except SystemExit as e:  # argparse's usage errors
                code = e.code if isinstance(e.code, int) else 1
            sys.stdout.flush()
            sys.stderr.flush()
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["trainforge", *args], code, out, err)

    return run


def sigint_default() -> None:
    """A child's `preexec_fn`: Ctrl-C as a terminal delivers it. A shell's background job
    (`make test &`, a CI runner) starts with SIGINT ignored, which Python then leaves ignored,
    so the process under test would never see a KeyboardInterrupt (the Ctrl-C tests exited 0
    in such a run)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_stack(stack: str, overrides: dict | None = None):
    """Run the project's __main__.py under trainforge.plan.mocks with Pulumi.<stack>.yaml."""
    from trainforge.plan.mocks import run_mocked
    from trainforge.stack.file import read_stack_file

    config = read_stack_file(ROOT / f"Pulumi.{stack}.yaml").engine()
    config.update(overrides or {})
    return run_mocked(ROOT / "__main__.py", config, stack=stack)


@pytest.fixture(autouse=True)
def _fresh_process_caches():
    """Caches whose answer depends on what a test may change are emptied before each test,
    so no result depends on which test ran first: instance-type facts come from whichever
    Pulumi mocks are active. Kept across tests (pure functions of files that never change
    during a run): moto's instance catalog, the Kubernetes schemas, botocore's regions, the
    IAM rehearsal's recorded S3 calls (the one test that patches the runtime's S3 code
    empties that cache itself).

    The runtime's exit context too (`trainforge.training.exits.context`: rank, step, the run
    ledger): a process holds one, and a test that runs the training loop in-process leaves its
    run's ledger there; a later test's exit line then read that finished run as "the Master has
    exited 0" (a CI failure, order-dependent under xdist). Each test starts with a fresh one,
    as each pod's process does.

    Pulumi's engine config too (`pulumi.runtime.config`, a process-wide ContextVar): a program
    run (run_mocked, every plan) leaves its stack's config there, and a later test that calls
    platform code under mocks alone read that stack's aws:region (which types are offered,
    the region its errors name). Each test starts with none, as a fresh process does.
    The ledger that checkpoint restores note their step in (`trainforge.training.resume_note`)
    too: a test that begins an attempt of a RunLedger registers it, and a later test's restore
    rewrote that earlier test's run.json. (`loop.train` gives back what it registered.)
    tests/test_process_state_isolation.py runs each leak before the test it reached."""
    config = sys.modules.get("pulumi.runtime.config")
    if config is not None:
        config.set_all_config({}, [])
    facts = sys.modules.get("trainforge.platform.instance_types")  # never imported for this
    if facts is not None:
        facts.instance_type_facts.cache_clear()
        facts._offered.cache_clear()
    exits = sys.modules.get("trainforge.training.exits")  # a fresh import starts fresh
    if exits is not None:
        exits.context = exits.Context()
    note = sys.modules.get("trainforge.training.resume_note")
    if note is not None:
        note.register(None)
        note.check_on_resume(None)
    yield


# What a user adds to Pulumi.prod.yaml before `pulumi up` (its `YOURS:` keys; README.md, "What
# prod needs from you"): the shipped file carries no documentation values, so tests of the
# features these keys turn on (admin and team access entries, a reserved node group, an
# allow-list) add values of a made-up, non-documentation account and network.
OWN_ACCOUNT = "210987654321"
OWN_RESERVATION = "cr-07f3a9c1b2d4e5f60"
OWN_CIDRS = ["52.94.76.0/22", "100.24.16.0/24"]


def prod_own_values() -> dict[str, str]:
    """Engine-config overrides: Pulumi.prod.yaml with its `YOURS:` keys filled in."""
    import json

    from trainforge.stack.file import read_stack_file

    config = read_stack_file(ROOT / "Pulumi.prod.yaml").engine()
    groups = json.loads(config["trainforge:nodeGroups"])
    groups[0]["capacityReservationId"] = OWN_RESERVATION
    teams = json.loads(config["trainforge:teams"])
    for team in teams:
        role = f"arn:aws:iam::{OWN_ACCOUNT}:role/{team['name'].capitalize()}Engineer"
        team["access"] = {**team.get("access", {}), "principals": [role]}
    return {
        "trainforge:endpoint": json.dumps({"publicAccessCidrs": OWN_CIDRS}),
        "trainforge:admins": json.dumps([f"arn:aws:iam::{OWN_ACCOUNT}:role/PlatformAdmin"]),
        "trainforge:nodeGroups": json.dumps(groups),
        "trainforge:teams": json.dumps(teams),
    }


# The longest test files, scheduled first, longest first. Under `make test` (`-n 2 --dist
# loadfile`) a worker runs a file whole, so a long file sent late runs alone at the end of the
# suite while the other worker sits idle; started first, the short files fill in around them.
# Only the order of files changes; each file keeps its own order. pytest-xdist sends the files
# in collection order only with its `loadscope-reorder` off (pytest_configure below): on, its
# default, it sends them by number of tests, most first, which undid this list (the 1-test
# rehearsals, tests/jobs/test_indexed_rehearsal.py and tests/images/test_stable_identity.py,
# were sent last, and tests/test_docs_run.py 32nd). The list and its measurements:
# docs/performance.md, "Test suite".
RUN_FIRST = (  # CPU s of the file alone (user+sys, pytest and its children); "w": wall s of
    # its tests among the slowest 60 of a coverage run of the suite (a lower bound); "/1.7":
    # measured 2026-11-30 at load 8-20, divided by 1.7 (what four files measured in both
    # sessions took then against these figures)
    "tests/test_docs_run.py",  # ~300
    "tests/jobs/test_user_code_runs.py",  # 105
    "tests/training/test_checkpoint_e2e.py",  # 92
    "tests/platform/test_mlflow_auth.py",  # 60 w (mostly the server's start)
    "tests/training/test_reliability_e2e.py",  # 58
    "tests/training/test_gpu_check.py",  # 56
    "tests/jobs/test_pod_kill_rehearsal.py",  # 49
    "tests/images/test_runtime_image.py",  # 40 (13 with its layer cached)
    "tests/jobs/test_run_local_adhoc.py",  # 66.9/1.7
    "tests/training/test_agreement.py",  # 37
    "tests/jobs/test_user_code_exits.py",  # 59.6/1.7
    "tests/plan/test_import_cli.py",  # 53.0/1.7
    "tests/training/test_checkpoint.py",  # 28 w
    "tests/test_report_resume.py",  # 27
    "tests/jobs/test_indexed_rehearsal.py",  # 27
    "tests/jobs/test_run_local_on_exit.py",  # 44.8/1.7
    "tests/platform/test_alerts_e2e.py",  # 26 w (waits on Prometheus), 16
    "tests/images/test_stable_identity.py",  # 24
    "tests/plan/test_review_intent.py",  # 22 w
    "tests/jobs/test_program_jobs.py",  # 35.9/1.7
    "tests/plan/test_plan_review.py",  # 18 w
    "tests/jobs/test_launch_model.py",  # 23.5/1.7
    "tests/training/test_runtime.py",  # 13 w
    "tests/training/test_setup_memory.py",  # 13 w
    "tests/test_cli.py",  # 13 w
    "tests/training/test_checkpoint_failures.py",  # 12 w
    "tests/jobs/test_estimate_measured.py",  # 12 w
    "tests/jobs/test_backend_stacks.py",  # 12 w
    "tests/training/test_runtime_flags.py",  # 11 w
    "tests/plan/test_plan_cost.py",  # 10 w
    "tests/training/test_acceptance.py",  # 10 w
)


def pytest_configure(config):
    """Files go to the xdist workers in collection order (RUN_FIRST's), not by test count."""
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's option
        config.option.loadscopereorder = False


# Files that `make test` sends to the workers in parts, not whole: path -> the pattern whose
# first group, found in a test's id, names its part. tests/test_docs_run.py runs every
# document's commands (~19% of the suite's worker-seconds in the durations run of 2026-11-30,
# /work/ci20/dur); whole, it held one worker for 851 s. Each document is a part: its
# commands still run in order, in a scratch copy of their own (test_docs_run.py), whichever
# worker runs it. Tests of a file whose id has no part (its plain tests) stay one unit.
SPLIT_FILES = {"tests/test_docs_run.py": re.compile(r"^test_doc_command_runs\[([^:\]]+):")}


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to under `make test`: its file, or its file's part."""
    path, _, rest = nodeid.partition("::")
    pattern = SPLIT_FILES.get(path)
    found = pattern.search(rest) if pattern else None
    return f"{path}::{found.group(1)}" if found else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (`make test`) with SPLIT_FILES's parts as units: xdist's own file
    scheduler, each other file still whole on one worker. Any other --dist is xdist's."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileOrPartScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return FileOrPartScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    first = {path: i for i, path in enumerate(RUN_FIRST)}
    items.sort(key=lambda item: first.get(item.nodeid.split("::", 1)[0], len(first)))


def full_report(result, tmp_path, summary: bool = True) -> str:
    """The text `trainforge plan` writes to its report file for `result` (plan/cli.write_report)."""
    from types import SimpleNamespace  # noqa: PLC0415

    from trainforge.plan import cli  # noqa: PLC0415

    args = SimpleNamespace(
        summary=summary, report=tmp_path / "report.txt", stack="test", program=None
    )
    return cli.write_report(result, args, ROOT, None).read_text()
