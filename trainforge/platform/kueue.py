"""Kueue: job queueing with gang admission, per-team quotas, borrowing and priorities.

Why: with a bare ResourceQuota a job whose pods do not all fit starts some of them, which
hold GPUs while they wait for the rest (two such jobs deadlock a pool), and a job over quota
is refused instead of waiting its turn. Kueue admits a job only when its team's queue has
quota for all of its pods (it keeps the job suspended until then), queues the rest in
priority and FIFO order, lends idle quota between teams of a cohort and takes it back by
preemption. The queue objects themselves are built in trainforge.platform.queues.

Installed from the pinned Helm chart (versions.KUEUE_CHART_VERSION), whose templates carry
the CRDs, into `kueue-system` (Pod Security `restricted`: the controller drops every
capability and runs as non-root), on the system node group. The ResourceFlavors, Topology, Cohort,
WorkloadPriorityClasses, ClusterQueues and LocalQueues depend on the release (Pulumi waits
for its webhook to be ready), and so must anything that creates a Job in a team namespace:
Kueue's webhooks intercept Job creation there (`failurePolicy: Fail`).

High availability: Kueue's webhooks (`failurePolicy: Fail`) stand in front of every Job,
PyTorchJob and TrainJob created in a team namespace, Pulumi's own included: with one replica,
a node drain or a crash blocks them all until a new pod is ready. So the controller runs 2
replicas (the chart's `controllerManager.replicas`; leader election is on in its config, so
one reconciles while both serve the webhooks), spread over nodes, with the chart's
PodDisruptionBudget (`minAvailable: 1`) so a drain never takes both.

Configuration choices (the chart's `managerConfig`): the Configuration is the chart's default
(vendored in data/kueue/manager-config-<minor>.yaml with its source) with only our keys
overridden, so the chart's `clientConnection` (QPS 300, burst 500) and controller concurrency
stay (replacing `controllerManagerConfigYaml` whole used to drop them: client-go's defaults
are QPS 5, burst 10, rate-limiting a busy queue's API calls):
- integrations: one per job backend trainforge emits (PyTorchJob, TrainJob, indexed
  batch/v1 Job); Kueue sets up an integration once its CRD appears, so the order in which
  the operators are installed does not matter;
- `managedJobsNamespaceSelector`: the namespaces labelled `trainforge.io/queued=true` (team
  namespaces and the acceptance tests'), so Kueue's webhooks never stand in the way of
  platform Jobs (Helm hooks, the Prometheus operator's admission patch). The chart makes this
  selector its job webhooks' `namespaceSelector` (charts/kueue/templates/webhook/manifests.yaml,
  release-0.19 at c90ed700c1): a Job elsewhere is never suspended at creation, queue label or
  not, so the acceptance tests' namespace must be selected for their Jobs to queue;
- `manageJobsWithoutQueueName: true`: in team namespaces every job goes through the queue,
  with or without a queue label (a PyTorchJob or Job written by hand, a Kubeflow SDK
  TrainJob). Kueue's webhook gives a job without the label its namespace's LocalQueue
  `default` (trainforge.platform.queues.DEFAULT_LOCAL_QUEUE, which every team namespace has,
  pointing at the team's ClusterQueue), so such a job is admitted like any other instead of
  hanging suspended. A job is queued once, on its own object: the JobSet a TrainJob makes
  has no integration here (Kueue's JobSet webhook is a no-op), the batch/v1 Jobs below it
  get no Workload because Kueue walks their owners through the JobSet (a kind it knows,
  enabled or not) to the managed TrainJob (jobframework FindAncestorJobManagedByKueue at
  v0.19.2), and no backend's pods are reached (no `pod` integration). That rule, and this
  Configuration judged on it, are proven by tests/platform/test_kueue_owners.py. Only
  team namespaces match `managedJobsNamespaceSelector`, so platform Jobs elsewhere are
  untouched;
- `resources.excludeResourcePrefixes: [vpc.amazonaws.com/efa]`: EFA devices come with the
  whole node a job fills, and quota is counted in GPUs;
- `waitForPodsReady`: an admitted job whose pods do not all run within the timeout (a
  spot shortage, an image that does not pull) is evicted and requeued, so it does not hold
  its quota while half-started. Kueue 0.19 turns it on by default: its config defaulting
  (apis/config/v1beta2/defaults.go) fills in an absent `waitForPodsReady` with a 30 min
  timeout, and only the feature gate `DisableWaitForPodsReady` (alpha, default off,
  pkg/util/waitforpodsready.Enabled) turns it off. So `podsReadyTimeout: false` sets that
  gate; leaving the section out would silently keep a 30 min timeout.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from trainforge.core import platform_names, versions
from trainforge.core.contract import EFA_RESOURCE, PoolFacts
from trainforge.core.labels import HOSTNAME
from trainforge.jobs import backends
from trainforge.platform import queues
from trainforge.platform.placement import SYSTEM_NODE_SELECTOR, psa_labels
from trainforge.platform.services_config import KueueConfig, TeamConfig
from trainforge.platform.teams import QUEUED_LABEL, TEAM_LABEL

NAMESPACE = platform_names.KUEUE_NAMESPACE
# Kueue's integration name for each trainforge job backend, declared by its emitter
FRAMEWORKS = backends.KUEUE_FRAMEWORKS
EXCLUDED_RESOURCES = (EFA_RESOURCE,)
DATA = Path(__file__).resolve().parent / "data" / "kueue"
REPLICAS = 2
PDB_MIN_AVAILABLE = 1


def default_config_path(chart_version: str = versions.KUEUE_CHART_VERSION) -> Path:
    """The vendored chart default for the pinned chart's minor line (0.19.5 -> 0.19)."""
    minor = ".".join(chart_version.split(".")[:2])
    return DATA / f"manager-config-{minor}.yaml"


