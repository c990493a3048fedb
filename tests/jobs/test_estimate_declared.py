"""Estimates from declared sizes: any model with `modelSize` gets a step time from its FLOPs
and the GPU's MFU (a calibration entry wins), in the units it has (a CNN: samples, not
tokens), and a basis line that names the job's own strategy."""

from __future__ import annotations

import pytest

from tests.jobs.test_estimate import A10G
from trainforge.jobs.estimate import estimate, facts
from trainforge.jobs.spec import parse_job
from trainforge.plan.checks.estimates import lines_for
from trainforge.training import gpus

# a small CNN (~1.2M parameters, ~10 GFLOP... per 64-image batch): sub-millisecond compute
CNN = {
    "parameters": 1_200_000,
    "flopsPerSample": 6 * 1_200_000 * 10,
    "activationBytesPerSample": 2**20,
    "batchSize": 64,
    "steps": 1000,
}


def job(size=CNN, **kw):
    raw = {"name": "cnn", "team": "t", "pool": "p", "image": "r/i:1", "workers": 2,
           "entrypoint": {"module": "vision.train"}, "modelSize": size, **kw}  # fmt: skip
    return parse_job(raw)


def test_a_declared_cnn_gets_a_step_time_from_its_flops_and_mfu():
    e = estimate(job(), A10G)
    a10g = gpus.match_gpu("A10G")
    mfu = facts.mfu_for("A10G").mid
    per_gpu = CNN["flopsPerSample"] * CNN["batchSize"]  # one rank's model FLOPs per step
    assert e.timing.compute_seconds == pytest.approx(per_gpu / (a10g.bf16_flops * mfu))
    assert e.step_seconds > e.timing.compute_seconds > 0
    lines = lines_for(e, "ns/cnn")
    step = next(x for x in lines if x.startswith("  step "))
    assert " 0 ms" not in step and "(0 ms" not in step, step
    # samples, not tokens it does not have
    assert f"{e.samples_per_step:,} samples/step" in step
    assert not any("token" in x for x in lines[:4]), lines
    assert e.tokens_per_second is None and not e.has_tokens


def test_sub_millisecond_steps_keep_their_digits():
    from trainforge.plan.checks.estimates import step_text

    assert (step_text(0.00041), step_text(0.0032), step_text(0.060), step_text(1.5)) == (
        "0.41 ms",
        "3.2 ms",
        "60 ms",
        "1.50 s",
    )


def test_the_basis_names_the_jobs_strategy_not_the_anchors():
    line = next(x for x in lines_for(estimate(job(), A10G), "ns/cnn") if "basis:" in x)
    assert line.startswith("  basis: DDP over 8 ranks (an all-reduce of the fp32 gradients")
    assert "FSDP2 over" not in line
    gpt = parse_job({"name": "g", "team": "t", "pool": "p", "preset": "fsdp", "workers": 2,
                     "model": "gpt", "layers": 4, "dModel": 256, "heads": 4, "seqLen": 128,
                     "vocabSize": 1024, "steps": 10})  # fmt: skip
    e = estimate(gpt, A10G)
    line = next(x for x in lines_for(e, "ns/g") if "basis:" in x)
    assert line.startswith("  basis: FSDP2 over 8 ranks (parameter all-gathers")
    assert "tokens/s" in "".join(lines_for(e, "ns/g"))


def test_a_calibrated_mfu_is_the_one_used():
    cal = {"A10G": {"mfu": 0.5, "run": "cnn-cal", "date": "2026-11-27"}}
    e = estimate(job(), A10G, calibration=cal)
    assert e.timing.mfu_used == pytest.approx(0.5)
    assert e.basis.startswith("calibrated: run cnn-cal")
    assert "at 50% MFU" in e.method


def test_a_declared_model_that_states_tokens_shows_tokens():
    per_token = {k: v for k, v in CNN.items() if k != "flopsPerSample"}
    per_token.update(flopsPerToken=CNN["flopsPerSample"] / 256, tokensPerSample=256)
    e = estimate(job(per_token), A10G)
    assert e.has_tokens and e.tokens_per_second
    assert "tokens/s" in next(x for x in lines_for(e, "ns/cnn") if x.startswith("  step "))
