"""What `trainforge import` says about a dropped or changed field is what the pod gets: each
line held to the workload the stack emits for the entry it writes (newcomer review, a Kubeflow
user, wave 21)."""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Any

import pytest
import yaml

from tests.jobs.helpers import CODE, EFA_POOL, GPU_POOL, node_shape, target
from tests.jobs.importing import POOLS, container, imp, pytorchjob_yaml, replica, write
from trainforge.core.contract import EFA_RESOURCE
from trainforge.jobs.backends import emit, pod_templates
from trainforge.jobs.code_paths import path_uses
from trainforge.jobs.importer import ImportProblem
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job

# a p4d.24xlarge pool (96 vCPU, 1152 GiB, 8 GPUs, 4 EFA devices), EFA_POOL's DaemonSets
P4D = dataclasses.replace(
    EFA_POOL,
    name="p4d-reserved",
    instance_types=("p4d.24xlarge",),
    efa_interfaces=4,
    vcpus_per_node=96,
    memory_mib_per_node=1179648,
    nodes=(node_shape("p4d.24xlarge", 96, 1179648, eni_pods=100, gpus=8, efa=4),),
)


def _pod(entry: dict[str, Any], pool: Any) -> dict[str, Any]:
    """The first pod spec of the workload the stack emits for `entry` on `pool`."""
    t = target(pool, backends=("pytorchjob",))
    job = resolve_job(parse_job(entry, "trainforge:jobs[0]"), t, "trainforge:jobs[0]")
    return pod_templates(emit(job, t, CODE, None).workload)[0].spec


def _efa_job(efa: int) -> str:
    c = container(resources={"limits": {"nvidia.com/gpu": 8, EFA_RESOURCE: efa}})
    return pytorchjob_yaml(Master=replica(c, 1), Worker=replica(c, 1))


@pytest.mark.parametrize(
    ("pool", "asked", "says", "gets"),
    [
        # the review's case: p5's count on a p4d pool; the pod gets the pool's own 4
        (
            P4D,
            32,
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits."
            "vpc.amazonaws.com/efa 32 -> vpc.amazonaws.com/efa 4: the pool's own EFA count "
            "(efa, on by default for a GPU pod on an EFA pool): a pod on p4d-reserved "
            "(p4d.24xlarge) requests 4 with FI_PROVIDER=efa; 32 would not have fit (needs 32 "
            "EFA devices, p4d.24xlarge has 4)",
            "4",
        ),
        (
            EFA_POOL,
            32,
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits."
            "vpc.amazonaws.com/efa 32 -> vpc.amazonaws.com/efa 32: the pool's own EFA count "
            "(efa, on by default for a GPU pod on an EFA pool): a pod on efa-p5 (p5.48xlarge) "
            "requests 32 with FI_PROVIDER=efa",
            "32",
        ),
    ],
)
def test_an_efa_request_says_the_count_the_pod_gets(tmp_path, pool, asked, says, gets):
    """Import said `limits.vpc.amazonaws.com/efa 32: dropped (not supported)` while the
    planned pod requested vpc.amazonaws.com/efa 4 with FI_PROVIDER=efa (the pool's p4d has 4;
    32 is a p5's, so the original pod never fit there)."""
    r = imp(write(tmp_path, _efa_job(asked)), pools={**POOLS, P4D.name: P4D}, pool_name=pool.name)
    assert says in r.changes
    pod = _pod(r.entry, pool)
    (c,) = pod["containers"]
    assert c["resources"]["limits"][EFA_RESOURCE] == gets
    assert {"name": "FI_PROVIDER", "value": "efa"} in c["env"]


def test_an_efa_request_on_a_pool_without_efa_is_dropped_and_the_pod_gets_none(tmp_path):
    c = container(resources={"limits": {"nvidia.com/gpu": 4, EFA_RESOURCE: 4}})
    r = imp(write(tmp_path, pytorchjob_yaml(Master=replica(c, 1))), pool_name=GPU_POOL.name)
    assert (
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits."
        "vpc.amazonaws.com/efa 4: dropped; pool gpu-workloads has no EFA interfaces, so the pod "
        "gets none (NCCL goes over TCP)"
    ) in r.changes
    (pc,) = _pod(r.entry, GPU_POOL)["containers"]
    assert EFA_RESOURCE not in pc["resources"]["limits"]
    assert "FI_PROVIDER" not in {e["name"] for e in pc["env"]}


def _v21_trainjob(selector: dict[str, str], gpus: int = 8) -> str:
    """The review's Trainer v2.1 TrainJob: a podTemplateOverrides of its node pods with a
    nodeSelector and a toleration."""
    doc = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "v21"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "image": "ghcr.io/acme/trainer:1.0",
                "command": ["torchrun", "/workspace/train.py"],
                "numNodes": 2,
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": gpus}},
            },
            "podTemplateOverrides": [
                {
                    "targetJobs": [{"name": "node"}],
                    "spec": {
                        "nodeSelector": selector,
                        "tolerations": [
                            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                        ],
                    },
                }
            ],
        },
    }
    return yaml.safe_dump(doc, sort_keys=False)


