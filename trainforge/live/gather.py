"""Everything the cluster knows about one job, on any backend.

Reads (GET only): the job (PyTorchJob, TrainJob or batch/v1 Job, whichever exists), its Kueue
Workload (found by Kueue's `kueue.x-k8s.io/job-uid` label), the LocalQueue and ClusterQueue it
waits in and, until its quota is reserved, its position (Kueue's visibility API), the
namespace's LimitRanges (Kueue counts their defaults for a container that names no requests:
trainforge.plan.kueue.workload_need), its pods (label `trainforge.io/job`; a TrainJob's by its JobSet's name, `pod_selector`), the
namespace's events about them, and rank 0's metrics through the API server's pod proxy (which a
team namespace's NetworkPolicy does not admit: `proxy_blocked_why`). A
failed read of the queue's objects (the Workload, its queues, the visibility API, the
LimitRanges) becomes a note, not a failure: `unread` says whose failure it is (your access, or
the cluster's) and what is then missing. `trainforge wait` polls with `poll`, which reads only
what it decides and prints from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from trainforge.jobs import indexed_job, pytorchjob, trainjob
from trainforge.jobs.pod import COMPLETION_INDEX_LABEL, JOB_LABEL, METRICS_PORT_NAME
from trainforge.live.kube import Api, KubeError
from trainforge.platform.teams import METRICS_SCRAPE_POLICY

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
# Kueue's visibility API (on-demand pending positions); v1beta1 in older releases.
VISIBILITY = ("/apis/visibility.kueue.x-k8s.io/v1beta2", "/apis/visibility.kueue.x-k8s.io/v1beta1")
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
# The JobSet a TrainJob runs as (its name and namespace are the TrainJob's: kubeflow/trainer
# v2.2.1 pkg/runtime/framework/plugins/jobset/jobset.go `Build`, ObjectKeyFromObject) and the
# label of its pods' replicated job (kubernetes-sigs/jobset v0.12.0 api/jobset/v1alpha2:
# GroupVersion, ReplicatedJobNameKey; both read 2026-11-30): its failurePolicy and Jobs are
# what happens after an exit where the pods do not say (explain.told_on_exit).
JOBSET = "/apis/jobset.x-k8s.io/v1alpha2"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"

# backend -> (display kind, collection path under /apis, rank-0 container)
BACKENDS = {
    "pytorchjob": ("PyTorchJob", f"/apis/{pytorchjob.API_VERSION}", "pytorchjobs", pytorchjob.CONTAINER),
    "trainjob": ("TrainJob", f"/apis/{trainjob.API_VERSION}", "trainjobs", trainjob.CONTAINER),
    "indexed-job": ("Job", f"/apis/{indexed_job.API_VERSION}", "jobs", indexed_job.CONTAINER),
}  # fmt: skip


class NotFound(Exception):
    pass


@dataclass
class Gathered:
    namespace: str
    name: str
    backend: str
    kind: str
    container: str
    job: dict[str, Any]
    workload: dict[str, Any] | None = None
    local_queue: dict[str, Any] | None = None
    cluster_queue: dict[str, Any] | None = None
    position: dict[str, Any] | None = None
    pods: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, float] | None = None
    # the namespace's LimitRange documents, which Kueue reads to count a Workload's requests
    limit_ranges: list[dict[str, Any]] = field(default_factory=list)
    limit_ranges_unread: str = ""  # the note when they could not be read (else "")
    jobset: dict[str, Any] | None = None  # a TrainJob's JobSet (`gather` reads it)
    jobset_unread: str = ""  # why it is not there: not found, or the failed read
    workload_unread: str = ""  # the note when the Workloads could not be read: None is unknown
    notes: list[str] = field(default_factory=list)
    spend: str | None = None  # the status line of its spend so far (live/spend.py)
    expected: Any = None  # a pending job's expected start (live/wait.py Expected)
    # the sized fix of a Workload Kueue never admits (`why --stack`: live/stack_fix.py); "":
    # not asked, or no change to name
    quota_fix: str = ""
    # `why --stack`: the stack's queue model found that no choice of flavors ever holds its
    # pod sets (stack_fix.never_fits), so a flavor-assignment message is never, not "not now";
    # False: it found a choice that holds them; None: not asked
    never_fits: bool | None = None
    # the namespace's labels (its Pod Security level), read only when an event says Pod
    # Security refused a pod (live/admission.py); None: not read, `namespace_unread` says why
    namespace_labels: dict[str, Any] | None = None
    namespace_unread: str = ""


def find_job(api: Api, namespace: str, name: str, backend: str | None = None) -> Gathered:
    """The job `name` of whichever backend has it (`backend`: look only there, one GET)."""
    for b, (kind, base, plural, container) in BACKENDS.items():
        if backend is not None and b != backend:
            continue
        obj = api.get(f"{base}/namespaces/{namespace}/{plural}/{name}")
        if obj is not None:
            return Gathered(namespace, name, b, kind, container, obj)
    kinds = ", ".join(k for b, (k, *_) in BACKENDS.items() if backend in (None, b))
    raise NotFound(f"no job {name!r} in namespace {namespace!r} (looked for a {kinds})")


def poll(
    api: Api,
    namespace: str,
    name: str,
    backend: str | None,
    workload: bool,
    jobset: dict[str, Any] | None = None,
) -> Gathered:
    """What `trainforge wait` decides and prints from, and nothing else: the job (at its
    backend once known), a TrainJob's pods (its Running state is its pods':
    explain.job_state; its JobSet is not read here: `jobset` is the one `wait` read once the
    TrainJob ran, whose replicated jobs `short` counts) and, with `workload` (`--for admitted`) or while the job is suspended,
    its Kueue Workload (whether Kueue admits it, or never will). Not the queues, the
    position, the LimitRanges (wait computes no requests), the other backends' pods, or the
    events, which `gather` reads for `status` and `why`: `wait` reads the events
    (`pod_refusals`) only while the job is started and short of its world (`short`: none of
    its pods runs, or a replica type has fewer running than it declares), where a Pod Security
    refusal keeps it, or a replica type of it, from ever running; not on each poll of a
    queued, whole running or finished job."""
    g = find_job(api, namespace, name, backend)
    if g.backend == "trainjob":
        g.pods = _pods(api, g)
        g.jobset = jobset  # its replicated jobs, as an earlier poll read them (`read_jobset`)
    if workload or suspended(g.job):
        g.workload = _workload(api, g, g.job.get("metadata", {}).get("uid", ""), WAIT_UNREAD)
    return g


# What `wait --for admitted` still sees when the Workload cannot be read: Kueue starts
# (unsuspends) a suspended job once its Workload is admitted (kubernetes-sigs/kueue v0.19.2
# pkg/controller/jobframework/reconciler.go, ReconcileGenericJob step 7, "start the job if the
# workload has been admitted"), except a job MultiKueue runs on a worker cluster
# (startJob: "skipping local execution"). A refused read does not end the wait: the job's
# own state still shows the admission.
WAIT_UNREAD = (
    "wait sees the admission only when Kueue starts the job (no longer suspended), which a "
    "job that MultiKueue runs on another cluster never does here"
)


def suspended(job: dict[str, Any]) -> bool:
    """Whether the job object is suspended (a queued job Kueue has not started)."""
    spec = job.get("spec") or {}
    return bool(spec.get("suspend") or (spec.get("runPolicy") or {}).get("suspend"))


def gather(api: Api, namespace: str, name: str, metrics: bool = True) -> Gathered:
    g = find_job(api, namespace, name)
    uid = g.job.get("metadata", {}).get("uid", "")
    _queue(api, g, uid)
    if g.workload:
        _limit_ranges(api, g)
    g.pods = _pods(api, g)
    if g.backend == "trainjob":
        read_jobset(api, g)
    names = {name, *(p["metadata"]["name"] for p in g.pods)}
    if g.workload:
        names.add(g.workload["metadata"]["name"])
    events = api.get(f"/api/v1/namespaces/{namespace}/events") or {}
    _keep_events(api, g, events, names)
    if metrics:
        _metrics(api, g)
    return g


# the API server's refusal of a Pod by Pod Security admission (core/pod_security `message`)
_POD_SECURITY = "violates PodSecurity"


def _keep_events(api: Api, g: Gathered, events: dict[str, Any], names: set[str]) -> None:
    """The events about the job (`_about`) and, when one says Pod Security refused a pod,
    the namespace's labels (its level: live/admission.py)."""
    g.events = [
        e for e in events.get("items", []) if _about(g, e.get("involvedObject") or {}, names)
    ]
    if any(_POD_SECURITY in str(e.get("message") or "") for e in g.events):
        _namespace(api, g)


