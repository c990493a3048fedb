"""A newcomer's stack mistakes, told in one run, by name, with a fix (issue #43, item 5).

Each test here failed before: errors named `jobs[7]` and not the job, a duplicate name hid
behind the other errors of its job, a misspelt namespace (`trainfroge:teams`) was never named
and cascaded into a line per job, `args` suggested `layers`, and `hangTimeout: 1` was taken.
"""

from __future__ import annotations

import copy
import pathlib

import pulumi
import pytest

from trainforge.plan.mocks import TrainforgeMocks
from trainforge.platform.stack_check import check_stack
from trainforge.stack.file import read_stack

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def mocks():
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))


def dev() -> dict:
    return copy.deepcopy(read_stack(ROOT, "dev").config)


def errors(config: dict, lookups: bool = True) -> list[str]:
    return check_stack(config, lookups=lookups).errors


@pytest.mark.parametrize("lookups", [True, False])
def test_a_one_second_hang_timeout_is_refused_in_one_line_with_a_fix(lookups):
    config = dev()
    config["trainforge:jobs"][0]["hangTimeout"] = 1
    (line,) = errors(config, lookups)
    assert ".hangTimeout: got 1; expected 0 (watchdog off) or 60 to 86400 seconds" in line
    assert line.endswith("set hangTimeout: 300 (the default is 300) or leave it unset")
    assert "\n" not in line
    for fine in (0, 60, 300):
        config["trainforge:jobs"][0]["hangTimeout"] = fine
        assert errors(config, lookups) == []


def test_a_hang_timeout_below_the_job_s_own_step_time_is_refused():
    config = dev()
    job = config["trainforge:jobs"][0]
    job.update(hangTimeout=120, expectedStepSeconds=200)
    (line,) = errors(config)
    assert "got 120; expected 0 (watchdog off) or 200 to 86400 seconds" in line
    assert "a step takes expectedStepSeconds (200 s)" in line


@pytest.mark.parametrize("lookups", [True, False])
def test_a_duplicate_name_comes_in_the_same_run_as_its_job_s_other_problems(lookups):
    """The README promises every problem in one run; a job with a bad key and a name already
    used got its duplicate reported only once the key was fixed."""
    config = dev()
    config["trainforge:jobs"][1].update(name="mnist-ddp", workers=-1)
    found = errors(config, lookups)
    assert any(".workers: got -1; expected a value >= 1" in e for e in found), found
    assert any(
        ".name: got 'mnist-ddp'; expected a name not used yet in team 'research'" in e
        for e in found
    ), found
    assert len(found) == 2, found


@pytest.mark.parametrize("lookups", [True, False])
def test_every_line_names_the_job_by_its_name_after_its_index(lookups):
    """`trainforge:jobs[2].workers` sent the user counting list items: the line says
    `trainforge:jobs[2] (mnist-user).workers`, and a job named by another's line too."""
    config = dev()
    jobs = config["trainforge:jobs"]
    jobs[2]["workers"] = -1
    jobs[3]["name"] = "mnist-ddp"  # already used by jobs[0]
    found = errors(config, lookups)
    assert "trainforge:jobs[2] (mnist-user).workers: got -1; expected a value >= 1" in found
    (dup,) = [e for e in found if e.startswith("trainforge:jobs[3] (mnist-ddp).name: got")]
    assert "(already used by trainforge:jobs[0] (mnist-ddp))" in dup
    assert len(found) == 2, found


def test_a_job_without_a_name_keeps_its_index_alone():
    config = dev()
    del config["trainforge:jobs"][1]["name"]
    (line,) = errors(config, lookups=False)
    assert line.startswith("trainforge:jobs[1].name: missing"), line


