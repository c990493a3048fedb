"""Every offline command in README.md and docs/ runs, as a newcomer would type it.

`tests/test_docs_commands.py` checks that the commands name real stacks, jobs and flags; this
file executes them, in document order, in a scratch copy of the project per document (the
docs' `/tmp/...` paths point into the scratch folder). A training run's length is only a matter
of time, so a bundled-runtime run gets `--steps 3` appended (argparse: the last value wins),
unless its comment states how long it takes (`# ~40 s`): then it runs as written and must
finish within SLACK x that; everything else runs exactly as written. Commands that cannot run
offline or need an earlier step's output are listed in NOT_RUN with the reason; any new command
runs by default, so a doc cannot drift from the code again. A command whose documented outcome
is a failure (EXPECTED_FAILURE) must fail with its documented exit code.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import cli_env, project_files

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PLACEHOLDER = re.compile(r"(^|[\s=/])([A-Z][A-Z_]{2,}|<[^>]+>|\[[^\]]+\])($|[\s/])")

# command prefix -> why it is not run here (each reason names where it is covered instead)
NOT_RUN = {
    "python -m trainforge calibrate": "reads a GPU run's summary (docs/performance.md shows "
    "the run that makes it); tests/jobs/test_calibrate.py runs it on a recorded summary",
    "python -m trainforge report build/demo/": "reads `make demo`'s runs; tests/test_report.py "
    "runs it on a recorded run and `make demo` on the demo's runs",
    "python -m trainforge.training --strategy fsdp --model gpt --layers 24": "a GPU benchmark "
    "(docs/performance.md); the same flags are parsed by test_docs_commands.py",
}
SHORTEN = ("python -m trainforge.training", "python -m trainforge run-local")
# command prefix -> (exit code, what the output must say): commands whose documented outcome
# is a failure (docs/reliability.md rehearses how a bug ends a job)
EXPECTED_FAILURE = {
    "TRAINFORGE_TEST_FAULT=1:3:ERROR ": (1, "exiting with 1 (user_error, permanent, rank 1)"),
}


# command -> (doc, how its quoted output starts): what the command prints, line by line, is the
# doc's block (losses, four decimals, aside: floating point may differ between CPUs). The
# report of docs/checkpointing.md's kill rehearsal runs on what the rehearsal before it left.
QUOTED_OUTPUT = {
    "python -m trainforge report runs/resumable": ("training.md", "run resumable: "),
}
LOSS = re.compile(r"\b\d+\.\d{4}\b")


def quoted_output(doc: str, start: str) -> list[str]:
    text = (ROOT / "docs" / doc).read_text()
    block = text.split(f"```\n{start}", 1)[1].split("```", 1)[0]
    return [LOSS.sub("N", start + ln if i == 0 else ln) for i, ln in enumerate(block.splitlines())]


# A training command that states how long it takes: `# ~40 s`, `# 1-3 min` in its comment
# (the upper figure counts). It runs as written, not shortened, and must finish within
# SLACK x what it states: the docs' times are measured on a 2-core VM; the slack absorbs a
# loaded CI machine, not a command ten times slower than its doc says.
STATED = re.compile(r"(?:~|\b(\d+)-)?(\d+) (s|min)\b")
SLACK = 3.0
STATED_SECONDS: dict[str, float] = {}  # command -> the seconds its doc states


def stated_seconds(comment: str) -> float | None:
    """The largest time a doc line's comment states, in seconds (None: none)."""
    found = [float(n) * (60 if unit == "min" else 1) for _, n, unit in STATED.findall(comment)]
    return max(found, default=None)


def doc_commands() -> list[tuple[str, str]]:
    """(doc, command) for every `python -m trainforge...` line in a fenced block, with its
    continuation lines joined and leading VAR=value assignments kept; a time its comment
    states goes to STATED_SECONDS."""
    out = []
    for doc in DOCS:
        in_block, pending = False, ""
        for line in doc.read_text().splitlines():
            if line.startswith("```"):
                in_block, pending = not in_block, ""
                continue
            if not in_block:
                continue
            text = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
            comment = line.split(" #", 1)[1] if " #" in line and text else ""
            if pending:
                text = f"{pending} {text}"
            if text.endswith("\\"):
                pending = text[:-1].strip()
                continue
            pending = ""
            bare = re.sub(r"^(?:[A-Z_]+=\S+\s+)+", "", text)
            if bare.startswith("python -m trainforge"):
                out.append((doc.name, text))
                seconds = stated_seconds(comment)
                if seconds is not None:
                    STATED_SECONDS[text] = seconds
    return out


