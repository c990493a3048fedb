"""TrainingJob under Pulumi mocks: children, options (replace on spec change, delete before
replace), provider, failures before any resource, stack-config declaration, schema."""

from __future__ import annotations

import dataclasses

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi.provider.experimental.analyzer import Analyzer

from tests.jobs import pulumi_harness as harness
from tests.jobs.helpers import CODE, GPU_POOL, target
from trainforge.core.contract import PlatformContract, PoolFacts, TeamFacts, TeamQuota
from trainforge.core.errors import JobConfigError
from trainforge.jobs import codeship
from trainforge.jobs.component import TrainingJob
from trainforge.jobs.declare import declare_jobs

ARGS = {"team": "research", "pool": "gpu-workloads", "workers": 2, "model": "gpt", "steps": 100}


def by_type(monitor, typ):
    return [r for r in monitor.registered if r.typ == typ]


def pytorchjob_of(monitor):
    (pj,) = by_type(monitor, "kubernetes:kubeflow.org/v1:PyTorchJob")
    return pj


def test_children_and_their_options():
    m = harness.run(lambda: TrainingJob("llm", ARGS, target=target(GPU_POOL), code=CODE))
    (comp,) = by_type(m, "trainforge:index:TrainingJob")
    assert comp.name == "llm"
    pj = pytorchjob_of(m)
    assert pj.parent.endswith("trainforge:index:TrainingJob::llm")
    assert pj.delete_before_replace is True
    assert pj.replace_on_changes == ["spec"]
    assert pj.custom_timeouts.delete == "420s"  # grace 90 + 30 + 300 margin
    assert pj.inputs["metadata"]["annotations"] == {
        "pulumi.com/deletionPropagationPolicy": "foreground",
        # the plan's expected duration, for `trainforge status` of a job queued behind it
        "trainforge.io/expected-duration": "unknown: set expectedStepSeconds (or "
        "runPolicy.activeDeadlineSeconds as a ceiling)",
    }
    assert pj.inputs["spec"] == m.result.manifests.workload["spec"]
    (cm,) = by_type(m, "kubernetes:core/v1:ConfigMap")
    assert cm.inputs["immutable"] is True and cm.inputs["metadata"]["name"] == CODE.configmap_name(
        "llm"
    )
    assert cm.parent == pj.parent and cm.delete_before_replace is False
    (pm,) = by_type(m, "kubernetes:monitoring.coreos.com/v1:PodMonitor")
    assert pm.parent == pj.parent
    assert pm.inputs["spec"]["selector"]["matchLabels"]["trainforge.io/job"] == "llm"


def test_a_spec_change_replaces_the_job_and_deletes_the_old_one_first():
    """Pulumi replaces a resource when a property in replaceOnChanges differs; with
    deleteBeforeReplace the old PyTorchJob is deleted before the new one is created."""
    first = harness.run(lambda: TrainingJob("llm", ARGS, target=target(GPU_POOL), code=CODE))
    second = harness.run(
        lambda: TrainingJob("llm", {**ARGS, "steps": 200}, target=target(GPU_POOL), code=CODE)
    )
    a, b = pytorchjob_of(first), pytorchjob_of(second)
    assert a.inputs["spec"] != b.inputs["spec"]
    assert a.inputs["metadata"] == b.inputs["metadata"]  # same name: replacement, not a second job
    assert "spec" in b.replace_on_changes and b.delete_before_replace


def test_a_code_change_gets_a_new_configmap_and_a_new_job_spec():
    other = codeship.CodeBundle(
        files=(*CODE.files[:2], ("trainforge/training/__main__.py", "print(2)\n"))
    )
    a = harness.run(lambda: TrainingJob("llm", ARGS, target=target(GPU_POOL), code=CODE))
    b = harness.run(lambda: TrainingJob("llm", ARGS, target=target(GPU_POOL), code=other))
    name = lambda m: by_type(m, "kubernetes:core/v1:ConfigMap")[0].inputs["metadata"]["name"]  # noqa: E731
    assert name(a) != name(b)
    assert pytorchjob_of(a).inputs["spec"] != pytorchjob_of(b).inputs["spec"]