@functools.cache
def chart_default_config(chart_version: str = versions.KUEUE_CHART_VERSION) -> dict[str, Any]:
    """The chart's default `controllerManagerConfigYaml`, parsed; a chart version without a
    vendored default is a platform error naming the file to vendor (never a silent guess)."""
    path = default_config_path(chart_version)
    if not path.is_file():
        raise RuntimeError(
            f"Kueue chart {chart_version}: no vendored default Configuration {path.name} in "
            f"{DATA} (vendor charts/kueue/values.yaml's managerConfig.controllerManagerConfigYaml "
            "of that release)"
        )
    return yaml.safe_load(path.read_text())


def manager_config(cfg: KueueConfig) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2): the chart's default with only
    the keys below set by us (lists and sections we set replace the chart's whole)."""
    out: dict[str, Any] = copy.deepcopy(chart_default_config())
    out.pop("waitForPodsReady", None)
    out |= {
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {"matchLabels": {QUEUED_LABEL: "true"}},
        "integrations": {"frameworks": list(FRAMEWORKS.values())},
        "resources": {"excludeResourcePrefixes": list(EXCLUDED_RESOURCES)},
    }
    if cfg.pods_ready_timeout:
        out["waitForPodsReady"] = {
            "timeout": cfg.pods_ready_timeout,
            "blockAdmission": False,
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffBaseSeconds": 60,
                "backoffMaxSeconds": 3600,
            },
        }
    return out


# The feature gate that turns waitForPodsReady off in Kueue 0.19 (an absent config section
# is defaulted to a 30 min timeout). source: kubernetes-sigs/kueue release-0.19
# pkg/features/kube_features.go (DisableWaitForPodsReady, alpha since 0.19, default false;
# deprecated, planned removal in 0.21) and charts/kueue values `controllerManager.featureGates`,
# checked 2026-11-25 (the mirror holds release-0.19 up to v0.19.2+; the gate is unchanged).
DISABLE_PODS_READY_GATE = "DisableWaitForPodsReady"


# the chart's pod selector labels (charts/kueue/templates/_helpers.tpl kueue.selectorLabels,
# release-0.19 at c90ed700c1): the release is named `kueue`
POD_LABELS = {
    "app.kubernetes.io/name": "kueue",
    "app.kubernetes.io/instance": "kueue",
    "control-plane": "controller-manager",
}


def chart_values(cfg: KueueConfig) -> dict[str, Any]:
    manager: dict[str, Any] = {
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "replicas": REPLICAS,
        "podDisruptionBudget": {"enabled": True, "minAvailable": PDB_MIN_AVAILABLE},
        # one replica per node where there are nodes enough (dev's system group may be 2)
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": HOSTNAME,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": dict(POD_LABELS)},
            }
        ],
    }
    if not cfg.pods_ready_timeout:
        manager["featureGates"] = [{"name": DISABLE_PODS_READY_GATE, "enabled": True}]
    return {
        "controllerManager": manager,
        "managerConfig": {
            "controllerManagerConfigYaml": yaml.safe_dump(manager_config(cfg), sort_keys=False)
        },
    }