def runnable(cmd: str) -> str | None:
    """None when the command runs here, else why not."""
    bare = re.sub(r"^(?:[A-Z_]+=\S+\s+)+", "", cmd)
    for prefix, reason in NOT_RUN.items():
        if bare.startswith(prefix):
            return reason
    if PLACEHOLDER.search(bare.replace("--", "  ")) or "~" in bare:
        return "a template with placeholders (STACK, JOB, <...>, [...], ~)"
    return None


COMMANDS = doc_commands()


def _distinct_runnable() -> list[tuple[str, str]]:
    """Each runnable command once, at its first place in the docs (docs order matters:
    a later command may use an earlier one's output)."""
    seen: set[str] = set()
    out = []
    for doc, cmd in COMMANDS:
        if runnable(cmd) is None and cmd not in seen:
            seen.add(cmd)
            out.append((doc, cmd))
    return out


RUNNABLE = _distinct_runnable()


def test_the_readme_s_training_runs_say_how_long():
    """The README's first run-local example trained 50 GPT steps, ~10 minutes on a laptop
    CPU, without a word: each of its training commands states its time (and so runs as
    written above, within it)."""
    silent = [
        cmd
        for doc, cmd in COMMANDS
        if doc == "README.md"
        and re.sub(r"^(?:[A-Z_]+=\S+\s+)+", "", cmd).startswith(SHORTEN)
        and "--help" not in cmd
        and runnable(cmd) is None
        and cmd not in STATED_SECONDS
    ]
    assert not silent, f"README.md: say how long these take (`# ~N s`/`# N min`): {silent}"


def test_most_doc_commands_run():
    """The exemptions stay few: a doc full of templates would test nothing."""
    assert len(RUNNABLE) >= 10 and len(RUNNABLE) * 2 > len(COMMANDS), COMMANDS


@pytest.fixture(scope="module")
def scratches(tmp_path_factory):
    """A copy of the project as a newcomer has it (program, stacks, examples), one per
    document, as a function of the document: a doc's commands run in order in its own copy,
    as a reader of that doc alone types them, and `make test` may run each document on
    either worker (tests/conftest.py, SPLIT_FILES)."""
    made: dict[str, Path] = {}

    def scratch(doc: str) -> Path:
        if doc not in made:
            made[doc] = project_files(tmp_path_factory.mktemp(f"project-{doc}"))
        return made[doc]

    return scratch


def runs_user_code(tokens: list[str]) -> bool:
    """`run-local --stack S JOB` of a job with its own `entrypoint` (its args are the user's)."""
    if "--stack" not in tokens:
        return False
    rest = [t for t in tokens if not t.startswith("--program")]
    if "--program" in tokens:  # `--program FILE`: FILE is not the job
        rest.remove(tokens[tokens.index("--program") + 1])
    i = rest.index("--stack")
    stack, job = rest[i + 1], rest[i + 2]
    config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    jobs = {j["name"]: j for j in config.get("trainforge:jobs") or []}
    return job not in jobs or "entrypoint" in jobs[job]  # not in config: declared in Python


def argv_and_env(cmd: str, scratch: Path) -> tuple[list[str], dict[str, str]]:
    """The command's argv and environment in the scratch project; `--steps 3` appended to a
    bundled-runtime run (not to a fault rehearsal, whose fault step must be reached)."""
    env = cli_env()
    tokens = shlex.split(cmd.replace("/tmp/", f"{scratch}/tmp/"))
    faulted = False
    while tokens and re.match(r"^[A-Z_]+=", tokens[0]):
        key, _, value = tokens.pop(0).partition("=")
        env[key] = value
        faulted |= key.startswith("TRAINFORGE_TEST_")
    assert tokens[:2] == ["python", "-m"], cmd
    bare = " ".join(tokens)
    if (
        bare.startswith(SHORTEN)
        and cmd not in STATED_SECONDS  # its doc says how long: it runs as written
        and "--help" not in tokens
        and not faulted
        and not runs_user_code(tokens)
    ):
        tokens += ["--steps", "3"]
    return [sys.executable, *tokens[1:]], env


