"""Acceptance tests for GPU capacity, declared as resources and run on demand.

Why: a bad GPU or EFA link does not crash a job, it slows it down or corrupts it. New
capacity (a capacity block, a replaced node, a new pool) should prove it works before a
multi-day job lands on it. Per GPU pool with ``acceptanceTest`` set, the platform declares in
namespace ``trainforge-acceptance``:

* ``<pool>-dcgm-diag``: an Indexed Job template that runs ``dcgmi diag -r LEVEL -j`` on
  ``nodes`` nodes of the pool (each pod asks for all of a node's GPUs: one pod per node, and
  no job shares the node while it runs). ``dcgmi`` is a client of the host engine the EKS node
  monitoring agent already runs on every GPU node (its ``dcgm-server`` DaemonSet, hostPort
  5555), so the test pod needs neither root nor capabilities; a second container judges the
  JSON (``trainforge.training.acceptance.parse``) and fails the pod on a failed test.
* ``<pool>-allreduce`` (EFA pools, or ``allReduce: true``): an Indexed Job template of
  ``nodes`` pods, each with all of its node's GPUs and EFA devices, that run our all-reduce
  benchmark (``trainforge.training.acceptance.allreduce``) under torchrun across the nodes,
  rendezvous on pod 0 through a headless Service, and judge the bus bandwidth against the
  facts table's floor and that NCCL really selected the EFA provider.

On demand: each is a *suspended CronJob* -- it never runs on a schedule; a platform engineer
creates a run from it with one command (and re-runs it the same way; Pulumi's objects never
change, runs are cleaned up a week after they finish)::

    kubectl -n trainforge-acceptance create job --from=cronjob/efa-training-allreduce \\
        efa-training-allreduce-$(date +%s)

A suspended Job would run once (a completed Job cannot be resumed again) and resuming it would
be drift from Pulumi's state; a CronJob's template can be instantiated any number of times.
For a Karpenter pool the run itself brings up the nodes (and Karpenter removes them when the
run's pods are gone); for a managed node group it tests nodes already in the group.

Through the queue (with Kueue on): a run holds whole GPU nodes of a pool the teams' queues
share, so it goes through Kueue like a team's job; otherwise the queues would not see its
p5/p4d nodes and could admit jobs the pool's limits cannot hold. The namespace is labelled
`trainforge.io/queued=true` (Kueue's managedJobsNamespaceSelector: its job webhooks only see
selected namespaces), each run's Job carries `kueue.x-k8s.io/queue-name: acceptance`, and
the LocalQueue `acceptance` points at ClusterQueue `trainforge-acceptance`: no quota of its own
(nominal 0 on each tested pool's flavor), in the teams' cohort, so a run is admitted only on
quota the teams leave idle (borrowed, never taken by preemption) and a team reclaims it as it
would any borrowed quota. With several cohorts, the queue joins the first by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from trainforge.core import platform_names, versions
from trainforge.core.contract import EFA_RESOURCE, GPU_RESOURCE, PoolFacts
from trainforge.core.image_routes import cached, torch_image
from trainforge.core.labels import NAMESPACE_NAME
from trainforge.core.pod_security import ENFORCE as PSA_ENFORCE
from trainforge.core.pod_security import WARN as PSA_WARN
from trainforge.core.pods import QUEUE_LABEL
from trainforge.jobs.codeship import CODE_MOUNT, CodeBundle, configmap_manifest
from trainforge.jobs.pod import container_security_context, pool_tolerations
from trainforge.platform.config import POOL_LABEL, ConfigError, PlatformConfig
from trainforge.platform.teams import QUEUED_LABEL
from trainforge.stack.base import problem
from trainforge.stack.platform import AcceptanceTestConfig
from trainforge.training.acceptance import facts
from trainforge.training.timeouts import MIN_RENDEZVOUS_S

NAMESPACE = platform_names.ACCEPTANCE_NAMESPACE
SERVICE_ACCOUNT = "acceptance"
RUN_AS = 1000
RDZV_PORT = 29500
NEVER = "0 0 1 1 *"  # a valid schedule that is never used: the CronJobs are suspended
KEEP_FINISHED_S = 7 * 24 * 3600
NODE_LAUNCH_S = 1800  # a Karpenter pool's nodes come up within the run's deadline
LABEL = "trainforge.io/acceptance"
LOCAL_QUEUE = "acceptance"
CLUSTER_QUEUE = platform_names.ACCEPTANCE_CLUSTER_QUEUE


def run_command(name: str) -> str:
    return f"kubectl -n {NAMESPACE} create job --from=cronjob/{name} {name}-$(date +%s)"


def check_acceptance(config: PlatformConfig, pools: dict[str, PoolFacts]) -> None:
    """Every acceptance test is on GPU capacity; an all-reduce has EFA or an explicit ask."""
    errors = []
    entries = [("nodeGroups", i, g.name, g.acceptance) for i, g in enumerate(config.node_groups)]
    entries += [("nodePools", i, p.name, p.acceptance) for i, p in enumerate(config.node_pools)]
    for key, i, name, acc in entries:
        if not acc.enabled:
            continue
        f = pools[name]
        if not f.has_gpus:
            errors.append(
                problem(
                    f"trainforge:{key}[{i}].acceptanceTest",
                    True,
                    f"false: acceptance tests are for GPU capacity, and {name!r} has no GPUs "
                    f"({', '.join(f.instance_types)})",
                )
            )
        if f.max_nodes is not None and acc.nodes > f.max_nodes:
            errors.append(
                problem(
                    f"trainforge:{key}[{i}].acceptanceTest.nodes",
                    acc.nodes,
                    f"at most the group's maxSize ({f.max_nodes})",
                )
            )
    if errors:
        raise ConfigError(errors)


def runs_all_reduce(acc: AcceptanceTestConfig, pool: PoolFacts) -> bool:
    return acc.all_reduce if acc.all_reduce is not None else pool.efa_interfaces > 0


def _labels(pool: str, test: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "trainforge",
        "app.kubernetes.io/component": "acceptance-test",
        "app.kubernetes.io/managed-by": "pulumi",
        POOL_LABEL: pool,
        LABEL: f"{pool}-{test}",
    }


def _pod_spec(pool: PoolFacts, containers: list[dict], volumes: list[dict], **extra: Any) -> dict:
    return {
        "restartPolicy": "Never",
        "serviceAccountName": SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "fsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "nodeSelector": dict(pool.node_selector),
        "tolerations": pool_tolerations(pool, gpu=True),
        "containers": containers,
        "volumes": volumes,
        **extra,
    }


def _cronjob(
    name: str, pool: str, test: str, job_spec: dict, what: str, queued: bool = False
) -> dict:
    run_labels = {**_labels(pool, test), **({QUEUE_LABEL: LOCAL_QUEUE} if queued else {})}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": _labels(pool, test),
            "annotations": {"trainforge.io/what": what, "trainforge.io/run": run_command(name)},
        },
        "spec": {
            "suspend": True,  # on demand only: `kubectl create job --from=cronjob/...`
            "schedule": NEVER,
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"metadata": {"labels": run_labels}, "spec": job_spec},
        },
    }


def _code_volume(bundle: CodeBundle) -> dict[str, Any]:
    return {
        "name": "code",
        "configMap": {
            "name": bundle.configmap_name("acceptance"),
            "items": bundle.items(),
            "defaultMode": 0o444,
        },
    }


def _env(**values: str) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in values.items()]


def _field(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def dcgm_manifest(
    pool: PoolFacts, acc: AcceptanceTestConfig, bundle: CodeBundle, queued: bool = False
) -> dict:
    name = f"{pool.name}-dcgm-diag"
    level = str(acc.dcgm_level)
    # dcgmi as a client of the node's host engine (the node monitoring agent's dcgm-server on
    # hostPort 5555): the diagnostic runs inside that privileged engine; this pod needs no root.
    script = (
        'dcgmi diag --host "$HOST_IP" -r "$LEVEL" -j > /results/dcgm.json 2>&1; rc=$?; '
        'cat /results/dcgm.json; echo "dcgmi diag -r $LEVEL on $NODE_NAME exited $rc"; exit 0'
    )
    diag = {
        "name": "dcgm-diag",
        "image": cached(versions.DCGM_IMAGE),
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", script],
        "env": [
            _field("HOST_IP", "status.hostIP"),
            _field("NODE_NAME", "spec.nodeName"),
            *_env(LEVEL=level, HOME="/tmp"),
        ],
        # all of the node's GPUs: one pod per node, and nothing else runs there meanwhile
        "resources": _amounts(
            {"cpu": "500m", "memory": "512Mi", GPU_RESOURCE: str(pool.gpus_per_node)}
        ),
        "volumeMounts": [
            {"name": "results", "mountPath": "/results"},
            {"name": "tmp", "mountPath": "/tmp"},
        ],  # fmt: skip
        "securityContext": container_security_context(),
    }
    verdict = {
        "name": "verdict",
        "image": torch_image(),
        "imagePullPolicy": "IfNotPresent",
        "command": [
            "python",
            "-m",
            "trainforge.training.acceptance.cli",
            "parse",
            "dcgm",
            "/results/dcgm.json",
            "--level",
            level,
            "--node",
            "$(NODE_NAME)",
        ],  # fmt: skip
        "env": [
            _field("NODE_NAME", "spec.nodeName"),
            *_env(PYTHONPATH=CODE_MOUNT, PYTHONDONTWRITEBYTECODE="1", HOME="/tmp"),
        ],
        "resources": _amounts({"cpu": "100m", "memory": "256Mi"}),
        "volumeMounts": [
            {"name": "results", "mountPath": "/results", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "code", "mountPath": CODE_MOUNT, "readOnly": True},
        ],
        "securityContext": container_security_context(),
    }
    volumes = [
        {"name": "results", "emptyDir": {"sizeLimit": "64Mi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        _code_volume(bundle),
    ]
    job = {
        "completionMode": "Indexed",
        "completions": acc.nodes,
        "parallelism": acc.nodes,
        "backoffLimit": 0,
        "activeDeadlineSeconds": 2 * facts.DCGM_LEVEL_SECONDS[acc.dcgm_level] + NODE_LAUNCH_S,
        "ttlSecondsAfterFinished": KEEP_FINISHED_S,
        "template": {
            "metadata": {"labels": _labels(pool.name, "dcgm-diag")},
            "spec": _pod_spec(pool, [verdict], volumes, initContainers=[diag]),
        },
    }
    what = f"DCGM diagnostics level {level} on {acc.nodes} node(s) of pool {pool.name}"
    return _cronjob(name, pool.name, "dcgm-diag", job, what, queued)


def allreduce_manifests(
    pool: PoolFacts, acc: AcceptanceTestConfig, bundle: CodeBundle, queued: bool = False
) -> tuple[dict, dict]:
    """(headless Service, CronJob) of the all-reduce test across `acc.nodes` nodes."""
    name = f"{pool.name}-allreduce"
    efa = pool.efa_interfaces > 0
    floor = (
        facts.Floor(acc.min_bus_bandwidth_gbps, "acceptanceTest.minBusBandwidthGBps")
        if acc.min_bus_bandwidth_gbps is not None
        else facts.allreduce_floor(pool.instance_types, acc.nodes)
    )
    bench = [
        "-m",
        "trainforge.training.acceptance.allreduce",
        "--timeout",
        str(int(MIN_RENDEZVOUS_S)),
    ]
    if floor.gbps is not None:
        bench += ["--min-busbw", str(floor.gbps), "--floor-why", floor.why]
    if efa:
        bench.append("--require-efa")
    args = [
        "python", "-m", "trainforge.training.launch",
        f"--nnodes={acc.nodes}", f"--nproc-per-node={pool.gpus_per_node}",
        "--node-rank=$(JOB_COMPLETION_INDEX)",
        f"--master-addr=$(JOB_NAME)-0.{name}", f"--master-port={RDZV_PORT}",
        f"--rdzv-conf=timeout={int(MIN_RENDEZVOUS_S)}",
        *bench,
    ]  # fmt: skip
    env = [
        _field("JOB_NAME", "metadata.labels['batch.kubernetes.io/job-name']"),
        *_env(
            PYTHONPATH=CODE_MOUNT,
            PYTHONDONTWRITEBYTECODE="1",
            PYTHONUNBUFFERED="1",
            HOME="/tmp",
            NCCL_DEBUG="INFO",
            NCCL_DEBUG_SUBSYS="INIT,NET",
            NCCL_DEBUG_FILE="/tmp/nccl.%h.%p.log",
            NCCL_SOCKET_IFNAME="eth0",
        ),
    ]
    amounts = {
        "cpu": str(max(1, min((pool.vcpus_per_node or 8) // 2, 32))),
        "memory": f"{max(8, min((pool.memory_mib_per_node or 32768) // 4096, 256))}Gi",
        GPU_RESOURCE: str(pool.gpus_per_node),
    }
    if efa:
        amounts[EFA_RESOURCE] = str(pool.efa_interfaces)
        env += _env(FI_PROVIDER="efa", FI_EFA_FORK_SAFE="1")
        if pool.rdma:
            env += _env(FI_EFA_USE_DEVICE_RDMA="1")
    container = {
        "name": "allreduce",
        "image": cached(versions.EFA_TEST_IMAGE) if efa else torch_image(),
        "imagePullPolicy": "IfNotPresent",
        # `args`, not `command`: the image's entrypoint (CUDA forward-compatibility setup in
        # the Deep Learning Containers) stays in front of it
        "args": args,
        "env": env,
        "ports": [{"name": "rdzv", "containerPort": RDZV_PORT, "protocol": "TCP"}],
        "resources": _amounts(amounts),
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "code", "mountPath": CODE_MOUNT, "readOnly": True},
        ],
        "securityContext": container_security_context(),
    }
    volumes = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "8Gi"}},
        _code_volume(bundle),
    ]
    labels = _labels(pool.name, "allreduce")
    job = {
        "completionMode": "Indexed",
        "completions": acc.nodes,
        "parallelism": acc.nodes,
        "backoffLimit": 0,
        "activeDeadlineSeconds": 3600 + NODE_LAUNCH_S,
        "ttlSecondsAfterFinished": KEEP_FINISHED_S,
        "template": {
            "metadata": {"labels": labels},
            # pods are <job>-<index>.<service>: the rendezvous address of pod 0
            "spec": _pod_spec(pool, [container], volumes, subdomain=name),
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {LABEL: f"{pool.name}-allreduce"},
            "ports": [{"name": "rdzv", "port": RDZV_PORT, "targetPort": RDZV_PORT}],
        },
    }
    what = (
        f"NCCL all-reduce across {acc.nodes} node(s) of pool {pool.name}"
        + (f", floor {floor.gbps:g} GB/s" if floor.gbps is not None else "")
        + (", EFA required" if efa else "")
    )
    return service, _cronjob(name, pool.name, "allreduce", job, what, queued)


def _amounts(amounts: dict[str, str]) -> dict[str, dict[str, str]]:
    return {"requests": dict(amounts), "limits": dict(amounts)}


def queue_manifests(tested: list[PoolFacts], cohort: str) -> list[dict[str, Any]]:
    """The acceptance tests' ClusterQueue (no quota of its own: it borrows the cohort's idle
    quota on the tested pools' flavors, and never preempts) and its LocalQueue."""
    from trainforge.platform import queues  # noqa: PLC0415

    flavors = [
        {
            "name": queues.flavor_name(p.name),
            "resources": [{"name": r, "nominalQuota": 0} for r in queues.COVERED],
        }
        for p in tested
    ]
    labels = {"app.kubernetes.io/name": "trainforge", "app.kubernetes.io/managed-by": "pulumi"}
    return [
        {
            "apiVersion": queues.API_VERSION,
            "kind": "ClusterQueue",
            "metadata": {"name": CLUSTER_QUEUE, "labels": labels},
            "spec": {
                "cohortName": cohort,
                "namespaceSelector": {"matchLabels": {NAMESPACE_NAME: NAMESPACE}},
                "queueingStrategy": "BestEffortFIFO",
                "preemption": {
                    "withinClusterQueue": "Never",
                    "reclaimWithinCohort": "Never",
                    "borrowWithinCohort": {"policy": "Never"},
                },
                "resourceGroups": [{"coveredResources": list(queues.COVERED), "flavors": flavors}],
            },
        },
        {
            "apiVersion": queues.API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": NAMESPACE, "labels": labels},
            "spec": {"clusterQueue": CLUSTER_QUEUE},
        },
    ]


