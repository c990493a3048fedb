"""The policy keys (trainforge-policy:costCaps, trainforge-policy:waivers): every problem at
once, in the one format, with did-you-mean for rule and team names; Pulumi's text values."""

from __future__ import annotations

import json

import pytest

from trainforge.stack.policy import (
    CostCaps,
    CostCapsError,
    Waiver,
    WaiverError,
    parse_caps,
    parse_waivers,
)

RULES = {"CKV_K8S_16", "TF_COST_JOB_CAP", "TF_COST_TEAM_CAP"}


def test_every_bad_waiver_in_one_error():
    raw = [
        {"resource": "a", "rule": "TF_COST_JOB_CAPP", "reason": "r"},
        {"resource": "b", "rule": "CKV_K8S_16", "reason": "  "},
        {"resource": "c", "rule": "CKV_K8S_16", "reason": "r", "reasn": "x"},
        "not a mapping",
        {"resource": "d", "rule": "CKV_K8S_16", "reason": "fine"},
        {"resource": "e", "rule": "SOMETHING_ELSE", "reason": "r"},
    ]
    with pytest.raises(WaiverError) as e:
        parse_waivers(raw, RULES)
    assert e.value.errors == [
        "trainforge-policy:waivers[0].rule: got 'TF_COST_JOB_CAPP'; expected one of the 3 rules "
        "of the plan (did you mean 'TF_COST_JOB_CAP'?)",
        "trainforge-policy:waivers[1].reason: got '  '; expected a reason: say why the rule "
        "does not apply here",
        "trainforge-policy:waivers[2].reasn: unknown key (did you mean 'reason'?); "
        "known keys: image, reason, resource, rule",
        "trainforge-policy:waivers[3]: got 'not a mapping'; expected a mapping with keys image, reason, resource, rule",
        "trainforge-policy:waivers[5].rule: got 'SOMETHING_ELSE'; expected one of the rules: "
        "CKV_K8S_16, TF_COST_JOB_CAP, TF_COST_TEAM_CAP",
    ]


def test_waivers_as_the_engine_hands_them_over_and_where_they_sit():
    raw = json.dumps([{"resource": " gpu-lt ", "rule": "CKV_K8S_16", "reason": " why "}])
    (w,) = parse_waivers(raw, RULES)
    assert (w.resource, w.reason, w.where) == ("gpu-lt", "why", "trainforge-policy:waivers[0]")
    assert w.covers("CKV_K8S_16", {"gpu-lt"}) and not w.covers("CKV_K8S_16", {"other"})
    assert parse_waivers(None, RULES) == parse_waivers("", RULES) == []
    # a waiver is a value: two alike are equal and hash alike (the plan keeps sets of them)
    assert Waiver(resource="x", rule="R", reason="y") in {
        Waiver(resource="x", rule="R", reason="y")
    }


def test_errors_can_be_collected_with_the_other_areas():
    errors: list[str] = ["trainforge:cluster: ..."]
    assert parse_waivers([{"rule": "CKV_K8S_16"}], None, errors) == []
    assert parse_caps({"jobPerHour": 0}, None, errors) == CostCaps()
    assert [e.split(":")[1] for e in errors] == [
        "cluster",
        "waivers[0].resource",
        "waivers[0].reason",
        "costCaps.jobPerHour",
    ]


def test_caps_problems_together_with_team_suggestions():
    raw = {
        "jobPerHour": "lots",
        "teamPerHour": True,
        "teams": {"visoin": {"teamPerHour": 5}, "llm": {"jobPerHour": -1, "perJob": 2}},
    }
    with pytest.raises(CostCapsError) as e:
        parse_caps(raw, {"llm", "vision"})
    assert e.value.errors == [
        "trainforge-policy:costCaps.jobPerHour: got 'lots'; expected a number",
        "trainforge-policy:costCaps.teamPerHour: got True; expected a number of USD per hour > 0",
        "trainforge-policy:costCaps.teams.llm.jobPerHour: got -1; expected a number of USD per hour > 0",
        "trainforge-policy:costCaps.teams.llm.perJob: unknown key; known keys: jobPerHour, "
        "teamPerHour, teamPerMonth",
    ]
    with pytest.raises(CostCapsError) as e:
        parse_caps({"teams": {"visoin": {"teamPerHour": 5}}}, {"llm", "vision"})
    assert e.value.errors == [
        "trainforge-policy:costCaps.teams.visoin: got 'visoin'; expected one of the teams: "
        "llm, vision (did you mean 'vision'?)"
    ]


def test_caps_from_pulumi_text_and_per_team_overrides():
    caps = parse_caps(json.dumps({"jobPerHour": "100", "teams": {"llm": {"teamPerHour": 9}}}))
    assert caps.for_team("llm") == (100.0, 9.0)
    assert caps.for_team("vision") == (100.0, None)
    assert parse_caps(None) == parse_caps("") == CostCaps()
