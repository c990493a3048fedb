"""The versions README.md and docs/services.md state as what the platform runs are the pins in
trainforge/core/versions.py (nothing else pinned these lines: a bumped pin left the docs
naming the old release)."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.conftest import ROOT
from trainforge.core import versions as v

README = (ROOT / "README.md").read_text(encoding="utf-8")
SERVICES = (ROOT / "docs" / "services.md").read_text(encoding="utf-8")
PR_REVIEW = (ROOT / "docs" / "pr-review.md").read_text(encoding="utf-8")
NUMBER = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_kueue_minor = v.KUEUE_CHART_VERSION.rsplit(".", 1)[0]


@pytest.mark.parametrize(
    ("doc", "claim"),
    [
        (README, f"Kubernetes\n{v.KUBERNETES_VERSION}, add-on builds"),
        (README, f"EKS {v.KUBERNETES_VERSION} (private endpoint"),
        (
            README,
            f"(Kueue {v.KUEUE_CHART_VERSION}, Trainer {v.TRAINER_VERSION}, JobSet "
            f"{v.JOBSET_VERSION}, SDK {v.KUBEFLOW_SDK_VERSION}; any other set is a plan finding)",
        ),
        (README, f"a Kueue {_kueue_minor} queue per team"),
        (
            README,
            f"{NUMBER[len(v.EKS_ADDONS_ASKED_AT_PREVIEW)]} add-on builds for "
            f"{v.KUBERNETES_VERSION} had no public record",
        ),
        (README, f"the chart is pinned at {v.OPENCOST_CHART_VERSION}, the newest"),
        (SERVICES, f"Kubeflow training operator {v.TRAINING_OPERATOR_VERSION} (PyTorchJob)"),
        (SERVICES, f"Kubeflow Trainer v{v.TRAINER_VERSION} and JobSet {v.JOBSET_VERSION}"),
        (SERVICES, f"Kueue {v.KUEUE_CHART_VERSION} (Helm chart, namespace `kueue-system`)"),
        # the webhook rules plan validates TrainJobs by (plan/checks/validate.py: the same at
        # the pin and 2.3); the line said v2.3 while the platform runs the pin
        (PR_REVIEW, f"Kubeflow Trainer v{v.TRAINER_VERSION}'s webhook rules"),
    ],
)
def test_the_docs_state_the_pinned_version(doc, claim):
    assert claim in doc


def test_the_readme_names_the_newest_opencost_chart_versions_py_saw():
    """versions.py's latest re-check of the OpenCost pin names the newest chart it saw; the
    README's "(X exists)" is that chart."""
    source = (ROOT / "trainforge" / "core" / "versions.py").read_text(encoding="utf-8")
    seen = re.findall(r"re-checked \d{4}-\d\d-\d\d: chart (\d+\.\d+\.\d+) exists", source)
    assert seen, "versions.py no longer records the newest OpenCost chart it saw"
    assert f"readable here ({seen[-1]} exists)" in README


def test_every_extra_the_docs_and_messages_name_exists():
    """`pip install 'trainforge[status]'` and the like, in the docs and in the messages the
    package prints: each extra is one pyproject.toml declares."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"])
    files = [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "trainforge").rglob("*.py"),
    ]
    named = {
        (f.relative_to(ROOT).as_posix(), name)
        for f in files
        for group in re.findall(r"trainforge\[([a-z0-9_,-]+)\]", f.read_text(encoding="utf-8"))
        for name in group.split(",")
    }
    assert len(named) >= 8  # the docs' install lines were found
    assert not {(f, n) for f, n in named if n not in extras}, extras


def test_the_readme_says_which_doc_commands_are_not_run():
    """README: test_docs_run.py "runs every one of these commands" was not so: NOT_RUN skips
    some; the README says so while there are any, and each names where it runs instead."""
    from tests.test_docs_run import NOT_RUN

    if NOT_RUN:
        assert "but for those that need a GPU or a finished run" in " ".join(README.split())
        assert all("test" in why or "make" in why for why in NOT_RUN.values())


def test_every_pin_a_message_or_doc_names_beside_an_extra_is_the_extras():
    """`pip install 'trainforge[report]' (matplotlib==3.11.2)`: the messages and docs that name
    a pin beside the extra that installs it name the pin pyproject.toml gives that extra (the
    pins are written out in the messages; nothing tied them to the extras)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = pyproject["project"]["optional-dependencies"]
    files = [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "trainforge").rglob("*.py"),
    ]
    named = [
        (f.relative_to(ROOT).as_posix(), extra, pin)
        for f in files
        for extra, pin in re.findall(
            r"trainforge\[([a-z0-9_-]+)\]'? \(([A-Za-z0-9_.-]+==[^ )]+)\)",
            f.read_text(encoding="utf-8"),
        )
    ]
    assert len(named) >= 3  # report.py's, s3_mirror.py's and checkpointing.md's were found
    assert not [(f, e, p) for f, e, p in named if p not in extras.get(e, [])], extras


