"""The upstream CRDs are package data read by both the plan and the tests, and the plan's Kueue
check validates against their openAPIV3Schema and CEL rules: every refusal the hand-written
field lists and CEL copies used to report is still reported, now by the CRD itself (its CEL
rules evaluated by `trainforge.plan.crd_cel`), and the webhooks' Go checks by their code."""

from __future__ import annotations

import copy

import pytest

from tests.conftest import ROOT
from tests.jobs import schemas
from trainforge.jobs import trainjob
from trainforge.plan import crds, kueue_validate
from trainforge.plan.checks import validate

A = kueue_validate.API_VERSION
GOOD = {
    "cohortName": "c",
    "resourceGroups": [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "1"}]}],
        }
    ],
}


def _cq(**spec) -> dict:
    return {"apiVersion": A, "kind": "ClusterQueue", "metadata": {"name": "a"},
            "spec": {**copy.deepcopy(GOOD), **spec}}  # fmt: skip


def _res(**res) -> dict:
    return _cq(resourceGroups=[{"coveredResources": ["cpu"],
                                "flavors": [{"name": "f", "resources": [{"name": "cpu", **res}]}]}])  # fmt: skip


def _doc(kind: str, spec: dict | None = None, **top) -> dict:
    d = {"apiVersion": A, "kind": kind, "metadata": {"name": "a", "namespace": "n"}, **top}
    return d if spec is None else {**d, "spec": spec}


# (object, a substring of the finding): what the old written-out lists refused
REFUSED = [
    (_cq(bogus=1), "spec.bogus: unknown field"),
    (_cq(queueingStrategy="X"), "spec.queueingStrategy: 'X' is not one of"),
    (_cq(preemption={"withinClusterQueue": "X"}), "spec.preemption.withinClusterQueue"),
    (_cq(preemption={"reclaimWithinCohort": "X"}), "spec.preemption.reclaimWithinCohort"),
    (_cq(preemption={"borrowWithinCohort": {"policy": "X"}}), "borrowWithinCohort.policy"),
    (
        _cq(
            preemption={
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": "x"}
            }
        ),
        "maxPriorityThreshold: 'x' is not of type 'integer'",
    ),  # fmt: skip
    (_cq(resourceGroups=GOOD["resourceGroups"] * 17), "spec.resourceGroups: at most 16 items"),
    (
        _cq(resourceGroups=[{"flavors": GOOD["resourceGroups"][0]["flavors"]}]),
        "'coveredResources' is a required property",
    ),  # fmt: skip
    (_cq(resourceGroups=[{"coveredResources": ["cpu"]}]), "'flavors' is a required property"),
    (
        _cq(
            resourceGroups=[
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": f"f{i}", "resources": [{"name": "cpu", "nominalQuota": "1"}]}
                        for i in range(65)
                    ],
                }
            ]
        ),
        "flavors: at most 64 items",
    ),  # fmt: skip
    (
        _cq(
            resourceGroups=[
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "F_", "resources": [{"name": "cpu", "nominalQuota": "1"}]}
                    ],
                }
            ]
        ),
        "flavors[0].name: 'F_' does not match",
    ),  # fmt: skip
    (_res(), "'nominalQuota' is a required property"),
    (_res(nominalQuota="1x"), "nominalQuota: '1x' does not match"),
    (_res(nominalQuota="1", borrowingLimit="z"), "borrowingLimit: 'z' does not match"),
    (_res(nominalQuota="1", lendingLimit="z"), "lendingLimit: 'z' does not match"),
    (_doc("ResourceFlavor", {"bogus": 1}), "spec.bogus: unknown field"),
    (_doc("Topology", {"levels": []}), "spec.levels: at least 1 item(s)"),
    (
        _doc("Topology", {"levels": [{"nodeLabel": f"l{i}"} for i in range(17)]}),
        "spec.levels: at most 16 items",
    ),  # fmt: skip
    (_doc("LocalQueue", {"clusterQueue": "q", "bogus": 1}), "spec.bogus: unknown field"),
    (_doc("WorkloadPriorityClass"), "'value' is a required property"),
    (_doc("WorkloadPriorityClass", value="1"), "value: '1' is not of type 'integer'"),
    (_doc("WorkloadPriorityClass", value=True), "value: True is not of type 'integer'"),
    (_doc("WorkloadPriorityClass", value=1, bogus=2), "bogus: unknown field"),
    # the CRDs' CEL rules (upstream's messages), and the webhooks' checks written out
    (
        _cq(
            preemption={
                "reclaimWithinCohort": "Never",
                "borrowWithinCohort": {"policy": "LowerPriority"},
            }
        ),
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
    ),  # fmt: skip
    (
        _cq(cohortName=None)
        | {
            "spec": {
                "resourceGroups": _res(nominalQuota="1", borrowingLimit="1")["spec"][
                    "resourceGroups"
                ]
            }
        },
        "borrowingLimit must be nil when cohort is empty",
    ),  # fmt: skip
    (
        _doc("ResourceFlavor", {"nodeTaints": [{"key": "k", "effect": "X"}]}),
        "spec.nodeTaints: Invalid value: supported taint effect values: 'NoSchedule', "
        "'PreferNoSchedule', 'NoExecute'",
    ),  # fmt: skip
    (
        _doc("ResourceFlavor", {"nodeTaints": [{"key": "", "effect": "NoSchedule"}]}),
        "spec.nodeTaints[0].key: a taint key is required",
    ),  # fmt: skip
    (_doc("ResourceFlavor", {"topologyName": "t"}), "at least one nodeLabel is required"),
    (_doc("Topology", {"levels": [{"nodeLabel": "a"}, {"nodeLabel": "a"}]}), "must be unique"),
    (_doc("LocalQueue", {}), "spec.clusterQueue is required"),
    (_doc("ClusterQueue", GOOD) | {"metadata": {"name": "A_"}}, "not a DNS-1123 subdomain"),
]


