"""A TrainJob's pod size in the plan's job view (the PR review's `pods: N pods x ...` and
`GPUs:` lines) is that of the pod Trainer builds (`core.pods.Shape.main_container` reads the
built pod, `trainjob.trainer_resources` the one reader of resourcesPerNode), as the API server
stores it (its limits stand in for missing requests), not resourcesPerNode as written.

Trainer v2.2.1 (github.com/kubeflow/trainer tag v2.2.1, c505fc7c, read 2026-12-01): the JobSet
builder replaces the node container's resources only when resourcesPerNode names limits or
requests (pkg/runtime/framework/plugins/jobset/builder.go:145-159); `{}` keeps the runtime's."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainforge.jobs import trainjob
from trainforge.jobs.pod import JOB_LABEL
from trainforge.plan.job_view import job_views

RUNTIME_RESOURCES = {
    "limits": {"nvidia.com/gpu": "8"},
    "requests": {"cpu": "90", "memory": "900Gi"},
}


def _docs(per_node: Any) -> dict[str, dict[str, Any]]:
    container = {"name": trainjob.CONTAINER, "image": "rt:1", "resources": RUNTIME_RESOURCES}
    node_job = {
        "name": trainjob.REPLICATED_JOB,
        "template": {"spec": {"template": {"spec": {"containers": [container]}}}},
    }
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "gpu-rt", "namespace": "a"},
        "spec": {"template": {"spec": {"replicatedJobs": [node_job]}}},
    }
    trainer: dict[str, Any] = {"image": "job:1", "command": ["torchrun", "t.py"], "numNodes": 2}
    if per_node is not None:
        trainer["resourcesPerNode"] = copy.deepcopy(per_node)
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "j", "namespace": "a", "labels": {JOB_LABEL: "j"}},
        "spec": {"runtimeRef": {"name": "gpu-rt", "kind": "TrainingRuntime"}, "trainer": trainer},
    }
    return {"rt": runtime, "job": job}


@pytest.mark.parametrize(
    ("per_node", "want"),
    [
        # none or `{}`: the runtime's container, its GPU limit the request
        (None, {"nvidia.com/gpu": "8", "cpu": "90", "memory": "900Gi"}),
        ({}, {"nvidia.com/gpu": "8", "cpu": "90", "memory": "900Gi"}),
        # limits only: they replace the runtime's resources and stand in for the requests
        ({"limits": {"nvidia.com/gpu": "4"}}, {"nvidia.com/gpu": "4"}),
        # requests only: the runtime's GPU limit is gone with the rest
        ({"requests": {"cpu": "4"}}, {"cpu": "4"}),
    ],
)
def test_a_trainjobs_pod_size_is_the_built_pods(per_node, want):
    (view,) = job_views(_docs(per_node)).values()
    assert view.per_pod == want
    assert view.gpus_per_pod == int(want.get("nvidia.com/gpu", 0))


@pytest.mark.parametrize(
    ("per_node", "want"),
    [
        # a runtime the plan does not hold: what resourcesPerNode replaces is known all the same
        ({"limits": {"nvidia.com/gpu": "4"}}, {"nvidia.com/gpu": "4"}),
        ({"requests": {"cpu": "4"}, "claims": [{"name": "x"}]}, {"cpu": "4"}),
        # ... and where it replaces nothing, the runtime's resources stay: unknown here
        ({}, {}),
        (None, {}),
    ],
)
def test_without_its_runtime_a_trainjobs_pod_size_is_what_resources_per_node_replaces(
    per_node, want
):
    docs = _docs(per_node)
    del docs["rt"]
    (view,) = job_views(docs).values()
    assert view.per_pod == want
