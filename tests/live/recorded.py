"""API responses for three live jobs, in the shapes the real controllers write at the pinned
versions (Kubeflow training operator v1 PyTorchJob, Trainer v2.2.1 TrainJob, batch/v1 Job,
Kueue 0.19 Workload/LocalQueue/ClusterQueue v1beta2 and its visibility API, core/v1 Pods and
Events), as `kubectl get -o json` shows them, trimmed to the fields a status reads plus their
neighbours. Written out by hand from those types; timestamps are fixed and NOW is passed to the
commands, so nothing depends on today's date.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from trainforge.live import spend

NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def meta(name: str, ns: str | None, created: str, uid: str = "", **extra) -> dict:
    m = {"name": name, "creationTimestamp": created, "uid": uid or f"uid-{name}"}
    if ns:
        m["namespace"] = ns
    m.update(extra)
    return m


def cond(kind: str, status: str, at: str, reason: str = "", message: str = "") -> dict:
    return {
        "type": kind,
        "status": status,
        "lastTransitionTime": at,
        "reason": reason,
        "message": message,
    }


def gpu_container(name: str, gpus: int, cpu: str, memory: str) -> dict:
    req = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus)}
    return {
        "name": name,
        "image": "public.ecr.aws/trainforge/pytorch:2.13.0-cuda12.9",
        "resources": {"requests": req, "limits": {"nvidia.com/gpu": str(gpus)}},
        "ports": [{"name": "metrics", "containerPort": 9400, "protocol": "TCP"}],
    }


def cluster_queue(name: str, flavor: str, nominal_gpus: str, used_gpus: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": meta(name, None, "2026-11-20T09:00:00Z"),
        "spec": {
            "cohortName": "trainforge",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "1500"},
                                {"name": "memory", "nominalQuota": "12000Gi"},
                                {"name": "nvidia.com/gpu", "nominalQuota": nominal_gpus},
                            ],
                        }
                    ],
                }
            ],
        },
        "status": {
            "pendingWorkloads": 2,
            "admittedWorkloads": 3,
            "flavorsUsage": [
                {
                    "name": flavor,
                    "resources": [
                        {"name": "cpu", "total": "1100", "borrowed": "0"},
                        {"name": "memory", "total": "8800Gi", "borrowed": "0"},
                        {"name": "nvidia.com/gpu", "total": used_gpus, "borrowed": "0"},
                    ],
                }
            ],
        },
    }


# --- 1. pending on quota: a PyTorchJob Kueue keeps suspended ------------------------------------

PENDING_NS, PENDING = "llm", "gpt-13b"
_pending_job = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": meta(PENDING, PENDING_NS, "2026-11-25T11:18:00Z", "5f0c1e2a-pending",
                     labels={"trainforge.io/job": PENDING, "kueue.x-k8s.io/queue-name": "training"}),
    "spec": {
        "runPolicy": {"suspend": True, "cleanPodPolicy": "None"},
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "ExitCode"},
            "Worker": {"replicas": 3, "restartPolicy": "ExitCode"},
        },
    },
    "status": {
        "conditions": [
            cond("Created", "True", "2026-11-25T11:18:00Z", "PyTorchJobCreated",
                 f"PyTorchJob {PENDING} is created."),
            cond("Suspended", "True", "2026-11-25T11:18:01Z", "PyTorchJobSuspended",
                 f"PyTorchJob {PENDING} is suspended."),
        ],
        "replicaStatuses": {},
    },
}  # fmt: skip
_pending_wl = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": meta("pytorchjob-gpt-13b-7c2d9", PENDING_NS, "2026-11-25T11:18:01Z",
                     labels={"kueue.x-k8s.io/job-uid": "5f0c1e2a-pending"}),
    "spec": {
        "queueName": "training",
        "priority": 0,
        "podSets": [
            {"name": "master", "count": 1, "template": {"spec": {"containers": [
                gpu_container("pytorch", 8, "90", "1000Gi")]}}},
            {"name": "worker", "count": 3, "template": {"spec": {"containers": [
                gpu_container("pytorch", 8, "90", "1000Gi")]}}},
        ],
    },
    "status": {
        "conditions": [
            cond("QuotaReserved", "False", "2026-11-25T11:18:01Z", "Pending",
                 "couldn't assign flavors to pod set worker: insufficient unused quota for "
                 "nvidia.com/gpu in flavor efa-training, 16 more needed"),
        ],
        "resourceRequests": [],
    },
}  # fmt: skip
PENDING_ROUTES = {
    f"/apis/kubeflow.org/v1/namespaces/{PENDING_NS}/pytorchjobs/{PENDING}": _pending_job,
    f"{KUEUE}/namespaces/{PENDING_NS}/workloads?labelSelector=kueue.x-k8s.io/job-uid=5f0c1e2a-pending": {
        "kind": "WorkloadList", "items": [_pending_wl]},
    f"{KUEUE}/namespaces/{PENDING_NS}/localqueues/training": {
        "kind": "LocalQueue", "metadata": meta("training", PENDING_NS, "2026-11-20T09:00:00Z"),
        "spec": {"clusterQueue": "llm"}, "status": {"pendingWorkloads": 2}},
    f"{KUEUE}/clusterqueues/llm": cluster_queue("llm", "efa-training", "64", "48"),
    f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{PENDING_NS}/localqueues/training/pendingworkloads": {
        "kind": "PendingWorkloadsSummary",
        "items": [
            {"metadata": meta("pytorchjob-llama-ft-11aa2", PENDING_NS, "2026-11-25T10:40:00Z"),
             "priority": 0, "localQueueName": "training", "positionInClusterQueue": 0,
             "positionInLocalQueue": 0},
            {"metadata": meta("pytorchjob-gpt-13b-7c2d9", PENDING_NS, "2026-11-25T11:18:01Z"),
             "priority": 0, "localQueueName": "training", "positionInClusterQueue": 1,
             "positionInLocalQueue": 1},
        ],
    },
    f"/api/v1/namespaces/{PENDING_NS}/pods?labelSelector=trainforge.io/job={PENDING}": {
        "kind": "PodList", "items": []},
    f"/api/v1/namespaces/{PENDING_NS}/events": {"kind": "EventList", "items": [
        {"involvedObject": {"kind": "Workload", "name": "pytorchjob-gpt-13b-7c2d9"},
         "type": "Normal", "reason": "Pending", "lastTimestamp": "2026-11-25T11:59:00Z",
         "message": "couldn't assign flavors to pod set worker: insufficient unused quota for "
                    "nvidia.com/gpu in flavor efa-training, 16 more needed"},
    ]},
}  # fmt: skip


# --- 2. restarting: a TrainJob whose pods were re-created after a hang ------------------------

RESTART_NS, RESTART = "vision", "vit-l"
_restart_job = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": meta(RESTART, RESTART_NS, "2026-11-25T08:00:00Z", "9b1d-restart",
                     labels={"trainforge.io/job": RESTART, "kueue.x-k8s.io/queue-name": "training"}),
    "spec": {"runtimeRef": {"name": "trainforge-vit-l", "kind": "TrainingRuntime"},
             "trainer": {"numNodes": 2}, "suspend": False},
    "status": {"conditions": []},
}  # fmt: skip
_restart_wl = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": meta("trainjob-vit-l-3e8f1", RESTART_NS, "2026-11-25T08:00:01Z",
                     labels={"kueue.x-k8s.io/job-uid": "9b1d-restart"}),
    "spec": {"queueName": "training", "podSets": [
        {"name": "node", "count": 2, "template": {"spec": {"containers": [
            gpu_container("node", 4, "44", "180Gi")]}}}]},
    "status": {
        "conditions": [
            cond("QuotaReserved", "True", "2026-11-25T08:00:02Z", "QuotaReserved",
                 "Quota reserved in ClusterQueue vision"),
            cond("Admitted", "True", "2026-11-25T08:00:02Z", "Admitted",
                 "The workload is admitted"),
            cond("PodsReady", "True", "2026-11-25T11:41:00Z", "PodsReady", "All pods reached readiness"),
        ],
        "admission": {"clusterQueue": "vision", "podSetAssignments": [
            {"name": "node", "count": 2, "flavors": {"cpu": "gpu-workloads", "memory": "gpu-workloads",
                                                      "nvidia.com/gpu": "gpu-workloads"},
             "resourceUsage": {"cpu": "88", "memory": "360Gi", "nvidia.com/gpu": "8"}}]},
    },
}  # fmt: skip


# What a trainforge runtime job's pods run: their exit codes are the runtime's reasons'
RUNTIME_COMMAND = ["python", "-m", "trainforge.training.launch", "--nnodes=2",
                   "--nproc-per-node=4", "-m", "trainforge.training"]  # fmt: skip


def _pod(
    name: str,
    ns: str,
    job: str,
    index: str,
    node: str,
    container: str,
    restarts: int,
    last: dict | None,
    started: str,
    phase: str = "Running",
    jobset: bool = False,
    ours: bool = True,
    created: str = "2026-11-25T08:01:00Z",
    on_exit: str | None = None,
) -> dict:
    """A pod of `job`. `jobset`: a TrainJob's pod, with the labels JobSet v0.12.0 gives every
    pod of its child Jobs (labelAndAnnotateObject: jobset-name is the JobSet's, which the Trainer
    names after the TrainJob); `ours`: it carries trainforge's job label (a TrainJob the Kubeflow
    SDK made carries none); `on_exit`: the TRAINFORGE_ON_EXIT its emitter gave its training
    container (what the job's controller does after it exits)."""
    labels = {"batch.kubernetes.io/job-completion-index": index}
    if ours:
        labels["trainforge.io/job"] = job
    if jobset:
        labels.update({"jobset.sigs.k8s.io/jobset-name": job,
                       "jobset.sigs.k8s.io/replicatedjob-name": "node"})  # fmt: skip
    cs = {
        "name": container,
        "ready": phase == "Running",
        "restartCount": restarts,
        "state": {"running": {"startedAt": started}} if phase == "Running" else {},
        "lastState": {"terminated": last} if last else {},
    }
    main = gpu_container(container, 4, "44", "180Gi")
    if ours:  # the runtime under its launcher (jobs/entrypoint.command_for of a runtime job)
        main["command"] = list(RUNTIME_COMMAND)
    if on_exit is not None:
        main["env"] = [{"name": "TRAINFORGE_ON_EXIT", "value": on_exit}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": meta(name, ns, created, labels=labels),
        "spec": {"nodeName": node, "containers": [main]},
        "status": {"phase": phase, "startTime": created,
                   "conditions": [cond("PodScheduled", "True", created)],
                   "containerStatuses": [cs]},
    }  # fmt: skip


_hang = {"exitCode": 201, "reason": "Error", "startedAt": "2026-11-25T10:02:00Z",
         "finishedAt": "2026-11-25T11:40:00Z"}  # fmt: skip
_peer = {"exitCode": 202, "reason": "Error", "startedAt": "2026-11-25T10:02:00Z",
         "finishedAt": "2026-11-25T11:40:02Z"}  # fmt: skip
# What the TrainJob's emitter tells its pods (restartPolicy OnFailure: the runtime's pods
# restart their container in place, as these did): trainforge.jobs.restarts.on_exit of such
# a job, which tests/live/test_status.py checks this against
RESTART_ON_EXIT = (
    "permanent=the container restarts in place, counted against backoffLimit;"
    "retryable=the container restarts in place, counted against backoffLimit"
)
RESTART_METRICS = """\
# HELP trainforge_step optimizer steps completed
# TYPE trainforge_step gauge
trainforge_step{run="vit-l"} 41200.0
trainforge_total_steps{run="vit-l"} 100000.0
trainforge_progress{run="vit-l"} 0.412
trainforge_step_seconds{run="vit-l"} 0.61
trainforge_eta_seconds{run="vit-l"} 35868.0
trainforge_checkpoint_step{run="vit-l"} 41000.0
trainforge_restarts{run="vit-l"} 2.0
trainforge_goodput{run="vit-l"} 0.83
trainforge_attempt_exits{run="vit-l",reason="hang"} 1.0
trainforge_attempt_exits{run="vit-l",reason="peer_lost"} 1.0
"""
RESTART_ROUTES = {
    f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{RESTART_NS}/trainjobs/{RESTART}": _restart_job,
    f"{KUEUE}/namespaces/{RESTART_NS}/workloads?labelSelector=kueue.x-k8s.io/job-uid=9b1d-restart": {
        "kind": "WorkloadList", "items": [_restart_wl]},
    f"{KUEUE}/namespaces/{RESTART_NS}/localqueues/training": {
        "kind": "LocalQueue", "spec": {"clusterQueue": "vision"}},
    f"/api/v1/namespaces/{RESTART_NS}/pods?labelSelector=jobset.sigs.k8s.io/jobset-name={RESTART}": {
        "kind": "PodList", "items": [
            _pod("vit-l-node-0-0-k8x2p", RESTART_NS, RESTART, "0", "ip-10-40-3-17.ec2.internal",
                 "node", 1, _peer, "2026-11-25T11:40:40Z", jobset=True, on_exit=RESTART_ON_EXIT),
            _pod("vit-l-node-0-1-q4m7d", RESTART_NS, RESTART, "1", "ip-10-40-3-52.ec2.internal",
                 "node", 1, _hang, "2026-11-25T11:40:38Z", jobset=True, on_exit=RESTART_ON_EXIT),
        ]},
    f"/api/v1/namespaces/{RESTART_NS}/events": {"kind": "EventList", "items": [
        {"involvedObject": {"kind": "Pod", "name": "vit-l-node-0-1-q4m7d"}, "type": "Warning",
         "reason": "BackOff", "lastTimestamp": "2026-11-25T11:40:20Z",
         "message": "Back-off restarting failed container node in pod vit-l-node-0-1-q4m7d"},
    ]},
    f"/api/v1/namespaces/{RESTART_NS}/pods/vit-l-node-0-0-k8x2p:9400/proxy/metrics": RESTART_METRICS,
    f"/api/v1/namespaces/{RESTART_NS}/pods/vit-l-node-0-1-q4m7d/log?previous=true":
        "[rank1] step 40210 loss 2.113\n[rank1] watchdog: rank 1: step 40211 made no progress for "
        "300.4s\n[rank1] trainforge exit: hang code=201 (rank 1, step 40211): step 40211 made no "
        "progress for 300.4s [the job restarts]\n",
    f"/api/v1/namespaces/{RESTART_NS}/pods/vit-l-node-0-0-k8x2p/log?previous=true":
        "[rank0] trainforge exit: peer_lost code=202 (rank 0, step 40211): rank 1 vanished "
        "[the job restarts]\n",
}  # fmt: skip


# --- 3. running: an indexed Job making progress --------------------------------------------------

RUN_NS, RUN = "llm", "mnist-ddp"
_run_job = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": meta(RUN, RUN_NS, "2026-11-25T11:30:00Z", "77aa-run",
                     labels={"trainforge.io/job": RUN, "kueue.x-k8s.io/queue-name": "training"}),
    "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "suspend": False},
    "status": {"active": 2, "ready": 2, "startTime": "2026-11-25T11:30:05Z",
               "conditions": []},
}  # fmt: skip
_run_wl = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": meta("job-mnist-ddp-0b1c4", RUN_NS, "2026-11-25T11:30:00Z",
                     labels={"kueue.x-k8s.io/job-uid": "77aa-run"}),
    "spec": {"queueName": "training", "podSets": [
        {"name": "main", "count": 2, "template": {"spec": {"containers": [
            gpu_container("trainer", 1, "3", "12Gi")]}}}]},
    "status": {
        "conditions": [
            cond("QuotaReserved", "True", "2026-11-25T11:30:01Z", "QuotaReserved", ""),
            cond("Admitted", "True", "2026-11-25T11:30:01Z", "Admitted", ""),
        ],
        "admission": {"clusterQueue": "llm", "podSetAssignments": [
            {"name": "main", "count": 2, "flavors": {"nvidia.com/gpu": "gpu-workloads"}}]},
    },
}  # fmt: skip
RUN_METRICS = """\
trainforge_step{run="mnist-ddp"} 1800.0
trainforge_total_steps{run="mnist-ddp"} 5000.0
trainforge_progress{run="mnist-ddp"} 0.36
trainforge_step_seconds{run="mnist-ddp"} 0.9
trainforge_eta_seconds{run="mnist-ddp"} 2880.0
trainforge_checkpoint_step{run="mnist-ddp"} 1500.0
trainforge_restarts{run="mnist-ddp"} 0.0
trainforge_goodput{run="mnist-ddp"} 0.97
"""
RUN_ROUTES = {
    f"/apis/batch/v1/namespaces/{RUN_NS}/jobs/{RUN}": _run_job,
    f"{KUEUE}/namespaces/{RUN_NS}/workloads?labelSelector=kueue.x-k8s.io/job-uid=77aa-run": {
        "kind": "WorkloadList", "items": [_run_wl]},
    f"{KUEUE}/namespaces/{RUN_NS}/localqueues/training": {
        "kind": "LocalQueue", "spec": {"clusterQueue": "llm"}},
    f"/api/v1/namespaces/{RUN_NS}/pods?labelSelector=trainforge.io/job={RUN}": {
        "kind": "PodList", "items": [
            _pod("mnist-ddp-0-7xk2q", RUN_NS, RUN, "0", "ip-10-40-1-9.ec2.internal",
                 "trainer", 0, None, "2026-11-25T11:30:40Z"),
            _pod("mnist-ddp-1-p9d3w", RUN_NS, RUN, "1", "ip-10-40-1-23.ec2.internal",
                 "trainer", 0, None, "2026-11-25T11:30:41Z"),
        ]},
    f"/api/v1/namespaces/{RUN_NS}/events": {"kind": "EventList", "items": []},
    f"/api/v1/namespaces/{RUN_NS}/pods/mnist-ddp-0-7xk2q:9400/proxy/metrics": RUN_METRICS,
    f"/api/v1/namespaces/{RUN_NS}/pods/mnist-ddp-0-7xk2q/log": "[rank0] step 1800 loss 0.081\n",
}  # fmt: skip