def test_upgrading_md_lists_the_add_ons_asked_at_preview():
    """docs/upgrading.md names, "today", the add-ons whose build `pulumi preview` asks EKS for
    instead of sending the pin: versions.EKS_ADDONS_ASKED_AT_PREVIEW, no more, no fewer."""
    text = " ".join((ROOT / "docs" / "upgrading.md").read_text(encoding="utf-8").split())
    listed = text.split("`EKS_ADDONS_ASKED_AT_PREVIEW` (today: ", 1)[1].split(")", 1)[0]
    assert set(re.findall(r"`([a-z0-9-]+)`", listed)) == set(v.EKS_ADDONS_ASKED_AT_PREVIEW)


def test_every_place_that_says_how_long_make_gpu_check_takes_says_the_same():
    """`make gpu-check`'s time: README.md, docs/performance.md and bench/gpu_check.py said
    "under 10 minutes", the Makefile "under 8"; the script stops starting checks after its
    default --budget-s, which the docs name in minutes."""
    import ast

    script = (ROOT / "bench" / "gpu_check.py").read_text(encoding="utf-8")
    default = re.search(r'"--budget-s", type=float, default=([\d.]+)', script)
    assert default, "bench/gpu_check.py: --budget-s default not found"
    budget_min = ast.literal_eval(default[1]) / 60
    said = {
        name: re.findall(r"under (\d+) min", (ROOT / name).read_text(encoding="utf-8"))
        for name in ("README.md", "docs/performance.md", "Makefile", "bench/gpu_check.py")
    }
    minutes = {m for found in said.values() for m in found}
    assert all(said.values()) and len(minutes) == 1, said
    assert budget_min < int(minutes.pop())
    perf = " ".join((ROOT / "docs" / "performance.md").read_text(encoding="utf-8").split())
    assert (
        f"`--budget-s {ast.literal_eval(default[1]):g}` stops starting checks after {budget_min:g} minutes"
        in perf
    )


@pytest.mark.parametrize("path", ["docs/jobs.md", "trainforge/jobs/trainjob.py"])
def test_what_the_trainjob_backend_says_of_the_trainer_is_of_the_pinned_one(path):
    """trainjob.py and docs/jobs.md said what "v2.3" (its runtime patch, its torch plugin)
    cannot do, while the platform runs TRAINER_VERSION (v2.2.1, whose patch types differ:
    v2.3.0 added terminationGracePeriodSeconds). Every Trainer release they name is the pin."""
    text = (ROOT / path).read_text(encoding="utf-8")
    release = r"\bv2\.\d+(?:\.\d+)?\b"
    named = set(re.findall(release, text))
    if path.endswith(".md"):
        # the import's line on an older file's field names that field's releases (import2:
        # jobs/import_read.py _TRAINJOB_DROPPED, cited upstream); the doc quotes that line,
        # and names no other release
        from trainforge.jobs.import_read import _TRAINJOB_DROPPED

        quoted = {x for said in _TRAINJOB_DROPPED.values() for x in re.findall(release, said)}
        named -= quoted - {f"v{v.TRAINER_VERSION}"}
    assert named == {f"v{v.TRAINER_VERSION}"}, named
    if path.endswith(".py"):  # its refusals name the pin (f-strings of TRAINER_VERSION)
        assert text.count("Kubeflow Trainer v{TRAINER_VERSION}") == 3


def test_a_trainjob_refusal_names_the_pinned_trainer():
    from trainforge.core.contract import JobTarget, PoolFacts, TeamFacts
    from trainforge.core.errors import JobConfigError
    from trainforge.jobs import trainjob
    from trainforge.jobs.spec import parse_job

    job = parse_job(
        {"name": "e", "team": "t", "pool": "p", "workers": 2, "preset": "elastic",
         "elastic": {"minWorkers": 1}},
        "trainforge:jobs[0]",
    )  # fmt: skip
    target = JobTarget(team=TeamFacts(name="t", namespace="t"), pool=PoolFacts("p"))
    with pytest.raises(JobConfigError, match=rf"Kubeflow Trainer v{v.TRAINER_VERSION} has no"):
        trainjob.check(job, target, "trainforge:jobs[0]")
