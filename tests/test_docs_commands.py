"""The offline commands the docs tell a newcomer to run name stacks and jobs that exist and
flags the CLIs accept, so a docs command cannot drift from the code again."""

from __future__ import annotations

import pathlib
import re
import shlex

import pytest
import yaml

from trainforge.local import build_parser as run_local_parser

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def fenced_commands() -> list[tuple[str, str]]:
    """(doc, command) for every `python -m trainforge ...` line in a fenced block."""
    out = []
    for doc in DOCS:
        in_block = False
        for line in doc.read_text().splitlines():
            if line.startswith("```"):
                in_block = not in_block
                continue
            cmd = line.split("#", 1)[0].strip().rstrip("\\").strip()
            cmd = re.sub(r"^(?:[A-Z_]+=\S+\s+)+", "", cmd)  # leading VAR=value
            if in_block and cmd.startswith(("python -m trainforge", "trainforge ")):
                out.append((doc.name, cmd))
    return out


COMMANDS = fenced_commands()


def stack_jobs(stack: str) -> set[str]:
    data = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {j["name"] for j in data.get("trainforge:jobs") or []}


def test_the_docs_have_offline_commands():
    assert any("plan --stack" in c for _, c in COMMANDS)
    assert any("run-local --stack" in c for _, c in COMMANDS)


@pytest.mark.parametrize(("doc", "cmd"), COMMANDS, ids=[f"{d}:{c[:60]}" for d, c in COMMANDS])
def test_docs_command_names_real_stacks_and_jobs(doc, cmd):
    argv = shlex.split(cmd)
    argv = argv[3:] if argv[0] == "python" else argv[1:]
    if "--stack" in argv:
        stack = argv[argv.index("--stack") + 1]
        if stack.isupper() or stack.startswith("<"):
            return  # a placeholder (STACK)
        assert (ROOT / f"Pulumi.{stack}.yaml").is_file(), f"{doc}: no stack {stack}"
        if argv and argv[0] == "run-local":
            rest = argv[argv.index("--stack") + 2 :]
            job = rest[0] if rest and not rest[0].startswith("-") else None
            if job and not job.isupper():
                assert job in stack_jobs(stack), f"{doc}: stack {stack} declares no job {job}"
    if argv and argv[0] == "run-local":
        run_local_parser().parse_known_args(argv[1:])


def test_a_drifted_job_name_is_caught():
    assert "gpt-fsdp" not in stack_jobs("dev")
