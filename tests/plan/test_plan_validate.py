"""Validation of rebuilt objects: strict core schemas, the PyTorchJob webhook, Karpenter CRDs."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from trainforge.plan.checks import validate as V

POD = {"containers": [{"name": "pytorch", "image": "pytorch/pytorch:2.5.1"}]}
JOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "llm", "namespace": "a"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": POD}},
            "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": {"spec": POD}},
        },
        "runPolicy": {"cleanPodPolicy": "None"},
    },
}


def job(**changes):
    doc = copy.deepcopy(JOB)
    for path, value in changes.items():
        node = doc
        *head, last = path.split("__")
        for k in head:
            node = node[k]
        if value is None:
            node.pop(last)
        else:
            node[last] = value
    return doc


def messages(doc):
    status, findings = V.validate_object(doc, "1.31")
    return status, [f.message for f in findings]


def test_cached_core_validation_agrees_with_kubernetes_validate():
    good = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}
    bad = dict(good, datas={"a": "b"})
    kubernetes_validate.validate(good, "1.31", strict=True)
    with pytest.raises(kubernetes_validate.ValidationError) as e:
        kubernetes_validate.validate(bad, "1.31", strict=True)
    assert V.core_errors(good, "1.31") == []
    assert V.core_errors(bad, "1.31") == [e.value.message]
    assert V.core_errors({"apiVersion": "example.com/v1", "kind": "Thing"}, "1.31") is None


def test_good_pytorchjob_passes():
    assert messages(JOB) == ("pass", [])


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (job(metadata__name="LLM_1"), "not a DNS-1035 label"),
        (job(spec__pytorchReplicaSpecs__Master__replicas=2), "Master.replicas must be exactly 1"),
        (job(spec__pytorchReplicaSpecs__Worker__replicas=0), "Worker.replicas must be at least 1"),
        (job(spec__pytorchReplicaSpecs__Master=None), "needs a Master"),
        (
            job(spec__pytorchReplicaSpecs__Worker__restartPolicy="Sometimes"),
            "restartPolicy 'Sometimes'",
        ),
        (job(spec__runPolicy__cleanPodPolicy="Finished"), "cleanPodPolicy 'Finished'"),
        (
            job(spec__elasticPolicy={"minReplicas": 1}, spec__pytorchReplicaSpecs__Worker=None),
            "elasticPolicy needs a Worker",
        ),
        (
            job(spec__elasticPolicy={"minReplicas": 4, "maxReplicas": 2}),
            "minReplicas 4 > maxReplicas 2",
        ),
        (job(spec__pytorchReplicaSpecs={}), "spec.pytorchReplicaSpecs is empty"),
        (
            job(spec__pytorchReplicaSpecs__Chief={"template": {"spec": POD}}),
            "Chief: replica type must be Master or Worker",
        ),
        (
            job(spec__pytorchReplicaSpecs__Worker__replicas=-1),
            "Worker.replicas -1 must be a non-negative integer",
        ),
        (
            job(spec__elasticPolicy={"nProcPerNode": 8}, spec__nprocPerNode="8"),
            "nProcPerNode and spec.nprocPerNode are both set",
        ),
        (job(spec__replicas=3), "spec.replicas: unknown field"),
        # the PyTorchJob CRD's schema (package data), not a written-out field list
        (job(spec__pytorchReplicaSpecs__Worker__foo=1), "Worker.foo: unknown field"),
        (
            job(spec__pytorchReplicaSpecs__Worker__replicas="2"),
            "Worker.replicas: '2' is not of type 'integer'",
        ),
    ],
)
def test_pytorchjob_webhook_rules(doc, expected):
    status, msgs = messages(doc)
    assert status == "fail" and any(expected in m for m in msgs), msgs


INDEXED = {
    "completionMode": "Indexed",
    "completions": 2,
    "backoffLimitPerIndex": 1,
    "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main"}]}},
    "podFailurePolicy": {"rules": [{"action": "Ignore", "onExitCodes": {"values": [3]}}]},
}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"template": {"spec": {"restartPolicy": "Always"}}}, "a Job needs Never or OnFailure"),
        ({"completionMode": None}, "backoffLimitPerIndex needs completionMode Indexed"),
        ({"backoffLimitPerIndex": None, "maxFailedIndexes": 1}, "needs backoffLimitPerIndex"),
        ({"podReplacementPolicy": "TerminatingOrFailed"}, "must be Failed with a podFailurePolicy"),
        ({"podFailurePolicy": {"rules": [{"action": "Retry"}]}}, "'Retry' is not FailJob"),
        (
            {
                "backoffLimitPerIndex": None,
                "podFailurePolicy": {"rules": [{"action": "FailIndex"}]},
            },
            "action FailIndex needs backoffLimitPerIndex",
        ),
        ({"podFailurePolicy": {"rules": [{"action": "Count"}]}}, "exactly one of onExitCodes"),
        (
            {"podFailurePolicy": {"rules": [{"action": "Count", "onExitCodes": {"values": []}}]}},
            "onExitCodes.values: 1 to 255 values",
        ),
        (
            {
                "podFailurePolicy": {
                    "rules": [
                        {"action": "Count", "onExitCodes": {"values": [1], "containerName": "x"}}
                    ]
                }
            },
            "containerName 'x' is not a container",
        ),
    ],
)
def test_job_validation_rules(change, expected):
    """The API server's Job rules beyond the schema (validate.job_spec_findings), one each."""
    assert V.job_spec_findings(INDEXED) == []
    spec = {k: v for k, v in {**INDEXED, **change}.items() if v is not None}
    assert any(expected in m for m in V.job_spec_findings(spec)), V.job_spec_findings(spec)