def node(name: str, instance_type: str, gpus: str, cpu: str, memory: str) -> dict:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": meta(name, None, "2026-11-25T07:58:00Z", labels={
            "node.kubernetes.io/instance-type": instance_type,
            "topology.kubernetes.io/region": "us-east-1",
            "topology.kubernetes.io/zone": "us-east-1a",
            "karpenter.sh/capacity-type": "on-demand",
            "trainforge.io/pool": "gpu-workloads"}),
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpus}},
    }  # fmt: skip


# OpenCost's Prometheus, through the API server's service proxy: an admin's kubeconfig reads
# it (mnist-ddp: created 30m before NOW), a team member's is refused (vit-l: created 4h before)
PROMETHEUS = spend.query_path()
OPENCOST_ANSWER = json.dumps(
    {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1764072000, "6.84"]}]},
    }
)
RUN_ROUTES[f"{PROMETHEUS}?query={spend.opencost_query(RUN_NS, RUN, 1800)}"] = OPENCOST_ANSWER
FORBIDDEN = {f"{PROMETHEUS}?query={spend.opencost_query('vision', 'vit-l', 14400)}"}
# vit-l's nodes (4 A10G GPUs each: g5.12xlarge), for the estimate when OpenCost is not readable
for _name in ("ip-10-40-3-17.ec2.internal", "ip-10-40-3-52.ec2.internal"):
    RESTART_ROUTES[f"/api/v1/nodes/{_name}"] = node(_name, "g5.12xlarge", "4", "47810m", "185Gi")

