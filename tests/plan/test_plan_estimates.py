"""The plan shows memory per GPU, throughput and expected duration for every declared job."""

from __future__ import annotations

from tests.conftest import full_report, shipped_plan
from trainforge.plan.checks.estimates import TITLE


def _section(result):
    (section,) = [s for s in result.sections if s.title == TITLE]
    return section


def test_prod_plan_shows_memory_and_duration_of_every_job(tmp_path):
    result = shipped_plan("prod")
    section = _section(result)
    (data,) = section.data  # the prod stack declares one job
    assert data["job"] == "gpt-350m-fsdp" and data["gpu"] == "A10G"
    assert data["world_size"] == 8  # 2 pods x 4 GPUs (g5.12xlarge, the pool's smallest)
    assert data["memory_capacity_bytes"] == 22888 * 2**20
    assert 0 < data["memory_total_bytes"] < data["memory_capacity_bytes"]
    assert set(data["memory_bytes"]) >= {"parameters", "optimizer", "activations", "logits"}
    lo, hi = data["step_seconds_range"]
    assert lo <= data["step_seconds"] <= hi
    dlo, dhi = data["duration_range"]
    assert dlo <= data["duration_seconds"] <= dhi and data["steps"] == 20000

    out = full_report(result, tmp_path)
    assert f"{TITLE}:\n  vision/gpt-350m-fsdp on gpu-workloads: 8 x A10G" in out
    assert "memory per GPU: est. " in out and " of 22.4 GiB (" in out
    assert "tokens/s" in out and "duration: 20,000 steps in " in out
    assert result.clean


def test_dev_plan_reports_cpu_and_gpu_jobs():
    result = shipped_plan("dev")
    lines = _section(result).lines
    text = "\n".join(lines)
    assert "research/mnist-ddp on training-workloads: 2 x CPU process" in text
    assert "memory per process: est. " in text
    # the dev GPU pool mixes g4dn.xlarge (T4) and g5.xlarge (A10G): planned on the slower,
    # smaller one
    assert "research/gpt-small-fsdp on gpu-workloads: 2 x T4" in text
    # its precision is auto: what the pod picks depends on the node (parallel.resolve_precision)
    assert (
        "precision auto runs bf16 on A10G nodes and fp32 on T4 (no bf16 units); planned as on "
        "the T4" in text
    )
    assert "of 16.0 GiB" in text


def test_the_cost_report_takes_its_duration_from_the_estimate():
    """Issue 16's duration sources: what the user measured, then this model, then the
    deadline (a ceiling)."""
    from tests.jobs.test_estimate import A10G, CPU, job
    from trainforge.jobs import duration
    from trainforge.jobs.spec import parse_job

    d = duration.expected_duration(job(), A10G)
    assert d.source == "estimate" and d.low <= d.seconds <= d.high
    assert "20000 steps x 1.68s estimated on 8 x A10G" in d.detail
    assert duration.expected_duration(job(expectedStepSeconds=2.0), A10G).seconds == 40000
    cpu = parse_job(
        {"name": "m", "team": "t", "pool": "cpu", "runPolicy": {"activeDeadlineSeconds": 600}}
    )
    assert duration.expected_duration(cpu, CPU).source == "activeDeadlineSeconds"  # no CPU model


def test_every_reader_says_a_duration_one_way():
    """One wording (jobs.duration.duration_text) for every duration a reader sees: the
    estimates, the cost table, the queue and verdict lines, the PR comment and `trainforge
    status`. A short job does not read "0.0 h" (the cost table's old wording), a 100-day one
    not "1e+02 days" (the queue's)."""
    from trainforge.jobs.duration import duration_text
    from trainforge.live import wait
    from trainforge.plan import job_diff, verdict
    from trainforge.plan.checks import cost_check, estimates, queues

    cases = {
        0: "0 s",
        45: "45 s",
        119: "119 s",
        120: "2 min",
        5400: "90 min",
        7200: "2.0 h",
        30960: "8.6 h",
        216000: "60.0 h",
        259200: "3.0 days",
        8640000: "100.0 days",
        86400000: "1,000.0 days",
    }
    assert {s: duration_text(s) for s in cases} == cases
    readers = (estimates, cost_check, queues, job_diff, wait)
    assert all(m.duration_text is duration_text for m in readers)
    # the verdict's start line is the queue section's (livewords' queues.start_text), which
    # says its durations with duration_text; the verdict has no wording of its own
    assert verdict.start_text is queues.start_text and not hasattr(verdict, "duration_text")
    assert queues.start_text(5400, False, [("a", 30.0)]) == (
        f"expected to start after {duration_text(5430)} (admitted after {duration_text(5400)}; "
        + queues.preempt_words([("a", 30.0)])
        + ")"
    )
    assert not hasattr(queues, "hours") and not hasattr(cost_check, "hours")
