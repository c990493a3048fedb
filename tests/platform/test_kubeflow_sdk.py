"""The Kubeflow SDK as a real client: the seed's program lands on the platform.

Seed 002 submits with `TrainerClient().train(trainer=CustomTrainer(func=train, num_nodes=4,
resources_per_node={"gpu": 2}))`. Here that program runs unchanged with the real SDK
(kubeflow 0.4.1, in its own venv: `make sdk-venv`, tools/kubeflow-sdk/requirements.lock)
against a fake Kubernetes API server on 127.0.0.1 that answers from the offline plan of a
stack with the Trainer installed: the ClusterTrainingRuntime the SDK asks for is the one the
platform declares, and the TrainJob the SDK POSTs is captured as it is sent. That TrainJob
then goes through the plan's validation (CRD schema and runtime, plan/checks/validate.py) and
the pod-script rehearsal (plan/checks/pod_sandbox.py: its bash script, as the pod's user, on a
read-only root, in the runtime's working directory). Admission through the team's queue and
the pool's tolerations need the platform's queue pieces (a `default` LocalQueue per team,
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import ROOT
from trainforge.jobs import tenancy, trainjob
from trainforge.plan import sdk
from trainforge.plan.checks import pod_sandbox as sandbox
from trainforge.plan.checks import pod_scripts as P
from trainforge.plan.checks import validate as V
from trainforge.plan.core import plan_project

SDK_PYTHON = ROOT / ".sdk-venv" / "bin" / "python"
PROGRAM = ROOT / "tests" / "fixtures" / "kubeflow_sdk" / "seed_002_program.py"
NAMESPACE = "research"  # team research's namespace
GPU_POOL = "g5-4gpu"

pytestmark = pytest.mark.skipif(
    not SDK_PYTHON.exists(),
    reason="the Kubeflow SDK's venv .sdk-venv is absent: `make sdk-venv` creates it "
    "(`make test` does)",
)


@pytest.fixture(scope="module")
def plan():
    """dev with the Trainer installed and a 4-GPU pool (g5.12xlarge) the seed's 4 x 2 GPUs fit."""
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    pools = [
        *stack["trainforge:nodePools"],
        {
            "name": GPU_POOL,
            "instanceTypes": ["g5.12xlarge"],
            "capacityTypes": ["on-demand"],
            "limits": {"cpu": "192", "memory": "768Gi", "gpus": 8},
        },
    ]
    # the team's 8 guaranteed GPUs all in the 4-GPU pool (quota.pools): the SDK's gang of 8
    # fits one pool only if the team's share there holds it (docs/teams.md, "Quotas")
    teams = [{**stack["trainforge:teams"][0], "quota": {"gpus": "8", "cpu": "192",
                                                       "memory": "768Gi", "pods": "50",
                                                       "pools": {GPU_POOL: {"gpus": 8}}}}]  # fmt: skip
    overrides = {
        "trainforge:nodePools": pools,
        "trainforge:teams": teams,
        "trainforge:jobBackends": ["trainjob"],
    }
    return plan_project(ROOT, "dev", standins=False, config_overrides=overrides)


@pytest.fixture(scope="module")
def sent(plan) -> dict:
    """The TrainJob the seed's program sends, as the SDK sends it: the program runs against
    the API stand-in of `trainforge plan --sdk` (trainforge/plan/sdk.py), which answers from
    the plan's objects and records every request."""
    sub = sdk.run_program(PROGRAM, [o.doc for o in plan.objects], NAMESPACE, SDK_PYTHON)
    assert sub.returncode == 0, sub.output
    assert ("GET", f"/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/"
                   f"{trainjob.SDK_RUNTIME}") in sub.requests, sub.requests  # fmt: skip
    posts = [path for method, path in sub.requests if method == "POST"]
    assert posts == [f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NAMESPACE}/trainjobs"]
    (body,) = sub.created
    assert body["metadata"]["name"] == sub.stdout.strip().splitlines()[-1]
    # what the API server stores: the namespace of the URL
    assert body["metadata"]["namespace"] == NAMESPACE
    return body


def runtime_of(plan, name: str) -> dict:
    (doc,) = [o.doc for o in plan.objects if o.kind == "ClusterTrainingRuntime"
              and o.doc["metadata"]["name"] == name]  # fmt: skip
    return doc


