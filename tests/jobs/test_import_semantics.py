"""`trainforge import` keeps, or names, what the original's runtime, restarts and failure
policy did (the rev20 Kubeflow user's review: tests/fixtures/import/review/trainjob-*.yaml,
indexed-ignore-*.yaml). Both sides are read with core/failures.py, the one model of upstream's
rules; the upstream facts are cited where they are kept (core/failures.py,
jobs/import_read.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.jobs.importing import emitted, imp
from trainforge.core import failures, pods
from trainforge.jobs import trainjob
from trainforge.jobs.import_read import ImportProblem
from trainforge.jobs.import_restarts import CODES, UPSTREAM_RUNTIME_JOBSET

ROOT = Path(__file__).resolve().parents[2]
REVIEW = ROOT / "tests" / "fixtures" / "import" / "review"
CRDS = ROOT / "trainforge" / "plan" / "data" / "crds"  # the pinned CRDs the plan reads
NO_STATUS = REVIEW / "indexed-ignore-no-status.yaml"
WITH_STATUS = REVIEW / "indexed-ignore-status.yaml"
DISRUPTION_CLAUSE = "a disruption (preemption, eviction, a lost node) no longer uses a retry"


def _doc(path: Path, kind: str) -> dict[str, Any]:
    return next(d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == kind)


def _restart_line(changes: list[str]) -> str:
    return next(c for c in changes if c.startswith("spec.template.spec.restartPolicy"))


def test_an_ignore_rule_without_status_matches_a_disruption_as_the_api_server_defaults_it():
    """The API server stores an onPodConditions pattern without status as status True
    (SetDefaults_Job), so the Job controller ignores a preempted pod's failure."""
    spec = _doc(NO_STATUS, "Job")["spec"]
    assert "status" not in spec["podFailurePolicy"]["rules"][0]["onPodConditions"][0]
    lost = failures.failed_pod("trainer", failures.TERMINATED, disrupted=True)
    assert failures.match_pod_failure_policy(spec["podFailurePolicy"], lost) == (False, "Ignore")
    assert not failures.job_outcome(spec, lost).counted
    # a pattern that asks another status still does not match True
    other = {"rules": [{"action": "Ignore", "onPodConditions": [
        {"type": failures.DISRUPTION_TARGET, "status": "False"}]}]}  # fmt: skip
    assert failures.match_pod_failure_policy(other, lost) == (True, None)


def test_the_import_of_an_ignore_rule_without_status_says_what_the_one_with_status_says():
    """rev/ij.yaml (no status) was said to lose its disruption retry; ij_status.yaml was not.
    Both Jobs are the same Job once the API server has defaulted them."""
    lines = [
        _restart_line(imp(p, backends=("indexed-job",)).changes) for p in (NO_STATUS, WITH_STATUS)
    ]
    assert lines[0] == lines[1]
    assert DISRUPTION_CLAUSE not in lines[0]


# --- a TrainJob's runtime ----------------------------------------------------------------------

DEEPSPEED = REVIEW / "trainjob-deepspeed.yaml"
TORCH = REVIEW / "trainjob-torch.yaml"
BOTH = ("pytorchjob", "trainjob")


def _variant(tmp_path: Path, path: Path, **trainer: Any) -> Path:
    """`path` with its TrainJob's spec.trainer fields replaced (None: removed), or with its
    runtimeRef replaced (`runtimeRef=`)."""
    docs = list(yaml.safe_load_all(path.read_text()))
    spec = next(d for d in docs if d["kind"] == "TrainJob")["spec"]
    if "runtimeRef" in trainer:
        spec["runtimeRef"] = trainer.pop("runtimeRef")
    for key, value in trainer.items():
        spec["trainer"].pop(key, None)
        if value is not None:
            spec["trainer"][key] = value
    out = tmp_path / path.name
    out.write_text(yaml.safe_dump_all(docs))
    return out


