"""The plan reads a stack file as `pulumi up` does (Go's yaml.v3, trainforge.stack.pulumi_yaml),
and every stack entry we print is read back as written.

Before: the plan read stack files as YAML 1.1 (PyYAML), so `--lr, 3e-5` was a string to the
plan and passed, while Pulumi reads the float 3e-05 and the job parser refuses it on
`pulumi up`; `trainforge import` printed `- 3e-5` unquoted for a TrainJob's `"3e-5"`."""

from __future__ import annotations

import math

import pytest

from tests.conftest import ROOT, project_files
from trainforge.stack.file import StackFileError, read_stack
from trainforge.stack.pulumi_yaml import dump, pulumi_value, resolve_plain


@pytest.mark.parametrize(
    ("plain", "value"),
    [
        # YAML 1.2 floats need no dot (go-yaml v3.0.1 resolve.go yamlStyleFloat); 1.1 did
        ("3e-5", 3e-05),
        ("1e3", 1000),  # an integral float reaches the program as Go's JSON `1000`
        ("2.0", 2),
        ("0.5", 0.5),
        ("08", 8),  # not octal (8 is no octal digit), so Go's float pattern takes it
        # 1.1's booleans are strings in 1.2
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("off", "off"),
        ("y", "y"),
        ("True", True),
        ("FALSE", False),
        # octal: 1.2's 0o, and 1.1's leading 0 (still read by yaml.v3)
        ("0o17", 15),
        ("017", 15),
        ("0x1F", 31),
        ("0b101", 5),
        ("1_000", 1000),
        ("1:30", "1:30"),  # sexagesimal is gone in 1.2
        ("~", None),
        ("null", None),
        ("2026-12-01", "2026-12-01 00:00:00 +0000 UTC"),  # time.Time.String()
        ("1e400", "1e400"),  # out of float64's range: strconv refuses, a string
        ("abc", "abc"),
    ],
)
def test_a_plain_scalar_is_what_pulumi_hands_the_program(plain, value):
    got = pulumi_value(plain)
    assert got == value and type(got) is type(value), (plain, got)


@pytest.mark.parametrize("plain", [".inf", "-.Inf", "+.INF", ".nan"])
def test_infinity_and_nan_are_floats_pulumi_cannot_hand_over(plain, tmp_path):
    assert resolve_plain(plain)[0].endswith(":float") and not math.isfinite(resolve_plain(plain)[1])
    (tmp_path / "Pulumi.bad.yaml").write_text(f"config:\n  trainforge:x: {plain}\n")
    with pytest.raises(StackFileError) as err:
        read_stack(tmp_path, "bad")
    assert str(err.value) == (
        f"Pulumi.bad.yaml: line 2, column 17: `{plain}` is a float Pulumi cannot hand to the "
        "program (it passes config as JSON, which has no infinity or NaN); expected a finite "
        f'number, or quotes for the text ("{plain}")'
    )


def test_the_stack_reader_reads_each_difference_as_pulumi_does(tmp_path):
    (tmp_path / "Pulumi.s.yaml").write_text(
        "config:\n  trainforge:x: [3e-5, yes, 0o17, '3e-5', \"yes\", 1:30, 2026-12-01]\n"
    )
    assert read_stack(tmp_path, "s").config["trainforge:x"] == [
        3e-05,
        "yes",
        15,
        "3e-5",
        "yes",
        "1:30",
        "2026-12-01 00:00:00 +0000 UTC",
    ]


@pytest.mark.parametrize("text", ["3e-5", "1e3", "0o17", "200", "08", "true", "null", "", "~"])
def test_a_written_string_reads_back_as_that_string(text, tmp_path):
    """The writer (trainforge import's entry) quotes what Pulumi would read as no string."""
    (tmp_path / "Pulumi.s.yaml").write_text(dump({"config": {"trainforge:x": [text]}}))
    assert read_stack(tmp_path, "s").config["trainforge:x"] == [text]


def test_plan_refuses_an_unquoted_learning_rate_as_pulumi_up_would(tmp_path, trainforge_here):
    root = project_files(tmp_path / "proj")
    job = (
        "    - name: lr-job\n      team: research\n      pool: gpu-workloads\n      workers: 2\n"
        "      image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n"
        "      entrypoint:\n        command: [torchrun, /workspace/train.py, --lr, 3e-5]\n"
    )
    text = (ROOT / "Pulumi.dev.yaml").read_text()
    (root / "Pulumi.lr.yaml").write_text(
        text.replace("  trainforge:jobs:\n", f"  trainforge:jobs:\n{job}", 1)
    )
    proc = trainforge_here(root, "plan", "--stack", "lr")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        "trainforge:jobs[0] (lr-job).entrypoint.command[3]: got 3e-05; expected a string "
        '(quote numbers and booleans in YAML: "1")'
    ) in proc.stderr


def test_import_quotes_a_learning_rate_so_the_stack_keeps_it_a_string(tmp_path, trainforge_here):
    src = tmp_path / "tj.yaml"
    src.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: tj}\n"
        "spec:\n  runtimeRef: {name: torch-distributed}\n  trainer:\n"
        "    image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n    numNodes: 2\n"
        '    command: [torchrun, /workspace/train.py, --lr, "3e-5", --steps, "200"]\n'
        "    resourcesPerNode: {limits: {nvidia.com/gpu: 1}}\n"
    )
    proc = trainforge_here(ROOT, "import", str(src), "--stack", "dev")
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout.split("# Add under trainforge:jobs in Pulumi.dev.yaml:\n")[1]
    entry = printed.split("\n# ")[0]
    assert "    - '3e-5'\n" in entry + "\n" and "    - '200'\n" in entry + "\n", entry
    (tmp_path / "Pulumi.s.yaml").write_text(
        "config:\n  trainforge:jobs:\n"
        + "\n".join("    " + line for line in entry.splitlines())
        + "\n"
    )
    [job] = read_stack(tmp_path, "s").config["trainforge:jobs"]
    assert job["entrypoint"]["command"][3] == "3e-5"


def _shipped_yaml() -> list[tuple[str, str]]:
    """(where, text) of every YAML a user copies into a stack: the shipped stacks and
    examples, and the YAML blocks of the docs."""
    import re
    import subprocess

    files = subprocess.run(
        ["git", "ls-files", "Pulumi.*.yaml", "examples/*.yaml", "examples/*.yml"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    out = [(f, (ROOT / f).read_text()) for f in files]
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        blocks = re.findall(r"```ya?ml\n(.*?)```", doc.read_text(), re.S)
        out += [(f"{doc.name} yaml block {i + 1}", b) for i, b in enumerate(blocks)]
    return out


def test_what_we_ship_reads_the_same_in_yaml_1_1_and_as_pulumi_reads_it():
    """A stack, example or doc snippet with `lr: 3e-5` or `enabled: yes` means one thing to the
    reader's editor (YAML 1.1) and another to `pulumi up`: quote it, or write true/false."""
    from trainforge.stack.file import load_yaml

    differ = []
    for where, text in _shipped_yaml():
        try:
            old = load_yaml(text, where, all_documents=True)
            new = load_yaml(text, where, all_documents=True, pulumi=True)
        except (StackFileError, ValueError):
            continue  # a fragment that is no YAML on its own (`...` elisions)
        if repr(old) != repr(new):
            differ.append(where)
    assert not differ, differ