@pytest.mark.parametrize("doc,finding", REFUSED, ids=[f for _, f in REFUSED])
def test_every_refusal_is_still_reported(doc, finding):
    found = kueue_validate.kueue_findings(doc)
    assert any(finding in f for f in found), found


def test_a_good_object_has_no_findings():
    assert kueue_validate.kueue_findings(_cq()) == []


def test_the_plan_and_the_tests_read_the_same_crd_files():
    names = {f.name for f in crds.crd_files()}
    assert {"kueue.x-k8s.io_clusterqueues.yaml", "kubeflow.org_pytorchjobs.yaml",
            "trainer.kubeflow.org_trainjobs.yaml"} <= names  # fmt: skip
    copies = [p for p in (ROOT / "tests").rglob("*.yaml") if p.name in names]
    assert copies == [], "a CRD copy under tests/ would drift from the plan's"
    # the tests' validator is built from the plan's files
    assert schemas.validator("ClusterQueue").schema == crds.validator(A, "ClusterQueue").schema


def test_a_kind_without_a_vendored_crd_is_said():
    assert crds.crd_errors({"apiVersion": "example.com/v1", "kind": "Widget"}) is None
    # (AdmissionCheck was the example until the fleet vendored its CRD)
    assert kueue_validate.kueue_findings(_doc("ProvisioningRequestConfig", {})) == [
        "no Kueue CRD serves kueue.x-k8s.io/v1beta2 ProvisioningRequestConfig"
    ]


def _trainjob(**spec) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "t", "namespace": "n"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec}}  # fmt: skip


