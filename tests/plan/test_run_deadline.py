"""A job's run is never timed, priced or queued past its own activeDeadlineSeconds, and the
plan flags a run its deadline cuts (trainforge.jobs.duration.cut_at_deadline, the estimates
check's TF_RUN_PAST_DEADLINE).

Before: a job with expectedStepSeconds 2, 2000 steps and runPolicy.activeDeadlineSeconds
3600 planned CLEAN, `runs ~67 min`, priced 67 min, and its object said expected-duration-seconds
4000; every backend's controller fails it at 60 min (kubeflow/trainer v1.9.4
pkg/controller.v1/common/job.go:211; v2.2.1 pkg/controller/trainjob_controller.go
reconcileDeadline; a batch/v1 Job's own activeDeadlineSeconds)."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import ROOT, project_files
from trainforge.jobs.duration import Duration, cut_at_deadline
from trainforge.stack.pulumi_yaml import dump

BACKENDS = {"pytorchjob": "PyTorchJob", "trainjob": "TrainJob", "indexed-job": "Job"}


def _stack(tmp_path, deadline: int):
    """dev with mnist-ddp (2000 steps, checkpoints every 200) timed at 2 s a step under
    `deadline`, once on each backend."""
    root = project_files(tmp_path / "proj")
    data = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    jobs = data["config"]["trainforge:jobs"]
    [ddp] = [j for j in jobs if j["name"] == "mnist-ddp"]
    ddp.update(expectedStepSeconds=2, runPolicy={"activeDeadlineSeconds": deadline})
    for backend in ("trainjob", "indexed-job"):
        jobs.append({**ddp, "name": f"ddp-{backend}", "backend": backend})
    (root / "Pulumi.dl.yaml").write_text(dump(data, sort_keys=False))
    return root


@pytest.fixture(scope="module")
def cut_plan(tmp_path_factory):
    import subprocess
    import sys

    tmp = tmp_path_factory.mktemp("deadline")
    root = _stack(tmp, 3600)
    proc = subprocess.run(
        [sys.executable, "-m", "trainforge", "plan", "--stack", "dl", "--out", str(tmp / "out")],
        cwd=root, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp)},
    )  # fmt: skip
    report = (root / "build" / "plan" / "dl-report.txt").read_text()
    return proc, report, tmp / "out"


def test_plan_flags_a_run_its_deadline_cuts_on_each_backend(cut_plan):
    proc, report, _ = cut_plan
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "need a fix or a decision" in proc.stdout.splitlines()[0]
    flat = " ".join(proc.stdout.split())
    for name, kind in [("mnist-ddp", "PyTorchJob"), ("ddp-trainjob", "TrainJob"),
                       ("ddp-indexed-job", "Job")]:  # fmt: skip
        assert f"[TF_RUN_PAST_DEADLINE] research/{kind}/{name}" in proc.stdout
        assert (
            f"job {name}: its run needs ~67 min (2000 steps x 2s (expectedStepSeconds)), but its "
            f"runPolicy.activeDeadlineSeconds is 3600 (60 min): the {kind}'s controller fails it "
            "at the deadline, after about 1,800 of 2,000 steps; its checkpoints (every 200 "
            "steps, checkpoint.resume auto) let a resubmission continue from step 1,800, with a "
            "new deadline"
        ) in flat
        assert (
            "fix: raise runPolicy.activeDeadlineSeconds to at least 4000 (the run; add a margin "
            "for slow steps), or run at most ~1,800 steps under this deadline"
        ) in flat
        # the queue and the Cost time the run at the deadline, and say so
        assert (
            f"research/{name} [normal]: runs on training-workloads within its nominal quota; "
            "runs ~60 min (cut at its activeDeadlineSeconds 3600: the run needs ~67 min)"
        ) in report
    rows = [line.split() for line in report.splitlines() if line.strip().startswith("mnist-ddp ")]
    [row] = [r for r in rows if "research" in r]
    assert row[5:9] == ["60", "min", "expectedStepSeconds,", "cut"], row
    assert row[4] == row[-2], row  # the run costs one hour of its node: $/h x 1 h


def test_the_object_records_the_cut_run_for_status(cut_plan):
    """`trainforge status` of a job queued behind reads this annotation (live/wait.py)."""
    _, _, out = cut_plan
    for kind, name in [("pytorchjob", "mnist-ddp"), ("trainjob", "ddp-trainjob"),
                       ("job", "ddp-indexed-job")]:  # fmt: skip
        doc = yaml.safe_load((out / "research" / f"{kind}-{name}.yaml").read_text())
        notes = doc["metadata"]["annotations"]
        assert notes["trainforge.io/expected-duration-seconds"] == "3600", notes
        assert notes["trainforge.io/expected-duration"].endswith(
            "(cut at its activeDeadlineSeconds 3600: the run needs ~67 min)"
        )
        spec = doc["spec"].get("runPolicy", doc["spec"])
        assert spec["activeDeadlineSeconds"] == 3600


@pytest.mark.parametrize(
    ("run", "deadline", "seconds", "needs", "high"),
    [
        (Duration(4000, "expectedStepSeconds", "x"), 3600, 3600, 4000, None),
        (Duration(4000, "expectedStepSeconds", "x"), 4000, 4000, None, None),
        (Duration(4000, "expectedStepSeconds", "x"), None, 4000, None, None),
        (Duration(3000, "estimate", "x", 2000, 5000), 3600, 3000, None, 5000),
        (Duration(4000, "estimate", "x", 3000, 5000), 3600, 3600, 4000, 3600),
        (Duration(3600, "activeDeadlineSeconds", "x"), 3600, 3600, None, None),
    ],
)
def test_a_run_is_cut_at_its_deadline_only_when_it_outlasts_it(run, deadline, seconds, needs, high):
    d = cut_at_deadline(run, deadline)
    assert (d.seconds, d.needs, d.high if high is not None else None) == (seconds, needs, high)
    assert d.cut == (needs is not None)