def test_kubernetes_provider_is_used_by_every_child():
    def program():
        provider = k8s.Provider("cluster", kubeconfig="{}")
        return TrainingJob("llm", ARGS, target=target(GPU_POOL), code=CODE, provider=provider)

    m = harness.run(program)
    children = [
        r
        for r in m.registered
        if r.typ.startswith("kubernetes:") and r.typ != "pulumi:providers:kubernetes"
    ]
    assert len(children) == 3
    assert all("pulumi:providers:kubernetes::cluster" in r.provider for r in children)


def test_invalid_job_fails_before_any_resource():
    with pytest.raises(JobConfigError, match=r"TrainingJob llm\.gpusPerWorker: got 8"):
        harness.run(
            lambda: TrainingJob(
                "llm", {**ARGS, "gpus_per_worker": 8}, target=target(GPU_POOL), code=CODE
            )
        )


def test_presets_and_outputs():
    m = harness.run(
        lambda: TrainingJob.elastic(
            "el",
            {**ARGS, "workers": 3, "elastic": {"min_workers": 2, "max_workers": 4}},
            target=target(GPU_POOL),
            code=CODE,
        )
    )
    spec = pytorchjob_of(m).inputs["spec"]
    assert spec["elasticPolicy"]["minReplicas"] == 2 and list(spec["pytorchReplicaSpecs"]) == [
        "Worker"
    ]
    f = harness.run(lambda: TrainingJob.fsdp("sh", ARGS, target=target(GPU_POOL), code=CODE))
    assert (
        "fsdp"
        in pytorchjob_of(f).inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"][
            "containers"
        ][0]["command"]
    )
    assert f.result.spec.strategy == "fsdp"


def test_target_in_args_for_other_languages():
    t = target(GPU_POOL)
    raw_target = {
        "namespace": t.namespace,
        "service_account": t.service_account,
        "claim_name": t.claim_name,
        "checkpoint_bucket": pulumi.Output.from_input("b"),  # an output, as from the platform
        "pool": {
            **{
                k: v
                for k, v in dataclasses.asdict(GPU_POOL).items()
                if k not in ("taints", "node_selector")
            },
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            "node_selector": {"karpenter.sh/nodepool": "gpu-workloads"},
        },
        "quota": {"gpus": "16"},
    }
    user_image = {"image": "ghcr.io/acme/trainforge:1.0"}  # has boto3: the S3 mirror is on
    m = harness.run(
        lambda: TrainingJob("llm", {**ARGS, **user_image, "target": raw_target}, code=CODE)
    )
    pod = pytorchjob_of(m).inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["nodeSelector"] == {"karpenter.sh/nodepool": "gpu-workloads"}
    cmd = pod["containers"][0]["command"]
    assert cmd[cmd.index("--checkpoint-s3") + 1] == "s3://b/checkpoints/llm"
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule", "operator": "Exists"}
    ]


def test_schema_analyzer_infers_inputs_and_outputs():
    result = Analyzer("trainforge").analyze([TrainingJob])
    comp = result["component_definitions"]["TrainingJob"]
    for key in (
        "team",
        "pool",
        "preset",
        "workers",
        "gpusPerWorker",
        "checkpoint",
        "elastic",
        "runPolicy",
        "target",
        "image",
    ):
        assert key in comp.inputs
    assert sorted(comp.outputs) == ["backend", "checkpointDir", "jobName", "namespace", "workers"]
    assert "backend" in comp.inputs
    types = result["type_definitions"]
    assert {"JobTargetArgs", "JobPoolArgs", "JobCheckpointArgs", "JobElasticArgs"} <= set(types)
    # the bucket name is an output of the platform, so it may be one here too
    target_props = types["JobTargetArgs"].properties
    assert target_props["checkpointBucket"].plain is None and target_props["namespace"].plain