# what the TrainJob check's written-out field lists and bounds used to refuse, now the CRD's
TRAINJOB_REFUSED = [
    (_trainjob(bogus=1), "spec.bogus: unknown field"),
    (_trainjob(trainer={"bogus": 1}), "spec.trainer.bogus: unknown field"),
    (_trainjob(activeDeadlineSeconds=0), "spec.activeDeadlineSeconds: 0 is less than the minimum"),
    (_trainjob(trainer={"numProcPerNode": "auto"}), "numProcPerNode: 'auto' is not of type"),
    (_trainjob(trainer={"numNodes": 0}), "spec.trainer.numNodes 0 must be an integer >= 1"),
    (
        _trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "1x"}}}),
        "spec.trainer.resourcesPerNode.requests.cpu: '1x' does not match",
    ),  # fmt: skip
    (
        _trainjob(runtimePatches=[{"manager": f"a.io/m{i}"} for i in range(17)]),
        "spec.runtimePatches: at most 16 items",
    ),  # fmt: skip
    (
        _trainjob(runtimePatches=[{"manager": "a.io/m"}, {"manager": "a.io/m"}]),
        "managers must be unique",
    ),  # fmt: skip
    ({**_trainjob(), "spec": {}}, "spec: 'runtimeRef' is a required property"),
]


@pytest.mark.parametrize("doc,finding", TRAINJOB_REFUSED, ids=[f for _, f in TRAINJOB_REFUSED])
def test_every_trainjob_refusal_is_still_reported(doc, finding):
    found = validate.trainjob_findings(doc, "1.35")
    assert any(finding in f for f in found), found


def test_a_training_runtime_is_checked_against_its_crd_outside_its_pod_templates():
    (runtime,) = [
        copy.deepcopy(r)
        for r in trainjob.runtime_manifests()
        if r["metadata"]["name"] == "trainforge-torch"
    ]
    assert [f for f in validate.runtime_findings(runtime, "1.35") if "unknown field" in f] == []
    runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["bogus"] = 1
    assert "spec.template.spec.replicatedJobs[0].bogus: unknown field" in (
        validate.runtime_findings(runtime, "1.35")
    )


def _karpenter(kind: str, mutate) -> dict:
    from tests.plan.test_plan_validate import NODECLASS, NODEPOOL

    doc = copy.deepcopy(NODEPOOL if kind == "NodePool" else NODECLASS)
    mutate(doc["spec"], (doc["spec"].get("template") or {}).get("spec"))
    return doc


# what the Karpenter checks' written-out lists refused, now the v1.14.1 CRDs' schemas
KARPENTER_REFUSED = [
    ("NodePool", lambda s, t: t.pop("requirements"), "'requirements' is a required property"),
    ("NodePool", lambda s, t: t["requirements"][0].pop("key"), "'key' is a required property"),
    (
        "NodePool",
        lambda s, t: t["requirements"][0].update(operator="Has"),
        "requirements[0].operator: 'Has' is not one of",
    ),  # fmt: skip
    (
        "NodePool",
        lambda s, t: t.update(taints=[{"key": "k", "effect": "Never"}]),
        "taints[0].effect: 'Never' is not one of",
    ),  # fmt: skip
    (
        "NodePool",
        lambda s, t: s["disruption"].update(after="5m"),
        "disruption.after: unknown field",
    ),
    ("NodePool", lambda s, t: t.update(expireAfter="forever"), "expireAfter: 'forever' does not"),
    (
        "NodePool",
        lambda s, t: s["disruption"].update(budgets=[{"nodes": "101%"}]),
        "budgets[0].nodes: '101%' does not match",
    ),  # fmt: skip
    (
        "EC2NodeClass",
        lambda s, t: s.pop("subnetSelectorTerms"),
        "'subnetSelectorTerms' is a required property",
    ),  # fmt: skip
    (
        "EC2NodeClass",
        lambda s, t: s["metadataOptions"].update(httpTokens="maybe"),
        "httpTokens: 'maybe' is not one of",
    ),  # fmt: skip
    (
        "EC2NodeClass",
        lambda s, t: s["metadataOptions"].update(httpEndpoint="on"),
        "httpEndpoint: 'on' is not one of",
    ),  # fmt: skip
]


@pytest.mark.parametrize("kind,mutate,finding", KARPENTER_REFUSED,
                         ids=[f for *_, f in KARPENTER_REFUSED])  # fmt: skip
def test_every_karpenter_refusal_is_still_reported(kind, mutate, finding):
    doc = _karpenter(kind, mutate)
    check = validate.nodepool_findings if kind == "NodePool" else validate.ec2nodeclass_findings
    found = check(doc)
    assert any(finding in f for f in found), found
