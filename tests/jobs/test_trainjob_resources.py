"""A TrainJob's `trainer.resourcesPerNode` on its runtime's `node` container, as Trainer v2.2.1
applies it (`trainjob.trainer_resources`, read by `trainjob.effective_pod`, which every reader
of a TrainJob's pod sees): it replaces the container's whole `resources`, it does not merge.

Upstream: github.com/kubeflow/trainer tag v2.2.1 (c505fc7c), read 2026-12-01.
- pkg/runtime/framework/plugins/jobset/builder.go:145-159: when resourcesPerNode has limits or
  requests, a fresh ResourceRequirements of those two is set with `WithResources`.
- pkg/runtime/core/trainingruntime_test.go:119 "succeeded to build JobSet with NumNodes from the
  Runtime and container from the TrainJob.": the fixture the first test transcribes
  (`resRequests` = {cpu: 1}, line 42; the testing wrappers' `Container` write it as the runtime
  container's `resources.requests` and as the TrainJob's `resourcesPerNode.requests`,
  pkg/util/testing/wrapper.go:677, 1157).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainforge.jobs import trainjob

RES_REQUESTS = {"cpu": "1"}  # trainingruntime_test.go:42 resRequests


def _runtime(resources: dict[str, Any]) -> dict[str, Any]:
    """MakeTrainingRuntimeWrapper("default", "test-runtime") with the case's
    `.WithMLPolicy(NumNodes 100).Container(node, node, "test:runtime", ["runtime"],
    ["runtime"], resRequests).Env(node, node, TRAIN_JOB=original, RUNTIME=test:runtime)`."""
    container = {
        "name": trainjob.CONTAINER,
        "image": "test:runtime",
        "command": ["runtime"],
        "args": ["runtime"],
        "resources": resources,
        "env": [
            {"name": "TRAIN_JOB", "value": "original"},
            {"name": "RUNTIME", "value": "test:runtime"},
        ],
    }
    node_job = {
        "name": trainjob.REPLICATED_JOB,
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [container]}}},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "test-runtime", "namespace": "default"},
        "spec": {
            "mlPolicy": {"numNodes": 100},
            "template": {"spec": {"replicatedJobs": [node_job]}},
        },
    }


def _trainjob(resources_per_node: Any) -> dict[str, Any]:
    """MakeTrainJobWrapper("default", "test-job") with the case's trainer
    `.Container("test:trainjob", ["trainjob"], ["trainjob"], resRequests)
    .Env(TRAIN_JOB=override, TRAIN_JOB_CUSTOM=test:trainjob)`."""
    trainer: dict[str, Any] = {
        "image": "test:trainjob",
        "command": ["trainjob"],
        "args": ["trainjob"],
        "env": [
            {"name": "TRAIN_JOB", "value": "override"},
            {"name": "TRAIN_JOB_CUSTOM", "value": "test:trainjob"},
        ],
    }
    if resources_per_node is not None:
        trainer["resourcesPerNode"] = resources_per_node
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "test-job", "namespace": "default"},
        "spec": {
            "runtimeRef": {"name": "test-runtime", "kind": "TrainingRuntime"},
            "trainer": trainer,
        },
    }


def _node(trainjob_doc: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    pod = trainjob.effective_pod(trainjob_doc, runtime)
    return next(c for c in pod["spec"]["containers"] if c["name"] == trainjob.CONTAINER)


def test_upstreams_case_container_from_the_trainjob():
    """The upstream case as written: the JobSet's node container is the TrainJob's image,
    command, args and resources (`wantObjs` `.Container(node, node, "test:trainjob", ...,
    resRequests)`), its env the TrainJob's upserted over the runtime's."""
    c = _node(_trainjob({"requests": RES_REQUESTS}), _runtime({"requests": RES_REQUESTS}))
    assert (c["image"], c["command"], c["args"]) == ("test:trainjob", ["trainjob"], ["trainjob"])
    assert c["resources"] == {"requests": RES_REQUESTS}
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert {k: env[k] for k in ("TRAIN_JOB", "TRAIN_JOB_CUSTOM", "RUNTIME")} == {
        "TRAIN_JOB": "override",
        "TRAIN_JOB_CUSTOM": "test:trainjob",
        "RUNTIME": "test:runtime",
    }


# The same case with the runtime's container declaring what the TrainJob's does not: the
# builder's `WithResources(requirements)` (requirements: resourcesPerNode's limits and requests
# only) leaves none of the runtime's resources, and names no claims. The upstream case cannot
# tell replace from merge (runtime and TrainJob both write resRequests); these can.
LIMITS = {"cpu": "2", "memory": "4Gi"}
CLAIMS = [{"name": "gpu"}]


@pytest.mark.parametrize(
    ("runtime_resources", "per_node", "want"),
    [
        # requests only: the runtime's limits are gone (the merge kept them: cpu limit 2 under
        # a request of 3, a pod Kubernetes and Kueue refuse)
        ({"limits": LIMITS}, {"requests": {"cpu": "3"}}, {"requests": {"cpu": "3"}}),
        # the kind both name: the TrainJob's whole map, not the runtime's keys under it
        (
            {"requests": {"cpu": "1", "memory": "4Gi"}},
            {"requests": {"cpu": "3"}},
            {"requests": {"cpu": "3"}},
        ),
        # limits only: the runtime's requests are gone too
        ({"requests": RES_REQUESTS}, {"limits": LIMITS}, {"limits": LIMITS}),
        # the runtime's claims are not carried (never copied from resourcesPerNode either)
        (
            {"requests": RES_REQUESTS, "claims": CLAIMS},
            {"requests": {"cpu": "3"}, "claims": CLAIMS},
            {"requests": {"cpu": "3"}},
        ),
        # an empty but present map is non-nil in Go: it replaces, leaving no requests
        ({"limits": LIMITS}, {"requests": {}}, {"requests": {}}),
        # neither limits nor requests set: the runtime's resources stay
        ({"limits": LIMITS}, {}, {"limits": LIMITS}),
        ({"limits": LIMITS}, None, {"limits": LIMITS}),
        ({"limits": LIMITS}, {"claims": CLAIMS}, {"limits": LIMITS}),
    ],
)
def test_resources_per_node_replaces_the_runtimes_container_resources(
    runtime_resources, per_node, want
):
    runtime = _runtime(copy.deepcopy(runtime_resources))
    job = _trainjob(copy.deepcopy(per_node))
    assert _node(job, runtime)["resources"] == want
    # the inputs are read, not changed
    assert runtime == _runtime(runtime_resources) and job == _trainjob(per_node)


# PET_NPROC_PER_NODE (`trainjob.proc_per_node`): the torch plugin's EnforceMLPolicy reads the
# TrainJob's resourcesPerNode whenever it is set, `{}` included, and the runtime's resources only
# when it is not (torch.go:100-114 at v2.2.1). Upstream's own cases first: torch_test.go
# TestTorch (v2.2.1), every "nproc_per_node" case; their trainer is the wrappers' `Container`,
# whose resources are resourcesPerNode's `requests` (wrapper.go:677), and their runtime names
# no resources. `example.com/gpu` counts: numGPU takes any resource whose name holds "gpu".
def _env(c: dict[str, Any], name: str) -> str | None:
    return next((e.get("value") for e in c["env"] if e["name"] == name), None)


@pytest.mark.parametrize(
    ("case", "requests", "procs", "want"),
    [
        ("nproc_per_node=auto with CPU limit", {"cpu": "4"}, None, "4"),
        ("nproc_per_node=auto with no CPU resources", None, None, "1"),
        ("nproc_per_node=auto with low CPU limit", {"cpu": "2"}, None, "2"),
        ("nproc_per_node=auto with CPU request but no limit", {"cpu": "3"}, None, "3"),
        ("nproc_per_node=auto with millicore CPU limit", {"cpu": "2.5"}, None, "3"),
        ("nproc_per_node=auto with fractional CPU limit", {"cpu": "0.7"}, None, "1"),
        (
            "nproc_per_node=auto with GPU request should remain auto",
            {"example.com/gpu": "2"},
            None,
            "auto",
        ),
        ("explicitly set nproc_per_node should be preserved", {"cpu": "8"}, 3, "3"),
        ("nproc_per_node=auto with millicore CPU limit in m format", {"cpu": "2500m"}, None, "3"),
        ("nproc_per_node=cpu with CPU limit", {"cpu": "4"}, None, "4"),
        (
            "nproc_per_node=auto resolves to GPU count when GPU resources present",
            {"cpu": "6", "example.com/gpu": "2"},
            None,
            "auto",
        ),
        ("nproc_per_node=cpu with fractional CPU", {"cpu": "3.7"}, None, "4"),
    ],
)
def test_proc_per_node_gives_upstreams_answer(case, requests, procs, want):
    job = _trainjob({"requests": requests} if requests is not None else {})
    if procs is not None:
        job["spec"]["trainer"]["numProcPerNode"] = procs
    c = _node(job, _runtime({}))
    assert _env(c, "PET_NPROC_PER_NODE") == want, case


GPU_RUNTIME = {"limits": {"nvidia.com/gpu": "8", "cpu": "90"}, "requests": {"cpu": "90"}}


@pytest.mark.parametrize(
    ("per_node", "want_procs", "want_resources"),
    [
        # no resourcesPerNode: the runtime's 8 GPUs, one process each (torchrun's auto)
        (None, "auto", GPU_RUNTIME),
        # `{}`: the builder keeps the runtime's GPUs, but the torch plugin reads `{}` (no GPU,
        # no CPU): one process on an 8-GPU node
        ({}, "1", GPU_RUNTIME),
        ({"claims": CLAIMS}, "1", GPU_RUNTIME),
        # CPU only: the runtime's GPUs are gone with its limits, its count is the CPU one
        ({"requests": {"cpu": "4"}}, "4", {"requests": {"cpu": "4"}}),
    ],
)
def test_an_empty_resources_per_node_reads_as_upstreams(per_node, want_procs, want_resources):
    c = _node(_trainjob(copy.deepcopy(per_node)), _runtime(copy.deepcopy(GPU_RUNTIME)))
    assert (_env(c, "PET_NPROC_PER_NODE"), c["resources"]) == (want_procs, want_resources)
