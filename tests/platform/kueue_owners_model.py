"""Kueue's owner rule: which object of a job's owner chain Kueue queues, and what it does to
the others (the child JobSet, Jobs and pods its controller makes).

Why: the platform runs Kueue with `manageJobsWithoutQueueName: true` and an integrations list
that enables `batch/job` (the indexed-Job backend) but not `jobset.x-k8s.io/jobset` or `pod`.
A TrainJob makes a JobSet, which makes batch/v1 Jobs: if Kueue took those Jobs for jobs
without a queue name, each would get a Workload of its own (the job's quota counted twice, a
gang admitted Job by Job, or Jobs left suspended forever). This module is the one model of
the rule Kueue applies, so that the platform's Configuration (trainforge.platform.kueue
`manager_config`) is judged on it rather than on a reading of it (tests/platform/
test_kueue_owners.py proves the model on Kueue's own test cases and the Configuration on it).

Source: kubernetes-sigs/kueue tag v0.19.2 (8eab6877, 2026-08-20); these files are the same
on branch release-0.19 at c90ed700c1 (2026-08-22, `git diff` empty), the newest 0.19 source
readable here (the pinned chart is 0.19.5: versions.KUEUE_CHART_VERSION). Read 2026-12-01.

- pkg/controller/jobframework/reconciler.go:884 `FindAncestorJobManagedByKueue` walks
  controller ownerReferences up from an object. It stops (returning the highest managed
  ancestor found so far) at an object with no controller, at an owner kind it does not know
  (`isKnownOwner`, integrationmanager.go:213: every integration compiled into Kueue, enabled
  or not, the enabled external frameworks, and apps/v1 ReplicaSet), or at an owner whose UID
  is not the referenced object's. An owner is *managed* when its kind's integration is enabled
  (`getJobTypeForOwner`, integrationmanager.go:230) and, with manageJobsWithoutQueueName off,
  it has a queue name. A missing owner is an error (ErrWorkloadOwnerNotFound), as are a cycle
  and more than 10 objects walked (`managedOwnersChainLimit`, reconciler.go:80).
  So a JobSet whose integration is disabled is still *known*: the walk goes through it
  to its TrainJob (the upstream case "Job -> JobSet (disabled) -> AppWrapper => AppWrapper
  (manageJobsWithoutQueueName)", reconciler_test.go:587 `TestFindAncestorJobManagedByKueue`,
  and the e2e "ManageJobsWithoutQueueName without JobSet integration", test/e2e/sequential/
  extended/managejobswithoutqueuename_test.go:722: one Workload, the JobSet completes).
  The walk reads the JobSet, which the chart's ClusterRole allows whether or not the
  integration is on (charts/kueue/templates/rbac/role.yaml:197, jobsets get/list/watch).
- reconciler.go:297 `ReconcileGenericJob` (lines 324-402): an object in a namespace
  `managedJobsNamespaceSelector` does not select is left alone; one with a managed ancestor
  gets no Workload and is only kept suspended while that ancestor's Workload is not admitted
  (`shouldSuspendChildJob`, :766); a top-level one without a queue name is left alone unless
  manageJobsWithoutQueueName; the rest get their own Workload.
- The webhooks agree: jobframework/utils.go:138 `WorkloadShouldBeSuspended` (the batch/Job
  webhook's suspend default, jobs/job/job_webhook.go:102) and jobs/pod/pod_webhook.go:146 do
  not suspend or gate an object with a managed ancestor. A disabled integration's webhook is a
  no-op (jobframework/setup.go:109 `WithNoopWebhook`).
- LocalQueue defaulting looks at the direct owner only (jobframework/defaults.go:86
  `defaultLocalQueueApplies` -> `IsOwnerManagedByKueueForObject`, integrationmanager.go:358):
  a TrainJob's child Job, whose direct owner is a JobSet of a disabled integration, gets the
  label `kueue.x-k8s.io/queue-name: default` (upstream's job_webhook_test.go `TestDefault`
  "job is managed by non Kueue managed owner"). The label changes nothing: the reconciler's
  ancestor rule comes first, so the Job still gets no Workload (`Fate.default_label`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trainforge.core.pods import QUEUE_LABEL
from trainforge.jobs import indexed_job, pytorchjob, trainjob

# Every integration compiled into Kueue 0.19 (cmd/kueue/main.go imports pkg/controller/jobs,
# whose jobs.go imports each package; each registers FrameworkName with its GVK in init()):
# framework name -> (apiVersion, kind). The walk knows these kinds whether enabled or not.
# source: pkg/controller/jobs/*/..._controller.go `FrameworkName` and `gvk` at v0.19.2
REGISTERED: dict[str, tuple[str, str]] = {
    "batch/job": ("batch/v1", "Job"),
    "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    "trainer.kubeflow.org/trainjob": ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
    "kubeflow.org/pytorchjob": ("kubeflow.org/v1", "PyTorchJob"),
    "kubeflow.org/tfjob": ("kubeflow.org/v1", "TFJob"),
    "kubeflow.org/paddlejob": ("kubeflow.org/v1", "PaddleJob"),
    "kubeflow.org/xgboostjob": ("kubeflow.org/v1", "XGBoostJob"),
    "kubeflow.org/jaxjob": ("kubeflow.org/v1", "JAXJob"),
    "kubeflow.org/mpijob": ("kubeflow.org/v2beta1", "MPIJob"),
    "pod": ("v1", "Pod"),
    "deployment": ("apps/v1", "Deployment"),
    "statefulset": ("apps/v1", "StatefulSet"),
    "leaderworkerset.x-k8s.io/leaderworkerset": ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    "ray.io/rayjob": ("ray.io/v1", "RayJob"),
    "ray.io/raycluster": ("ray.io/v1", "RayCluster"),
    "ray.io/rayservice": ("ray.io/v1", "RayService"),
    "workload.codeflare.dev/appwrapper": ("workload.codeflare.dev/v1beta2", "AppWrapper"),
    "sparkoperator.k8s.io/sparkapplication": ("sparkoperator.k8s.io/v1beta2", "SparkApplication"),
}
# ImplicitlyEnabledFrameworkNames (deployment_controller.go:47, statefulset_controller.go:50,
# leaderworkerset_controller.go:62): enabling these enables `pod` too (setup.go:59)
IMPLICIT: dict[str, tuple[str, ...]] = {
    "deployment": ("pod",),
    "statefulset": ("pod",),
    "leaderworkerset.x-k8s.io/leaderworkerset": ("pod",),
}
# kinds whose GenericJob is always top level (jobs/pod/pod_controller.go:346 `IsTopLevel`):
# the reconciler does not walk from them; their webhook does (pod_webhook.go:146)
TOP_LEVEL = {("v1", "Pod")}
# isKnownOwner's interim owner between a Pod and its Deployment (integrationmanager.go:226)
REPLICA_SET = ("apps/v1", "ReplicaSet")
CHAIN_LIMIT = 10  # managedOwnersChainLimit, reconciler.go:80

# What each backend's controller makes, top object first, each the controller owner of the
# next (all in the job's namespace):
# - pytorchjob: training-operator v1.9.4 creates the pods itself with a controller reference
#   to the PyTorchJob (kubeflow/trainer v1.9.4 pkg/controller.v1/common/pod.go:454
#   GenOwnerReference, job_controller.go:222 `Controller: true`);
# - trainjob: Trainer v2.2.1 applies a JobSet owned by the TrainJob (pkg/runtime/framework/
#   plugins/jobset/jobset.go:322 `WithController(true)`); JobSet v0.12.0 creates its Jobs with
#   a controller reference (pkg/controllers/jobset_controller.go:740 SetControllerReference);
#   the Job controller owns the pods;
# - indexed-job: the Job trainforge emits, whose pods the Job controller owns.
# Read 2026-12-01 from the tags versions.TRAINING_OPERATOR_VERSION, TRAINER_VERSION and
# JOBSET_VERSION name.
CHAINS: dict[str, tuple[tuple[str, str], ...]] = {
    pytorchjob.BACKEND: ((pytorchjob.API_VERSION, pytorchjob.KIND), ("v1", "Pod")),
    trainjob.BACKEND: (
        (trainjob.API_VERSION, trainjob.KIND),
        REGISTERED["jobset.x-k8s.io/jobset"],
        REGISTERED["batch/job"],
        ("v1", "Pod"),
    ),
    indexed_job.BACKEND: ((indexed_job.API_VERSION, indexed_job.KIND), ("v1", "Pod")),
}


class OwnerWalkError(Exception):
    """FindAncestorJobManagedByKueue's errors: the object is not reconciled (and, at its
    webhook, not created) until they clear."""


CYCLIC = "cyclic ownership"  # ErrCyclicOwnership
OWNER_NOT_FOUND = "workload owner not found"  # ErrWorkloadOwnerNotFound
CHAIN_LIMIT_REACHED = "managed owners chain limit reached"  # ErrManagedOwnersChainLimitReached


@dataclass(frozen=True)
class KueueJobs:
    """The keys of Kueue's Configuration that decide which objects it queues."""

    enabled: frozenset[str]
    manage_without_queue_name: bool = False
    namespace_selector: Mapping[str, str] | None = None  # matchLabels; None selects all
    external: frozenset[tuple[str, str]] = frozenset()  # (apiVersion, kind)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> KueueJobs:
        """From a Configuration (config.kueue.x-k8s.io/v1beta2) as the chart hands it over."""
        integrations = cfg.get("integrations") or {}
        names = set(integrations.get("frameworks") or [])
        for name in list(names):
            names.update(IMPLICIT.get(name, ()))
        selector = cfg.get("managedJobsNamespaceSelector")
        if selector is not None and set(selector) - {"matchLabels"}:
            raise ValueError(f"managedJobsNamespaceSelector {selector}: only matchLabels modelled")
        return cls(
            enabled=frozenset(names),
            manage_without_queue_name=bool(cfg.get("manageJobsWithoutQueueName", False)),
            namespace_selector=None
            if selector is None
            else dict(selector.get("matchLabels") or {}),
            external=frozenset(_kind_arg(a) for a in integrations.get("externalFrameworks") or []),
        )

    def selects(self, namespace_labels: Mapping[str, str]) -> bool:
        sel = self.namespace_selector
        return sel is None or all(namespace_labels.get(k) == v for k, v in sel.items())

    def known(self, gvk: tuple[str, str]) -> bool:
        """isKnownOwner: a kind the walk goes through."""
        return gvk in REGISTERED.values() or gvk in self.external or gvk == REPLICA_SET

    def managed_kind(self, gvk: tuple[str, str]) -> bool:
        """getJobTypeForOwner != nil: a kind whose integration is enabled."""
        return gvk in {REGISTERED[n] for n in self.enabled if n in REGISTERED} or (
            gvk in self.external
        )


