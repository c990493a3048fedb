"""A TrainJob's resume is judged like a PyTorchJob's of the same shape.

Before: `ckpt_compat.store` matched the job's container by a name a TrainJob's `trainer`
mapping does not have, so every TrainJob had no checkpoint store and `plan --diff` said
"resumes" where a PyTorchJob got TF_CKPT_LOST; and `Shape.procs_per_pod` read only
`numProcPerNode`, so an SDK or imported TrainJob without it counted 1 process per pod where
Trainer v2.2.1's torch plugin sets `auto` (one per GPU) or the CPU count
(`trainjob.proc_per_node`). Both now read the pod Trainer builds (`Shape.main_pod`).
"""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

from trainforge.jobs import trainjob
from trainforge.jobs.pod import JOB_LABEL
from trainforge.plan import ckpt_compat as CC
from trainforge.plan import cli, job_diff
from trainforge.plan.checks import resume
from trainforge.plan.job_view import job_views

CKPT = "/ckpt/mnist"
ARGS = ["--model", "mlp", "--steps", "100", "--checkpoint-dir", CKPT, "--checkpoint-every", "10"]


def test_fsx_off_loses_a_trainjobs_checkpoints_as_it_loses_a_pytorchjobs(tmp_path, project_copy):
    """dev with mnist-ddp (a PyTorchJob) and its TrainJob twin, neither mirrored to S3; the
    head turns FSx off (an emptyDir at /fsx) and moves mnist-ddp to `backend: trainjob`.
    Each one's checkpoints were on the FSx claim: each starts at step 0 (TF_CKPT_LOST)."""

    def base(config: dict[str, Any]) -> None:
        jobs = config["trainforge:jobs"]
        ddp = next(j for j in jobs if j["name"] == "mnist-ddp")
        ddp["checkpoint"]["s3Mirror"] = False
        jobs.append({**copy.deepcopy(ddp), "name": "mnist-tj", "backend": "trainjob"})

    def head(config: dict[str, Any]) -> None:
        base(config)
        config["trainforge:fsx"]["enabled"] = False
        next(j for j in config["trainforge:jobs"] if j["name"] == "mnist-ddp")["backend"] = (
            "trainjob"
        )

    args = ["--stack", "dev", "--no-standins", "--report", str(tmp_path / "r.txt")]
    plan = tmp_path / "base-plan"
    root = project_copy(tmp_path, "base", base, stack="dev")
    assert cli.main([*args, "--project-dir", str(root), "--out", str(plan)]) == 0
    md = tmp_path / "pr.md"
    root = project_copy(tmp_path, "head", head, stack="dev")
    rc = cli.main([*args, "--project-dir", str(root), "--diff", str(plan), "--diff-md", str(md)])
    text = md.read_text()
    assert rc == 1, text
    lost = (
        "replaced, and the new job starts at step 0: its checkpoints were on "
        "PersistentVolumeClaim fsx-research, which this change removes (the new pods' "
        "directory is on a pod-local emptyDir)"
    )
    for job in ("mnist-ddp", "mnist-tj"):  # PyTorchJob -> TrainJob, TrainJob -> TrainJob
        assert f"- **[TF_CKPT_LOST]** `research/TrainJob/{job}`: {lost}" in text, text


def _sdk(nodes: int, per_node: dict[str, Any] | None, claim: str = "data") -> list[dict]:
    """An imported TrainJob on a TrainingRuntime of its own (as the SDK writes one: no
    numProcPerNode), whose node container mounts claim `claim` at /ckpt."""
    node = {
        "name": trainjob.CONTAINER,
        "image": "img:1",
        "resources": {"limits": {"nvidia.com/gpu": "8"}},
        "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}],
    }
    pod = {
        "spec": {
            "containers": [node],
            "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": claim}}],
        }
    }
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "gpu", "namespace": "vision"},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": trainjob.REPLICATED_JOB,
                            "template": {"spec": {"template": pod}},
                        }
                    ]
                }
            },
        },
    }
    trainer: dict[str, Any] = {
        "command": ["torchrun", "-m", "trainforge.training", *ARGS],
        "numNodes": nodes,
    }
    if per_node is not None:
        trainer["resourcesPerNode"] = per_node
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "sdk", "namespace": "vision", "labels": {JOB_LABEL: "sdk"}},
        "spec": {"runtimeRef": {"name": "gpu", "kind": "TrainingRuntime"}, "trainer": trainer},
    }
    return [runtime, job]


def _objects(docs: list[dict]) -> dict[str, dict]:
    return {f"{d['metadata']['namespace']}/{d['kind']}/{d['metadata']['name']}": d for d in docs}


def test_an_sdk_trainjobs_world_size_is_the_processes_trainer_sets():
    """No numProcPerNode: `auto` on the runtime's 8 GPUs (torchrun: the 8 devices), the CPU
    count where resourcesPerNode names CPUs only (it replaces the runtime's resources)."""
    for per_node, world in (
        (None, 2 * 8),
        ({"requests": {"cpu": "6"}}, 2 * 6),
        ({}, 2 * 1),  # `{}`: the torch plugin reads no GPU and no CPU in it: 1
    ):
        (view,) = job_views(_objects(_sdk(2, per_node))).values()
        assert view.world_size == world, (per_node, view.procs_per_pod)


def test_an_sdk_trainjob_grown_resets_the_rng_of_its_new_ranks_only():
    """2 -> 3 nodes of 8 GPUs: ranks 16-23 are new (not 2-2, as 1 process per pod read it);
    its claim is where the new pods look, so it resumes (with the reset), not 'starts at 0'."""
    old, new = _objects(_sdk(2, None)), _objects(_sdk(3, None))
    ident = "vision/TrainJob/sdk"
    ch = job_diff.job_change(job_views(old)[ident], job_views(new)[ident], {}, {}, True)
    side = SimpleNamespace(records=[], sections={})
    ctx = SimpleNamespace(
        jobs={ident: ch},
        base=SimpleNamespace(objects=old, **vars(side)),
        head=SimpleNamespace(objects=new, **vars(side)),
    )
    resume.diff_check(ctx)
    assert ch.compat is not None and ch.compat.verdict == CC.RESETS, ch.compat.line()
    assert "RNG: ranks 16-23 have no saved stream" in ch.compat.line()
    # the new pods mount another claim at /ckpt: the checkpoints are not where they look
    ch.old, ch.new = job_views(old)[ident], job_views(_objects(_sdk(3, None, "other")))[ident]
    ctx.head.objects = _objects(_sdk(3, None, "other"))
    resume.diff_check(ctx)
    assert ch.compat.verdict == CC.LOST, ch.compat.line()
    assert "PersistentVolumeClaim data" in ch.compat.line()
