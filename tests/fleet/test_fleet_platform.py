"""The fleet's Pulumi side, in the real program (`__main__.py`) under the plan's mocks, with the
example stacks (Pulumi.fleet.yaml, Pulumi.fleet-use1.yaml) and StackReferences answered as a
`pulumi up` of the other stacks would have left them: the manager's MultiKueue objects, valid
against the vendored Kueue CRDs; managedBy on every backend's object; the bootstrap skip; the
worker's RBAC, its kubeconfig for the manager and its endpoint allow-list."""

from __future__ import annotations

import base64
import json
import pathlib
from typing import Any

import pulumi
import pytest

from trainforge.jobs import backends, indexed_job, pytorchjob, trainjob
from trainforge.plan import kueue_validate
from trainforge.plan.mocks import TrainforgeMocks, run_mocked
from trainforge.platform import fleet
from trainforge.stack.file import read_stack_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
TOKEN = "eyJ-worker-token"  # what the worker's token controller would write
# a made-up manager NAT address (not a documentation range)
MANAGER_EGRESS = ["52.94.76.17/32"]
NAT_IP = "54.210.0.9"  # what the mocks' EIPs allocate (made up, not a documentation range)


class TokenMocks(TrainforgeMocks):
    """The plan's mocks, plus Kubernetes' token controller: a service-account-token Secret
    comes back with its `data.token` filled (pulumi-kubernetes waits for it)."""

    def _outputs(self, typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict]:
        rid, out = super()._outputs(typ, name, inputs)
        if typ == "aws:ec2/eip:Eip":  # the address AWS allocates
            out["publicIp"] = NAT_IP
        if typ == "kubernetes:core/v1:Secret" and inputs.get("type") == (
            "kubernetes.io/service-account-token"
        ):
            out["data"] = {
                "token": base64.b64encode(TOKEN.encode()).decode(),
                "ca.crt": base64.b64encode(b"ca").decode(),
            }
        return rid, out


def run(stack: str, stack_outputs: dict[str, dict[str, Any]], monkeypatch) -> Any:
    warnings: list[str] = []
    real_warn = pulumi.log.warn
    monkeypatch.setattr(
        pulumi.log, "warn", lambda msg, *a, **k: (warnings.append(msg), real_warn(msg, *a, **k))
    )
    config = read_stack_file(ROOT / f"Pulumi.{stack}.yaml").engine()
    region = json.loads(config["aws:region"]) if config["aws:region"].startswith('"') else None
    references = {
        s: {"name": s, "outputs": out, "secretOutputNames": sorted(out)}
        for s, out in stack_outputs.items()
    }
    mocks = TokenMocks(region=region or config["aws:region"], references=references)
    result = run_mocked(ROOT / "__main__.py", config, stack=stack, mocks=mocks)
    result.warnings = warnings
    return result


SECRET_SIG = "4dabf18193072939515e22adb298388d"  # how Pulumi marks a secret value