def _kind_arg(arg: str) -> tuple[str, str]:
    """`Kind.version.group` (schema.ParseKindArg, as registerExternal reads it)."""
    kind, _, rest = arg.partition(".")
    version, _, group = rest.partition(".")
    return (f"{group}/{version}" if group else version, kind)


def gvk(obj: Mapping[str, Any]) -> tuple[str, str]:
    return (str(obj.get("apiVersion", "")), str(obj.get("kind", "")))


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def queue_name(obj: Mapping[str, Any]) -> str:
    return str((_meta(obj).get("labels") or {}).get(QUEUE_LABEL) or "")


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((o for o in _meta(obj).get("ownerReferences") or [] if o.get("controller")), None)


Objects = Mapping[tuple[str, str, str], Mapping[str, Any]]  # (apiVersion, kind, name) -> obj


def managed_ancestor(
    obj: Mapping[str, Any], objects: Objects, jobs: KueueJobs
) -> Mapping[str, Any] | None:
    """FindAncestorJobManagedByKueue: the highest Kueue-managed object above `obj` (None:
    `obj` is top level as far as Kueue is concerned); OwnerWalkError as Kueue errs."""
    seen: set[str] = set()
    current, top = obj, None
    while True:
        uid = str(_meta(current).get("uid", ""))
        if uid in seen:
            raise OwnerWalkError(CYCLIC)
        seen.add(uid)
        owner = controller_of(current)
        if owner is None:
            return top
        kind = (str(owner.get("apiVersion", "")), str(owner.get("kind", "")))
        if not jobs.known(kind):
            return top
        parent = objects.get((*kind, str(owner.get("name", ""))))
        if parent is None:
            raise OwnerWalkError(OWNER_NOT_FOUND)
        if str(_meta(parent).get("uid", "")) != str(owner.get("uid", "")):
            return top
        if jobs.managed_kind(kind) and (jobs.manage_without_queue_name or queue_name(parent)):
            top = parent
        current = parent
        if len(seen) > CHAIN_LIMIT:
            raise OwnerWalkError(CHAIN_LIMIT_REACHED)


