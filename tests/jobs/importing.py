"""The one setup of the `trainforge import` tests: the pools an import chooses from, the import
of a YAML file, and the workload the stack emits for the entry it writes (the emitted side is
what an import's lines are held to)."""

from __future__ import annotations

import dataclasses
import posixpath
import textwrap
from pathlib import Path
from typing import Any

import yaml

from tests.jobs.helpers import CODE, CPU_POOL, EFA_POOL, GPU_POOL, target
from trainforge.core.contract import PoolFacts
from trainforge.jobs import node_facts
from trainforge.jobs.backends import emit
from trainforge.jobs.codeship import CodeBundle
from trainforge.jobs.importer import Imported, import_workload
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.plan.mocks import instance_type_result

WHERE = "trainforge:jobs[0]"
RUNTIME = "the platform's runtime image (runtime: torch 2.13.0, mlflow, boto3)"
IMAGE = "ghcr.io/acme/trainer:1.0"  # a private image: facts unknown
TORCHRUN = ["torchrun", "/code/train.py"]


def _catalog_pool(name: str, instance_type: str) -> PoolFacts:
    """GPU_POOL (its taints, selector and DaemonSets) on `instance_type`, with that type's node
    facts from the catalog the plan's mocks answer from (moto's EC2 table: vCPUs, memory,
    GPUs) and nodeadm's ENI table (maxPods), as trainforge.platform.published sizes a node."""
    r = instance_type_result(instance_type)
    vcpus, memory, gpus = r["defaultVcpus"], r["memorySize"], sum(g["count"] for g in r["gpuses"])
    eni_pods = node_facts.eni_max_pods(*node_facts.ENIS_PER_CARD[instance_type])
    node = node_facts.node_shape(instance_type, vcpus, memory, eni_pods=eni_pods, gpus=gpus)
    return dataclasses.replace(
        GPU_POOL, name=name, instance_types=(instance_type,), gpus_per_node=gpus,
        vcpus_per_node=vcpus, memory_mib_per_node=memory, nodes=(node,),
    )  # fmt: skip


# it named g5.xlarge but kept GPU_POOL's g5.12xlarge node (48 vCPU, 192 GiB, 4 GPUs)
ONE_GPU = _catalog_pool("gpu-small", "g5.xlarge")
POOLS = {p.name: p for p in (CPU_POOL, ONE_GPU, GPU_POOL, EFA_POOL)}


def imp(path: Path, **kw: Any) -> Imported:
    """`trainforge import PATH` for team research on POOLS, the Docker Hub not routed and the
    pytorchjob backend; keyword arguments override import_workload's."""
    args = dict(pools=POOLS, team="research", out_dir="imported", docker_hub_routed=False,
                runtime_image=RUNTIME, backends=("pytorchjob",))  # fmt: skip
    args.update(kw)
    return import_workload(path, **args)


def write(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def emitted(
    entry: dict[str, Any], backend: str = "pytorchjob", files: dict[str, str] | None = None
) -> dict[str, Any]:
    """The workload the stack emits for a job entry on its pool of POOLS, with `backend`'s
    controller installed and FILES (an import's {path: text}) shipped as its code."""
    t = target(POOLS[entry["pool"]], backends=(backend,))
    job = resolve_job(parse_job(entry, WHERE), t, WHERE)
    code = tuple((posixpath.basename(path), text) for path, text in (files or {}).items())
    return emit(job, t, CODE, CodeBundle(code) if code else None).workload


# The workloads a test imports, as YAML text. A value may be a placeholder (COMMAND, DEADLINE)
# that the test replaces with YAML of its own, a malformed value too.


def container(name: str = "pytorch", command: Any = None, **fields: Any) -> dict[str, Any]:
    """A container of IMAGE running `command` (else torchrun of /code/train.py); keyword
    arguments add fields or override the image."""
    return {"name": name, "image": IMAGE, "command": command or TORCHRUN, **fields}


def replica(container: dict[str, Any], replicas: int | None = None, **pod: Any) -> dict[str, Any]:
    """A PyTorchJob replica spec: pods of `container` (and POD's pod-spec fields)."""
    count = {} if replicas is None else {"replicas": replicas}
    return {**count, "template": {"spec": {"containers": [container], **pod}}}


def pytorchjob_yaml(name: str = "ptj", run_policy: dict | None = None, **replicas: Any) -> str:
    """A training operator v1 PyTorchJob of the given replica specs (Master=, Worker=)."""
    spec = {"runPolicy": run_policy} if run_policy else {}
    doc = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}}
    return yaml.safe_dump(
        {**doc, "spec": {**spec, "pytorchReplicaSpecs": replicas}}, sort_keys=False
    )


def indexed_job_yaml(container: dict[str, Any], name: str = "ij", **spec: Any) -> str:
    """An Indexed Job of 2 completions, 2 at once, restartPolicy Never, with `container` and
    SPEC's fields in its spec (one given None is left out)."""
    fields = {"completionMode": "Indexed", "completions": 2, "parallelism": 2, **spec}
    pod = {"restartPolicy": "Never", "containers": [container]}
    fields = {k: v for k, v in fields.items() if v is not None} | {"template": {"spec": pod}}
    doc = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": fields}
    return yaml.safe_dump(doc, sort_keys=False)


def trainer_spec(**fields: Any) -> dict[str, Any]:
    """A TrainJob's spec.trainer: 2 nodes of IMAGE running torchrun; keyword arguments add or
    override fields."""
    return {"image": IMAGE, "command": TORCHRUN, "numNodes": 2, **fields}


def trainjob_yaml(name: str = "tj", trainer: dict[str, Any] | None = None, **spec: Any) -> str:
    """A Trainer v1alpha1 TrainJob of `trainer` (else trainer_spec()) and SPEC's fields."""
    doc = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"}
    spec = {"trainer": trainer or trainer_spec(), **spec}
    return yaml.safe_dump({**doc, "metadata": {"name": name}, "spec": spec}, sort_keys=False)