def short(g: Gathered) -> bool:
    """Whether a started job may be short of its world: a replica type has fewer pods running
    than it declares, from what `poll` read, no further read. A PyTorchJob's own status says
    it per replica type (the training operator's replicaStatuses: active, succeeded) against
    its pytorchReplicaSpecs' replicas: its Running condition needs only the Master running
    (kubeflow/trainer pkg/controller.v1/pytorch/pytorchjob_controller.go UpdateJobStatus:
    `if rtype == Master { if running > 0 { ... JobRunning`, at commit 07cf0978 of the v1
    operator's source, not checked against the pinned v1.9.4 tag; read 2026-12-01),
    so a Running PyTorchJob may have no Worker at all.
    A TrainJob's pods (read by `poll`) against its JobSet's replicated jobs (as `wait` read
    them once, else the trainer's `node`, trainjob.REPLICATED_JOB): one of them has no pod
    running or done, while another's runs (an MPI runtime's node pods wait for a launcher; an
    initializer's pod runs before the node's Job is made, where the runtime orders them by
    dependsOn). A batch/v1 Job's pods share one template: refused all or none, and one
    running means none is refused."""
    if g.backend == "pytorchjob":
        specs = (g.job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
        statuses = (g.job.get("status") or {}).get("replicaStatuses") or {}
        for rtype, spec in specs.items():
            want = (spec or {}).get("replicas", 1)
            got = statuses.get(rtype) or {}
            if int(got.get("active") or 0) + int(got.get("succeeded") or 0) < int(want or 0):
                return True
        return False
    if g.backend == "trainjob":
        rjobs = ((g.jobset or {}).get("spec") or {}).get("replicatedJobs") or []
        names = {str(r.get("name")) for r in rjobs} or {trainjob.REPLICATED_JOB}
        up = {
            p["metadata"].get("labels", {}).get(REPLICATED_JOB_LABEL)
            for p in g.pods
            if p.get("status", {}).get("phase") in ("Running", "Succeeded")
        }
        return bool(names - up)
    return False


def pod_refusals(api: Api, g: Gathered) -> None:
    """What `wait` reads of a started job short of its world (its state Created, or Running
    and `short`), where a Pod Security refusal of its pod creates (admission.refusals) means
    it, or a replica type of it, never runs: the namespace's Warning events about it
    (`_about`: the job, a TrainJob's JobSet's Jobs) and, when one is a refusal, the namespace's
    labels and the job's pods (a refused replica type with a pod now is refused no more), as
    `gather` reads them for `why`. A failed read is a note (`unread`): the wait goes on
    without them."""
    # a refused create is a Warning (the Job controller's and the training operator's
    # `Eventf(obj, EventTypeWarning, FailedCreatePodReason, "Error creating: %v")`), and core/v1
    # events select on `type` (kubernetes pkg/registry/core/event/strategy.go
    # ToSelectableFields, at 00b2d95c, read 2026-12-01): the Normal events are not fetched
    what = f"the events of namespace {g.namespace}"
    means = "wait does not see a Pod Security refusal of its pods (which never lets it run)"
    found = _optional(
        api,
        g,
        what,
        means,
        f"/api/v1/namespaces/{g.namespace}/events",
        fieldSelector="type=Warning",
    )
    _keep_events(api, g, found or {}, {g.name})
    if not any(_POD_SECURITY in str(e.get("message")) for e in g.events):
        return
    if g.backend == "trainjob":  # its replicated jobs: whose Jobs the events are about
        if not g.jobset:
            read_jobset(api, g)
        g.events = [e for e in g.events if _about(g, e.get("involvedObject") or {}, {g.name})]
    else:
        pods = _optional(
            api, g, f"the pods of {g.kind} {g.name}",
            "a refused replica type whose pods were created since is still said refused",
            f"/api/v1/namespaces/{g.namespace}/pods", labelSelector=pod_selector(g),
        )  # fmt: skip
        g.pods = sorted((pods or {}).get("items", []), key=lambda p: p["metadata"]["name"])


def _about(g: Gathered, obj: dict[str, Any], names: set[str]) -> bool:
    """Whether an event's object is the job's: the job, its pods, its Workload, or a Job of a
    TrainJob's JobSet (`replicated_job`; its Job controller's FailedCreate is where a refused
    pod is said)."""
    name = obj.get("name")
    if name in names:
        return True
    return (
        g.backend == "trainjob"
        and obj.get("kind") == "Job"
        and replicated_job(g, str(name)) is not None
    )


def replicated_job(g: Gathered, job: str) -> str | None:
    """The replicated job of a TrainJob's JobSet's Job `job`, named
    `<jobset>-<replicatedJob>-<index>` (kubernetes-sigs/jobset v0.12.0 GenJobName), None when
    it is not one of its: where the JobSet was read, one of its replicatedJobs' names (so that
    TrainJob `tj` does not claim `tj-2-node-0`, TrainJob tj-2's), else any such name."""
    names = [r.get("name") for r in ((g.jobset or {}).get("spec") or {}).get("replicatedJobs", [])]
    for r in names:
        if re.fullmatch(rf"{re.escape(g.name)}-{re.escape(str(r))}-\d+", job):
            return str(r)
    if names:
        return None
    m = re.fullmatch(rf"{re.escape(g.name)}-(.+)-\d+", job)
    return m.group(1) if m else None


def _namespace(api: Api, g: Gathered) -> None:
    """The namespace's labels (its Pod Security level); a failed read leaves the note in
    `namespace_unread` (a team may not read its Namespace: the refusal's policy stands in)."""
    found, g.namespace_unread = optional(
        api, f"namespace {g.namespace}", "", f"/api/v1/namespaces/{g.namespace}"
    )
    g.namespace_unread = g.namespace_unread.removesuffix(": ")
    if found is not None:
        g.namespace_labels = dict((found.get("metadata") or {}).get("labels") or {})
    elif not g.namespace_unread:
        g.namespace_unread = f"namespace {g.namespace} not found"


def pod_selector(g: Gathered) -> str:
    """The label selector of the job's pods: a TrainJob's by the JobSet name its pods carry
    (trainjob.POD_NAME_LABEL), so that a TrainJob the Kubeflow SDK made (no trainforge.io/job
    label) shows its pods too; the other backends' by trainforge.io/job."""
    label = trainjob.POD_NAME_LABEL if g.backend == "trainjob" else JOB_LABEL
    return f"{label}={g.name}"


def _pods(api: Api, g: Gathered) -> list[dict[str, Any]]:
    pods = api.get(f"/api/v1/namespaces/{g.namespace}/pods", labelSelector=pod_selector(g))
    return sorted((pods or {}).get("items", []), key=lambda p: p["metadata"]["name"])


def refused(e: KubeError) -> bool:
    """The read was refused: 401 (the credentials) or 403 (the user's access). Any other
    error is the platform's (the API server answered another error, or could not be reached)."""
    return e.status in (401, 403)


def cannot_read(what: str, e: KubeError) -> str:
    """`cannot read WHAT (CAUSE)`, by whose the failure is: refused (`refused`) or the
    platform's. Not found (404) is no failure: `Api.get` answers None and the object is absent.
    The one wording of every failed read that does not end the command (`unread`, the expected
    start, the spend)."""
    if e.status == 401:
        cause = "401: the API server did not accept your credentials"
    elif e.status == 403:
        cause = "403: your access does not include it"
    else:
        cause = f"{e.status or ''} {e.reason}".strip()
        cause = f"{cause}: the cluster failed to answer, not your access; try again later"
    return f"cannot read {what} ({cause})"


def unread(what: str, e: KubeError, means: str) -> str:
    """The note for an optional read that failed (`cannot_read`) and what its absence means
    for what is shown."""
    return f"{cannot_read(what, e)}: {means}"


def optional(api: Api, what: str, means: str, path: str, **query: Any) -> tuple[dict | None, str]:
    """An optional read: (the object, or None when not found or not read; the note when the
    read failed, else ""). Every failure becomes the note (`unread`): what status and why
    show stands without this object."""
    try:
        return api.get(path, **query), ""
    except KubeError as e:
        return None, unread(what, e, means)


def _optional(api: Api, g: Gathered, what: str, means: str, path: str, **query: Any) -> dict | None:
    found, note = optional(api, what, means, path, **query)
    if note:
        g.notes.append(note)
    return found


def read_jobset(api: Api, g: Gathered) -> None:
    """A TrainJob's JobSet, or why it is not there (no note: only `then:` reads it; `wait`
    reads it once, for its replicated jobs, which do not change: `short`)."""
    found, unread = optional(
        api, f"JobSet {g.name}", "", f"{JOBSET}/namespaces/{g.namespace}/jobsets/{g.name}"
    )
    g.jobset = found
    g.jobset_unread = unread.removesuffix(": ") or (
        "" if found else f"no JobSet {g.name} (the Trainer has not created it, or it is gone)"
    )


def _limit_ranges(api: Api, g: Gathered) -> None:
    """The namespace's LimitRanges, as Kueue lists them to count the Workload's requests."""
    found, g.limit_ranges_unread = optional(
        api, f"the LimitRanges of namespace {g.namespace}",
        "a container without requests counts 0 here, Kueue counts the LimitRange's defaults, "
        "so the requests shown may be under-counted",
        f"/api/v1/namespaces/{g.namespace}/limitranges",
    )  # fmt: skip
    if g.limit_ranges_unread:
        g.notes.append(g.limit_ranges_unread)
    g.limit_ranges = list((found or {}).get("items", []))


def _workload(
    api: Api, g: Gathered, uid: str, means: str = "its queue, position and quota are not shown"
) -> dict[str, Any] | None:
    """The job's Kueue Workload: the newest with its uid (a re-created job gets a new one).
    `means`: what is missing when it cannot be read."""
    wls, g.workload_unread = optional(
        api, "Kueue Workloads", means,
        f"{KUEUE}/namespaces/{g.namespace}/workloads", labelSelector=f"{JOB_UID_LABEL}={uid}",
    )  # fmt: skip
    if g.workload_unread:
        g.notes.append(g.workload_unread)
    items = (wls or {}).get("items", [])
    return max(items, key=lambda w: w["metadata"].get("creationTimestamp", "")) if items else None


def _queue(api: Api, g: Gathered, uid: str) -> None:
    g.workload = _workload(api, g, uid)
    if g.workload is None:
        return
    lq_name = g.workload.get("spec", {}).get("queueName")
    if lq_name:
        g.local_queue = _optional(
            api, g, f"LocalQueue {lq_name}",
            "its ClusterQueue is known only once Kueue admits the job",
            f"{KUEUE}/namespaces/{g.namespace}/localqueues/{lq_name}",
        )  # fmt: skip
    cq_name = (g.workload.get("status", {}).get("admission") or {}).get("clusterQueue") or (
        (g.local_queue or {}).get("spec", {}).get("clusterQueue")
    )
    if cq_name:
        g.cluster_queue = _optional(
            api, g, f"ClusterQueue {cq_name}",
            "its quota, usage and the expected start are not shown",
            f"{KUEUE}/clusterqueues/{cq_name}",
        )  # fmt: skip
    # a Workload whose quota Kueue reserved has left its queue (release-0.19 c90ed70
    # pkg/controller/core/workload_controller.go:1437-1438: Pending to QuotaReserved or
    # Admitted deletes it from the queue manager), whose pending workloads are all the
    # visibility API lists (pkg/visibility/storage/pending_workloads_lq.go:79): no position
    reserved = any(
        (condition(g.workload, c) or {}).get("status") == "True"
        for c in ("QuotaReserved", "Admitted")
    )
    if lq_name and not reserved:
        pending = None
        try:
            pending = pending_workloads(api, g.namespace, lq_name)
        except KubeError as e:
            g.notes.append(
                unread("the queue position", e, "the job's place in the queue is not shown")
            )
        if pending is not None:
            wl = g.workload["metadata"]["name"]
            g.position = next(
                (i for i in pending.get("items", []) if i["metadata"]["name"] == wl), None
            )


def pending_workloads(api: Api, namespace: str, local_queue: str) -> dict[str, Any] | None:
    """Kueue's visibility API's pending workloads of a LocalQueue (each with its
    positionInClusterQueue), at the newest version it serves (not found: an older Kueue
    serves the next); None when no version is served. A failed read raises (KubeError)."""
    for base in VISIBILITY:
        found = api.get(f"{base}/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads")
        if found is not None:
            return found
    return None


def condition(obj: dict | None, kind: str) -> dict | None:
    for c in (obj or {}).get("status", {}).get("conditions", []) or []:
        if c.get("type") == kind:
            return c
    return None


def rank0_pod(g: Gathered) -> dict | None:
    """The pod of global rank 0: PyTorchJob `-master-0` (or `-worker-0` without a master),
    TrainJob and indexed Job: completion index 0 (of the JobSet's one Job)."""
    pods = g.pods
    for suffix in ("-master-0", "-worker-0"):
        for p in pods:
            if p["metadata"]["name"] == f"{g.name}{suffix}":
                return p
    for p in pods:
        if p["metadata"].get("labels", {}).get(COMPLETION_INDEX_LABEL) == "0":
            return p
    return None


def metrics_of(api: Api, g: Gathered) -> dict[str, float] | None:
    """Rank 0's metrics of a job `find_job` found (its pods are read here); None when rank 0
    does not run or serves none."""
    g.pods = _pods(api, g)
    _metrics(api, g)
    return g.metrics


def _metrics(api: Api, g: Gathered) -> None:
    pod = rank0_pod(g)
    if pod is None or pod.get("status", {}).get("phase") != "Running":
        return
    port = next(
        (
            p["containerPort"]
            for c in pod["spec"].get("containers", [])
            for p in c.get("ports", []) or []
            if p.get("name") == METRICS_PORT_NAME
        ),
        None,
    )
    if port is None:
        g.notes.append("rank 0 serves no metrics (the job sets metricsPort: 0)")
        return
    path = f"/api/v1/namespaces/{g.namespace}/pods/{pod['metadata']['name']}:{port}/proxy/metrics"
    try:
        text = api.text(path, timeout=METRICS_TIMEOUT_S)
    except KubeError as e:
        what = f"the metrics of rank 0's pod {pod['metadata']['name']}"
        means = "its progress, ETA, last checkpoint and restarts are not shown"
        if proxy_blocked(e):
            g.notes.append(f"cannot read {what} ({proxy_blocked_why(e, port)}): {means}")
        else:
            g.notes.append(unread(what, e, means))
        return
    if text is not None:
        g.metrics = parse_metrics(text)


# The metrics read waits this long: the API server dials the pod for 30 s before it answers
# 503 (cmd/kube-apiserver/app/server.go CreateProxyTransport: utilnet.SetTransportDefaults,
# net/http's default dialer), and a dropped connection is what a team namespace gives it.
METRICS_TIMEOUT_S = 5.0


def proxy_blocked(e: KubeError) -> bool:
    """The API server's pod proxy could not reach the pod: it answers 503 when its dial fails
    (k8s.io/apimachinery pkg/util/proxy/transport.go RoundTrip: NewServiceUnavailable("error
    trying to reach service: ...")), 502/504 through a gateway, or does not answer within
    METRICS_TIMEOUT_S while it still dials (a read timeout: the API server took the request;
    a connect timeout is the API server's own, and stays the cluster's failure). The API
    server answered the pod list just before: it is the pod that cannot be reached."""
    if e.status in (502, 503, 504):
        return True
    return e.status is None and "read timed out" in e.reason.lower()


def proxy_blocked_why(e: KubeError, port: int) -> str:
    """Why the pod proxy cannot reach rank 0 on the shipped platform: the team namespace's
    NetworkPolicy (platform.teams.network_policies) admits the metrics port from the monitoring
    namespace only; the proxy connects from the control plane, which no policy can select."""
    answer = f"{e.status} {e.reason}" if e.status else f"no answer in {METRICS_TIMEOUT_S:g} s"
    return (
        f"{answer}: the API server's proxy could not reach port {port}: the team namespace's "
        f"NetworkPolicy {METRICS_SCRAPE_POLICY} admits it from the monitoring namespace only, "
        "not from the control plane the proxy connects from; Grafana's training board shows them"
    )


_SAMPLE = re.compile(r"^trainforge_(\w+)(\{[^}]*\})?\s+(\S+)$")
_REASON = re.compile(r'reason="([^"]+)"')


def parse_metrics(text: str) -> dict[str, float]:
    """trainforge_* gauges of the runtime's text format; per-reason exits keep their reason
    (`attempt_exits:hang`)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if not m:
            continue
        name, labels, value = m.groups()
        reason = _REASON.search(labels or "")
        if reason:
            name = f"{name}:{reason.group(1)}"
        try:
            out[name] = float(value)
        except ValueError:
            continue
    return out