# --- 4. a TrainJob the Kubeflow SDK made: running, its pods without trainforge's label -------

# What `TrainerClient().train(trainer=CustomTrainer(func=train, num_nodes=2))` of kubeflow 0.4.1
# sends (the TrainJob `trainforge plan --sdk` captured from the real SDK, the fixture
# tests/fixtures/kubeflow_sdk/waits_for_its_job.py, 2026-11-30): a generated name, the SDK's
# default runtime, no labels of trainforge's, no queue label (the team's default LocalQueue).
SDK_NS, SDK = "research", "x1d870ab9ffc"
_sdk_job = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": meta(SDK, SDK_NS, "2026-11-25T11:50:00Z", "5dc1-sdk"),
    "spec": {"runtimeRef": {"name": "torch-distributed"},
             "trainer": {"numNodes": 2, "command": ["bash", "-c", "torchrun train.py"]}},
    "status": {"conditions": []},
}  # fmt: skip
_sdk_wl = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": meta(f"trainjob-{SDK}-1f0a2", SDK_NS, "2026-11-25T11:50:01Z",
                     labels={"kueue.x-k8s.io/job-uid": "5dc1-sdk"}),
    "spec": {"queueName": "default", "podSets": [
        {"name": "node", "count": 2, "template": {"spec": {"containers": [
            gpu_container("node", 1, "3", "12Gi")]}}}]},
    "status": {
        "conditions": [
            cond("QuotaReserved", "True", "2026-11-25T11:50:02Z", "QuotaReserved",
                 "Quota reserved in ClusterQueue research"),
            cond("Admitted", "True", "2026-11-25T11:50:02Z", "Admitted",
                 "The workload is admitted"),
        ],
        "admission": {"clusterQueue": "research", "podSetAssignments": [
            {"name": "node", "count": 2, "flavors": {"cpu": "gpu-workloads", "memory": "gpu-workloads",
                                                      "nvidia.com/gpu": "gpu-workloads"},
             "resourceUsage": {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "2"}}]},
    },
}  # fmt: skip
SDK_ROUTES = {
    f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{SDK_NS}/trainjobs/{SDK}": _sdk_job,
    f"{KUEUE}/namespaces/{SDK_NS}/workloads?labelSelector=kueue.x-k8s.io/job-uid=5dc1-sdk": {
        "kind": "WorkloadList", "items": [_sdk_wl]},
    f"{KUEUE}/namespaces/{SDK_NS}/localqueues/default": {
        "kind": "LocalQueue", "spec": {"clusterQueue": "research"}},
    f"/api/v1/namespaces/{SDK_NS}/pods?labelSelector=jobset.sigs.k8s.io/jobset-name={SDK}": {
        "kind": "PodList", "items": [
            _pod(f"{SDK}-node-0-0-h2k9s", SDK_NS, SDK, "0", "ip-10-40-5-11.ec2.internal",
                 "node", 0, None, "2026-11-25T11:51:00Z", jobset=True, ours=False,
                 created="2026-11-25T11:50:30Z"),
            _pod(f"{SDK}-node-0-1-m3x7c", SDK_NS, SDK, "1", "ip-10-40-5-12.ec2.internal",
                 "node", 0, None, "2026-11-25T11:51:02Z", jobset=True, ours=False,
                 created="2026-11-25T11:50:30Z"),
        ]},
    f"/api/v1/namespaces/{SDK_NS}/events": {"kind": "EventList", "items": []},
    f"/api/v1/namespaces/{SDK_NS}/pods/{SDK}-node-0-0-h2k9s/log": "training\n",
}  # fmt: skip
# its nodes (1 A10G GPU each: g5.xlarge)
for _name in ("ip-10-40-5-11.ec2.internal", "ip-10-40-5-12.ec2.internal"):
    SDK_ROUTES[f"/api/v1/nodes/{_name}"] = node(_name, "g5.xlarge", "1", "3920m", "14Gi")