@dataclass(frozen=True)
class Fate:
    """What Kueue does to one object.

    `workload`: Kueue makes a Workload for it (suspends it at creation, counts its pods
    against its queue's quota, starts it on admission). `ancestor`: the managed ancestor
    whose Workload stands for it (it gets none; it is held suspended while that Workload is
    not admitted). `default_label`: the batch/Job or pod webhook gives it the label
    `kueue.x-k8s.io/queue-name: default` (direct-owner rule; the namespace has a LocalQueue
    `default`). `why`: the reason, in Kueue's terms."""

    workload: bool
    ancestor: Mapping[str, Any] | None
    default_label: bool
    why: str


def fate(
    obj: Mapping[str, Any],
    objects: Objects,
    jobs: KueueJobs,
    namespace_labels: Mapping[str, str],
    default_queue: bool = True,
) -> Fate:
    """ReconcileGenericJob's decision for `obj` (and its webhook's, which agrees).
    `default_queue`: the namespace has a LocalQueue `default` (every team namespace does)."""
    kind = gvk(obj)
    if not jobs.managed_kind(kind):
        return Fate(False, None, False, f"integration for {kind[1]} not enabled")
    if not jobs.selects(namespace_labels):
        return Fate(False, None, False, "namespace not selected by managedJobsNamespaceSelector")
    owner = controller_of(obj)
    default_label = (
        default_queue
        and not queue_name(obj)
        and not (owner is not None and jobs.managed_kind((owner["apiVersion"], owner["kind"])))
    )
    ancestor = managed_ancestor(obj, objects, jobs)
    if kind in TOP_LEVEL:  # the pod webhook defaults the label after its walk, not before
        default_label = default_queue and not queue_name(obj) and ancestor is None
    if ancestor is not None:
        a = gvk(ancestor)
        name = _meta(ancestor).get("name")
        return Fate(False, ancestor, default_label, f"child of Kueue-managed {a[1]} {name}")
    if not (queue_name(obj) or default_label) and not jobs.manage_without_queue_name:
        return Fate(False, None, False, "no queue-name label")
    return Fate(True, None, default_label, "top-level job Kueue manages")


