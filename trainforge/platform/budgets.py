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
e-mail addresses and SNS topics only, not Alertmanager); each `webhook` receiver of
`trainforge:monitoring.receivers` is subscribed to it over HTTPS. Slack and PagerDuty
receivers are not reachable from AWS Budgets directly: the plan says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from trainforge.stack.policy import CostCaps

CLUSTER_TAG = "trainforge.io/cluster"
NAMESPACE_TAG = "aws:eks:namespace"  # split cost allocation data for EKS (AWS-generated)
# Notify when the month's actual cost passes 80% and when the forecast passes 100%.
THRESHOLDS = (("ACTUAL", 80.0), ("FORECASTED", 100.0))


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
        webhook_urls: Sequence[str],
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
        for i, url in enumerate(webhook_urls):
            aws.sns.TopicSubscription(
                f"{name}-webhook-{i}",
                topic=self.topic.arn,
                protocol="https",
                endpoint=pulumi.Output.secret(url),
                opts=child,
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
    webhooks = [r.secret for r in receivers if r.type == "webhook" and r.secret]
    unreachable = [r.name for r in receivers if r.type != "webhook"]
    if unreachable:
        pulumi.log.warn(
            "trainforge-policy:costCaps: AWS Budgets notify SNS topics and e-mail only, so "
            f"receivers {', '.join(unreachable)} get no budget notification (subscribe them to "
            "the budgets' SNS topic, docs/cost.md)"
        )
    tags = {CLUSTER_TAG: config.cluster, "managed-by": "pulumi", **dict(config.tags)}
    return Budgets("budgets", wanted, webhooks, tags)