ROUTES = {**PENDING_ROUTES, **RESTART_ROUTES, **RUN_ROUTES, **SDK_ROUTES}


# --- 1b. the rest of team llm's queue, for gpt-13b's expected start ------------------------------
# ClusterQueue llm (64 GPUs nominal in flavor efa-training, 48 in use) holds three admitted
# workloads: bert-sweep (16 GPUs, admitted 2h ago, expected 3h by its annotation, no metrics),
# llama-pt (32 GPUs, its rank 0's metrics: ETA 2h) and mnist-ddp (in flavor gpu-workloads);
# llama-ft (24 GPUs, expected 1.5h) waits ahead of gpt-13b (32 GPUs). Within the nominal
# quota: bert-sweep ends at +1h, llama-ft starts (56 GPUs), llama-pt ends at +2h and gpt-13b
# starts (56 GPUs): expected start after 2.0 h.

# fmt: off
EXPECTED_SECONDS = "trainforge.io/expected-duration-seconds"
EXPECTED_BASIS = "trainforge.io/expected-duration"


def _queued_job(name: str, created: str, seconds: str | None, basis: str, workers: int) -> dict:
    notes = {EXPECTED_BASIS: basis, **({EXPECTED_SECONDS: seconds} if seconds else {})}
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": meta(name, PENDING_NS, created, annotations=notes,
                         labels={"trainforge.io/job": name, "kueue.x-k8s.io/queue-name": "training"}),
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1},
                                         "Worker": {"replicas": workers - 1}}},
    }  # fmt: skip