def test_the_sdk_sends_a_trainjob_on_the_platforms_runtime(sent):
    spec = sent["spec"]
    ref = spec["runtimeRef"]
    # kubeflow 0.4.1 sends no kind: the TrainJob CRD defaults it to ClusterTrainingRuntime
    # (trainer v2.2.1 trainjobs CRD, spec.runtimeRef.kind default)
    kind = ref.get("kind", "ClusterTrainingRuntime")
    assert (kind, ref["name"]) == ("ClusterTrainingRuntime", trainjob.SDK_RUNTIME)
    trainer = spec["trainer"]
    assert trainer["numNodes"] == 4
    # the SDK sends the quantity as a JSON number (2.0), which a Quantity accepts
    assert {k: float(v) for k, v in trainer["resourcesPerNode"]["requests"].items()} == {
        "nvidia.com/gpu": 2.0
    }
    assert trainer["command"][:2] == ["bash", "-c"] and "torchrun" in trainer["command"][2]
    # no queue label and no tolerations: Kueue and the platform must supply them
    assert "kueue.x-k8s.io/queue-name" not in (sent["metadata"].get("labels") or {})


def test_the_sent_trainjob_passes_the_plans_validation(plan, sent):
    runtimes = {o.obj_name: o.doc for o in plan.objects if o.kind == trainjob.RUNTIME_KIND}
    assert trainjob.SDK_RUNTIME in runtimes
    status, findings = V.validate_object(sent, None, runtimes)
    assert (status, [f.message for f in findings]) == ("pass", [])


def test_its_pods_write_their_code_in_the_working_directory(plan, sent, tmp_path):
    """The SDK's own bash script, in the pod the Trainer builds from the platform's runtime:
    as its user, on a read-only root, in its workingDir; torchrun (not in this sandbox) is a
    stand-in that reads the file the script wrote and parses it as Python."""
    why = sandbox.unavailable()
    if why:
        pytest.skip(f"the pod sandbox cannot run here: {why}")
    pod = trainjob.effective_pod(sent, runtime_of(plan, trainjob.SDK_RUNTIME))
    (c,) = pod["spec"]["containers"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] and sc.get("runAsNonRoot", True)
    env = {e["name"]: e["value"] for e in c.get("env") or [] if "value" in e}
    assert env["HOME"] == tenancy.HOME
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = []
    hosts = {}
    for m in c["volumeMounts"]:
        host = tmp_path / m["name"]
        host.mkdir()
        if "emptyDir" in volumes[m["name"]]:
            host.chmod(0o777)  # an emptyDir, as the kubelet makes it
        hosts[m["mountPath"]] = host
        mounts.append(sandbox.Mount(host, m["mountPath"], bool(m.get("readOnly"))))
    # the plan's stand-ins for the image's programs (torchrun parses the file it is given)
    stand_in = tmp_path / "stand-in"
    stand_in.mkdir()
    mounts.append(P._stand_ins(stand_in))
    identity = sandbox.Identity.of(pod["spec"].get("securityContext"), sc)
    assert c["command"][:2] == ["bash", "-c"]
    result = sandbox.run(
        c["command"][2],
        identity,
        mounts,
        env={"HOME": env["HOME"], "PATH": f"{P.STAND_IN_DIR}:/usr/bin:/bin"},
        shell="/bin/bash",
        cwd=c.get("workingDir") or "/",
    )
    assert result.rc == 0, result.stdout + result.stderr
    assert "parsed " in result.stdout
    written = hosts[c["workingDir"]] / result.stdout.split("parsed ", 1)[1].strip()
    assert "dist.init_process_group" in written.read_text()


