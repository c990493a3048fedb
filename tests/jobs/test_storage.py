"""Storage beyond the team's FSx claim: the team's further claims (from its team config, through
the contract), mounted where the job says; a custom checkpoint directory on a writable volume;
claims that are not the team's refused at preview."""

from __future__ import annotations

import dataclasses

import pytest

from tests.jobs.helpers import CODE, CPU_POOL, container, env_of, target, validate_pod_templates
from tests.jobs.schemas import crd_errors
from trainforge.core.errors import JobConfigError
from trainforge.jobs.backends import emit
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job

W = "trainforge:jobs[0]"
TEAM = target(CPU_POOL, claims=("research-datasets", "research-models"))
DATA = {"claim": "research-datasets", "mountPath": "/data", "readOnly": True}
MODELS = {"claim": "research-models", "mountPath": "/models", "subPath": "llm"}


def build(tgt=TEAM, **kw):
    raw = {"name": "byo", "team": "research", "pool": CPU_POOL.name, **kw}
    job = resolve_job(parse_job(raw, W), tgt, W)
    return job, emit(job, tgt, CODE)


def test_team_claims_are_mounted_where_the_job_says():
    _, out = build(volumes=[DATA, MODELS], checkpoint={"dir": "/models/ckpt/byo"})
    pj = out.pytorchjob
    assert crd_errors(pj) == [] and validate_pod_templates(pj) == 1
    c = container(pj)
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/data"] == {"name": "claim-0", "mountPath": "/data", "readOnly": True}
    assert mounts["/models"] == {"name": "claim-1", "mountPath": "/models", "subPath": "llm"}
    vols = {
        v["name"]: v
        for v in pj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["volumes"]
    }
    assert vols["claim-0"]["persistentVolumeClaim"] == {
        "claimName": "research-datasets",
        "readOnly": True,
    }
    assert vols["claim-1"]["persistentVolumeClaim"] == {"claimName": "research-models"}
    # the runtime and user code both see the checkpoint directory the job chose
    assert "--checkpoint-dir" in c["command"]
    assert c["command"][c["command"].index("--checkpoint-dir") + 1] == "/models/ckpt/byo"
    assert env_of(c)["TRAINFORGE_CHECKPOINT_DIR"] == "/models/ckpt/byo"


def test_a_relative_checkpoint_dir_is_on_the_team_fsx():
    _, out = build(checkpoint={"dir": "experiments/byo"})
    assert env_of(container(out.pytorchjob))["TRAINFORGE_CHECKPOINT_DIR"] == "/fsx/experiments/byo"


@pytest.mark.parametrize(
    "kw, match",
    [
        (
            {"volumes": [{"claim": "vision-datasets", "mountPath": "/data"}]},
            r"volumes\[0\]\.claim: got 'vision-datasets'; not a claim of team 'research' "
            r"\(namespace 'team-research'\); its claims are: fsx-research \(its FSx, on every "
            r"pod at /fsx\); further: research-datasets, research-models",
        ),
        (
            {"volumes": [{"claim": "fsx-research", "mountPath": "/data"}]},
            "the team's FSx claim is already mounted at /fsx",
        ),
        (
            {"volumes": [{**DATA, "mountPath": "/workspace/data"}]},
            r"volumes\[0\]\.mountPath: got '/workspace/data'; overlaps /workspace",
        ),
        ({"volumes": [{**DATA, "mountPath": "/fsx/data"}]}, "overlaps /fsx"),
        (
            {"volumes": [DATA], "checkpoint": {"dir": "/data/ckpt"}},
            r"checkpoint\.dir: got '/data/ckpt'; lies on volumes\[0\] \(research-datasets\), "
            "which is mounted readOnly",
        ),
        (
            {"checkpoint": {"dir": "/home/ckpt"}},
            r"checkpoint\.dir: got '/home/ckpt'; must lie on a volume of the job \(/fsx\)",
        ),
        ({"volumes": [DATA, {**MODELS, "mountPath": "/data/models"}]}, "overlaps volumes"),
        (
            {"volumes": [{"claim": "Bad_Name", "mountPath": "/d"}]},
            r"volumes\[0\]\.claim: got 'Bad_Name'",
        ),
        (
            {"volumes": [{"claim": "x", "mountPath": "data"}]},
            r"mountPath: got 'data'; expected an absolute",
        ),
        ({"checkpoint": {"dir": "../other-team"}}, r"checkpoint\.dir: .*without '\.\.'"),
    ],
)
def test_storage_mistakes_are_refused_at_preview(kw, match):
    with pytest.raises(JobConfigError, match=match):
        build(**kw)


def test_a_team_without_further_claims_names_its_fsx_claim():
    """A team with its FSx claim and no further ones: the refusal said "its claims are: none",
    as if the team had no storage, while its jobs mount fsx-<team> on every pod."""
    with pytest.raises(JobConfigError) as e:
        build(tgt=target(CPU_POOL), volumes=[DATA])
    assert str(e.value).endswith(
        "not a claim of team 'research' (namespace 'team-research'); its claims are: "
        "fsx-research (its FSx, on every pod at /fsx); no further ones. A platform admin lists "
        "further ones under trainforge:teams[].claims"
    ), str(e.value)
    # without FSx the team has only what its config lists
    no_fsx = target(CPU_POOL)
    no_fsx = dataclasses.replace(no_fsx, team=dataclasses.replace(no_fsx.team, claim_name=None))
    with pytest.raises(JobConfigError, match="its claims are: none. A platform admin"):
        build(tgt=no_fsx, volumes=[DATA])


def test_team_claims_come_from_the_team_config_through_the_contract():
    from trainforge.platform.published import team_facts
    from trainforge.platform.services_config import parse_services_config

    errors: list[str] = []
    services = parse_services_config(
        {"teams": [{"name": "research", "claims": ["research-datasets", "research-models"]}]},
        errors,
    )
    assert errors == []
    assert team_facts(services)["research"].claims == ("research-datasets", "research-models")


@pytest.mark.parametrize(
    "claims, message",
    [
        ("datasets", "trainforge:teams[0].claims: got 'datasets'; expected a list"),
        (
            ["Data_Sets"],
            "trainforge:teams[0].claims[0]: got 'Data_Sets'; expected a PersistentVolumeClaim name",
        ),
        (["fsx-research"], "the team's FSx claim is always mounted"),
        (["a", "a"], "trainforge:teams[0].claims[1]: got 'a'; expected each claim once"),
    ],
)
def test_bad_team_claims_are_reported(claims, message):
    from trainforge.platform.services_config import parse_services_config

    errors: list[str] = []
    parse_services_config({"teams": [{"name": "research", "claims": claims}]}, errors)
    assert any(message in e for e in errors), errors