def test_a_misspelt_namespace_is_named_once_and_does_not_cascade():
    """`trainfroge:teams` was never read and never named: each job said `team: got
    'research'; expected one of the teams: (none declared)` instead."""
    config = dev()
    config["trainfroge:teams"] = config.pop("trainforge:teams")
    found = errors(config)
    assert found == [
        "trainfroge:teams: unknown namespace 'trainfroge' (did you mean 'trainforge:teams'?); "
        "trainforge reads only trainforge: keys; rename it (its value was checked as that key)"
    ]
    # its value is checked as the key it was meant to be: a problem in it still shows
    config["trainfroge:teams"][0]["quota"]["gpu"] = "4"
    found = errors(config)
    assert len(found) == 2 and "trainforge:teams[0].quota.gpu: unknown key" in found[1], found
    # the policy namespace too; other namespaces (aws:, kubernetes:) are not ours to judge
    config = dev()
    config["trainforge-polcy:waivers"] = []
    config["kubernetes:context"] = "x"
    (line,) = errors(config, lookups=False)
    assert line.startswith("trainforge-polcy:waivers: unknown namespace 'trainforge-polcy' "
                           "(did you mean 'trainforge-policy:waivers'?)")  # fmt: skip


def test_a_misspelt_key_next_to_the_right_one_is_named_and_not_read():
    config = dev()
    config["trainfroge:teams"] = []
    (line,) = errors(config)
    assert line.endswith("trainforge:teams is set too and this one is never read: delete it")


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("args", "(did you mean 'entrypoint.args'?)"),  # it suggested 'layers'
        ("command", "(did you mean 'entrypoint.command'?)"),
        ("script", "(did you mean 'entrypoint.script'?)"),
        ("replicas", "(did you mean 'workers'? it counts pods)"),
        ("nodes", "(did you mean 'workers'? it counts pods"),  # it suggested 'model'
        ("nproc_per_node", "(did you mean 'procsPerWorker'?"),
        ("namespace", "(did you mean 'team'? a team is a namespace)"),
        ("resources", "(did you mean 'cpu'? with memory and gpusPerWorker, per pod)"),
    ],
)
def test_a_key_of_another_tool_is_told_the_key_that_means_it(key, meant):
    config = dev()
    config["trainforge:jobs"][2][key] = ["x"]
    (line,) = errors(config, lookups=False)
    assert line.startswith(f"trainforge:jobs[2] (mnist-user).{key}: unknown key {meant}"), line


def test_a_reference_to_a_team_when_none_is_declared_says_to_declare_it():
    config = dev()
    del config["trainforge:teams"]
    found = errors(config)
    assert found and all(
        line.endswith("expected one of the teams: (none declared: declare 'research' first)")
        for line in found
    ), found


@pytest.mark.parametrize(
    ("command", "split"),
    [(["torchrun train.py"], "[torchrun, train.py]"),
     (["python -u 'my dir/t.py'", "--x"], "[python, -u, my dir/t.py]"),
     (["python 'x"], "[python, 'x]")],  # an unbalanced quote: split at the spaces, no crash
)  # fmt: skip
def test_a_command_whose_program_is_a_whole_command_line_is_refused(command, split):
    """Kubernetes execs command[0] as one program name ("torchrun train.py"): every pod would
    fail to start. `trainforge import` refuses it (jobs/import_read.py); the stack's
    entrypoint.command took it. One rule now (stack/jobs.whole_command_line)."""
    config = dev()
    job = config["trainforge:jobs"][0]
    for key in ("model", "steps", "batchSize"):
        job.pop(key, None)
    job.update(image="ghcr.io/acme/train:1.0", entrypoint={"command": command})
    (line,) = errors(config, lookups=False)
    assert line == (
        f"trainforge:jobs[0] (mnist-ddp).entrypoint.command[0]: got {command[0]!r}; expected a "
        "program, not a command line: Kubernetes runs it as one program name, and no shell "
        f"splits it: write each word as its own item: {split}"
    )
    job["entrypoint"] = {"command": ["bash", "-c", "torchrun train.py"]}  # a shell's script
    assert errors(config, lookups=False) == []


def test_a_scalar_where_a_block_of_keys_goes_names_the_keys():
    """`borrowingLimit: "8"` (a newcomer review): "expected a mapping" alone left the reader to
    guess the keys; the line names them, read from the model."""
    config = dev()
    config["trainforge:teams"][0]["quota"]["borrowingLimit"] = "8"
    (line,) = errors(config, lookups=False)
    assert line.endswith(
        "trainforge:teams[0].quota.borrowingLimit: got '8'; expected a mapping with keys "
        "cpu, gpus, memory"
    ), line
    config["trainforge:teams"][0]["quota"]["borrowingLimit"] = {"gpus": "8"}
    assert errors(config, lookups=False) == []