def test_a_v21_pod_template_override_is_named_as_such_and_its_selector_obeyed(tmp_path):
    """A Trainer v2.1 `podTemplateOverrides` was dropped as "not supported (a job entry has no
    such field)", and its nodeSelector with it: the job landed on the smallest pool that holds
    it, not on the one the selector named (docs/jobs.md: a selector is obeyed or refused,
    never overridden)."""
    r = imp(write(tmp_path, _v21_trainjob({"eks.amazonaws.com/nodegroup": "efa-p5"})))
    assert r.entry["pool"] == "efa-p5"
    assert "pool efa-p5: its nodeSelector names it (eks.amazonaws.com/nodegroup: efa-p5)" in (
        r.changes
    )
    assert (
        "spec.podTemplateOverrides: dropped; a Trainer v2.1 field (v2.1.0's TrainJobSpec), gone "
        "since v2.2.0 and at the pinned v2.2.1, which replaced it with spec.runtimePatches: each "
        "field of its node pods (nodeSelector, tolerations, ...) is read as the pod's and named, "
        "on its own line; code it mounts from a ConfigMap of the file is shipped"
    ) in r.changes
    assert (
        "spec.podTemplateOverrides[0].spec.tolerations: dropped; the platform tolerates the "
        "pool's own taints"
    ) in r.changes
    # a selector naming a pool whose nodes cannot hold the pod is refused, naming its field
    bad = write(tmp_path, _v21_trainjob({"karpenter.sh/nodepool": "gpu-workloads"}), "bad.yaml")
    with pytest.raises(ImportProblem) as e:
        imp(bad)
    assert "spec.podTemplateOverrides[0].spec.nodeSelector" in str(e.value)


def test_the_code_path_reader_names_writes_and_uses_by_file_and_line():
    """jobs/code_paths.py, the one reader the importer (paths under a dropped mount) and the
    plan (writes on no writable volume) share: literal paths, joins, pathlib and names bound
    once count; a computed path is not guessed at."""
    py = textwrap.dedent(
        """\
        import os, torch
        from pathlib import Path
        CK = "/checkpoints"
        open(os.path.join("/checkpoints", "done"), "w").write("x")
        data = open("/data/train.txt").read()
        (Path(CK) / "y").write_text("a")
        torch.save({}, f"/ckpt/step{1}.pt")
        open(os.environ["OUT"] + "/x", "w")
        """
    )
    sh = "#!/bin/bash\nmkdir -p /checkpoints/run\necho hi > /out/done  # a comment /nope\n"
    assert [(u.where, u.path, u.writes) for u in path_uses([("t.py", py), ("run", sh)])] == [
        ("t.py:3", "/checkpoints", False),
        ("t.py:4", "/checkpoints/done", True),
        ("t.py:5", "/data/train.txt", False),
        ("t.py:6", "/checkpoints/y", True),
        ("t.py:7", "/ckpt", True),
        ("run:2", "/checkpoints/run", True),
        ("run:3", "/out/done", True),
    ]


def test_a_v21_pod_template_overrides_configmap_script_is_shipped(tmp_path):
    """A v2.1 TrainJob mounts its code the v2.1 way: a `node` container override's
    volumeMounts and the override's volumes. The one reader of a TrainJob's node pod patches
    (import_read.node_pod_patches) gives them to the mounts, so the script is shipped."""
    doc = yaml.safe_load(_v21_trainjob({"eks.amazonaws.com/nodegroup": "efa-p5"}))
    doc["spec"]["trainer"]["command"] = ["torchrun", "/code/train.py"]
    override = doc["spec"]["podTemplateOverrides"][0]["spec"]
    override["containers"] = [
        {"name": "node", "volumeMounts": [{"name": "c", "mountPath": "/code"}]}
    ]
    override["volumes"] = [{"name": "c", "configMap": {"name": "v21-code"}}]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "v21-code"},
          "data": {"train.py": "print('v21')\n"}}  # fmt: skip
    r = imp(write(tmp_path, yaml.safe_dump_all([doc, cm], sort_keys=False)))
    assert r.entry["entrypoint"] == {"script": "imported/v21/train.py"}
    assert r.files == {"imported/v21/train.py": "print('v21')\n"}


def test_a_trainjobs_write_off_its_volumes_is_flagged_in_the_pod_the_trainer_builds(tmp_path):
    """On the trainjob backend the pod is the Trainer's, built from the runtime: the plan's
    static reads (a write on no writable volume) run on that pod, as the script rehearsal
    does, and the import's list of what the plan flags says it."""
    from trainforge import import_cli  # noqa: PLC0415
    from trainforge.jobs.codeship import CodeBundle  # noqa: PLC0415

    entry = {"name": "tjw", "team": "research", "pool": GPU_POOL.name, "workers": 2,
             "gpusPerWorker": 1, "backend": "trainjob",
             "entrypoint": {"script": "imported/tjw/train.py"}}  # fmt: skip
    code = "open('/checkpoints/done', 'w').write('x')\n"
    t = target(GPU_POOL, backends=("trainjob",))
    job = resolve_job(parse_job(entry, "trainforge:jobs[0]"), t, "trainforge:jobs[0]")
    emitted = emit(job, t, CODE, CodeBundle((("train.py", code),)))
    assert emitted.workload["kind"] == "TrainJob"
    flags = import_cli.rehearsal_flags([emitted.workload, emitted.user_configmap], None, "")
    assert [(r, m.split(": ", 1)[1].split(";")[0]) for r, m in flags] == [
        ("TRAINFORGE_POD_CANNOT_WRITE", "/workspace/train.py:1 writes /checkpoints/done")
    ]
