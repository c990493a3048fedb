"""`trainforge import FILE`: the YAML a newcomer already has -> a stack job entry, and why.

Why: a new user arrives with a PyTorchJob from a blog (Master + Workers, a script mounted from
a ConfigMap, `pytorch/pytorch` from Docker Hub, GPU limits, NCCL variables), a Kubeflow
Trainer v2 TrainJob or an indexed `batch/v1` Job. Nothing mapped it onto `trainforge:jobs`, so
they translated it by hand and met each platform rule one plan at a time. `import_workload`
does the translation once and says, for every field it changed or dropped, what became of it
and why (the image rules the plan applies, the pool a pod's GPUs fit, the variables the
platform owns).

YAML only: a Kubeflow SDK *program* (Python) is not read here. The pools, teams and image
routes come from the caller (`trainforge.plan.import_cli` reads them from a stack), so this
module needs no Pulumi.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainforge.core import image_routes, versions
from trainforge.core.contract import PoolFacts
from trainforge.stack.jobs import IMAGE_RE, RESERVED_ENV

GPU = "nvidia.com/gpu"
SUPPORTED = (
    "a kubeflow.org/v1 PyTorchJob, a trainer.kubeflow.org TrainJob or a batch/v1 Job with "
    "completionMode: Indexed (and ConfigMaps holding its code)"
)
# torchrun flags that take a value as the next argument (torch.distributed.run's parser)
_TORCHRUN_VALUE_FLAGS = {
    "--nnodes", "--nproc-per-node", "--nproc_per_node", "--node-rank", "--node_rank",
    "--master-addr", "--master_addr", "--master-port", "--master_port", "--rdzv-backend",
    "--rdzv_backend", "--rdzv-endpoint", "--rdzv_endpoint", "--rdzv-id", "--rdzv_id",
    "--rdzv-conf", "--rdzv_conf", "--max-restarts", "--max_restarts", "--monitor-interval",
    "--monitor_interval", "--start-method", "--start_method", "--role", "--log-dir",
    "--log_dir", "-r", "--redirects", "-t", "--tee", "--local-addr", "--local_addr",
    "--logs-specs", "--logs_specs",
}  # fmt: skip
_PYTHON = re.compile(r"^(?:/[\w./-]*/)?python(?:3(?:\.\d+)?)?$")
# pod and container fields that are translated (or knowingly dropped with their own reason)
_CONTAINER_KNOWN = {
    "name", "image", "command", "args", "env", "resources", "volumeMounts",
}  # fmt: skip
_DROPPED_WHY = {
    "ports": "the platform opens the rendezvous port (pytorchjob-port) and the metrics port",
    "workingDir": "your code runs from its own mount, as on every trainforge pod",
    "securityContext": "the platform runs every pod non-root as the team's UID/GID",
    "serviceAccountName": "pods run as the team's ServiceAccount",
    "serviceAccount": "pods run as the team's ServiceAccount",
    "tolerations": "the platform tolerates the pool's own taints",
    "affinity": "placement is the pool's (and Kueue's topology, `topology`)",
    "nodeSelector": "read to choose the pool; the pool's own selector is set",
    "imagePullSecrets": "images come through the stack's pull-through cache or a public registry",
    "restartPolicy": "set by the backend; restarts follow the job's restartPolicy (docs/jobs.md)",
    "priorityClassName": "priority is the job's `priority` (a Kueue WorkloadPriorityClass)",
    "schedulerName": "Kueue admits the job; the default scheduler places its pods",
    "terminationGracePeriodSeconds": "derived from checkpoint.gracePeriod (+30 s)",
    "dnsPolicy": "the platform's default",
    "imagePullPolicy": "Kubernetes' default applies (IfNotPresent for a tagged image)",
}


class ImportProblem(ValueError):
    """Input the importer cannot translate: one line naming the file and the field."""

    def __init__(self, file: str, where: str, message: str) -> None:
        super().__init__(f"{file}: {where}: {message}")


@dataclass
class Imported:
    """The stack job entry, the files it ships (project-relative path -> text) and what
    changed on the way (one line each)."""

    source: str  # "PyTorchJob pytorch-distributed-ddp"
    entry: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)
    changes: list[str] = field(default_factory=list)


@dataclass
class _Workload:
    """The parts every supported kind has, with the field paths they were read from."""

    kind: str
    name: str
    workers: int
    container: dict[str, Any]
    at: str  # field path of the container
    pod: dict[str, Any]
    pod_at: str
    extra: dict[str, Any] = field(default_factory=dict)  # entry keys read from the kind
    pods: str = ""  # how the kind counts its pods ("1 Master + 3 Worker")


# --- reading -----------------------------------------------------------------------------------


def read_documents(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of `path` (mappings only). Raises ImportProblem."""
    file = str(path)
    if path.suffix == ".py":
        raise ImportProblem(
            file, "file", f"a Python program; trainforge import reads YAML only: {SUPPORTED}"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ImportProblem(file, "file", "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ImportProblem(file, "file", f"cannot be read as UTF-8 text ({e})") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "file"
        what = getattr(e, "problem", None) or "not valid YAML"
        raise ImportProblem(file, where, f"not valid YAML ({what})") from None
    bad = [i for i, d in enumerate(docs) if not isinstance(d, dict)]
    if bad:
        raise ImportProblem(file, f"document {bad[0] + 1}", "expected a Kubernetes object")
    return docs


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def _int(value: Any, file: str, where: str, default: int | None = None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ImportProblem(file, where, f"got {value!r}; expected a whole number")
    return value


def _container(pod: Any, file: str, at: str, changes: list[str]) -> tuple[dict[str, Any], str]:
    containers = _get(pod, "containers")
    if not isinstance(containers, list) or not containers:
        raise ImportProblem(file, f"{at}.containers", "missing; expected one training container")
    named = [
        i for i, c in enumerate(containers) if isinstance(c, dict) and c.get("name") == "pytorch"
    ]
    i = named[0] if named else 0
    if not isinstance(containers[i], dict):
        raise ImportProblem(file, f"{at}.containers[{i}]", "expected a container mapping")
    for j, c in enumerate(containers):
        if j != i:
            changes.append(
                f"{at}.containers[{j}] ({_get(c, 'name')}): dropped; a trainforge pod runs one "
                "training container"
            )
    return containers[i], f"{at}.containers[{i}]"


def _pytorchjob(doc: dict[str, Any], file: str, changes: list[str]) -> _Workload:
    specs = _get(doc, "spec", "pytorchReplicaSpecs")
    if not isinstance(specs, dict) or not specs:
        raise ImportProblem(
            file, "spec.pytorchReplicaSpecs", "missing; expected Master and/or Worker"
        )
    other = sorted(set(specs) - {"Master", "Worker"})
    if other:
        raise ImportProblem(
            file, f"spec.pytorchReplicaSpecs.{other[0]}", "expected only Master and Worker"
        )
    counts = {
        role: _int(
            _get(specs, role, "replicas"), file, f"spec.pytorchReplicaSpecs.{role}.replicas", 1
        )
        for role in specs
    }
    if counts.get("Master", 1) != 1:
        raise ImportProblem(
            file, "spec.pytorchReplicaSpecs.Master.replicas", f"got {counts['Master']}; expected 1"
        )
    role = "Master" if "Master" in specs else "Worker"
    pod_at = f"spec.pytorchReplicaSpecs.{role}.template.spec"
    pod = _get(specs, role, "template", "spec")
    if not isinstance(pod, dict):
        raise ImportProblem(file, pod_at, "missing; expected the pod template's spec")
    container, at = _container(pod, file, pod_at, changes)
    if set(specs) == {"Master", "Worker"}:
        mine = {k: container.get(k) for k in ("image", "command", "args")}
        worker, _ = _container(_get(specs, "Worker", "template", "spec") or {}, file, "Worker", [])
        theirs = {k: worker.get(k) for k in ("image", "command", "args")}
        if mine != theirs:
            changes.append(
                "spec.pytorchReplicaSpecs.Worker: its image/command differ from Master's; every "
                "trainforge pod runs the same code, Master's (rank 0 decides by RANK)"
            )
    for r, spec in specs.items():
        policy = _get(spec, "restartPolicy")
        if policy is not None:
            changes.append(
                f"spec.pytorchReplicaSpecs.{r}.restartPolicy {policy}: dropped; the entry's "
                "restartPolicy key decides, by default as docs/jobs.md says for your own code"
            )
    extra: dict[str, Any] = {}
    elastic = _get(doc, "spec", "elasticPolicy")
    workers = sum(counts.values())
    if isinstance(elastic, dict):
        block = {
            "minWorkers": _get(elastic, "minReplicas"),
            "maxWorkers": _get(elastic, "maxReplicas"),
            "maxRestarts": _get(elastic, "maxRestarts"),
        }
        extra["elastic"] = {k: v for k, v in block.items() if v is not None}
        extra["preset"] = "elastic"
        changes.append(
            "spec.elasticPolicy -> elastic: {minWorkers, maxWorkers, maxRestarts}"
            + (
                "; its metrics (HPA) dropped: trainforge does not autoscale jobs"
                if elastic.get("metrics")
                else ""
            )
        )
    nproc = _get(doc, "spec", "nprocPerNode")
    if nproc is not None:
        if isinstance(nproc, int | str) and str(nproc).isdigit():
            extra["procsPerWorker"] = int(nproc)
        else:
            changes.append(
                f"spec.nprocPerNode {nproc!r}: dropped; procsPerWorker defaults to the GPUs"
            )
    run_policy = _get(doc, "spec", "runPolicy")
    if isinstance(run_policy, dict):
        extra.update(_run_policy(run_policy, "spec.runPolicy", changes))
    pods = " + ".join(f"{n} {r}" for r, n in counts.items())
    return _Workload(
        "PyTorchJob", _name(doc, file), workers, container, at, pod, pod_at, extra, pods
    )


def _run_policy(policy: Mapping[str, Any], at: str, changes: list[str]) -> dict[str, Any]:
    keys = ("cleanPodPolicy", "ttlSecondsAfterFinished", "backoffLimit", "activeDeadlineSeconds")
    kept = {k: policy[k] for k in keys if policy.get(k) is not None}
    for k in sorted(set(policy) - set(keys)):
        why = (
            "Kueue admits and queues jobs"
            if k in ("schedulingPolicy", "suspend")
            else "not supported"
        )
        changes.append(f"{at}.{k}: dropped ({why})")
    return {"runPolicy": kept} if kept else {}


def _trainjob(doc: dict[str, Any], file: str, changes: list[str]) -> _Workload:
    trainer = _get(doc, "spec", "trainer")
    if not isinstance(trainer, dict):
        raise ImportProblem(file, "spec.trainer", "missing; expected image, command, numNodes")
    runtime = _get(doc, "spec", "runtimeRef", "name")
    if runtime is not None:
        changes.append(
            f"spec.runtimeRef {runtime}: the platform's own runtime for the job's backend "
            "(add `backend: trainjob` where the stack installs Kubeflow Trainer)"
        )
    for k in (
        "initializer",
        "podTemplateOverrides",
        "podSpecOverrides",
        "datasetConfig",
        "modelConfig",
    ):
        if _get(doc, "spec", k) is not None:
            changes.append(f"spec.{k}: dropped (not supported; put it in your code or image)")
    workers = _int(trainer.get("numNodes"), file, "spec.trainer.numNodes", 1)
    container = dict(trainer)
    resources = trainer.get("resourcesPerNode")
    if resources is not None:
        container["resources"] = resources
    extra: dict[str, Any] = {}
    nproc = trainer.get("numProcPerNode")
    if isinstance(nproc, int) or (isinstance(nproc, str) and nproc.isdigit()):
        extra["procsPerWorker"] = int(nproc)
    return _Workload(
        "TrainJob", _name(doc, file), workers, container, "spec.trainer", {}, "spec", extra
    )


def _indexed_job(doc: dict[str, Any], file: str, changes: list[str]) -> _Workload:
    spec = _get(doc, "spec")
    if not isinstance(spec, dict):
        raise ImportProblem(file, "spec", f"got {spec!r}; expected the Job's spec")
    mode = spec.get("completionMode")
    if mode != "Indexed":
        raise ImportProblem(
            file,
            "spec.completionMode",
            f"got {mode!r}; a distributed job needs Indexed (each pod's JOB_COMPLETION_INDEX is its rank)",
        )
    completions = _int(spec.get("completions"), file, "spec.completions", 1)
    parallelism = _int(spec.get("parallelism"), file, "spec.parallelism", completions)
    if parallelism != completions:
        raise ImportProblem(
            file,
            "spec.parallelism",
            f"got {parallelism}, completions {completions}; every rank must run at once (equal values)",
        )
    pod = _get(spec, "template", "spec")
    if not isinstance(pod, dict):
        raise ImportProblem(file, "spec.template.spec", "missing; expected the pod template's spec")
    container, at = _container(pod, file, "spec.template.spec", changes)
    policy = {
        k: spec[k]
        for k in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished")
        if k in spec
    }
    extra = {"runPolicy": policy} if policy else {}
    extra["backend"] = "indexed-job"
    changes.append(
        "kind Job (Indexed) -> backend: indexed-job (no operator; trainforge adds the headless Service and rendezvous)"
    )
    return _Workload(
        "Job", _name(doc, file), completions, container, at, pod, "spec.template.spec", extra
    )


def _name(doc: dict[str, Any], file: str) -> str:
    name = _get(doc, "metadata", "name")
    if not isinstance(name, str) or not name:
        raise ImportProblem(file, "metadata.name", "missing; the job's name comes from it")
    return name


def _workload(docs: list[dict[str, Any]], file: str, changes: list[str]) -> _Workload:
    found = []
    for doc in docs:
        api, kind = str(doc.get("apiVersion", "")), doc.get("kind")
        if kind == "PyTorchJob" and api.startswith("kubeflow.org/"):
            found.append((doc, _pytorchjob))
        elif kind == "TrainJob" and api.startswith("trainer.kubeflow.org/"):
            found.append((doc, _trainjob))
        elif kind == "Job" and api == "batch/v1":
            found.append((doc, _indexed_job))
    if not found:
        kinds = ", ".join(sorted({str(d.get("kind")) for d in docs})) or "nothing"
        raise ImportProblem(file, "kind", f"found {kinds}; expected {SUPPORTED}")
    if len(found) > 1:
        names = ", ".join(f"{d.get('kind')} {_get(d, 'metadata', 'name')}" for d, _ in found)
        raise ImportProblem(file, "kind", f"{len(found)} jobs ({names}); import one job per file")
    doc, reader = found[0]
    ns = _get(doc, "metadata", "namespace")
    if ns:
        changes.append(f"metadata.namespace {ns}: dropped; the job runs in its team's namespace")
    return reader(doc, file, changes)


def _check_shapes(w: _Workload, docs: list[dict[str, Any]], file: str) -> None:
    """The fields the translation reads have the types Kubernetes gives them, so a malformed
    file is one line naming the field, never a Python error."""

    def need(value: Any, kind: type, where: str, what: str) -> None:
        if value is not None and not isinstance(value, kind):
            raise ImportProblem(file, where, f"got {value!r}; expected {what}")

    def mappings(value: Any, where: str, names: tuple[str, ...]) -> None:
        need(value, list, where, "a list")
        for i, item in enumerate(value or []):
            need(item, dict, f"{where}[{i}]", "a mapping")
            if item is None:
                raise ImportProblem(file, f"{where}[{i}]", "empty; expected a mapping")
            for n in names:
                if not isinstance(item.get(n), str):
                    raise ImportProblem(
                        file, f"{where}[{i}].{n}", f"got {item.get(n)!r}; expected a string"
                    )

    c, at = w.container, w.at
    need(c.get("command"), list, f"{at}.command", "a list of strings")
    need(c.get("args"), list, f"{at}.args", "a list of strings")
    mappings(c.get("env"), f"{at}.env", ("name",))
    resources = c.get("resources")
    need(resources, dict, f"{at}.resources", "a mapping with limits and requests")
    for kind in ("limits", "requests"):
        need(_get(resources, kind), dict, f"{at}.resources.{kind}", "a mapping")
    mappings(c.get("volumeMounts"), f"{at}.volumeMounts", ("name", "mountPath"))
    mappings(w.pod.get("volumes"), f"{w.pod_at}.volumes", ("name",))
    for i, v in enumerate(w.pod.get("volumes") or []):
        need(v.get("configMap"), dict, f"{w.pod_at}.volumes[{i}].configMap", "a mapping")
        mappings(_get(v, "configMap", "items"), f"{w.pod_at}.volumes[{i}].configMap.items",
                 ("key", "path"))  # fmt: skip
    need(w.pod.get("nodeSelector"), dict, f"{w.pod_at}.nodeSelector", "a mapping")
    for d in docs:
        if d.get("kind") == "ConfigMap":
            need(d.get("data"), dict, f"ConfigMap {_get(d, 'metadata', 'name')}.data", "a mapping")


# --- translating -------------------------------------------------------------------------------


def _argv(c: Mapping[str, Any], file: str, at: str) -> list[str]:
    command, args = c.get("command"), c.get("args")
    if not command:
        raise ImportProblem(
            file,
            f"{at}.command",
            "not set, so the image's own ENTRYPOINT/CMD would run, which cannot be read from "
            "YAML; set command (e.g. [python, /workspace/train.py])",
        )
    argv = [*(command or []), *(args or [])]
    if not all(isinstance(a, str | int | float) and not isinstance(a, bool) for a in argv):
        raise ImportProblem(file, f"{at}.command", "expected a list of strings")
    return [str(a) for a in argv]


@dataclass
class _Program:
    kind: str  # "script" | "inline" | "module" | "command"
    path: str = ""  # the script's path in the container; the module
    args: list[str] = field(default_factory=list)
    code: str = ""  # python -c
    nproc: int | None = None


def _program(argv: list[str]) -> _Program:
    """What a container's argv runs: python SCRIPT, python -c CODE, python -m MOD, torchrun."""
    i = 0
    torchrun = False
    nproc: int | None = None
    if argv and posixpath.basename(argv[0]) == "torchrun":
        torchrun, i = True, 1
    elif argv and _PYTHON.match(argv[0]):
        i = 1
        while i < len(argv) and argv[i] in ("-u", "-B", "-O", "-OO", "-E", "-s"):
            i += 1
        if (
            i < len(argv)
            and argv[i] == "-m"
            and i + 1 < len(argv)
            and argv[i + 1]
            in (
                "torch.distributed.run",
                "torch.distributed.launch",
            )
        ):
            torchrun, i = True, i + 2
        elif i + 1 < len(argv) and argv[i] == "-c":
            return _Program("inline", code=argv[i + 1], args=argv[i + 2 :])
        elif i + 1 < len(argv) and argv[i] == "-m":
            return _Program("module", path=argv[i + 1], args=argv[i + 2 :])
    else:
        return _Program("command", args=argv)
    if torchrun:
        while i < len(argv) and argv[i].startswith("-"):
            flag, eq, value = argv[i].partition("=")
            if flag in _TORCHRUN_VALUE_FLAGS and not eq and i + 1 < len(argv):
                value, i = argv[i + 1], i + 1
            if flag in ("--nproc-per-node", "--nproc_per_node") and value.isdigit():
                nproc = int(value)
            if flag == "-m":
                break
            i += 1
        if i < len(argv) and argv[i] == "-m" and i + 1 < len(argv):
            return _Program("module", path=argv[i + 1], args=argv[i + 2 :], nproc=nproc)
    if i < len(argv):
        return _Program("script", path=argv[i], args=argv[i + 1 :], nproc=nproc)
    return _Program("command", args=argv)


def _code_source(
    w: _Workload, program: _Program, docs: list[dict[str, Any]], yaml_dir: Path, file: str
) -> tuple[str, dict[str, str], str] | None:
    """(what the script is called in the shipped directory, {file name: text}, the ConfigMap) when the
    script comes from a ConfigMap (one in the file, or made from files next to it, as
    `kubectl create configmap --from-file` does); None when it is not mounted from one."""
    volumes = {v.get("name"): v for v in (w.pod.get("volumes") or []) if isinstance(v, dict)}
    for m in w.container.get("volumeMounts") or []:
        mount = str(_get(m, "mountPath") or "").rstrip("/")
        if not mount or not program.path.startswith(mount + "/"):
            continue
        vol = volumes.get(_get(m, "name")) or {}
        cm = _get(vol, "configMap", "name")
        if not cm:
            continue
        rel = program.path[len(mount) + 1 :]
        items = {_get(x, "path"): _get(x, "key") for x in _get(vol, "configMap", "items") or []}
        key = items.get(rel, rel)
        doc = next(
            (d for d in docs if d.get("kind") == "ConfigMap" and _get(d, "metadata", "name") == cm),
            None,
        )
        if doc is not None:
            data = {str(k): str(v) for k, v in (_get(doc, "data") or {}).items()}
            if key not in data:
                raise ImportProblem(
                    file,
                    f"ConfigMap {cm}.data",
                    f"has no key {key!r} (the script {program.path} that {w.at}.command runs); "
                    f"keys: {', '.join(sorted(data)) or 'none'}",
                )
            # the files as the kubelet projects them: the items' paths, else every key
            paths = items if items else {k: k for k in data}
            return rel, {p: data[k] for p, k in paths.items() if k in data}, cm
        beside = yaml_dir / posixpath.basename(key)
        if beside.is_file():
            made = f"{cm}, made from {beside.name} beside the YAML"
            return (
                posixpath.basename(rel),
                {posixpath.basename(rel): beside.read_text("utf-8")},
                made,
            )
        raise ImportProblem(
            file,
            f"{w.pod_at}.volumes ({_get(m, 'name')})",
            f"the script {program.path} comes from ConfigMap {cm!r}, which is neither a "
            f"document of this file nor made from {beside.name} next to it; add the ConfigMap "
            f"(kubectl create configmap {cm} --from-file={key} --dry-run=client -o yaml) or "
            "put the file beside the YAML",
        )
    return None


def _gpus(resources: Any, file: str, at: str) -> int:
    limits, requests = _get(resources, "limits") or {}, _get(resources, "requests") or {}
    value = limits.get(GPU, requests.get(GPU, 0))
    try:
        gpus = int(str(value))
    except ValueError:
        raise ImportProblem(
            file, f"{at}.resources.limits[{GPU}]", f"got {value!r}; expected a whole number"
        ) from None
    if gpus < 0:
        raise ImportProblem(
            file, f"{at}.resources.limits[{GPU}]", f"got {gpus}; expected 0 or more"
        )
    return gpus


def choose_pool(
    pools: Mapping[str, PoolFacts],
    gpus: int,
    selector: Mapping[str, Any],
    wanted: str | None,
    file: str,
    at: str,
) -> tuple[PoolFacts, str]:
    """The pool a pod with `gpus` GPUs (and this nodeSelector) runs on, and why."""
    if wanted is not None:
        if wanted not in pools:
            raise ImportProblem(
                file, "--pool", f"got {wanted!r}; the stack's pools: {', '.join(pools)}"
            )
        pool = pools[wanted]
        if gpus > pool.gpus_per_node or (gpus == 0 and pool.gpus_per_node):
            have = f"{pool.gpus_per_node} GPU(s) per node" if pool.gpus_per_node else "no GPUs"
            raise ImportProblem(file, "--pool", f"pool {wanted!r} has {have}; the pod asks {gpus}")
        return pool, "chosen with --pool"
    fits = [p for p in pools.values() if (gpus <= p.gpus_per_node if gpus else not p.gpus_per_node)]
    if not fits:
        sizes = ", ".join(f"{p.name} ({p.gpus_per_node} GPU/node)" for p in pools.values())
        raise ImportProblem(
            file,
            f"{at}.resources.limits[{GPU}]",
            f"{gpus} GPU(s) per pod, and no pool of the stack has that many per node: {sizes}",
        )
    types = {
        str(v)
        for k, v in selector.items()
        if k in ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
    }
    names = {
        str(v)
        for k, v in selector.items()
        if k in ("karpenter.sh/nodepool", "trainforge.io/pool", "eks.amazonaws.com/nodegroup")
    }
    by_selector = [p for p in fits if p.name in names or types & set(p.instance_types)]
    if by_selector:
        return by_selector[0], "its nodeSelector names it"
    best = min(fits, key=lambda p: p.gpus_per_node)
    if gpus:
        return (
            best,
            f"the smallest GPU pool whose nodes hold {gpus} GPU(s) ({best.gpus_per_node} per node)",
        )
    return best, "a CPU pool (the pod asks no GPUs)"


def import_workload(
    path: Path,
    *,
    pools: Mapping[str, PoolFacts],
    team: str,
    out_dir: str,
    docker_hub_routed: bool,
    runtime_image: str | None,
    pool_name: str | None = None,
) -> Imported:
    """Translate the job in the YAML file `path` into a `trainforge:jobs` entry.

    `out_dir`: the project-relative folder the job's code goes to (`<out_dir>/<job>/`);
    `docker_hub_routed`: the stack pulls Docker Hub through its cache with a credential;
    `runtime_image`: what a job without `image` runs (a sentence for the change lines)."""
    file = str(path)
    docs = read_documents(path)
    changes: list[str] = []
    w = _workload(docs, file, changes)
    _check_shapes(w, docs, file)
    c, at = w.container, w.at
    entry: dict[str, Any] = {"name": w.name, "team": team}

    # where: resources and nodeSelector -> a pool and gpusPerWorker
    gpus = _gpus(c.get("resources"), file, at)
    selector = w.pod.get("nodeSelector") or {}
    pool, why = choose_pool(pools, gpus, selector, pool_name, file, at)
    entry["pool"] = pool.name
    changes.append(f"pool {pool.name}: {why}")
    if "preset" in w.extra:
        entry["preset"] = w.extra.pop("preset")
    entry["workers"] = w.workers
    if gpus:
        entry["gpusPerWorker"] = gpus
    changes.append(
        f"workers {w.workers}: the pods of the {w.kind}"
        + (f" ({w.pods})" if w.pods else "")
        + (f", {gpus} GPU(s) each -> gpusPerWorker {gpus}" if gpus else "")
    )
    for kind in ("requests", "limits"):
        for res, value in sorted((_get(c.get("resources"), kind) or {}).items()):
            if res == GPU:
                continue
            what = {
                "cpu": "cpu",
                "memory": "memory",
            }.get(res)
            size = (
                "its GPUs' share of the node"
                if gpus
                else "the CPU pods' default (2 CPUs and 8Gi, capped at what the node leaves)"
            )
            if what:
                changes.append(
                    f"{at}.resources.{kind}.{res} {value}: dropped; a pod on {pool.name} gets "
                    f"{size} (the plan's queue section prints it); set `{what}` on the entry "
                    "to ask for a size"
                )
            else:
                changes.append(f"{at}.resources.{kind}.{res} {value}: dropped (not supported)")

    # what: the program and its files
    argv = _argv(c, file, at)
    program = _program(argv)
    files: dict[str, str] = {}
    code_dir = posixpath.join(out_dir, w.name)
    keep_image = False
    if program.kind == "inline":
        files["main.py"] = program.code if program.code.endswith("\n") else program.code + "\n"
        entry["entrypoint"] = {"script": posixpath.join(code_dir, "main.py")}
        changes.append(
            f"{at}.command python -c '...' -> entrypoint.script {code_dir}/main.py (the inline code, written out)"
        )
    elif program.kind == "script":
        found = _code_source(w, program, docs, path.parent, file)
        if found is not None:
            script, files = found[0], found[1]
            entry["entrypoint"] = {"script": posixpath.join(code_dir, script)}
            cm = f"ConfigMap {found[2]}"
            changes.append(
                f"{at}.command {program.path} ({cm}) -> entrypoint.script "
                f"{code_dir}/{script}, shipped with {len(files) - 1} other file(s) of its ConfigMap"
                if len(files) > 1
                else f"{at}.command {program.path} ({cm}) -> entrypoint.script {code_dir}/{script}"
            )
        else:
            keep_image = True
            entry["entrypoint"] = {"command": argv}
            changes.append(
                f"{at}.command: {program.path} is not mounted from a ConfigMap, so it must be in "
                "the image: entrypoint.command, run as written on your image"
            )
            program.args = []
    elif program.kind == "module":
        keep_image = True
        entry["entrypoint"] = {"module": program.path}
        changes.append(
            f"{at}.command -m {program.path} -> entrypoint.module, imported from your image"
        )
    else:
        keep_image = True
        entry["entrypoint"] = {"command": argv}
        changes.append(
            f"{at}.command {shlex.join(argv)[:60]}: entrypoint.command, run as written on your image"
        )
    if program.args and program.kind != "command":
        entry["entrypoint"]["args"] = program.args
    if program.nproc is not None:
        w.extra.setdefault("procsPerWorker", program.nproc)
    if "procsPerWorker" in w.extra and gpus and w.extra["procsPerWorker"] != gpus:
        changes.append(
            f"procsPerWorker {w.extra.pop('procsPerWorker')}: dropped; on GPU pods it is one "
            f"process per GPU ({gpus})"
        )

    # the image
    image = c.get("image")
    entry_image = _image(image, keep_image, docker_hub_routed, runtime_image, at, file, changes)
    if entry_image:
        entry["image"] = entry_image

    # env: NCCL_* and the user's own kept; what the platform owns dropped
    env: dict[str, str] = {}
    for i, e in enumerate(c.get("env") or []):
        name = _get(e, "name")
        if not isinstance(name, str):
            raise ImportProblem(file, f"{at}.env[{i}].name", "missing")
        if "valueFrom" in e:
            changes.append(
                f"{at}.env {name}: dropped (valueFrom: Secrets and field refs are not supported; put the value in your code or image)"
            )
        elif name in RESERVED_ENV or name == "HOME" or name.startswith("PET_"):
            changes.append(
                f"{at}.env {name}: dropped; the platform or operator sets it on every pod"
            )
        else:
            env[name] = str(e.get("value", ""))
    if env:
        entry["env"] = env
        nccl = sorted(n for n in env if n.startswith("NCCL_"))
        if nccl:
            changes.append(
                f"env {', '.join(nccl)}: kept (your value replaces the platform's default)"
            )

    # the pod's other fields
    code_mounts = set()
    vols = {v.get("name"): v for v in (w.pod.get("volumes") or []) if isinstance(v, dict)}
    for m in c.get("volumeMounts") or []:
        vol = vols.get(_get(m, "name")) or {}
        if "configMap" in vol and files:
            code_mounts.add(m.get("name"))
            continue
        claim = _get(vol, "persistentVolumeClaim", "claimName")
        hint = (
            f"declare `volumes: [{{claim: {claim}, mountPath: {m.get('mountPath')}}}]` if the claim is the team's (docs/jobs.md, Storage)"
            if claim
            else "/tmp is a writable emptyDir; /dev/shm is sized by shmSize"
        )
        changes.append(f"{at}.volumeMounts {m.get('name')} ({m.get('mountPath')}): dropped; {hint}")
    for k in sorted(set(c) - _CONTAINER_KNOWN - {"resourcesPerNode", "numNodes", "numProcPerNode"}):
        changes.append(f"{at}.{k}: dropped; {_DROPPED_WHY.get(k, 'not supported')}")
    for k in sorted(set(w.pod) - {"containers", "volumes"}):
        changes.append(f"{w.pod_at}.{k}: dropped; {_DROPPED_WHY.get(k, 'not supported')}")
    entry.update(w.extra)
    return Imported(
        f"{w.kind} {w.name}",
        entry,
        {posixpath.join(code_dir, p): t for p, t in files.items()},
        changes,
    )


def _image(
    image: Any,
    keep: bool,
    routed: bool,
    runtime_image: str | None,
    at: str,
    file: str,
    changes: list[str],
) -> str | None:
    """The entry's image (None: the platform's), judged as the plan judges it."""
    if image is None:
        if keep:
            raise ImportProblem(file, f"{at}.image", "missing; the command runs on your image")
        return None
    if not isinstance(image, str) or not IMAGE_RE.match(image):
        raise ImportProblem(file, f"{at}.image", f"got {image!r}; expected an image reference")
    host, repo, tag, digest = image_routes.parts(image)
    pinned = bool(digest) or (bool(tag) and tag != "latest")
    hub = image_routes.is_docker_hub(image)
    reachable = not hub or (routed and not image_routes.digest_pinned(image))
    if keep:
        if not pinned:
            changes.append(
                f"image {image}: kept (your command needs it); pin a tag or digest, the plan refuses :latest"
            )
        elif not reachable:
            changes.append(
                f"image {image}: kept (your command needs it), and the plan flags it "
                "(TRAINFORGE_DOCKER_HUB): nodes would pull it from Docker Hub anonymously; copy it "
                "to ECR or set trainforge:images.dockerHubCredentialArn"
            )
        else:
            changes.append(
                f"image {image}: kept; the plan checks it against the pool (CUDA build, driver)"
            )
        return image
    runs = runtime_image or f"the stock image {versions.PYTORCH_IMAGE}"
    if not reachable:
        changes.append(
            f"image {image}: dropped; it comes from Docker Hub and this stack pulls Docker Hub "
            "without a credential (10 anonymous pulls per hour per NAT address: "
            f"TRAINFORGE_DOCKER_HUB). The job runs {runs}, which has torch and the pieces the "
            "platform's features need; to keep yours, set trainforge:images.dockerHubCredentialArn "
            "and add image back"
        )
        return None
    if not pinned:
        changes.append(
            f"image {image}: dropped; unpinned (:latest), which the plan refuses. The job runs {runs}"
        )
        return None
    changes.append(
        f"image {image}: kept"
        + (" (pulled through the stack's cache)" if hub else "")
        + "; the plan checks it against the pool (CUDA build, driver)"
    )
    return image