# Commands another test reads too: run as typed, in their own fresh copy of the project, once
# per test run (conftest.py, shipped_cli_run). Each is the first of its document, so the
# scratch copy is still as copied when it comes; nothing later reads what it writes there.
SHARED_RUNS = {
    "python -m trainforge plan --stack dev",  # README.md; tests/test_cli.py reads its output
}
_NOT_RUNNABLE = SHARED_RUNS - {cmd for _, cmd in RUNNABLE}
assert not _NOT_RUNNABLE, _NOT_RUNNABLE
assert not SHARED_RUNS & set(STATED_SECONDS)  # a stated time is timed here, where it runs

# (stack, its stack file) -> the base plan a `--diff` command's test made (`plan --stack S --out
# DIR` in the scratch project): the next `--diff` of that stack file gets a copy instead of the
# same ~20 CPU s plan again (docs/pr-review.md diffs prod twice; no command between changes it)
BASE_PLANS: dict[tuple[str, bytes], Path] = {}


@pytest.mark.parametrize(("doc", "cmd"), RUNNABLE, ids=[f"{d}:{c[:70]}" for d, c in RUNNABLE])
def test_doc_command_runs(doc: str, cmd: str, scratches, capsys, shipped_cli_run) -> None:
    scratch = scratches(doc)
    (scratch / "tmp").mkdir(exist_ok=True)
    argv, env = argv_and_env(cmd, scratch)
    if "--diff" in argv:  # the base branch's plan, made by the doc's previous step
        base = scratch / argv[argv.index("--diff") + 1]
        stack = argv[argv.index("--stack") + 1]
        inputs = (stack, (scratch / f"Pulumi.{stack}.yaml").read_bytes())
        if not base.is_dir() and inputs in BASE_PLANS:  # the same command, the same inputs
            shutil.copytree(BASE_PLANS[inputs], base)
        elif not base.is_dir():
            # in this process: the base is the setup, not the documented command (that one
            # runs in its own process below); a plan process is ~8 CPU s, most of it start-up
            from trainforge.plan import cli as plan_cli

            rc = plan_cli.main(
                ["--stack", stack, "--project-dir", str(scratch), "--out", str(base)]
            )
            assert rc == 0, capsys.readouterr()
            BASE_PLANS[inputs] = base
    started = time.monotonic()
    if cmd in SHARED_RUNS:
        assert argv[:3] == [sys.executable, "-m", "trainforge"], argv
        proc = shipped_cli_run(argv[3:])
    else:
        proc = subprocess.run(
            argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=600, check=False
        )
    took = time.monotonic() - started
    output = proc.stdout + proc.stderr
    stated = STATED_SECONDS.get(cmd)
    assert stated is None or took <= SLACK * stated, (
        f"{doc}: `{cmd}` says it takes up to {stated:.0f} s; it took {took:.0f} s"
    )
    code, says = next(
        (want for prefix, want in EXPECTED_FAILURE.items() if cmd.startswith(prefix)), (0, "")
    )
    assert proc.returncode == code, f"{doc}: `{cmd}` exited {proc.returncode}:\n{output[-4000:]}"
    assert says in output, f"{doc}: `{cmd}` did not say {says!r}:\n{output[-4000:]}"
    assert "Traceback (most recent call last)" not in output or "TRAINFORGE_TEST_" in cmd, (
        f"{doc}: `{cmd}` printed a traceback:\n{output[-4000:]}"
    )
    # not even a rehearsed fault's: a killed rank's DCP checkpoint process printed `Process
    # SpawnProcess-1: ... EOFError` when its pipe closed (trainforge/training/dcp_writer.py)
    assert "Process SpawnProcess" not in output, f"{doc}: `{cmd}`:\n{output[-4000:]}"
    if cmd in QUOTED_OUTPUT:
        printed = [LOSS.sub("N", ln) for ln in proc.stdout.splitlines()]
        assert printed == quoted_output(*QUOTED_OUTPUT[cmd]), proc.stdout