def unsecret(value: Any) -> Any:
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return unsecret(value["value"])
        return {k: unsecret(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unsecret(v) for v in value]
    return value


def docs(result, kind: str) -> list[dict[str, Any]]:
    """The Kubernetes objects of `kind` the program declared, as their manifests."""
    return [
        unsecret(dict(r.inputs))
        for r in result.resources
        if r.type.startswith("kubernetes:") and r.type.endswith(f":{kind}")
    ]


def named(result, kind: str, name: str) -> dict[str, Any]:
    [doc] = [d for d in docs(result, kind) if d["metadata"]["name"] == name]
    return doc


def worker_kubeconfig() -> str:
    return fleet.token_kubeconfig(
        "trainforge-fleet-use1",
        "https://trainforge-fleet-use1.eks.us-east-1.amazonaws.com",
        "Y2E=",
        TOKEN,
    )


@pytest.fixture(scope="module")
def mp():
    with pytest.MonkeyPatch.context() as m:
        yield m


@pytest.fixture(scope="module")
def manager(mp):
    """The manager with worker use1 `up`'d (it exports its kubeconfig) and usw2 not yet."""
    outputs = {"fleet-use1": {"fleetKubeconfig": worker_kubeconfig(), "fleetRegion": "us-east-1"}}
    return run("fleet", outputs, mp)


@pytest.fixture(scope="module")
def worker(mp):
    """Worker use1 whose manager has been `up`'d (it exports its NAT addresses)."""
    return run("fleet-use1", {"fleet": {"fleetEgressCidrs": MANAGER_EGRESS}}, mp)


# --- the manager ----------------------------------------------------------------------------


def test_the_manager_declares_a_secret_and_cluster_per_reachable_worker(manager):
    secret = named(manager, "Secret", "use1-kubeconfig")
    assert secret["metadata"]["namespace"] == "kueue-system"
    [raw] = [r for r in manager.resources if r.name == "platform-fleet-use1-kubeconfig"]
    assert SECRET_SIG in json.dumps(raw.inputs["stringData"])  # a secret in the state too
    assert secret["stringData"] == {"kubeconfig": worker_kubeconfig()}
    cluster = named(manager, "MultiKueueCluster", "use1")
    assert cluster["spec"] == {
        "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "use1-kubeconfig"}}
    }
    [config] = docs(manager, "MultiKueueConfig")
    assert config["metadata"]["name"] == "trainforge-fleet"
    assert config["spec"] == {"clusters": ["use1"]}
    [check] = docs(manager, "AdmissionCheck")
    assert check["spec"]["controllerName"] == MULTIKUEUE
    assert check["spec"]["parameters"] == {
        "apiGroup": "kueue.x-k8s.io",
        "kind": "MultiKueueConfig",
        "name": "trainforge-fleet",
    }


def test_the_manager_objects_are_valid_against_the_vendored_crds(manager):
    objs = [
        *docs(manager, "MultiKueueCluster"),
        *docs(manager, "MultiKueueConfig"),
        *docs(manager, "AdmissionCheck"),
    ]
    assert len(objs) == 3
    for doc in objs:
        assert kueue_validate.kueue_findings(doc) == [], doc["kind"]


def test_the_crd_checks_can_fail():
    """What the vendored CRDs and their CEL rules refuse is said (the checks above can fail)."""
    [cluster, config, check] = fleet.manager_objects(["use1"])
    bad_cluster = {**cluster, "spec": {"clusterSource": {}}}
    assert kueue_validate.kueue_findings(bad_cluster) == [
        "spec.clusterSource: Invalid value: exactly one of the fields in [kubeConfig "
        "clusterProfileRef] must be set"
    ]
    assert kueue_validate.kueue_findings({**config, "spec": {"clusters": ["a", "a"]}}) == [
        "spec.clusters: Invalid value: must be unique"
    ]
    assert kueue_validate.kueue_findings({**config, "spec": {"clusters": []}}) != []
    wrong = {**check, "spec": {**check["spec"], "parameters": {"kind": "MultiKueueConfig"}}}
    assert kueue_validate.kueue_findings(wrong) != []


def test_every_team_cluster_queue_waits_for_the_multikueue_check(manager):
    queues = docs(manager, "ClusterQueue")
    assert queues
    for cq in queues:
        assert cq["spec"]["admissionChecksStrategy"] == {
            "admissionChecks": [{"name": "trainforge-fleet"}]
        }
        assert kueue_validate.kueue_findings(cq) == []


def test_a_worker_not_yet_up_is_skipped_with_the_order_to_run(manager):
    assert [d["metadata"]["name"] for d in docs(manager, "MultiKueueCluster")] == ["use1"]
    assert not [d for d in docs(manager, "Secret") if d["metadata"]["name"] == "usw2-kubeconfig"]
    assert (
        "trainforge:fleet.workers[1] (usw2): stack 'fleet-usw2' exports no fleetKubeconfig yet: "
        "MultiKueueCluster 'usw2' is skipped; `pulumi up` the worker stack 'fleet-usw2', then "
        "this manager again"
    ) in manager.warnings


def test_with_no_worker_up_the_queues_still_wait(mp):
    """Bootstrap: no MultiKueueCluster, no MultiKueueConfig (it needs one cluster), but the
    check is there and the queues list it, so no job ever runs on the manager."""
    bare = run("fleet", {}, mp)
    assert docs(bare, "MultiKueueCluster") == [] and docs(bare, "MultiKueueConfig") == []
    assert len(docs(bare, "AdmissionCheck")) == 1
    assert all("admissionChecksStrategy" in cq["spec"] for cq in docs(bare, "ClusterQueue"))
    assert sum("exports no fleetKubeconfig yet" in w for w in bare.warnings) == 2


def test_the_manager_exports_its_egress_and_its_jobs_carry_managed_by(manager):
    # one NAT gateway (natGateways: single): its address, as a /32
    assert manager.outputs["fleetEgressCidrs"] == [f"{NAT_IP}/32"]
    assert "fleetKubeconfig" not in manager.outputs
    jobs = docs(manager, "PyTorchJob")
    assert {j["metadata"]["name"] for j in jobs} == {"mnist-ddp", "gpt-small-fsdp"}
    assert all(j["spec"]["runPolicy"]["managedBy"] == MULTIKUEUE for j in jobs)


def test_the_manager_runs_no_fleet_worker_objects(manager):
    assert not [
        d for d in docs(manager, "ServiceAccount") if d["metadata"]["name"] == "multikueue-sa"
    ]


# --- managedBy on each backend ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "path"),
    [
        (pytorchjob, ("spec", "runPolicy", "managedBy")),
        (trainjob, ("spec", "managedBy")),
        (indexed_job, ("spec", "managedBy")),
    ],
)
def test_each_backend_keeps_managed_by_where_its_controller_reads_it(module, path):
    assert path == module.MANAGED_BY
    base = {"apiVersion": module.API_VERSION, "kind": module.KIND, "spec": {"x": 1}}
    doc = backends.managed(json.loads(json.dumps(base)), module.MANAGED_BY, MULTIKUEUE)
    node = doc
    for key in path:
        node = node[key]
    assert node == MULTIKUEUE
    # a single cluster's object is left as it was
    assert backends.managed(json.loads(json.dumps(base)), module.MANAGED_BY, None) == base


