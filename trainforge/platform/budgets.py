"""Monthly AWS Budgets for the stack's `trainforge-policy:costCaps` budgets.

Why: the plan checks the budgets against estimates before `pulumi up`; after it, only AWS
knows what was really spent. An AWS Budget compares the month's real (and forecast) cost with
the budget and notifies, without anything running in the cluster.

What AWS can attribute (docs/cost.md, "Budgets"):

* `clusterPerMonth`: every resource the platform creates carries the cost-allocation tag
  `trainforge.io/cluster=<cluster>` (the Karpenter node classes too, so job nodes count), so a
  budget filtered on that tag (`TagKeyValue` `user:trainforge.io/cluster$<cluster>`) sees the
  cluster's whole spend once the tag is activated in the Billing console.
* `teams.<team>.teamPerMonth`: teams share nodes, so no resource tag separates a team's cost.
  AWS's split cost allocation data for EKS splits each node's cost over its pods and labels
  them `aws:eks:namespace`; the team's budget filters on that tag with the team's namespace
  (`aws:eks:namespace$<namespace>`). It needs split cost allocation data turned on for the
  account (Billing preferences); docs/cost.md says what AWS documents and what it does not.

Notifications go to one SNS topic that AWS Budgets may publish to (AWS Budgets notifies
e-mail addresses and SNS topics only, not Alertmanager). A `webhook` receiver of
`trainforge:monitoring.receivers` is subscribed to it over HTTPS only when SNS can make that
subscription: the endpoint "is a URL beginning with https://" for protocol https (SNS
Subscribe API, https://docs.aws.amazon.com/sns/latest/api/API_Subscribe.html, read
2026-11-29) and SNS, which lives outside the cluster and the VPC, must reach it to deliver the
confirmation message, so a cluster-local (`*.svc`, `*.cluster.local`, one-label) or private
address can never confirm. Such a receiver (prod's `http://alert-router.ops.svc...`) gets the
team budgets through the platform's own Alertmanager instead (the in-cluster
`TrainforgeTeamSpendOverBudget` alert, OpenCost's real spend), which does reach cluster-local
receivers; a budget that route does not carry (the cluster's, or a stack without OpenCost) is
a plan finding naming the receiver's key (plan check `budget_subscriptions`). Slack and
PagerDuty receivers are not reachable from AWS Budgets directly: the plan says so.
"""

from __future__ import annotations

import ipaddress
import json
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from trainforge.platform.tags import CLUSTER_TAG, resource_tags
from trainforge.stack.policy import CostCaps

NAMESPACE_TAG = "aws:eks:namespace"  # split cost allocation data for EKS (AWS-generated)
# Notify when the month's actual cost passes 80% and when the forecast passes 100%.
THRESHOLDS = (("ACTUAL", 80.0), ("FORECASTED", 100.0))


# host suffixes only a cluster's (or a VPC's) own resolver answers: SNS cannot reach them
LOCAL_SUFFIXES = (".svc", ".cluster.local", ".local", ".internal", ".localdomain")


