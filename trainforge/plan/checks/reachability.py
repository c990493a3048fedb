"""Plan check: the machine that runs `pulumi up` can reach the EKS API endpoint of a cluster the
stack creates, or the stack says how (`trainforge:endpoint.deployFrom`): docs/rehearsals.md,
"Reachability (how `pulumi up` reaches the API)".
"""

from __future__ import annotations

from typing import Any

from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks.iam_eval import as_list
from trainforge.plan.checks.rules import eks_endpoint
from trainforge.plan.resource_types import EKS_CLUSTER, EKS_COMPONENT
from trainforge.plan.runner import UNKNOWN
from trainforge.platform.endpoint import DEPLOYERS

UNREACHABLE = "TRAINFORGE_ENDPOINT_UNREACHABLE"
RULES = {
    UNREACHABLE: "let `pulumi up` reach the API: list the deploying networks in "
    "trainforge:endpoint.publicAccessCidrs, or set trainforge:endpoint.deployFrom: deployer "
    "(the machine running `pulumi up`, /32), or run `pulumi up` inside the VPC and say so with "
    "deployFrom: vpc (docs/rehearsals.md, Reachability)",
}
VPC = "aws:ec2/vpc:Vpc"
SUBNET = "aws:ec2/subnet:Subnet"
KEY = "trainforge:endpoint"


def _made_here(by_urn: dict[str, Any], urn: str) -> bool:
    """Whether an input came from a VPC of this plan, or a subnet placed in one."""
    res = by_urn.get(urn)
    if res is None:
        return False
    if res.type == VPC:
        return True
    return res.type == SUBNET and any(
        getattr(by_urn.get(u), "type", "") == VPC for u in res.dependencies.get("vpcId", [])
    )


def _declared(config: dict[str, Any]) -> str:
    """The stack's `endpoint.deployFrom` (its default when unset or unreadable)."""
    from trainforge.stack.file import decode_value
    from trainforge.stack.platform import EndpointConfig

    raw = decode_value(config.get(KEY))
    try:
        return EndpointConfig.model_validate(raw if isinstance(raw, dict) else {}).deploy_from
    except ValueError:  # a bad value is the stack check's to report, with its key
        return EndpointConfig().deploy_from


def check(ctx: PlanContext) -> CheckResult:
    by_urn = ctx.inventory.by_urn()
    deploy_from = _declared(dict(ctx.inventory.config or {}))
    findings: list[Finding] = []
    lines: list[str] = []
    data: list[dict[str, Any]] = []
    for res in ctx.inventory.resources:
        if res.type not in (EKS_COMPONENT, EKS_CLUSTER):
            continue
        public, _, cidrs = eks_endpoint(res.type, res.inputs)
        public, cidrs = public is True, as_list(cidrs)
        vpc_prop = "vpcId" if res.type == EKS_COMPONENT else "vpcConfig"
        created = any(_made_here(by_urn, u) for u in res.dependencies.get(vpc_prop, []))
        data.append(
            {"cluster": res.name, "public": public, "publicAccessCidrs": cidrs,
             "vpcCreatedByStack": created, "deployFrom": deploy_from}
        )  # fmt: skip
        if public:
            parts = [c for c in cidrs if c not in (UNKNOWN, DEPLOYERS)]
            if UNKNOWN in cidrs or DEPLOYERS in cidrs:
                parts.append(
                    "the /32 of each machine that ran `pulumi up` (kept: a second operator or "
                    "CI does not lock out the first)"
                )
            who = ", ".join(parts) or "anywhere (no allow-list: the providers' 0.0.0.0/0)"
            lines.append(
                f"{res.name}: public endpoint reachable from {who}; private inside the VPC"
            )
        elif deploy_from == "vpc":
            lines.append(
                f"{res.name}: private-only endpoint; declared: `pulumi up` runs inside "
                f"{'the VPC this stack creates' if created else 'the VPC'} (deployFrom: vpc)"
            )
        elif not created:
            lines.append(
                f"{res.name}: private-only endpoint in an existing VPC: `pulumi up` must run "
                "inside it or a network routed to it (say so with deployFrom: vpc)"
            )
        else:
            message = (
                f"{res.name}: the API endpoint is private-only and the VPC is created by this "
                "same stack, so no laptop or CI runner can reach it: every Kubernetes object "
                f"and Helm release of `pulumi up` times out ({KEY}.publicAccessCidrs is empty, "
                f"deployFrom is {deploy_from!r})"
            )
            findings.append(Finding.on(res, UNREACHABLE, message, RULES[UNREACHABLE]))
            lines.append(
                f"{res.name}: private-only endpoint in a VPC this stack creates: unreachable"
            )
    if not data:
        lines.append("no EKS cluster in this plan")
    title = "Reachability (how `pulumi up` reaches the API)"
    return CheckResult(findings, [Section(title, lines, data)])