@pytest.mark.parametrize("backend", ["pytorchjob", "indexed-job"])
def test_a_manager_job_of_each_backend_is_valid_with_managed_by(backend, mp):
    """The manager's job, switched to each backend a manager may use, is emitted with
    managedBy where the CRD (or the Job API) has it, and the plan's validation accepts it (the
    trainjob backend is refused on a manager: tests/fleet/test_fleet_key.py; its emitter's
    managedBy is the test above)."""
    from trainforge.plan.checks.validate import validate_object

    config = read_stack_file(ROOT / "Pulumi.fleet.yaml").engine()
    jobs = json.loads(config["trainforge:jobs"])
    config["trainforge:jobs"] = json.dumps([{**jobs[0], "backend": backend}])
    config["trainforge:jobBackends"] = json.dumps([backend])
    result = run_mocked(
        ROOT / "__main__.py", config, stack="fleet", mocks=TokenMocks(region="us-east-1")
    )
    module = backends.EMITTERS[backend]
    runtimes = {d["metadata"]["name"]: d for d in docs(result, "ClusterTrainingRuntime")}
    [doc] = [d for d in docs(result, module.KIND) if d["metadata"]["name"] == "mnist-ddp"]
    node = doc
    for key in module.MANAGED_BY:
        node = node[key]
    assert node == MULTIKUEUE
    status, findings = validate_object(doc, None, runtimes)
    assert status == "pass", findings


# --- the worker --------------------------------------------------------------------------------


def test_the_worker_grants_the_manager_upstreams_rules_and_no_more(worker):
    role = named(worker, "ClusterRole", "multikueue-sa-role")
    rule = lambda g, r, *v: {"apiGroups": [g], "resources": r, "verbs": list(v)}  # noqa: E731
    jobs = ("create", "delete", "get", "list", "watch")
    assert role["rules"] == [
        rule("kueue.x-k8s.io", ["workloads"], *jobs, "update", "patch"),
        rule("kueue.x-k8s.io", ["clusterqueues", "localqueues"], "get", "list", "watch"),
        rule("kueue.x-k8s.io", ["workloads/status"], "get", "patch", "update"),
        rule("batch", ["jobs"], *jobs),
        rule("batch", ["jobs/status"], "get"),
        rule("kubeflow.org", ["pytorchjobs"], *jobs),
        rule("kubeflow.org", ["pytorchjobs/status"], "get"),
    ]
    binding = named(worker, "ClusterRoleBinding", "multikueue-sa-crb")
    assert binding["roleRef"]["name"] == "multikueue-sa-role"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "multikueue-sa", "namespace": "kueue-system"}
    ]
    sa = named(worker, "ServiceAccount", "multikueue-sa")
    assert sa["metadata"]["namespace"] == "kueue-system"
    token = named(worker, "Secret", "multikueue-sa")
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"] == {
        "kubernetes.io/service-account.name": "multikueue-sa"
    }