def _queued_wl(wl: str, job: str, created: str, pods: int, admitted: str | None,
               flavor: str = "efa-training", message: str = "") -> dict:
    owner = [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": job,
              "uid": f"uid-{job}", "controller": True}]
    status: dict = {"conditions": [cond("QuotaReserved", "False", created, "Pending", message)]}
    if admitted:
        status = {
            "conditions": [cond("QuotaReserved", "True", admitted, "QuotaReserved", ""),
                           cond("Admitted", "True", admitted, "Admitted", "")],
            "admission": {"clusterQueue": "llm", "podSetAssignments": [
                {"name": "worker", "count": pods,
                 "flavors": {"cpu": flavor, "memory": flavor, "nvidia.com/gpu": flavor}}]},
        }
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": meta(wl, PENDING_NS, created, ownerReferences=owner),
        "spec": {"queueName": "training", "podSets": [
            {"name": "worker", "count": pods, "template": {"spec": {"containers": [
                gpu_container("pytorch", 8, "90", "1000Gi")]}}}]},
        "status": status,
    }  # fmt: skip


_STEPS = "{} steps x 1.8s (expectedStepSeconds)"
QUEUE_JOBS = {
    "bert-sweep": _queued_job("bert-sweep", "2026-11-25T09:59:00Z", "10800", _STEPS.format(6000), 2),
    "llama-pt": _queued_job("llama-pt", "2026-11-25T06:00:00Z", "21600", _STEPS.format(12000), 4),
    "llama-ft": _queued_job("llama-ft", "2026-11-25T10:40:00Z", "5400", _STEPS.format(3000), 3),
}
QUEUE_WORKLOADS = [
    _pending_wl,
    _queued_wl("pytorchjob-bert-sweep-4d1e0", "bert-sweep", "2026-11-25T09:59:00Z", 2,
               "2026-11-25T10:00:00Z"),
    _queued_wl("pytorchjob-llama-pt-90b3c", "llama-pt", "2026-11-25T06:00:00Z", 4,
               "2026-11-25T06:00:05Z"),
    _queued_wl("pytorchjob-llama-ft-11aa2", "llama-ft", "2026-11-25T10:40:00Z", 3, None,
               message="couldn't assign flavors to pod set worker: insufficient unused quota "
                       "for nvidia.com/gpu in flavor efa-training, 8 more needed"),
    _run_wl,
]  # fmt: skip
LLAMA_PT_METRICS = """\
trainforge_step{run="llama-pt"} 8000.0
trainforge_total_steps{run="llama-pt"} 12000.0
trainforge_progress{run="llama-pt"} 0.667
trainforge_step_seconds{run="llama-pt"} 1.8
trainforge_eta_seconds{run="llama-pt"} 7200.0
"""