@pytest.mark.parametrize(
    ("runtime", "policy"),
    [("deepspeed-distributed", "mpi"), ("mlx-distributed", "mpi"), ("jax-distributed", "jax"),
     ("xgboost-distributed", "xgboost")],
)  # fmt: skip
def test_a_trainjob_on_a_runtime_that_is_not_torch_is_refused_in_one_line(
    tmp_path, runtime, policy
):
    """rev/bad3.yaml (deepspeed-distributed, `mpirun --hostfile ...`) was imported as a torch
    job, its mpirun "run as written" on the platform's torch runtime (no sshd, no hostfile)."""
    path = DEEPSPEED if runtime == "deepspeed-distributed" else _variant(
        tmp_path, DEEPSPEED, runtimeRef={"name": runtime})  # fmt: skip
    with pytest.raises(ImportProblem) as e:
        imp(path, backends=BOTH)
    said = str(e.value)
    assert "\n" not in said
    assert f"spec.runtimeRef.name: got {runtime!r}, Trainer's mlPolicy.{policy} runtime" in said
    assert "valid are the torch runtimes (torch-distributed, " in said


def test_a_trainjob_on_an_unknown_runtime_says_its_policy_and_restarts_are_unknown(tmp_path):
    path = _variant(tmp_path, TORCH, numProcPerNode=None, runtimeRef={"name": "my-runtime"})
    r = imp(path, backends=BOTH)
    (ref,) = [c for c in r.changes if c.startswith("spec.runtimeRef ")]
    assert "its mlPolicy and restarts are unknown here" in ref
    assert any(c.startswith("restarts of runtime my-runtime: unknown here") for c in r.changes)
    assert "restartPolicy" not in r.entry
    # a TrainingRuntime of the same name as Trainer's is the namespace's own: unknown too
    kind = {"name": "torch-distributed", "kind": "TrainingRuntime"}
    r = imp(_variant(tmp_path, TORCH, numProcPerNode=None, runtimeRef=kind), backends=BOTH)
    assert any("its mlPolicy and restarts are unknown here" in c for c in r.changes)


def _platform_runtime(name: str) -> dict[str, Any]:
    runtime = next(m for m in trainjob.runtime_manifests() if m["metadata"]["name"] == name)
    return pods.get(runtime, *trainjob.RUNTIME_SHAPE.levels[0], "spec")


