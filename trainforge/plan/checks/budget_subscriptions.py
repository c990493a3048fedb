"""Plan check: each SNS subscription `pulumi up` would create is one SNS accepts and can
confirm (TRAINFORGE_SNS_SUBSCRIPTION), and a webhook receiver SNS cannot subscribe still gets
the monthly budgets through Alertmanager (TRAINFORGE_BUDGET_UNROUTED). Why, and SNS's rules:
docs/cost.md, "Budgets (AWS Budgets)".
"""

from __future__ import annotations

import re
from typing import Any

from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.platform.budgets import subscription_problem
from trainforge.platform.dashboards import BUDGET
from trainforge.stack.file import decode_value
from trainforge.stack.policy import CAPS_KEY, parse_caps
from trainforge.stack.services import receiver_name

SUBSCRIPTION = "TRAINFORGE_SNS_SUBSCRIPTION"
BUDGET_UNROUTED = "TRAINFORGE_BUDGET_UNROUTED"
RULES = {
    SUBSCRIPTION: "subscribe a public https:// URL (protocol https) or an e-mail address "
    "(protocol email): SNS refuses an endpoint whose scheme is not the protocol's and cannot "
    "confirm a cluster-local or private address",
    # the registry's words; a finding's fix is `unrouted_fix`, built from the receiver's config
    BUDGET_UNROUTED: "give the receiver a public https:// URL SNS can subscribe (it must "
    "confirm the subscription), or keep it cluster-local and change what keeps each budget "
    "from it, as the finding's fix names; docs/cost.md, Budgets",
}
TOPIC_SUBSCRIPTION = "aws:sns/topicSubscription:TopicSubscription"
MONITORING_KEY = "trainforge:monitoring"
SPEND_ALERT = "TrainforgeTeamSpendOverBudget"
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def endpoint_problem(protocol: str, endpoint: Any) -> str | None:
    """Why SNS cannot make this subscription, or None (also: endpoint unknown at plan, or a
    protocol not judged here)."""
    if not isinstance(endpoint, str) or endpoint in ("", "[secret]"):
        return None
    if protocol in ("http", "https"):
        if not endpoint.startswith(f"{protocol}://"):
            return f"protocol {protocol} needs a URL beginning with {protocol}://"
        if protocol == "https":
            return subscription_problem(endpoint)
        return subscription_problem("https" + endpoint[len("http") :])
    if protocol in ("email", "email-json") and not EMAIL.fullmatch(endpoint):
        return f"protocol {protocol} needs an e-mail address"
    return None


def _spend_routes(resources: list[Any]) -> set[str] | None:
    """The teams whose budget series a rule records, or None without the spend alert (OpenCost
    off)."""
    rules = [
        rule
        for res in resources
        if isinstance(res.inputs, dict) and isinstance(spec := res.inputs.get("spec"), dict)
        for group in spec.get("groups") or ()
        for rule in (group or {}).get("rules") or ()
    ]
    if not any(rule.get("alert") == SPEND_ALERT for rule in rules):
        return None
    labels = [rule.get("labels") or {} for rule in rules if rule.get("record") == BUDGET]
    return {team for lab in labels if (team := lab.get("trainforge_io_team"))}


