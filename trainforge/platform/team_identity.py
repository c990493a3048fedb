"""Each team's pods run as the team's own UID/GID and name no PriorityClass, and its Services
are ClusterIP ones, enforced by the API server: two ValidatingAdmissionPolicies (pods,
Services) and their bindings per team namespace.

Why enforce it: a team's FSx directory is `0770` and owned by the team's UID/GID
(platform/fsx.py), and docs/teams.md promises that another team's pods cannot read it even
through a mount of the whole file system. That holds only if no pod in another team's
namespace may claim those ids: Pod Security `baseline` (the teams' default) restricts neither
runAsUser/runAsGroup nor fsGroup/supplementalGroups, so without this a team's Job could set
`runAsUser: <llm's uid>` (or `supplementalGroups: [<llm's gid>]`) and be the other team on
any file it can reach. Correcting the docs instead would leave the UID/GID pair meaning
nothing; the policy makes it what keeps teams apart beside the fileset mount and claimRef.

The rule, on every Pod created in the team's namespace (and every ephemeral container added):
the pod's securityContext sets runAsUser = the team's UID and runAsGroup = the team's GID;
fsGroup, if set, is the team's GID; supplementalGroups hold only the team's GID; no
container (init and ephemeral ones included) sets another runAsUser or runAsGroup; no
priorityClassName but the platform's for teams (TEAM_PRIORITY_CLASSES: none). The one
other identity admitted is the platform's shared default (`SHARED_ID`, below), which owns no
team's files: the Kubeflow SDK's TrainJobs run as it. Pods are
what every controller creates (the training operator, JobSet, Job), so one rule covers every
backend; the controllers see the denial (the Job's events), and the plan says it before
(plan/checks/admission_policies.py evaluates these same expressions on every pod template the
stack declares in a team namespace).

The Services rule (a team member with `createJobs` may create Services, for the operator-free
Indexed Job's headless rendezvous): type ClusterIP only, no externalIPs (SERVICE_TYPES, below).

Kubernetes 1.35: admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy is GA since 1.30
(kubernetes/kubernetes CHANGELOG-1.30, KEP-3488); `failurePolicy: Fail` (the default) denies
a request whose expression errors. The binding selects the namespace by the label the API
server sets on every namespace (`kubernetes.io/metadata.name`), which a team cannot change.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from trainforge.core.contract import DEFAULT_TRAINING_UID
from trainforge.core.labels import NAMESPACE_NAME

API_VERSION = "admissionregistration.k8s.io/v1"
POLICY_PREFIX = "trainforge-team-identity-"

# The one identity besides the team's own that a team's pods may have: the platform's default
# (DEFAULT_TRAINING_UID:DEFAULT_TRAINING_UID), which the one ClusterTrainingRuntime the Kubeflow
# SDK's TrainJobs run (trainjob.sdk_runtime_manifest, cluster-wide, so it cannot know the team)
# sets. It owns no team's files (every team directory is chown'd to its team's ids, fsx.py), so
# a pod running as it reaches none; what the policy must stop is a pod claiming another team's.
SHARED_ID = DEFAULT_TRAINING_UID

# The PriorityClasses a team's pods may name: none but the empty default. The platform defines
# no PriorityClass for team workloads (a job's `priority` is a Kueue WorkloadPriorityClass,
# which orders the team's queue and sets no pod priority; the one pod PriorityClass the
# platform names, `system-node-critical`, is its device plugins', platform/device_plugins.py,
# outside every team namespace). A pod naming one (`system-node-critical`, or any class of
# high value) would preempt other teams' pods on shared nodes: the scheduler's preemption
# knows nothing of Kueue's quotas. The Priority admission plugin (a mutating one, which runs
# before any ValidatingAdmissionPolicy) resolves an unset name to the cluster's globalDefault
# class, or leaves it empty where there is none (kubernetes plugin/pkg/admission/priority/
# admission.go, admitPod; checked 2026-12-01): the platform declares none, EKS adds none.
TEAM_PRIORITY_CLASSES: tuple[str, ...] = ("",)

SERVICES_PREFIX = "trainforge-team-services-"
# The Service types a team may create: ClusterIP (headless included: the operator-free Indexed
# Job's rendezvous, jobs/indexed_job.service_manifest). Not LoadBalancer (the public subnets
# are tagged kubernetes.io/role/elb, platform/tags.py: an internet-facing load balancer that
# Pulumi does not track), NodePort (a port on every node) or ExternalName; and no externalIPs
# on any (CVE-2020-8554: a Service with another's IP intercepts its traffic in the cluster).
SERVICE_TYPES: tuple[str, ...] = ("ClusterIP",)

# A container's runAsUser/runAsGroup either unset (the pod's applies) or allowed.
_CONTAINER = (
    "!has({c}.securityContext) || "
    "((!has({c}.securityContext.runAsUser) || {c}.securityContext.runAsUser in {uids}) && "
    "(!has({c}.securityContext.runAsGroup) || {c}.securityContext.runAsGroup in {gids}))"
)
_POD = "object.spec.securityContext"


def policy_name(team: str) -> str:
    """The team's pod policy's (and binding's) name."""
    return f"{POLICY_PREFIX}{team}"


def services_policy_name(team: str) -> str:
    """The team's Service policy's (and binding's) name."""
    return f"{SERVICES_PREFIX}{team}"


def validations(team: str, uid: int, gid: int) -> list[dict[str, str]]:
    """The CEL validations of team `team`'s policy (each with the message a denied pod's
    creator reads), the one model the cluster and the plan evaluate."""
    uids, gids = sorted({uid, SHARED_ID}), sorted({gid, SHARED_ID})
    u, g = str(uids).replace(" ", ""), str(gids).replace(" ", "")
    uw, gw = _words(uid, "uid"), _words(gid, "gid")

    def containers(field: str, optional: bool) -> str:
        each = _CONTAINER.format(c="c", uids=u, gids=g)
        rule = f"object.spec.{field}.all(c, {each})"
        return f"!has(object.spec.{field}) || {rule}" if optional else rule

    where = f"pods in namespace {team} run as team {team}"
    return [
        {
            "expression": f"has({_POD}) && has({_POD}.runAsUser) && {_POD}.runAsUser in {u}",
            "message": f"{where}: spec.securityContext.runAsUser must be {uw}",
        },
        {
            "expression": f"has({_POD}) && has({_POD}.runAsGroup) && {_POD}.runAsGroup in {g}",
            "message": f"{where}: spec.securityContext.runAsGroup must be {gw}",
        },
        {
            "expression": f"!has({_POD}) || !has({_POD}.fsGroup) || {_POD}.fsGroup in {g}",
            "message": f"{where}: spec.securityContext.fsGroup must be unset or {gw}",
        },
        {
            "expression": f"!has({_POD}) || !has({_POD}.supplementalGroups) || "
            f"{_POD}.supplementalGroups.all(x, x in {g})",
            "message": f"{where}: spec.securityContext.supplementalGroups may hold only {gw}",
        },
        *(
            {
                "expression": containers(field, optional),
                "message": f"{where}: every {field} entry's securityContext.runAsUser must be "
                f"unset or {uw}, its runAsGroup unset or {gw}",
            }
            for field, optional in (
                ("containers", False),
                ("initContainers", True),
                ("ephemeralContainers", True),
            )
        ),
        priority_validation(team),
    ]


def priority_validation(team: str) -> dict[str, str]:
    """A team's pod names no PriorityClass but the platform's for teams (TEAM_PRIORITY_CLASSES):
    the message names the field, the value and what is valid."""
    allowed = str(list(TEAM_PRIORITY_CLASSES))
    field = "object.spec.priorityClassName"
    valid = "unset (a job's priority is the job key `priority`, a Kueue WorkloadPriorityClass)"
    head = f"pods in namespace {team}: spec.priorityClassName "
    return {
        "expression": f"!has({field}) || {field} in {allowed}",
        "message": f"{head}must be {valid}",
        "messageExpression": f'"{head}" + {field} + " is not allowed: it must be {valid}"',
    }


def service_validations(team: str) -> list[dict[str, str]]:
    """The CEL validations of team `team`'s Service policy: ClusterIP (headless included) and
    no externalIPs; each message names the field, the value and what is valid."""
    where = f"services in namespace {team}"
    types = str(list(SERVICE_TYPES))
    valid = "ClusterIP (headless included): no LoadBalancer, NodePort or ExternalName"
    return [
        {
            "expression": f"!has(object.spec.type) || object.spec.type in {types}",
            "message": f"{where}: spec.type must be {valid}",
            "messageExpression": f'"{where}: spec.type " + object.spec.type + '
            f'" is not allowed: it must be {valid}"',
        },
        {
            "expression": "!has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0",
            "message": f"{where}: spec.externalIPs must be unset (CVE-2020-8554)",
        },
    ]


def _words(team_id: int, kind: str) -> str:
    """How a message names the allowed ids: the team's, and the shared one."""
    if team_id == SHARED_ID:
        return str(team_id)
    shared = "the platform's shared one, which owns no team's files"
    return f"{team_id} (the team's {kind}) or {SHARED_ID} ({shared})"


def policy_spec(team: str, uid: int, gid: int) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy's spec: Pods created (and ephemeral containers added)."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["pods"],
                },
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["UPDATE"],
                    "resources": ["pods/ephemeralcontainers"],
                },
            ]
        },
        "validations": validations(team, uid, gid),
    }


def services_policy_spec(team: str) -> dict[str, Any]:
    """The Service policy's spec: Services created or updated (a type or externalIPs may be
    changed on update)."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["services"],
                }
            ]
        },
        "validations": service_validations(team),
    }


def binding_spec(team: str, policy: str | None = None) -> dict[str, Any]:
    """A binding: the policy (the pod policy unless named), denying, in the team's
    namespace only."""
    return {
        "policyName": policy or policy_name(team),
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: team}}},
    }


def declare(
    name: str,
    team: str,
    uid: int,
    gid: int,
    labels: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> None:
    """The team's policies (its pods, its Services) and their bindings (cluster-scoped; each
    binding after its policy)."""
    for kind, policy_of, spec in (
        ("identity", policy_name(team), policy_spec(team, uid, gid)),
        ("services", services_policy_name(team), services_policy_spec(team)),
    ):
        meta = k8s.meta.v1.ObjectMetaArgs(name=policy_of, labels=labels)
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-{team}-{kind}-policy", metadata=meta, spec=spec, opts=opts
        )
        k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-{team}-{kind}-binding",
            metadata=meta,
            spec=binding_spec(team, policy_of),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[policy])),
        )