def fake_contract() -> PlatformContract:
    """A platform contract as a program without our platform component would build it."""
    return PlatformContract(
        pools={
            "gpu-workloads": GPU_POOL,
            "training-workloads": PoolFacts(
                "training-workloads",
                instance_types=("c5.4xlarge",),
                vcpus_per_node=16,
                memory_mib_per_node=32768,
            ),
        },
        teams={
            "research": TeamFacts(
                "research",
                namespace="team-research",
                claim_name="fsx-research",
                quota=TeamQuota(gpus="16"),
            )
        },
        checkpoint_bucket="ckpt",
    )


def test_declare_jobs_from_stack_config():
    raw = [
        {
            "name": "gpt",
            "team": "research",
            "pool": "gpu-workloads",
            "preset": "fsdp",
            "workers": 2,
        },
        {"name": "mnist", "team": "research", "pool": "training-workloads", "model": "mlp"},
    ]
    m = harness.run(lambda: declare_jobs(fake_contract(), raw, code=CODE))
    assert sorted(r.name for r in by_type(m, "trainforge:index:TrainingJob")) == [
        "job-research-gpt",
        "job-research-mnist",
    ]
    assert len(by_type(m, "kubernetes:kubeflow.org/v1:PyTorchJob")) == 2


def test_declare_jobs_rejects_before_declaring_any():
    raw = [
        {"name": "ok", "team": "research", "pool": "gpu-workloads"},
        {"name": "big", "team": "research", "pool": "gpu-workloads", "workers": 5},
    ]
    seen = []

    def program():
        try:
            declare_jobs(fake_contract(), raw, code=CODE)
        except JobConfigError as e:
            seen.append(str(e))
        return pulumi.Output.from_input(None)

    m = harness.run(program)
    assert seen and seen[0].startswith("trainforge:jobs[1].workers:") and "quota of 16" in seen[0]
    assert not by_type(m, "trainforge:index:TrainingJob")


def test_plan_policy_rules_accept_every_job_resource():
    """The same security rules `trainforge plan` and the policy pack enforce (the stock
    PyTorch image through a pull-through cache with a Docker Hub rule: TRAINFORGE_DOCKER_HUB)."""
    from tests.jobs.helpers import DLC_IMAGE, EFA_POOL
    from trainforge.core.image_routes import routes_for
    from trainforge.jobs.runtime_images import NoRuntime
    from trainforge.plan.checks.rules import check_resource

    cache = NoRuntime(
        routes_for("1.dkr.ecr.us-west-2.amazonaws.com", docker_hub=True, github=False)
    )
    m = harness.run(
        lambda: [
            TrainingJob("llm", ARGS, target=target(GPU_POOL, images=cache), code=CODE),
            TrainingJob(
                "el",
                {
                    "team": "research",
                    "pool": "efa-p5",
                    "preset": "elastic",
                    "image": DLC_IMAGE,
                    "elastic": {"max_workers": 3},
                },
                target=target(EFA_POOL),
                code=CODE,
            ),
        ]
    )
    checked = [r for r in m.registered if r.typ.startswith("kubernetes:")]
    assert len(checked) == 6
    assert {r.name: check_resource(r.typ, r.inputs) for r in checked} == {
        r.name: [] for r in checked
    }


# --- bring your own code ------------------------------------------------------------------------