def resource_flavor(name: str, taints: list | None = None) -> dict:
    """A ResourceFlavor as the platform renders it (trainforge.platform.queues): the pool's
    label, and its taints."""
    spec: dict = {"nodeLabels": {"trainforge.io/pool": name}}
    if taints:
        spec["nodeTaints"] = taints
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": meta(name, None, "2026-11-20T09:00:00Z"), "spec": spec}


PENDING_ROUTES.update({
    f"{KUEUE}/resourceflavors/efa-training": resource_flavor("efa-training"),
    f"{KUEUE}/namespaces/{PENDING_NS}/workloads": {"kind": "WorkloadList", "items": QUEUE_WORKLOADS},
    f"{KUEUE}/namespaces/{PENDING_NS}/localqueues": {"kind": "LocalQueueList", "items": [
        {"metadata": meta("default", PENDING_NS, "2026-11-20T09:00:00Z"),
         "spec": {"clusterQueue": "llm"}},
        {"metadata": meta("training", PENDING_NS, "2026-11-20T09:00:00Z"),
         "spec": {"clusterQueue": "llm"}},
    ]},
    f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{PENDING_NS}/localqueues/default/pendingworkloads": {
        "kind": "PendingWorkloadsSummary", "items": []},
    **{f"/apis/kubeflow.org/v1/namespaces/{PENDING_NS}/pytorchjobs/{n}": j
       for n, j in QUEUE_JOBS.items()},
    f"/api/v1/namespaces/{PENDING_NS}/pods?labelSelector=trainforge.io/job=llama-pt": {
        "kind": "PodList", "items": [
            _pod("llama-pt-master-0", PENDING_NS, "llama-pt", "0", "ip-10-40-2-8.ec2.internal",
                 "pytorch", 0, None, "2026-11-25T06:01:00Z")]},
    f"/api/v1/namespaces/{PENDING_NS}/pods/llama-pt-master-0:9400/proxy/metrics": LLAMA_PT_METRICS,
})  # fmt: skip
_vis = PENDING_ROUTES[
    f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{PENDING_NS}/localqueues/training/pendingworkloads"
]
_vis["items"][0]["metadata"]["ownerReferences"] = QUEUE_WORKLOADS[3]["metadata"]["ownerReferences"]
ROUTES.update(PENDING_ROUTES)
# fmt: on