def test_a_trainjob_on_torch_distributed_keeps_restarting_a_failed_exit_1(tmp_path):
    """rev/tj1.yaml sets no restart field: its pods ran OnFailure (JobSet's webhook default)
    with backoffLimit 6 (the Job's default), so exit 1 restarted the container in place; the
    import chose the platform's ExitCode runtime, where exit 1 fails the job. Now the planned
    TrainJob's runtime retries every code the original did."""
    r = imp(_variant(tmp_path, TORCH, numProcPerNode=None), backends=BOTH)
    assert r.entry["restartPolicy"] == "OnFailure" and r.entry["backend"] == "trainjob"
    tj = emitted(r.entry, "trainjob", r.files)
    now = _platform_runtime(tj["spec"]["runtimeRef"]["name"])
    node, container = trainjob.REPLICATED_JOB, trainjob.CONTAINER

    def retried(jobset: dict[str, Any]) -> set[int]:
        return {c for c in CODES if failures.jobset_outcome(jobset, node, container, c).restarts}

    assert retried(now) == retried(UPSTREAM_RUNTIME_JOBSET) == set(CODES)
    # and in the same way: the container restarts in place, counted against backoffLimit 6
    was, is_ = (
        failures.jobset_outcome(j, node, container, 1) for j in (UPSTREAM_RUNTIME_JOBSET, now)
    )
    assert was == is_ == failures.Outcome(True, True, in_place=True)
    assert now["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] == 6
    line = next(c for c in r.changes if c.startswith("restarts of runtime torch-distributed"))
    assert "-> restartPolicy OnFailure, which keeps it: exit codes 1-255 are retried" in line
    assert "no longer uses a retry" not in line
    (ref,) = [c for c in r.changes if c.startswith("spec.runtimeRef ")]
    assert ref == (
        "spec.runtimeRef torch-distributed: dropped (Trainer's own mlPolicy.torch runtime); on "
        "the trainjob backend the job runs on the platform's own ClusterTrainingRuntime"
    )


def test_a_trainjob_on_the_platforms_own_runtime_keeps_its_restart_policy(tmp_path):
    for policy, name in trainjob.RUNTIMES.items():
        r = imp(
            _variant(tmp_path, TORCH, numProcPerNode=None, runtimeRef={"name": name}), backends=BOTH
        )
        assert r.entry.get("restartPolicy", "ExitCode") == policy


# --- numProcPerNode ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["auto", "4", 1.5, True])
def test_a_num_proc_per_node_the_api_server_refuses_is_named(tmp_path, value):
    """rev/tj1.yaml's `numProcPerNode: auto` was dropped without a word; the pinned TrainJob
    CRD types it integer, so the API server refuses it (and "4", a string, too)."""
    schema = yaml.safe_load((CRDS / "trainer.kubeflow.org_trainjobs.yaml").read_text())
    spec = schema["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["trainer"]["properties"]["numProcPerNode"]["type"] == "integer"
    path = TORCH if value == "auto" else _variant(tmp_path, TORCH, numProcPerNode=value)
    with pytest.raises(ImportProblem) as e:
        imp(path, backends=BOTH)
    assert f"spec.trainer.numProcPerNode: got {value!r}; the pinned TrainJob CRD types it " \
        "integer, so the API server refuses it" in str(e.value)  # fmt: skip


def test_a_whole_num_proc_per_node_becomes_procs_per_worker_and_is_said(tmp_path):
    r = imp(_variant(tmp_path, TORCH, numProcPerNode=1), backends=BOTH)
    assert r.entry["procsPerWorker"] == 1
    assert "spec.trainer.numProcPerNode 1 -> procsPerWorker 1" in r.changes
    with pytest.raises(ImportProblem, match="numProcPerNode: got 0; expected 1 or more"):
        imp(_variant(tmp_path, TORCH, numProcPerNode=0), backends=BOTH)


CPU_NODE = {"limits": {"cpu": "4", "memory": "10Gi"}}
CPU = "training-workloads"  # a pool without GPUs (tests/jobs/importing.py POOLS)


def test_what_leaving_num_proc_per_node_unset_runs_is_what_the_import_keeps(tmp_path):
    """Trainer v2.2.1's torch plugin (pkg/runtime/framework/plugins/torch/torch.go:100-114)
    runs, without numProcPerNode, one process per GPU, else one per CPU the pod asks
    (`trainjob.proc_per_node`). The refusal of a string said "1 on a CPU pod" and the import of
    an unset one gave a 4-CPU pod procsPerWorker's default 1: 4 processes became 1, unsaid."""
    cpu = _variant(tmp_path, TORCH, numProcPerNode=None, resourcesPerNode=CPU_NODE)
    r = imp(cpu, backends=BOTH, pool_name=CPU)
    assert r.entry["procsPerWorker"] == 4
    assert any(
        c.startswith("spec.trainer.numProcPerNode unset -> procsPerWorker 4") for c in r.changes
    )
    with pytest.raises(ImportProblem, match=r"at least 1: here 4\)"):
        imp(_variant(tmp_path, TORCH, numProcPerNode="4", resourcesPerNode=CPU_NODE), backends=BOTH)
    with pytest.raises(ImportProblem, match=r"at least 1: here one per GPU\)"):
        imp(TORCH, backends=BOTH)  # numProcPerNode: auto on a GPU pod
    one = {"limits": {"cpu": "1", "memory": "10Gi"}}
    r = imp(
        _variant(tmp_path, TORCH, numProcPerNode=None, resourcesPerNode=one),
        backends=BOTH,
        pool_name=CPU,
    )
    assert "procsPerWorker" not in r.entry  # its default on a CPU pod is Trainer's count, 1