def manifests(
    config: PlatformConfig,
    pools: dict[str, PoolFacts],
    bundle: CodeBundle,
    cohort: str | None = None,
) -> list[dict[str, Any]]:
    """Every object of the acceptance tests (empty when no pool asks for one); `cohort`: Kueue
    runs, and the runs go through a queue in that cohort."""
    chosen = [(g.name, g.acceptance) for g in config.node_groups if g.acceptance.enabled]
    chosen += [(p.name, p.acceptance) for p in config.node_pools if p.acceptance.enabled]
    if not chosen:
        return []
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": NAMESPACE,
                "labels": {
                    PSA_ENFORCE: "restricted",
                    PSA_WARN: "restricted",
                    **({QUEUED_LABEL: "true"} if cohort is not None else {}),
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
            "automountServiceAccountToken": False,
        },
        configmap_manifest(
            bundle, "acceptance", NAMESPACE, {"app.kubernetes.io/name": "trainforge"}
        ),
    ]
    if cohort is not None:
        out += queue_manifests([pools[name] for name, _ in chosen], cohort)
    for name, acc in chosen:
        pool = pools[name]
        out.append(dcgm_manifest(pool, acc, bundle, cohort is not None))
        if runs_all_reduce(acc, pool):
            out += list(allreduce_manifests(pool, acc, bundle, cohort is not None))
    return out