def test_trainjob_rules_come_with_the_trainjob_backend():
    kinds = {tuple(r["resources"]) for r in fleet.worker_rules(["trainjob", "indexed-job"])}
    assert ("trainjobs",) in kinds and ("trainjobs/status",) in kinds
    assert ("pytorchjobs",) not in kinds


def test_the_worker_exports_a_token_kubeconfig_without_exec(worker):
    kubeconfig = json.loads(worker.outputs["fleetKubeconfig"])
    [user] = kubeconfig["users"]
    assert user["user"] == {"token": TOKEN}  # no exec plugin: MultiKueue refuses those
    [cluster] = kubeconfig["clusters"]
    assert cluster["cluster"]["server"] == (
        "https://trainforge-fleet-use1.eks.us-east-1.amazonaws.com"
    )
    assert worker.outputs["fleetRegion"] == "us-east-1"
    assert "fleetEgressCidrs" not in worker.outputs


def test_the_worker_endpoint_admits_the_manager_egress(worker, mp):
    [eks] = worker.of_type("eks:index:Cluster")
    assert eks.inputs["endpointPublicAccess"] is True
    assert set(MANAGER_EGRESS) <= set(eks.inputs["publicAccessCidrs"])
    before = run("fleet-use1", {}, mp)  # the manager not `up`'d yet
    [eks] = before.of_type("eks:index:Cluster")
    assert not set(MANAGER_EGRESS) & set(eks.inputs["publicAccessCidrs"])
    assert (
        "trainforge:fleet.manager: stack 'fleet' exports no fleetEgressCidrs yet: this worker's "
        "API endpoint admits no manager address; `pulumi up` the manager stack, then this "
        "worker again"
    ) in before.warnings


def test_the_fleet_component_is_a_child_of_the_platform(worker, manager):
    for result in (worker, manager):
        [component] = result.of_type("trainforge:index:Fleet")
        by_urn = {r.urn: r for r in result.resources if r.urn}
        assert by_urn[component.parent].type == "trainforge:index:TrainingPlatform"
        children = [r for r in result.resources if r.parent == component.urn]
        assert children


def test_a_single_cluster_stack_declares_nothing_of_the_fleet(mp):
    """dev (no trainforge:fleet): no Fleet, no StackReference, no admission check on its
    queues, no managedBy on its jobs, no fleet outputs."""
    dev = run("dev", {}, mp)
    assert dev.of_type("trainforge:index:Fleet") == []
    assert dev.of_type("pulumi:pulumi:StackReference") == []
    assert docs(dev, "AdmissionCheck") == []
    assert all("admissionChecksStrategy" not in cq["spec"] for cq in docs(dev, "ClusterQueue"))
    jobs = docs(dev, "PyTorchJob")
    assert jobs and all("managedBy" not in j["spec"]["runPolicy"] for j in jobs)
    assert not {k for k in dev.outputs if k.startswith("fleet")}


def test_the_manager_kueue_integrates_every_backend_and_keeps_multikueue_on(manager):
    """MultiKueue dispatches a job kind through its integration's adapter: the manager's Kueue
    lists the integration of every backend, and no feature gate turns MultiKueue off."""
    import yaml

    from trainforge.platform.kueue import FRAMEWORKS

    [release] = [r for r in manager.of_type("kubernetes:helm.sh/v3:Release")
                 if r.inputs.get("name") == "kueue"]  # fmt: skip
    values = unsecret(release.inputs["values"])
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert set(FRAMEWORKS.values()) <= set(config["integrations"]["frameworks"])
    gates = values["controllerManager"].get("featureGates", [])
    assert not [g for g in gates if g["name"] == "MultiKueue" and not g["enabled"]]