def test_the_plan_rehearses_the_sent_trainjob_s_script(plan, sent):
    """The plan's pod-script rehearsal (plan/checks/pod_scripts.py) finds the TrainJob, builds
    its pod from the platform's runtime as the test above does, and runs the SDK's script in
    every scenario: no finding. A runtime that mounts the working directory read-only makes
    the same script a finding."""
    if sandbox.unavailable():
        pytest.skip(f"the pod sandbox cannot run here: {sandbox.unavailable()}")
    import dataclasses

    from trainforge.plan.manifests import K8sObject

    name = sent["metadata"]["name"]
    ident = f"{NAMESPACE}/TrainJob/{name}"
    job = K8sObject(urn=f"urn:sdk:{name}", name=name, type="kubernetes:x:TrainJob", doc=sent)
    result = P.check(_ctx(plan, [*plan.objects, job]))
    assert [f.message for f in result.findings if f.resource == ident] == []
    (section,) = result.sections
    (entry,) = [e for e in section.data["scripts"] if e["object"] == ident]
    assert entry["scenarios"]["fresh volume"][0] == "run 1 ok", entry

    def read_only(o):
        if o.kind != "ClusterTrainingRuntime" or o.obj_name != trainjob.SDK_RUNTIME:
            return o
        doc = json.loads(json.dumps(o.doc))
        pod_spec = doc["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
        for m in pod_spec["template"]["spec"]["containers"][0]["volumeMounts"]:
            m["readOnly"] = m["mountPath"] == trainjob.SDK_WORKSPACE or m.get("readOnly", False)
        return dataclasses.replace(o, doc=doc)

    broken = P.check(_ctx(plan, [*(read_only(o) for o in plan.objects), job]))
    (f,) = [f for f in broken.findings if f.resource == ident]
    assert f.rule == P.SCRIPT_FAILS and "fails on run 1" in f.message


def _ctx(plan, objects=None):
    from trainforge.plan.check_types import PlanContext

    return PlanContext(
        inventory=plan.inventory,
        objects=list(plan.objects if objects is None else objects),
        declared=plan.inventory.declared,
        root=ROOT,
    )


def test_the_admission_rehearsal_decides_both_ways(plan, sent):
    """What Kueue does with the SDK's unlabelled, untolerating TrainJob: left alone without a
    `default` LocalQueue; on the platform as planned (a `default` LocalQueue, flavors that
    tolerate their pools' taints), admitted on the GPU flavor of the 4-GPU pool (4 pods x
    2 GPUs); refused by flavors that name their taints without tolerating them."""
    from trainforge.plan.checks import queues as Q

    pod = trainjob.effective_pod(sent, runtime_of(plan, trainjob.SDK_RUNTIME))
    alone = Q.admit_submitted(_ctx(plan, _without_default(plan)), sent, pod, 4)
    assert alone.state == "never" and "no LocalQueue 'default'" in alone.reason
    w = Q.admit_submitted(_ctx(plan), sent, pod, 4)
    # Kueue counts the team LimitRange's defaults for the requests the SDK leaves out (500m
    # CPU and 1Gi per pod: trainforge.plan.kueue.workload) beside the 2 GPUs per pod
    gib = 2**30
    need = {"nvidia.com/gpu": 8, "cpu": 2, "memory": 4 * gib}
    assert (w.state, w.flavor, w.need) == ("admitted", GPU_POOL, need), w.reason
    # a flavor that names its nodes' taints (nodeTaints) without tolerating them itself
    # (`tolerations`) refuses the SDK's pods, which tolerate nothing: Kueue's flavorassigner
    required = [_untolerating(o) if o.kind == "ResourceFlavor" else o for o in plan.objects]
    w = Q.admit_submitted(_ctx(plan, required), sent, pod, 4)
    assert w.state == "never" and "untolerated taint {nvidia.com/gpu " in w.reason, w.reason
    # named as Kueue names the trainer's pod set: its replicatedJob (Kueue release-0.19
    # pkg/controller/jobs/jobset `JobSet.PodSets`), not `main`
    assert "couldn't assign flavors to pod set node: " in w.reason, w.reason


def _untolerating(o):
    import copy
    import dataclasses

    doc = copy.deepcopy(o.doc)
    doc["spec"].pop("tolerations", None)
    return dataclasses.replace(o, doc=doc)


def _without_default(plan) -> list:
    return [o for o in plan.objects if not (o.kind == "LocalQueue" and o.obj_name == "default")]


def test_it_is_admitted_through_the_teams_queue_and_tolerates_the_pool(plan, sent):
    """On the platform as planned: Kueue gives the unlabelled TrainJob the team's `default`
    LocalQueue, assigns the GPU flavor of the 4-GPU pool, and the flavor's tolerations let
    its pods onto the pool's tainted nodes."""
    from trainforge.plan.checks import queues as Q

    pod = trainjob.effective_pod(sent, runtime_of(plan, trainjob.SDK_RUNTIME))
    w = Q.admit_submitted(_ctx(plan), sent, pod, 4)
    assert (w.state, w.reason) == ("admitted", "")
    assert w.flavor == GPU_POOL
