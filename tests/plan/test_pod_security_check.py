"""The plan says what Pod Security admission refuses: every namespace the program emits is read
with its labels, and every pod template in it is judged at that level (core/pod_security.py).

The security review's Job (a team namespace, `hostNetwork: true`, a `hostPath: /` volume, an
otherwise hardened securityContext) was CLEAN once the pod-script rule was waived; the team
namespace enforces baseline, so the Job controller would be refused every pod. The platform's
own pods pass their namespaces' levels in dev and prod."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import pod_scripts, pod_security
from trainforge.plan.manifests import K8sObject, k8s_objects
from trainforge.plan.registry import CHECKS
from trainforge.plan.runner import run_project

HARDENED = {
    "runAsNonRoot": True,
    "runAsUser": 504826,
    "runAsGroup": 504826,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def review_job(namespace: str) -> K8sObject:
    """The review's Job (rev21sec/evil_main.py, its hostNetwork/hostPath variant)."""
    doc = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "evil", "namespace": namespace},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "hostNetwork": True,
                    "containers": [
                        {
                            "name": "c",
                            "image": "public.ecr.aws/docker/library/busybox:1.36",
                            "command": ["sh", "-c", "ls /fsx"],
                            "securityContext": HARDENED,
                            "volumeMounts": [{"name": "h", "mountPath": "/fsx"}],
                        }
                    ],
                    "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
                }
            }
        },
    }
    return K8sObject("urn:pulumi:prod::trainforge::kubernetes:batch/v1:Job::evil", "evil",
                     "kubernetes:batch/v1:Job", doc)  # fmt: skip


@pytest.fixture(scope="module")
def stacks(repo_root):
    """The dev and prod programs' objects, recorded once for this module."""
    return {s: run_project(repo_root, s) for s in ("dev", "prod")}


def _check(inv, extra=()):
    objects = [*k8s_objects(inv), *extra]
    return pod_security.check(PlanContext(inventory=inv, objects=objects))


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_platform_s_own_pods_pass_their_namespaces_levels(stacks, stack):
    assert pod_security.check in [c.run for c in CHECKS]
    result = _check(stacks[stack])
    assert result.findings == []
    (section,) = result.sections
    data = section.data
    # the levels the platform gives its namespaces, read from the emitted labels
    assert data["fsx-admin"]["enforce"] == "baseline:latest"
    assert data["mlflow"]["enforce"] == "restricted:latest"
    assert data["fsx-admin"]["templates"] >= 1 and data["mlflow"]["templates"] >= 1
    if stack == "dev":
        assert data["research"] == {"enforce": "baseline:latest", "templates": 8, "refused": 0}
    else:
        assert data["trainforge-acceptance"]["enforce"] == "restricted:latest"
        assert data["trainforge-acceptance"]["templates"] == 5
        assert data["llm"]["enforce"] == data["vision"]["enforce"] == "baseline:latest"


def test_the_review_job_is_refused_by_its_team_namespace(stacks):
    (f,) = _check(stacks["prod"], [review_job("llm")]).findings
    assert f.rule == pod_security.RULE and f.resource == "llm/Job/evil"
    assert f.message.startswith(
        "llm/Job/evil (spec.template.spec): namespace llm enforces Pod Security "
        "baseline:latest, which refuses its pods: hostNamespaces (spec.hostNetwork / hostPID / "
        "hostIPC): host namespaces (hostNetwork=true); hostPathVolumes "
        '(spec.volumes[*].hostPath): hostPath volumes (volume "h").'
    )
    assert (
        '`violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), hostPath '
        'volumes (volume "h")`; the Job\'s controller is refused every pod (FailedCreate)'
    ) in f.message
    assert "remove hostNetwork" in f.fix and "team's FSx claim" in f.fix
    assert "capabilit" not in f.fix


def test_a_namespace_s_own_labels_decide(stacks):
    """The same Job in a namespace whose labels the test lowers to privileged is admitted:
    the check reads the emitted Namespace, not a table of its own."""
    inv = stacks["prod"]
    objects = []
    for o in k8s_objects(inv):
        if o.kind == "Namespace" and o.obj_name == "llm":
            doc = copy.deepcopy(o.doc)
            doc["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "privileged"
            o = dataclasses.replace(o, doc=doc)
        objects.append(o)
    ctx = PlanContext(inventory=inv, objects=[*objects, review_job("llm")])
    assert pod_security.check(ctx).findings == []


def test_the_pod_script_finding_s_fix_for_a_hostpath_names_volumes_not_capabilities():
    pod = {
        "containers": [
            {
                "name": "c",
                "command": ["sh", "-c", "ls /fsx"],
                "securityContext": HARDENED,
                "volumeMounts": [{"name": "h", "mountPath": "/fsx"}],
            }
        ],
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
    }
    s = pod_scripts.script_of(pod, pod["containers"][0], ident="llm/Job/evil")
    assert s is not None and s.skip == "volume 'h' is a hostPath, which is not rehearsed"
    assert "capabilit" not in (s.skip_fix or "")
    assert "in place of the hostPath volume" in (s.skip_fix or "")
    assert "TRAINFORGE_POD_SECURITY" in (s.skip_fix or "")


def test_a_restricted_team_refuses_only_the_operator_s_init_container(repo_root):
    """docs/configuration.md (teams[].podSecurity): `restricted` refuses the training
    operator's `init-pytorch` in the Workers of a Master/Worker PyTorchJob. The plan now says
    so, with a fix the user can apply; the other ways it names pass (an indexed Job, a
    TrainJob built from the platform's runtime, an elastic Worker-only PyTorchJob)."""
    from trainforge.stack.file import read_stack_file

    config = read_stack_file(repo_root / "Pulumi.dev.yaml").engine()
    teams = json.loads(config["trainforge:teams"])
    teams[0]["podSecurity"] = "restricted"
    jobs = {j["name"]: j for j in json.loads(config["trainforge:jobs"])}
    jobs["mnist-ddp"]["backend"] = "indexed-job"
    jobs["gpt-small-fsdp"]["backend"] = "trainjob"
    jobs["resumable"]["preset"] = "elastic"
    overrides = {
        "trainforge:teams": json.dumps(teams),
        "trainforge:jobs": json.dumps(list(jobs.values())),
    }
    result = _check(run_project(repo_root, "dev", config_overrides=overrides))
    (f,) = result.findings  # mnist-user: Master/Worker, the default backend
    assert f.resource == "research/PyTorchJob/mnist-user"
    assert "(Worker pod, spec.pytorchReplicaSpecs.Worker.template.spec)" in f.message
    assert 'container "init-pytorch" must set securityContext.allowPrivilegeEscalation=false' in (
        f.message
    )
    assert f.fix == pod_security.OPERATOR_FIX
    assert result.sections[0].data["research"]["templates"] == 5


def test_rehearsals_md_quotes_the_finding_the_plan_prints(stacks, repo_root):
    """docs/rehearsals.md's block is the review Job's finding as the verdict prints it."""
    import re

    text = (repo_root / "docs" / "rehearsals.md").read_text()
    section = text.split("## Pod Security admission", 1)[1].split("\n## ", 1)[0]
    block = section.split("```\n", 2)[1]
    (f,) = _check(stacks["prod"], [review_job("llm")]).findings
    assert block.splitlines()[0].strip() == f"[{f.rule}] {f.resource}"
    why = " ".join(line.strip() for line in block.split("why:", 1)[1].splitlines())
    assert re.sub(r"\s+", " ", why).strip() == f.message