@dataclass
class AcceptanceTestsArgs:
    config: PlatformConfig
    pools: dict[str, PoolFacts]
    k8s_provider: k8s.Provider
    depends_on: list[pulumi.Resource]
    cohort: str | None = None  # Kueue runs: the runs queue in this cohort


_KINDS = {
    "Namespace": k8s.core.v1.Namespace,
    "ServiceAccount": k8s.core.v1.ServiceAccount,
    "ConfigMap": k8s.core.v1.ConfigMap,
    "Service": k8s.core.v1.Service,
    "CronJob": k8s.batch.v1.CronJob,
}


class AcceptanceTests(pulumi.ComponentResource):
    """The on-demand acceptance tests of the GPU pools that ask for them."""

    def __init__(
        self, name: str, args: AcceptanceTestsArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("trainforge:index:AcceptanceTests", name, None, opts)
        from trainforge.jobs.codeship import collect  # noqa: PLC0415

        objects = manifests(args.config, args.pools, collect(), args.cohort)
        self.objects: dict[str, pulumi.Resource] = {}
        namespace: pulumi.Resource | None = None
        # what the CronJobs' pods name (their ServiceAccount, the code ConfigMap): they wait
        # for it, so a fresh stack never starts a test before its objects exist
        referenced: list[pulumi.Resource] = []
        for obj in objects:
            kind = obj["kind"]
            meta = obj["metadata"]
            depends = [*args.depends_on, *([namespace] if namespace is not None else [])]
            if kind in ("CronJob", "Job"):
                depends += referenced
            opts_ = pulumi.ResourceOptions(
                parent=self, provider=args.k8s_provider, depends_on=depends
            )
            res_name = f"{name}-{kind.lower()}-{meta['name']}"
            body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
            if kind in ("ClusterQueue", "LocalQueue"):
                res = k8s.apiextensions.CustomResource(
                    res_name,
                    api_version=obj["apiVersion"],
                    kind=kind,
                    metadata=meta,
                    spec=body["spec"],
                    opts=opts_,
                )
            else:
                res = _KINDS[kind](res_name, metadata=meta, **_snake_top(body), opts=opts_)
            if kind == "Namespace":
                namespace = res
            elif kind in (
                "ServiceAccount",
                "ConfigMap",
                "Secret",
                "PersistentVolumeClaim",
                "LocalQueue",
            ):
                referenced.append(res)
            self.objects[f"{kind}/{meta['name']}"] = res
        self.register_outputs({"objects": sorted(self.objects)})


def _snake_top(body: dict[str, Any]) -> dict[str, Any]:
    """Top-level fields as the typed classes' keyword arguments (nested dicts stay camelCase,
    which the provider takes as-is)."""
    rename = {"automountServiceAccountToken": "automount_service_account_token"}
    return {rename.get(k, k): v for k, v in body.items()}