def _receivers(config: dict[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
    """(index, `services.receiver_name`, receiver) of `trainforge:monitoring.receivers`."""
    raw = decode_value(config.get(MONITORING_KEY))
    found = raw.get("receivers") if isinstance(raw, dict) else None
    if not isinstance(found, list):
        return []
    return [(i, receiver_name(r, i), r) for i, r in enumerate(found) if isinstance(r, dict)]


def unrouted_fix(
    i: int, rec: dict[str, Any], teams: list[str], opencost: bool, cluster: bool
) -> str:
    """BUDGET_UNROUTED's fix for receiver `i`, from its config: the keys to change (and the
    value to add) so Alertmanager carries the unrouted `teams`' budgets to it; clusterPerMonth
    only when `cluster` (it is set: no in-cluster alert carries it)."""
    key = f"{MONITORING_KEY}.receivers[{i}]"
    severities = rec.get("severities") or ["critical", "warning"]
    only = list(rec.get("teams") or [])
    steps = [] if opencost else [f"set {MONITORING_KEY}.opencost.enabled: true"]
    if "warning" not in severities:
        steps.append(f"add `warning` to {key}.severities (now [{', '.join(severities)}])")
    if missing := [t for t in teams if only and t not in only]:
        steps.append(f"add {', '.join(missing)} to {key}.teams (now [{', '.join(only)}])")
    if teams and not steps:  # OpenCost on, the receiver takes them: the budget has no rule
        steps.append(f"no rule of this plan records their budget ({BUDGET})")
    carry = (
        f"let Alertmanager carry the budget of team {', '.join(teams)} ({SPEND_ALERT}, "
        f"severity warning): {'; '.join(steps)}"
        if teams
        else ""
    )
    if cluster:
        drop = f"drop {CAPS_KEY}.clusterPerMonth (no in-cluster alert carries it)"
        carry = f"{carry}, and {drop}" if carry else drop
    return (
        f"give {key}.url a public https:// URL SNS can subscribe (it must confirm the "
        f"subscription), or keep it cluster-local and {carry}; docs/cost.md, Budgets"
    )


def check(ctx: PlanContext) -> CheckResult:
    config = dict(ctx.inventory.config or {})
    resources = list(ctx.inventory.resources)
    findings: list[Finding] = []
    lines: list[str] = []
    data: dict[str, Any] = {"subscriptions": [], "receivers": []}
    receivers = _receivers(config)
    by_name = {name: r for _, name, r in receivers}
    for res in resources:
        if res.type != TOPIC_SUBSCRIPTION:
            continue
        protocol = str(res.inputs.get("protocol", ""))
        endpoint = res.inputs.get("endpoint")
        if endpoint == "[secret]":  # the budgets' topic names a subscription by its receiver
            rec = by_name.get(res.name.rpartition("-webhook-")[2]) or {}
            endpoint = decode_value(rec.get("url"))
        why = endpoint_problem(protocol, endpoint)
        data["subscriptions"].append({"name": res.name, "protocol": protocol, "problem": why})
        if why is None:
            lines.append(f"{res.name}: {protocol} subscription SNS accepts")
            continue
        findings.append(
            Finding.on(
                res,
                SUBSCRIPTION,
                f"{res.name}: SNS cannot make this {protocol} subscription ({why}): "
                "`pulumi up` fails on it, or it never confirms",
                RULES[SUBSCRIPTION],
            )
        )
        lines.append(f"{res.name}: {protocol} subscription SNS refuses: {why}")
    # the monthly budgets by the policy model; a malformed cap is the cost check's to report
    caps = parse_caps(config.get(CAPS_KEY), errors=[])
    cluster_budget = caps.cluster_per_month is not None
    team_budgets = sorted(t for t, c in caps.teams.items() if c.team_per_month is not None)
    if cluster_budget or team_budgets:
        routed = _spend_routes(resources)
        for i, name, rec in receivers:
            if rec.get("type", "webhook") != "webhook":
                continue
            url = decode_value(rec.get("url"))
            key = f"{MONITORING_KEY}.receivers[{i}].url"
            if not isinstance(url, str) or url == "[secret]":
                lines.append(f"receiver {name}: url is a secret; judged at `pulumi up` only")
                continue
            why = subscription_problem(url)
            entry = {"receiver": name, "key": key, "problem": why, "unrouted": []}
            data["receivers"].append(entry)
            if why is None:
                lines.append(f"receiver {name}: budgets through the SNS topic (https)")
                continue
            severities = rec.get("severities") or ["critical", "warning"]
            only = rec.get("teams") or []
            carried = routed is not None and "warning" in severities
            teams = [
                t for t in team_budgets
                if not carried or t not in (routed or ()) or (only and t not in only)
            ]  # fmt: skip
            unrouted = ["the cluster's"] * cluster_budget + [f"team {t}'s" for t in teams]
            entry["unrouted"] = unrouted
            if not unrouted:
                lines.append(
                    f"receiver {name}: not subscribable by SNS ({why}); gets the team budgets "
                    f"through Alertmanager ({SPEND_ALERT}: OpenCost's real spend; no forecast)"
                )
                continue
            findings.append(
                Finding(
                    resource=key,
                    rule=BUDGET_UNROUTED,
                    message=f"{key}: got {url!r}; SNS cannot subscribe it ({why}), and no "
                    f"in-cluster alert carries {' and '.join(unrouted)} monthly budget to it: "
                    "valid is a public https:// URL",
                    fix=unrouted_fix(i, rec, teams, routed is not None, cluster_budget),
                    names=frozenset({key, name}),
                )
            )
            lines.append(f"receiver {name}: gets no notice of {', '.join(unrouted)} budget")
    if not lines:
        return CheckResult()
    return CheckResult(
        findings, [Section("Budget notifications (subscriptions AWS can make)", lines, data)]
    )