def _replace_on(kind: str) -> list[str]:
    """Fields the CRDs make immutable (x-kubernetes-validations `self == oldSelf`): a change
    there must replace the object, since an update would be refused."""
    return {
        "Topology": ["spec.levels"],
        "LocalQueue": ["spec.clusterQueue"],
        "ResourceFlavor": ["spec.topologyName", "spec.nodeLabels"],
        "Cohort": [],
    }.get(kind, [])


@dataclass
class KueueArgs:
    config: KueueConfig
    teams: list[TeamConfig]
    pools: list[PoolFacts]
    k8s_provider: k8s.Provider
    # team name -> namespace output: LocalQueues wait for their namespace
    team_namespaces: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    # The Namespaces Kueue's namespace selector must find labelled (`trainforge.io/queued`)
    # before its configuration selects by that label: see Kueue.__init__.
    selected_namespaces: list[pulumi.Resource] = field(default_factory=list)
    # AdmissionChecks every team ClusterQueue lists (a fleet manager's MultiKueue check)
    admission_checks: tuple[str, ...] = ()


class Kueue(pulumi.ComponentResource):
    """The pinned Kueue release and the platform's queue objects."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: KueueArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainforge:index:Kueue", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)
        ns = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=NAMESPACE, labels=psa_labels("restricted")),
            opts=child,
        )
        self.release = k8s.helm.v3.Release(
            name,
            name="kueue",
            chart=versions.KUEUE_CHART,
            version=versions.KUEUE_CHART_VERSION,
            namespace=ns.metadata.name,
            values=chart_values(args.config),
            # The release carries `managedJobsNamespaceSelector` (namespaces labelled
            # trainforge.io/queued=true). On a live stack that moves to this selector, a release
            # updated before the namespaces' new label would leave team namespaces unselected
            # for a moment: a Job created then runs unqueued. Labels first, then the selector.
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=list(args.selected_namespaces))
            ),
        )
        after = pulumi.ResourceOptions(
            parent=self, provider=args.k8s_provider, depends_on=[self.release]
        )
        from trainforge.core.contract import record  # noqa: PLC0415

        for warning in queues.quota_plan(args.teams, args.pools).warnings:
            pulumi.log.warn(warning, self)
            if (rec := record()) is not None:  # a plan run repeats it in its queue section
                rec.quota_warnings.append(warning)
        self.objects: list[Any] = []
        for doc in queues.queue_objects(args.teams, args.pools, args.config):
            meta = dict(doc["metadata"])
            namespace = meta.get("namespace")
            team = meta.get("labels", {}).get(TEAM_LABEL)
            if namespace is not None and team in args.team_namespaces:
                meta["namespace"] = args.team_namespaces[team]
            body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}
            kind = doc["kind"]
            if kind == "ClusterQueue" and args.admission_checks:
                body["spec"] = with_admission_checks(body["spec"], args.admission_checks)
            res_name = (
                f"{name}-{kind.lower()}-{(namespace + '-') if namespace else ''}{meta['name']}"
            )
            self.objects.append(
                KubeObject(
                    res_name,
                    doc["apiVersion"],
                    kind,
                    k8s.meta.v1.ObjectMetaArgs(**_meta_args(meta)),
                    body,
                    pulumi.ResourceOptions.merge(
                        after, pulumi.ResourceOptions(replace_on_changes=_replace_on(kind))
                    ),
                )
            )
        self.register_outputs(
            {"namespace": NAMESPACE, "chartVersion": versions.KUEUE_CHART_VERSION}
        )


def with_admission_checks(spec: dict[str, Any], checks: tuple[str, ...]) -> dict[str, Any]:
    """A ClusterQueue spec that admits only once `checks` pass (v1beta2
    `admissionChecksStrategy`): a fleet manager's queues wait for MultiKueue, which admits
    a job where a worker admits its copy."""
    return {**spec, "admissionChecksStrategy": {"admissionChecks": [{"name": c} for c in checks]}}


class KubeObject(pulumi.CustomResource):
    """A Kubernetes custom object with top-level fields besides `spec` (a
    WorkloadPriorityClass has `value` and `description`), which
    `kubernetes.apiextensions.CustomResource` cannot carry. Same provider, same type token."""

    def __init__(
        self,
        resource_name: str,
        api_version: str,
        kind: str,
        metadata: Any,
        fields: dict[str, Any],
        opts: pulumi.ResourceOptions,
    ) -> None:
        props = {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}
        super().__init__(f"kubernetes:{api_version}:{kind}", resource_name, props, opts)


def _meta_args(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k in ("name", "namespace", "labels", "annotations")}