def test_a_script_job_declares_its_code_configmap_before_the_job(tmp_path, monkeypatch):
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "train.py").write_text("print('hi')\n")
    (tmp_path / "train" / "vocab.bin").write_bytes(b"\xff\x00\x01")
    monkeypatch.chdir(tmp_path)  # paths are relative to the project directory
    args = {
        "team": "research",
        "pool": "gpu-workloads",
        "workers": 2,
        "entrypoint": {"script": "train/train.py", "args": ["--lr", "0.1"]},
    }
    m = harness.run(lambda: TrainingJob("byo", args, target=target(GPU_POOL), code=CODE))
    cms = {r.name: r for r in by_type(m, "kubernetes:core/v1:ConfigMap")}
    assert set(cms) == {"byo-code", "byo-src"}
    src = cms["byo-src"]
    assert src.inputs["immutable"] is True
    assert src.inputs["metadata"]["name"].startswith("byo-src-")
    assert src.inputs["data"] == {"train.py": "print('hi')\n"}
    assert src.inputs["binaryData"] == {"vocab.bin": "/wAB"}
    pj = pytorchjob_of(m)
    pod = pj.inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["containers"][0]["command"][-3:] == ["/workspace/train.py", "--lr", "0.1"]


def test_training_job_function_ships_the_function():
    from tests.jobs import user_functions as uf

    m = harness.run(
        lambda: TrainingJob.function(
            "fn",
            uf.train,
            {"team": "research", "pool": "gpu-workloads", "workers": 2},
            function_args={"steps": 2},
            target=target(GPU_POOL),
            code=CODE,
        )
    )
    (src,) = [r for r in by_type(m, "kubernetes:core/v1:ConfigMap") if r.name == "fn-src"]
    assert "def train(" in src.inputs["data"]["train_fn.py"]
    assert (
        pytorchjob_of(m).inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"][
            "containers"
        ][0]["command"][-1]
        == "/workspace/train_fn.py"
    )


