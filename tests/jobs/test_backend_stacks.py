"""The dev and prod stacks with `trainforge:jobBackend` set to each backend: the same jobs,
every object valid (the plan's validation: CRD-level webhook rules, core schemas, the pod the
Trainer builds), the controllers each backend needs and no others, and the same pods field
by field. A job switches backend with one line of stack config."""

from __future__ import annotations

import copy

import pytest

from tests.conftest import ROOT
from tests.jobs.schemas import crd_errors
from tests.jobs.test_backends import RENDEZVOUS, env_entries
from trainforge.core.contract import BACKENDS
from trainforge.jobs import trainjob
from trainforge.jobs.pod import GRACE_CLASSES
from trainforge.plan.core import plan_project
from trainforge.training.contract import ON_EXIT

KIND = {"pytorchjob": "PyTorchJob", "trainjob": "TrainJob", "indexed-job": "Job"}


def plan(stack: str, **overrides):
    config = {f"trainforge:{k}": v for k, v in overrides.items()}
    return plan_project(ROOT, stack, config_overrides=config, standins=False)


@pytest.fixture(scope="module", params=["dev", "prod"])
def stack_plans(request):
    return request.param, {b: plan(request.param, jobBackend=b) for b in BACKENDS}


def workloads(result, backend: str) -> dict[str, dict]:
    """The jobs' workload objects by job name (the FSx setup Jobs are not training jobs)."""
    return {
        o.doc["metadata"]["name"]: o.doc
        for o in result.objects
        if o.kind == KIND[backend] and "trainforge.io/job" in o.doc["metadata"].get("labels", {})
    }


def controller_pod(doc: dict, runtimes: dict[str, dict]) -> dict:
    if doc["kind"] == "PyTorchJob":
        specs = doc["spec"]["pytorchReplicaSpecs"]
        template = copy.deepcopy(specs["Master" if "Master" in specs else "Worker"]["template"])
        # the operator appends PYTHONUNBUFFERED=1 to every container (setPodEnv, v1.9)
        for c in template["spec"]["containers"]:
            c["env"] = [*c.get("env", []), {"name": "PYTHONUNBUFFERED", "value": "1"}]
        return template
    if doc["kind"] == "TrainJob":
        return trainjob.effective_pod(doc, runtimes[doc["spec"]["runtimeRef"]["name"]])
    return doc["spec"]["template"]


def types_of(result) -> set[str]:
    return {r.type for r in result.inventory.resources}


def test_same_jobs_all_valid_on_every_backend(stack_plans):
    stack, plans = stack_plans
    names = {b: set(workloads(p, b)) for b, p in plans.items()}
    assert names["pytorchjob"] and len({frozenset(n) for n in names.values()}) == 1, names
    for backend, result in plans.items():
        assert result.clean, [f"{v.resource}: {v.message}" for v in result.failing]
        assert result.validation["fail"] == 0 and result.validation["unchecked"] == 0
        for o in result.objects:
            if o.kind in ("TrainJob", "ClusterTrainingRuntime", "PyTorchJob", "PodMonitor"):
                assert crd_errors(o.doc) == [], f"{stack}/{backend}: {o.ident}"