def subscription_problem(url: str) -> str | None:
    """Why SNS cannot make (or confirm) an https subscription to `url`, or None when it can.

    SNS refuses an endpoint whose scheme is not the protocol's ("Endpoint must match the
    specified protocol"), and it confirms a subscription by POSTing to the URL from AWS's
    network: a name only the cluster's DNS answers, or a private or loopback address, never
    answers it."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        host = (parts.hostname or "").rstrip(".").lower()
    except ValueError:
        return "not a URL"
    if parts.scheme != "https":
        return f"SNS subscribes https:// URLs only here (scheme {parts.scheme or 'none'!r})"
    if not host:
        return "no host"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        if not address.is_global:
            return f"{host} is not a public address: SNS cannot reach it"
        return None
    if host == "localhost" or "." not in host or host.endswith(LOCAL_SUFFIXES):
        return f"{host} resolves inside the cluster or network only: SNS cannot reach it"
    return None


@dataclass(frozen=True)
class Webhook:
    """A webhook receiver the budgets' topic subscribes: its name, its index among the webhook
    receivers (the subscription's old resource name) and its URL (a secret)."""

    receiver: str
    index: int
    url: str


@dataclass(frozen=True)
class BudgetTarget:
    """One budget to create: its name, USD per month and the cost filter AWS applies."""

    name: str
    usd: float
    tag_filter: str  # TagKeyValue filter value: `<key>$<value>`


def targets(cluster: str, caps: CostCaps, namespaces: dict[str, str]) -> list[BudgetTarget]:
    """The budgets the caps ask for: the cluster's, then each team's (teams in name order)."""
    out = []
    if caps.cluster_per_month is not None:
        out.append(
            BudgetTarget(
                f"{cluster}-cluster", caps.cluster_per_month, f"user:{CLUSTER_TAG}${cluster}"
            )
        )
    for team in sorted(caps.teams):
        usd = caps.month_for_team(team)
        if usd is not None and team in namespaces:
            out.append(
                BudgetTarget(f"{cluster}-team-{team}", usd, f"{NAMESPACE_TAG}${namespaces[team]}")
            )
    return out


class Budgets(pulumi.ComponentResource):
    """The stack's AWS Budgets and the SNS topic they notify."""

    def __init__(
        self,
        name: str,
        budgets: Sequence[BudgetTarget],
        webhooks: Sequence[Webhook],
        tags: dict[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("trainforge:index:Budgets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Not encrypted with the aws/sns key: AWS Budgets cannot publish to a topic under an
        # AWS-managed key (it would need a customer key whose policy admits it); a budget
        # notification holds a budget's name and amounts, no secret.
        self.topic = aws.sns.Topic(f"{name}-topic", tags=tags, opts=child)
        account = aws.get_caller_identity_output().account_id
        aws.sns.TopicPolicy(
            f"{name}-topic-policy",
            arn=self.topic.arn,
            policy=pulumi.Output.all(self.topic.arn, account).apply(
                lambda a: json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Sid": "AwsBudgetsPublish",
                                "Effect": "Allow",
                                "Principal": {"Service": "budgets.amazonaws.com"},
                                "Action": "SNS:Publish",
                                "Resource": a[0],
                                "Condition": {"StringEquals": {"aws:SourceAccount": a[1]}},
                            }
                        ],
                    }
                )
            ),
            opts=child,
        )
        for hook in webhooks:
            # named by the receiver (the plan judges a secret endpoint by its receiver's key);
            # the alias keeps a subscription created under its old index name
            aws.sns.TopicSubscription(
                f"{name}-webhook-{hook.receiver}",
                topic=self.topic.arn,
                protocol="https",
                endpoint=pulumi.Output.secret(hook.url),
                opts=pulumi.ResourceOptions(
                    parent=self, aliases=[pulumi.Alias(name=f"{name}-webhook-{hook.index}")]
                ),
            )
        self.budgets = [
            aws.budgets.Budget(
                f"{name}-{b.name}",
                name=b.name,
                budget_type="COST",
                limit_amount=f"{b.usd:.2f}",
                limit_unit="USD",
                time_unit="MONTHLY",
                cost_filters=[
                    aws.budgets.BudgetCostFilterArgs(name="TagKeyValue", values=[b.tag_filter])
                ],
                notifications=[
                    aws.budgets.BudgetNotificationArgs(
                        comparison_operator="GREATER_THAN",
                        threshold=threshold,
                        threshold_type="PERCENTAGE",
                        notification_type=kind,
                        subscriber_sns_topic_arns=[self.topic.arn],
                    )
                    for kind, threshold in THRESHOLDS
                ],
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.topic]),
            )
            for b in budgets
        ]
        self.register_outputs({"topicArn": self.topic.arn})


def stack_budgets(config: Any, caps: CostCaps) -> Budgets | None:
    """The program's budgets (None when the caps set no monthly budget): the cluster's tag,
    the teams' namespaces and the webhook receivers come from the platform's config."""
    services = getattr(config, "services", None)
    teams = {t.name: t.name for t in getattr(services, "teams", ()) or ()}
    wanted = targets(config.cluster, caps, teams)
    if not wanted:
        return None
    receivers = getattr(getattr(services, "monitoring", None), "receivers", ()) or ()
    # a receiver SNS cannot subscribe gets the team budgets through Alertmanager (the
    # in-cluster spend alert); the plan reports a budget no route carries to it
    hooks = [r for r in receivers if r.type == "webhook" and r.secret]
    webhooks = [
        Webhook(r.name, i, r.secret)
        for i, r in enumerate(hooks)
        if subscription_problem(r.secret) is None
    ]
    unreachable = [r.name for r in receivers if r.type != "webhook"]
    if unreachable:
        pulumi.log.warn(
            "trainforge-policy:costCaps: AWS Budgets notify SNS topics and e-mail only, so "
            f"receivers {', '.join(unreachable)} get no budget notification (subscribe them to "
            "the budgets' SNS topic, docs/cost.md)"
        )
    return Budgets("budgets", wanted, webhooks, resource_tags(config))
