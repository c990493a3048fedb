"""An own-code job states its run as `expectedStepSeconds` next to `modelSize: {steps: N}`, with
no model shape (an ML engineer's review: `modelSize: {steps: 30}` was refused three times for
parameters, FLOPs and activation bytes, so a step time measured with run-local could not be
given). Every reader agrees: the run is steps x seconds (no overheads added on this basis), the
memory and step-time estimate says it has no model shape (never a guess), and what is still
incoherent is refused in one line."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from tests.jobs.helpers import CPU_POOL
from trainforge.core.errors import JobConfigError
from trainforge.jobs import duration
from trainforge.jobs.estimate import NoEstimate, estimate
from trainforge.jobs.spec import parse_job
from trainforge.plan.core import plan_project

W = "trainforge:jobs[0]"
ENTRY = {
    "name": "my-mlp",
    "team": "research",
    "pool": "training-workloads",
    "workers": 2,
    "entrypoint": {"script": "examples/mnist/train.py"},
}
REVIEWED = {**ENTRY, "expectedStepSeconds": 0.5, "modelSize": {"steps": 30}}


def test_steps_and_seconds_without_a_shape_time_the_run():
    job = parse_job(REVIEWED, W)
    run = duration.expected_duration(job, CPU_POOL)
    assert (run.seconds, run.source) == (15.0, "expectedStepSeconds")
    assert run.detail == "30 steps x 0.5s (expectedStepSeconds)"
    with pytest.raises(NoEstimate, match=r"^no model shape: modelSize states only steps"):
        estimate(job, CPU_POOL)
    # the job's deadline cuts the same figure (every backend's controller fails it there)
    short = parse_job({**REVIEWED, "runPolicy": {"activeDeadlineSeconds": 10}}, W)
    cut = duration.expected_duration(short, CPU_POOL)
    assert (cut.seconds, cut.needs, cut.source) == (10.0, 15.0, "expectedStepSeconds")


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        # steps without seconds and without a shape: one line, at modelSize
        (
            {"modelSize": {"steps": 30}},
            r"jobs\[0\]\.modelSize: got \{'steps': 30\}; expected the model's shape .* or "
            r"expectedStepSeconds next to modelSize\.steps",
        ),
        # seconds without steps: one line, at expectedStepSeconds
        (
            {"expectedStepSeconds": 0.5},
            r"jobs\[0\]\.expectedStepSeconds: got 0\.5; expected modelSize\.steps too: .*"
            r"`modelSize: \{steps: N\}` alone is enough",
        ),
        (
            {"expectedStepSeconds": 0.5, "modelSize": {}},
            r"jobs\[0\]\.expectedStepSeconds: got 0\.5; expected modelSize\.steps too",
        ),
        # a key only the estimate reads, without the shape it needs
        (
            {"expectedStepSeconds": 0.5, "modelSize": {"steps": 30, "batchSize": 8}},
            r"jobs\[0\]\.modelSize\.batchSize: got 8; expected no such key in the steps-only form",
        ),
    ],
)
def test_an_incoherent_run_is_refused_in_one_line(extra, line):
    with pytest.raises(JobConfigError) as e:
        parse_job({**ENTRY, **extra}, W)
    assert "\n" not in str(e.value), str(e.value)  # one problem: one line
    assert re.search(line, str(e.value)), str(e.value)


def test_a_shape_still_needs_all_of_its_form():
    """A half-stated shape is refused as before (the steps-only form is no shape at all)."""
    with pytest.raises(JobConfigError, match=r"modelSize\.activationBytesPerSample: got None"):
        parse_job(
            {**REVIEWED, "modelSize": {"steps": 30, "parameters": 10, "flopsPerSample": 1e6}}, W
        )


def test_the_reviewed_entry_plans_and_is_priced_and_queued_at_steps_x_seconds():
    """The plan a user reads: the Cost row's run and basis, the queue's `runs ~`, and the
    estimates section's reason for having no estimate."""
    overrides = {"trainforge:jobs": [REVIEWED]}
    result = plan_project(ROOT, "dev", standins=False, config_overrides=overrides)
    sections = {s.title.split(" (")[0]: s for s in result.sections}
    (cost,) = [s for t, s in sections.items() if t.startswith("Cost")]
    (row,) = [ln.split() for ln in cost.lines if ln.strip().startswith("my-mlp ")]
    at = row.index("expectedStepSeconds")
    assert row[at - 2 : at] == ["15", "s"], row
    (queues,) = [s for t, s in sections.items() if t.startswith("Queue admission")]
    assert any("my-mlp" in ln and "runs ~15 s" in ln for ln in queues.lines), queues.lines
    (est,) = [s for t, s in sections.items() if t.startswith("Memory per GPU")]
    assert (
        "research/my-mlp on training-workloads: no estimate (no model shape: modelSize states "
        "only steps; the run is timed from expectedStepSeconds)"
    ) in est.lines