def test_each_backend_installs_its_controller_and_no_other(stack_plans):
    _, plans = stack_plans
    operator, trainer = "trainforge:index:TrainingOperator", "trainforge:index:KubeflowTrainer"
    assert operator in types_of(plans["pytorchjob"])
    assert trainer not in types_of(plans["pytorchjob"])
    assert trainer in types_of(plans["trainjob"])
    assert operator not in types_of(plans["trainjob"])
    # indexed-job needs no operator: the platform installs none
    assert not {operator, trainer} & types_of(plans["indexed-job"])
    charts = [h for h in plans["trainjob"].helm() if h["type"] == "kubernetes:helm.sh/v4:Chart"]
    # JobSet from its own chart: the Trainer chart's bundled one (0.11.0) is off (versions.py)
    # (the plan lists resources in tree order, not registration order: compare as a set)
    assert sorted((h["chart"], h["version"]) for h in charts) == [
        ("oci://ghcr.io/kubeflow/charts/kubeflow-trainer", "2.2.1"),
        ("oci://registry.k8s.io/jobset/charts/jobset", "0.12.0"),
    ]
    runtimes = sorted(
        o.obj_name for o in plans["trainjob"].objects if o.kind == "ClusterTrainingRuntime"
    )
    # one per restart policy, each also for jobs with their own code (shipped / in the image),
    # each per terminationGracePeriodSeconds class (Kueue drops it from a TrainJob's patch),
    # and the Kubeflow SDK's default runtime
    assert runtimes == sorted(
        [
            *(
                name + suffix + trainjob.grace_suffix(grace)
                for name in trainjob.RUNTIMES.values()
                for suffix in trainjob.VARIANTS
                for grace in GRACE_CLASSES
            ),
            trainjob.SDK_RUNTIME,
        ]
    )
    assert len(runtimes) == 9 * len(GRACE_CLASSES) + 1


def test_the_pods_are_the_same_on_every_backend(stack_plans):
    stack, plans = stack_plans
    runtimes = {
        o.obj_name: o.doc for o in plans["trainjob"].objects if o.kind == "ClusterTrainingRuntime"
    }
    pods = {
        b: {n: controller_pod(d, runtimes) for n, d in workloads(p, b).items()}
        for b, p in plans.items()
    }
    for name, ref in pods["pytorchjob"].items():
        rc = ref["spec"]["containers"][0]
        for backend in ("trainjob", "indexed-job"):
            pod = pods[backend][name]
            c = pod["spec"]["containers"][0]
            where = f"{stack}/{name}/{backend}"
            assert c["resources"] == rc["resources"], where
            assert pod["spec"].get("tolerations") == ref["spec"].get("tolerations"), where
            assert pod["spec"]["volumes"] == ref["spec"]["volumes"], where
            assert c["volumeMounts"] == rc["volumeMounts"], where
            assert c["command"] == rc["command"] and c["image"] == rc["image"], where
            assert pod["spec"]["nodeSelector"] == ref["spec"]["nodeSelector"], where
            assert pod["spec"]["securityContext"] == ref["spec"]["securityContext"], where
            assert c["securityContext"] == rc["securityContext"], where
            env, ref_env = env_entries(c), env_entries(rc)
            # what the job's controller does after an exit is each backend's own answer
            # (core/failures, tests/jobs/test_restarts.py): told to every pod, not equal
            assert ON_EXIT in env and ON_EXIT in ref_env, where
            own = RENDEZVOUS | {ON_EXIT}
            common = {k: v for k, v in env.items() if k not in own and k[:4] != "PET_"}
            assert common == {k: v for k, v in ref_env.items() if k != ON_EXIT}, where
            assert env.keys() >= RENDEZVOUS, where


def test_a_job_switches_backend_with_one_line(tmp_path):
    """One `backend:` line on one job: that job becomes a TrainJob, the others stay, and the
    platform installs both controllers."""
    import yaml

    data = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    jobs = copy.deepcopy(data["trainforge:jobs"])
    jobs[1]["backend"] = "trainjob"
    result = plan("dev", jobs=jobs)
    assert result.clean, [v.message for v in result.failing]
    assert set(workloads(result, "trainjob")) == {jobs[1]["name"]}
    assert set(workloads(result, "pytorchjob")) == {j["name"] for j in jobs} - {jobs[1]["name"]}
    assert {"trainforge:index:TrainingOperator", "trainforge:index:KubeflowTrainer"} <= types_of(
        result
    )
    # the job resource is the same Pulumi resource on either backend (aliases): a replace
    (tj,) = [
        r
        for r in result.inventory.resources
        if r.type == "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
    ]
    assert tj.name == f"job-{jobs[1]['team']}-{jobs[1]['name']}"
