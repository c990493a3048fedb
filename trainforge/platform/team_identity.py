"""Each team's pods run as the team's own UID/GID, enforced by the API server: one
ValidatingAdmissionPolicy and its binding per team namespace.

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
container (init and ephemeral ones included) sets another runAsUser or runAsGroup. Pods are
what every controller creates (the training operator, JobSet, Job), so one rule covers every
backend; the controllers see the denial (the Job's events), and the plan says it before
(plan/checks/team_identity.py evaluates these same expressions on every pod template the
stack declares in a team namespace).

Kubernetes 1.35: admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy is GA since 1.30
(kubernetes/kubernetes CHANGELOG-1.30, KEP-3488); `failurePolicy: Fail` (the default) denies
a request whose expression errors. The binding selects the namespace by the label the API
server sets on every namespace (`kubernetes.io/metadata.name`), which a team cannot change.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from trainforge.core.labels import NAMESPACE_NAME

API_VERSION = "admissionregistration.k8s.io/v1"
POLICY_PREFIX = "trainforge-team-identity-"

# A container's runAsUser/runAsGroup either unset (the pod's applies) or the team's.
_CONTAINER = (
    "!has({c}.securityContext) || "
    "((!has({c}.securityContext.runAsUser) || {c}.securityContext.runAsUser == {uid}) && "
    "(!has({c}.securityContext.runAsGroup) || {c}.securityContext.runAsGroup == {gid}))"
)
_POD = "object.spec.securityContext"


def policy_name(team: str) -> str:
    """The team's policy's (and binding's) name."""
    return f"{POLICY_PREFIX}{team}"


def validations(team: str, uid: int, gid: int) -> list[dict[str, str]]:
    """The CEL validations of team `team`'s policy (each with the message a denied pod's
    creator reads), the one model the cluster and the plan evaluate."""

    def containers(field: str, optional: bool) -> str:
        each = _CONTAINER.format(c="c", uid=uid, gid=gid)
        rule = f"object.spec.{field}.all(c, {each})"
        return f"!has(object.spec.{field}) || {rule}" if optional else rule

    where = f"pods in namespace {team} run as team {team}"
    return [
        {
            "expression": f"has({_POD}) && has({_POD}.runAsUser) && {_POD}.runAsUser == {uid}",
            "message": f"{where}: spec.securityContext.runAsUser must be {uid}",
        },
        {
            "expression": f"has({_POD}) && has({_POD}.runAsGroup) && {_POD}.runAsGroup == {gid}",
            "message": f"{where}: spec.securityContext.runAsGroup must be {gid}",
        },
        {
            "expression": f"!has({_POD}) || !has({_POD}.fsGroup) || {_POD}.fsGroup == {gid}",
            "message": f"{where}: spec.securityContext.fsGroup must be unset or {gid}",
        },
        {
            "expression": f"!has({_POD}) || !has({_POD}.supplementalGroups) || "
            f"{_POD}.supplementalGroups.all(g, g == {gid})",
            "message": f"{where}: spec.securityContext.supplementalGroups may hold only {gid}",
        },
        *(
            {
                "expression": containers(field, optional),
                "message": f"{where}: every {field} entry's securityContext.runAsUser and "
                f"runAsGroup must be unset or {uid} and {gid}",
            }
            for field, optional in (
                ("containers", False),
                ("initContainers", True),
                ("ephemeralContainers", True),
            )
        ),
    ]


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


def binding_spec(team: str) -> dict[str, Any]:
    """The binding: the policy, denying, in the team's namespace only."""
    return {
        "policyName": policy_name(team),
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
    """The team's policy and its binding (cluster-scoped; the binding after the policy)."""
    meta = k8s.meta.v1.ObjectMetaArgs(name=policy_name(team), labels=labels)
    policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
        f"{name}-{team}-identity-policy",
        metadata=meta,
        spec=policy_spec(team, uid, gid),
        opts=opts,
    )
    k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        f"{name}-{team}-identity-binding",
        metadata=meta,
        spec=binding_spec(team),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[policy])),
    )