def test_declare_jobs_refuses_a_missing_script_before_declaring_any(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raw = [
        {"name": "ok", "team": "research", "pool": "gpu-workloads"},
        {
            "name": "byo",
            "team": "research",
            "pool": "training-workloads",
            "entrypoint": {"script": "examples/mnist/trian.py"},
        },
    ]
    seen = []

    def program():
        try:
            declare_jobs(fake_contract(), raw, code=CODE)
        except JobConfigError as e:
            seen.append(str(e))
        return pulumi.Output.from_input(None)

    m = harness.run(program)
    assert seen == [
        "trainforge:jobs[1].entrypoint.script: got 'examples/mnist/trian.py'; no such file "
        "(paths are relative to the project directory, where Pulumi runs)"
    ]
    assert not by_type(m, "trainforge:index:TrainingJob")


WORKLOADS = {
    "pytorchjob": "kubernetes:kubeflow.org/v1:PyTorchJob",
    "trainjob": "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",
    "indexed-job": "kubernetes:batch/v1:Job",
}


@pytest.mark.parametrize("backend", sorted(WORKLOADS))
def test_each_backend_is_one_workload_replaced_delete_first(backend):
    """Same resource name on every backend, the other backends' types as aliases: a change of
    backend is a replacement (old one deleted first), not a second job beside the first."""
    all_backends = target(GPU_POOL, backends=tuple(WORKLOADS))
    m = harness.run(
        lambda: TrainingJob("llm", {**ARGS, "backend": backend}, target=all_backends, code=CODE)
    )
    (wl,) = by_type(m, WORKLOADS[backend])
    assert wl.name == "llm" and wl.parent.endswith("trainforge:index:TrainingJob::llm")
    assert sorted(wl.aliases) == sorted(t for b, t in WORKLOADS.items() if b != backend)
    assert wl.delete_before_replace is True and wl.replace_on_changes == ["spec"]
    annotations = wl.inputs["metadata"]["annotations"]
    assert annotations["pulumi.com/deletionPropagationPolicy"] == "foreground"
    assert "pulumi.com/skipAwait" not in annotations  # it would skip awaiting the deletion
    assert wl.inputs["spec"] == m.result.manifests.workload["spec"]
    assert m.result.backend  # an output
    others = [t for b, t in WORKLOADS.items() if b != backend]
    assert not any(by_type(m, t) for t in others)
    services = by_type(m, "kubernetes:core/v1:Service")
    if backend == "indexed-job":
        # a training Job is awaited until it exists, not until it completes
        assert annotations["pulumi.com/waitFor"] == "jsonpath={.metadata.uid}"
        (svc,) = services
        assert svc.inputs["spec"]["clusterIP"] == "None"
        assert any(d.endswith("kubernetes:batch/v1:Job::llm") for d in svc.dependencies)
    else:
        assert services == []


def test_the_job_waits_for_its_backends_controller_only():
    contract = fake_contract()
    marker = {}

    def program():
        op = k8s.core.v1.ConfigMap("operator")
        tr = k8s.core.v1.ConfigMap("trainer")
        c = dataclasses.replace(
            contract,
            backends=("pytorchjob", "trainjob"),
            backend_ready={"pytorchjob": (op,), "trainjob": (tr,)},
        )
        marker["job"] = TrainingJob("llm", {**ARGS, "backend": "trainjob"}, contract=c, code=CODE)
        return marker["job"]

    m = harness.run(program)
    (comp,) = by_type(m, "trainforge:index:TrainingJob")
    assert any(d.endswith("ConfigMap::trainer") for d in comp.dependencies)
    assert not any(d.endswith("ConfigMap::operator") for d in comp.dependencies)


def test_declare_jobs_refuses_a_backend_the_platform_does_not_run():
    raw = [{"name": "gpt", "team": "research", "pool": "gpu-workloads", "backend": "trainjob"}]
    with pytest.raises(JobConfigError, match=r"trainforge:jobs\[0\]\.backend: got 'trainjob'"):
        harness.run(lambda: declare_jobs(fake_contract(), raw, code=CODE))


def test_trainer_runtimes_wait_for_the_chart_and_jobs_for_the_runtimes():
    """The Trainer webhook must be up before the runtimes, the runtimes before a TrainJob."""
    from trainforge.platform.trainer import KubeflowTrainer, KubeflowTrainerArgs

    def program():
        provider = k8s.Provider("cluster", kubeconfig="{}")
        trainer = KubeflowTrainer("trainer", KubeflowTrainerArgs(k8s_provider=provider))
        c = dataclasses.replace(
            fake_contract(), backends=("trainjob",), backend_ready={"trainjob": (trainer,)}
        )
        return TrainingJob("llm", {**ARGS, "backend": "trainjob"}, contract=c, code=CODE)

    m = harness.run(program)
    jobset, chart = by_type(m, "kubernetes:helm.sh/v4:Chart")
    # JobSet's chart before the Trainer's: the Trainer's controller watches JobSets
    assert jobset.name == "trainer-jobset" and any(
        d.endswith("kubernetes:helm.sh/v4:Chart::trainer-jobset") for d in chart.dependencies
    )
    runtimes = by_type(m, "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime")
    assert sorted(r.inputs["metadata"]["name"] for r in runtimes) == sorted(
        [
            f"trainforge-torch{policy}{variant}{grace}"
            for policy in ("", "-exitcode", "-never")
            for variant in ("", "-code", "-image")  # jobs with their own code (shipped, in image)
            # terminationGracePeriodSeconds classes (Kueue drops it from a TrainJob's patch)
            for grace in ("", "-grace330", "-grace630", "-grace930", "-grace1830", "-grace3630")
        ]
        + ["torch-distributed"]  # the Kubeflow SDK's default runtime (trainjob.SDK_RUNTIME)
    )
    assert all(
        any(d.endswith("kubernetes:helm.sh/v4:Chart::trainer") for d in r.dependencies)
        for r in runtimes
    )
    assert chart.inputs["version"] == "2.2.1" and chart.inputs["namespace"] == "kubeflow-system"
    (comp,) = by_type(m, "trainforge:index:TrainingJob")
    # waiting for the Trainer component means waiting for its runtimes
    assert all(any(d.endswith(r.name) for d in comp.dependencies) for r in runtimes)