def backend_chain(backend: str, namespace: str = "team") -> list[dict[str, Any]]:
    """The objects a `backend` job becomes, as its controllers make them: the top object
    (which trainforge emits, unlabelled here, as a Kubeflow SDK or hand-written one is) and
    each controller-owned child below it."""
    out: list[dict[str, Any]] = []
    for i, (api_version, kind) in enumerate(CHAINS[backend]):
        meta: dict[str, Any] = {"name": f"{kind.lower()}-{i}", "namespace": namespace}
        meta["uid"] = f"uid-{i}"
        if out:
            up = out[-1]
            meta["ownerReferences"] = [
                {
                    "apiVersion": up["apiVersion"],
                    "kind": up["kind"],
                    "name": up["metadata"]["name"],
                    "uid": up["metadata"]["uid"],
                    "controller": True,
                }
            ]
        out.append({"apiVersion": api_version, "kind": kind, "metadata": meta})
    return out


def index(objs: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], Mapping[str, Any]]:
    return {(*gvk(o), str(_meta(o).get("name", ""))): o for o in objs}


def double_queued(cfg: Mapping[str, Any], namespace_labels: Mapping[str, str]) -> list[str]:
    """Where Kueue, run with Configuration `cfg`, would not queue each backend's job exactly
    once, on its top object, in a namespace labelled `namespace_labels`: one line per backend
    object that gets a Workload it should not, or a top object that gets none (empty: each
    backend's job is one Workload, its children ride on it)."""
    jobs = KueueJobs.from_config(cfg)
    out = []
    for backend in CHAINS:
        chain = backend_chain(backend)
        objects = index(chain)
        for i, obj in enumerate(chain):
            try:
                f = fate(obj, objects, jobs, namespace_labels)
            except OwnerWalkError as e:
                out.append(f"{backend}: {obj['kind']}: Kueue errs walking its owners ({e})")
                continue
            if i == 0 and not f.workload:
                out.append(f"{backend}: its {obj['kind']} gets no Workload ({f.why})")
            elif i > 0 and f.workload:
                out.append(
                    f"{backend}: its child {obj['kind']} gets a Workload of its own "
                    f"({f.why}): the job is queued twice"
                )
    return out