def test_pytorchjob_container_name_and_image_and_pod_template_schema():
    doc = job()
    doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"] = {
        "containers": [{"name": "main"}],
        "restartPolicy": "OnFailure",
        "hostnetwork": True,
    }
    _, msgs = messages(doc)
    assert any("no container named 'pytorch'" in m for m in msgs)
    assert any("container 'main' has no image" in m for m in msgs)
    assert any("Worker.template" in m and "hostnetwork" in m for m in msgs)


NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "gpu-workloads"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "gpu",
                },
                "requirements": [
                    {
                        "key": "karpenter.sh/capacity-type",
                        "operator": "In",
                        "values": ["spot", "on-demand"],
                    }
                ],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                "expireAfter": "720h",
            }
        },
        "disruption": {
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": "5m",
            "budgets": [{"nodes": "10%"}],
        },
        "limits": {"cpu": "1000", "memory": "4000Gi", "nvidia.com/gpu": 64},
    },
}


def test_nodepool_rules():
    assert messages(NODEPOOL) == ("pass", [])
    bad = copy.deepcopy(NODEPOOL)
    tspec = bad["spec"]["template"]["spec"]
    del tspec["nodeClassRef"]["name"]
    tspec["requirements"].append({"key": "x", "operator": "Exists", "values": ["a"]})
    tspec["requirements"].append({"key": "y", "operator": "Gt", "values": ["a"]})
    bad["spec"]["disruption"]["consolidationPolicy"] = "WhenIdle"
    bad["spec"]["disruption"]["consolidateAfter"] = "5 minutes"
    bad["spec"]["limits"]["memory"] = "4 TB"
    _, msgs = messages(bad)
    for expected in (
        # the NodePool CRD's schema (package data)
        "nodeClassRef: 'name' is a required property",
        "operator Exists takes no values",
        "consolidationPolicy: 'WhenIdle' is not one of",
        "consolidateAfter: '5 minutes' does not match",
        "spec.limits.memory: '4 TB' does not match",
        # a required field is missing: the API server runs none of the CEL rules, and says so
        "<nil>: Invalid value: null: some validation rules were not checked",
    ):
        assert any(expected in m for m in msgs), (expected, msgs)
    assert not any("'Gt'" in m for m in msgs), msgs
    del tspec["requirements"][1]  # the schema's errors fixed, the CEL rules run
    bad["spec"]["disruption"].update(consolidationPolicy="WhenEmpty", consolidateAfter="5m")
    bad["spec"]["limits"]["memory"] = "4Ti"
    tspec["nodeClassRef"]["name"] = "gpu"
    assert messages(bad)[1] == [
        'spec.template.spec.requirements: Invalid value: "array": cannot convert string to int '
        "evaluating rule: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single "
        "positive integer value"
    ]


NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "gpu"},
    "spec": {
        "amiSelectorTerms": [{"alias": "al2023@v20251001"}],
        "role": "KarpenterNodeRole-tf",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "tf"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "tf"}}],
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1},
    },
}


def test_ec2nodeclass_rules():
    assert messages(NODECLASS) == ("pass", [])
    bad = copy.deepcopy(NODECLASS)
    bad["spec"]["amiSelectorTerms"] = [{"alias": "al2023@latest"}]
    del bad["spec"]["role"]
    bad["spec"]["metadataOptions"]["httpPutResponseHopLimit"] = 0
    _, msgs = messages(bad)
    for expected in (
        "not @latest",
        "spec: Invalid value: must specify exactly one of ['role', 'instanceProfile']",
        "httpPutResponseHopLimit: 0 is less than the minimum of 1",
    ):
        assert any(expected in m for m in msgs), (expected, msgs)
    no_ami = copy.deepcopy(NODECLASS)
    no_ami["spec"]["amiSelectorTerms"] = []
    assert any("spec.amiSelectorTerms: at least 1 item(s)" in m for m in messages(no_ami)[1])


def _tspec(doc):
    return doc["spec"]["template"]["spec"]


@pytest.mark.parametrize(
    ("base", "change", "expected"),
    [
        (
            NODEPOOL,
            lambda d: _tspec(d)["nodeClassRef"].update(group=""),
            'spec.template.spec.nodeClassRef.group: Invalid value: "": group may not be empty',
        ),
        (
            NODEPOOL,
            lambda d: _tspec(d)["requirements"].append({"key": "k", "operator": "In"}),
            # upstream's rule reads `values`, absent here: an evaluation error refuses it
            'spec.template.spec.requirements: Invalid value: "array": no such key: values '
            "evaluating rule: requirements with operator 'In' must have a value defined",
        ),
        (
            NODECLASS,
            lambda d: d["spec"].update(amiSelectorTerms=[{"alias": "al2023"}]),
            "spec.amiSelectorTerms[0].alias: Invalid value: \"al2023\": 'alias' is improperly "
            "formatted, must match the format 'family@version'",
        ),
        (
            NODECLASS,
            lambda d: d["spec"]["amiSelectorTerms"].append({"id": "ami-1"}),
            "spec.amiSelectorTerms: Invalid value: 'alias' is mutually exclusive, cannot be set "
            "with a combination of other amiSelectorTerms",
        ),
        (
            NODECLASS,
            lambda d: d["spec"].update(instanceProfile="p"),
            "spec: Invalid value: must specify exactly one of ['role', 'instanceProfile']",
        ),
        (
            NODECLASS,
            lambda d: d["spec"].update(subnetSelectorTerms=[]),
            "spec.subnetSelectorTerms: Invalid value: subnetSelectorTerms cannot be empty",
        ),
    ],
)
def test_karpenter_cel_rules_written_out(base, change, expected):
    """The Karpenter CRDs' CEL rules, evaluated from the CRDs (`crd_cel`; validate.py wrote
    them out by hand before), with upstream's messages as the API server prints them."""
    doc = copy.deepcopy(base)
    change(doc)
    status, msgs = messages(doc)
    assert status == "fail" and any(expected in m for m in msgs), msgs


def test_unknown_fields_in_karpenter_specs_are_errors():
    bad = copy.deepcopy(NODECLASS)
    bad["spec"]["metadataOptions"]["httpTokensRequired"] = True
    bad["spec"]["amiSelector"] = {"alias": "x"}
    _, msgs = messages(bad)
    assert "spec.amiSelector: unknown field" in msgs
    assert "spec.metadataOptions.httpTokensRequired: unknown field" in msgs
    pool = copy.deepcopy(NODEPOOL)
    pool["spec"]["template"]["spec"]["labels"] = {"a": "b"}  # labels live in template.metadata
    assert "spec.template.spec.labels: unknown field" in messages(pool)[1]


def test_pod_and_service_monitors():
    pm = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": "m", "namespace": "a"},
        "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "podMetricsEndpoints": [{"port": "metrics", "interval": "30s"}],
        },
    }
    assert messages(pm) == ("pass", [])
    pm["spec"]["podMetricsEndpoints"][0]["intervall"] = "30s"
    pm["spec"]["podMetricsEndpoints"][0]["interval"] = "half a minute"
    _, msgs = messages(pm)
    assert "spec.podMetricsEndpoints[0].intervall: unknown field" in msgs
    # the PodMonitor CRD's own pattern (package data) refuses it
    assert any("[0].interval: 'half a minute' does not match" in m for m in msgs)
    sm = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "s", "namespace": "a"},
        "spec": {},
    }
    assert set(messages(sm)[1]) >= {"spec: 'endpoints' is a required property"}
    sm["spec"] = {"selector": {}, "endpoints": [{"port": "m", "intervall": "30s"}]}
    assert messages(sm) == ("fail", ["spec.endpoints[0].intervall: unknown field"])


def test_prometheus_rules():
    pr = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "r", "namespace": "monitoring"},
        "spec": {
            "groups": [
                {
                    "name": "g",
                    "interval": "30s",
                    "rules": [
                        {"alert": "A", "expr": "up == 0", "for": "5m", "labels": {"s": "x"}},
                        {"record": "job:up:sum", "expr": "sum(up)"},
                    ],
                }
            ]
        },
    }
    assert messages(pr) == ("pass", [])
    bad = copy.deepcopy(pr)
    bad["spec"]["groups"].append({"name": "g", "rules": [{"alert": "B", "record": "c"}]})
    bad["spec"]["groups"][0]["rules"][0]["for"] = "five minutes"
    bad["spec"]["groups"][0]["rules"][0]["labels"] = {"n": 3}
    bad["spec"]["groups"][0]["rules"][1]["forr"] = "1m"
    _, msgs = messages(bad)
    duration = "'^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'"
    assert set(msgs) == {  # the CRD's schema (package data), then what it leaves to others
        f"spec.groups[0].rules[0].for: 'five minutes' does not match {duration}",
        "spec.groups[0].rules[0].labels.n: 3 is not of type 'string'",
        "spec.groups[0].rules[1].forr: unknown field",
        "spec.groups[1].rules[0]: 'expr' is a required property",
        "spec.groups[1].name 'g' is used by another group",
        "spec.groups[1].rules[0]: exactly one of alert or record is required",
    }
    assert messages({**pr, "spec": {}}) == ("pass", [])  # the CRD requires no group
