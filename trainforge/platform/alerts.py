"""trainforge's alerts as code: Prometheus alerting rules and Alertmanager routes.

Why: a job that stops making progress, restarts in a loop, or a GPU that reports XID errors
must reach a person, not only a dashboard. Every rule reads metrics that really exist at the
pinned versions:

* the training runtime's gauges (trainforge.training.metrics, goodput.py), served by global
  rank 0 and scraped by each job's PodMonitor, which keeps the pod labels `trainforge.io/job`
  and `trainforge.io/team` as `trainforge_io_job` / `trainforge_io_team`;
* DCGM exporter 4.5.3-4.8.2 (`DCGM_FI_DEV_XID_ERRORS`, `DCGM_FI_DEV_ROW_REMAP_FAILURE`,
  `DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS`: in our counters file, monitoring.py);
* kube-state-metrics (`kube_node_status_condition`: every node condition by type, so the EKS
  node monitoring agent's `AcceleratedHardwareReady` & co);
* Kueue 0.19 (`kueue_pending_workloads{cluster_queue,status}`,
  `kueue_admitted_workloads_total{cluster_queue}`: kubernetes-sigs/kueue
  site/content/en/docs/reference/metrics.md, read 2026-11-25);
* Karpenter 1.14 (`karpenter_cloudprovider_errors_total{controller,method,provider,error}`).

FSx for Lustre and S3 export no metrics into the cluster (they report to CloudWatch), so no
rule here watches them; a job's checkpoint writes that fail end in a restart, which the
restart-storm alert sees.

Each alert carries a `severity` (critical pages, warning goes to chat) and a `runbook_url`
into docs/troubleshooting.md (tests check every anchor exists).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from trainforge.platform.dashboards import (
    BUDGET,
    COST_PER_HOUR,
    SPEND_MONTH_TO_DATE,
    allocation_cost_expr,
)
from trainforge.platform.services_config import AlertsConfig, ReceiverConfig
from trainforge.stack.services import prometheus_seconds

RULE_NAME = "trainforge-alerts"
RUNBOOK_PAGE = "troubleshooting.md"
# A job's series: the PodMonitor's pod target labels, sanitised by the Prometheus operator.
JOB_KEYS = "namespace, trainforge_io_team, trainforge_io_job"
NODE_CONDITIONS = (
    "AcceleratedHardwareReady",
    "NetworkingReady",
    "StorageReady",
    "KernelReady",
    "ContainerRuntimeReady",
)


def anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _alert(
    cfg: AlertsConfig,
    name: str,
    expr: str,
    severity: str,
    summary: str,
    description: str,
    for_: str = "0m",
) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity, "platform": "trainforge"},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook_url": f"{cfg.runbook_base_url}{RUNBOOK_PAGE}#{anchor(name)}",
        },
    }


def _by(expr: str) -> str:
    return f"max by ({JOB_KEYS}) ({expr})"


def job_rules(cfg: AlertsConfig) -> list[dict[str, Any]]:
    stall = cfg.stalled_after
    job = "{{ $labels.namespace }}/{{ $labels.trainforge_io_job }}"
    on = f"on ({JOB_KEYS})"
    running = f"{_by('trainforge_progress')} < 1"
    return [
        _alert(
            cfg,
            "TrainforgeJobStalled",
            # no step for `stall` while the run is not finished, and the job was already
            # being scraped `stall` ago (a job that just started is not stalled)
            f"{_by(f'changes(trainforge_step[{stall}])')} == 0"
            f" and {on} {running}"
            f" and {on} {_by(f'trainforge_step offset {stall}')} >= 0",
            "critical",
            f"Job {job} made no optimizer step for {stall}",
            "The step counter of rank 0 has not moved while the run is unfinished: a hung "
            "collective, a stopped or dead rank, or a stuck data loader. GPUs are paid for "
            "and idle.",
        ),
        _alert(
            cfg,
            "TrainforgeJobMetricsDown",
            "max by (namespace, trainforge_io_team, trainforge_io_job) "
            '(1 - up{trainforge_io_job!=""}) == 1',
            "warning",
            f"Job {job}: its metrics endpoint (rank 0) does not answer",
            "Prometheus cannot scrape rank 0: the process is stopped, hung in a way that "
            "blocks its metrics thread, or the pod is not ready. Progress cannot be seen.",
            for_=stall,
        ),
        _alert(
            cfg,
            "TrainforgeRestartStorm",
            f"max by ({JOB_KEYS}) (max_over_time(trainforge_restarts[{cfg.restart_storm_window}]))"
            f" - min by ({JOB_KEYS}) "
            f"(min_over_time(trainforge_restarts[{cfg.restart_storm_window}]))"
            f" >= {cfg.restart_storm_count}",
            "warning",
            f"Job {job} restarted {{{{ $value }}}} times in {cfg.restart_storm_window}",
            "Attempts keep failing and being re-created (torchrun restarts and pod "
            "re-creations both count, from the run ledger); pod restart counters miss the "
            "latter. Read the attempts' exit reasons with `trainforge report`.",
        ),
        _alert(
            cfg,
            "TrainforgeCheckpointTooOld",
            f"{_by('(trainforge_step - trainforge_checkpoint_step) * trainforge_step_seconds')}"
            f" > {prometheus_seconds(cfg.checkpoint_max_age):g} and {on} {running}",
            "warning",
            f"Job {job}: {{{{ $value | humanizeDuration }}}} of training since its last checkpoint",
            f"More than {cfg.checkpoint_max_age} of progress would be lost to a failure now: "
            "checkpoints are failing, or their interval is too long for this step time.",
            for_="10m",
        ),
        _alert(
            cfg,
            "TrainforgeGoodputLow",
            f"{_by('trainforge_goodput')} < {cfg.goodput_min:g}"
            f" and {on} {_by('trainforge_wall_seconds')} > {prometheus_seconds(cfg.goodput_after):g}"
            f" and {on} {running}",
            "warning",
            f"Job {job}: goodput {{{{ $value | humanizePercentage }}}} is below "
            f"{cfg.goodput_min:.0%}",
            "Too much of the run's wall time went to restarts, lost steps, start-up and "
            "checkpoint stalls (docs/reliability.md, Goodput).",
            for_="15m",
        ),
    ]


def gpu_rules(cfg: AlertsConfig) -> list[dict[str, Any]]:
    gpu = "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}"
    where = ", pod {{ $labels.namespace }}/{{ $labels.pod }}"
    conditions = "|".join(NODE_CONDITIONS)
    return [
        _alert(
            cfg,
            "TrainforgeGpuXidError",
            "max by (Hostname, gpu, UUID, modelName, namespace, pod) "
            "(max_over_time(DCGM_FI_DEV_XID_ERRORS[5m])) > 0",
            "critical",
            f"{gpu} reported XID {{{{ $value }}}}{where}",
            "The driver reported an XID error (the value is the last XID). 48, 63, 64, 74, "
            "79, 94, 95 and 119 mean the GPU or its NVLink needs a reset or replacement.",
        ),
        _alert(
            cfg,
            "TrainforgeGpuRowRemapFailure",
            "max by (Hostname, gpu, UUID, modelName) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0",
            "critical",
            f"{gpu}: row remapping failed",
            "The GPU ran out of spare memory rows; it must be replaced.",
        ),
        _alert(
            cfg,
            "TrainforgeGpuUncorrectableRemappedRows",
            "max by (Hostname, gpu, UUID, modelName) "
            "(increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[1h])) > 0",
            "warning",
            f"{gpu}: new uncorrectable memory errors (rows remapped)",
            "Uncorrectable ECC errors remapped rows; the GPU needs a reset before the remap "
            "takes effect and jobs on it may have failed.",
        ),
        _alert(
            cfg,
            "TrainforgeNodeHardwareNotReady",
            "max by (node, condition) (kube_node_status_condition"
            f'{{condition=~"{conditions}", status=~"false|unknown"}}) == 1',
            "critical",
            "Node {{ $labels.node }}: {{ $labels.condition }} is not true",
            "The EKS node monitoring agent reports a hardware fault; Karpenter's node repair "
            "(when on) replaces the node after its wait.",
            for_="5m",
        ),
    ]


def queue_rules(cfg: AlertsConfig) -> list[dict[str, Any]]:
    wait = cfg.queue_pending_for
    cq = "Queue {{ $labels.cluster_queue }}"
    return [
        _alert(
            cfg,
            "TrainforgeQueueStarved",
            # workloads waiting all along `wait`, and none admitted within it (a queue that
            # never admitted has no counter yet: `unless` keeps it)
            "sum by (cluster_queue) (kueue_pending_workloads) > 0"
            " unless on (cluster_queue) "
            f"sum by (cluster_queue) (increase(kueue_admitted_workloads_total[{wait}])) > 0",
            "warning",
            f"{cq} has had workloads waiting and admitted none for {wait}",
            "Jobs wait and nothing is admitted: quota used by running jobs, borrowed quota "
            "not given back, or a flavor whose nodes cannot be created.",
            for_=wait,
        ),
        _alert(
            cfg,
            "TrainforgeQueueInadmissible",
            'sum by (cluster_queue) (kueue_pending_workloads{status="inadmissible"}) > 0',
            "warning",
            f"{cq}: {{{{ $value }}}} workloads can never be admitted as they are",
            "A workload asks for more than its queue could ever give (nominal quota plus "
            "borrowing), or for a flavor the queue does not have.",
            for_=wait,
        ),
        _alert(
            cfg,
            "TrainforgeNodeLaunchErrors",
            "sum by (method, error) (increase(karpenter_cloudprovider_errors_total"
            '{method="Create"}[15m])) > 0',
            "warning",
            "Karpenter cannot launch nodes: {{ $labels.error }}",
            "Node creation fails (insufficient capacity, a quota, the launch template); "
            "admitted jobs wait for nodes.",
            for_="15m",
        ),
    ]


# --- Real spend (OpenCost) ----------------------------------------------------------------------
# OpenCost's metrics (opencost/opencost pkg/costmodel/metrics.go, read 2026-11-27; the facts
# file tests/platform/facts/opencost-metrics.txt lists each with its labels): node prices per
# CPU, per GiB of memory and per GPU, and what each container is allocated (max of request and
# use) on which node. A namespace's cost per hour is the sum over its containers of allocation
# x the price of that resource on the container's node; storage, network and the nodes' idle
# capacity are not in it (docs/cost.md, "Real spend per team").
MONTH = "trainforge:month"
# The month-to-date sum samples the cost per hour once an hour (at the hour): each hour is
# counted at the cost it started with, so a job that starts or stops within an hour moves the
# sum by at most that hour's cost.
SPEND_WINDOW = "31d"  # the longest month; older samples are filtered out by month


def namespace_cost_expr() -> str:
    """USD per hour per namespace (dashboards.allocation_cost_expr)."""
    return allocation_cost_expr("namespace")


def spend_rules(cfg: AlertsConfig, budgets: Mapping[str, float]) -> list[dict[str, Any]]:
    """Cost per namespace per hour, month-to-date spend, each team's budget as a series, and
    the alert when a team's month-to-date spend passes `budget_fraction` of its budget.

    Month to date: PromQL has no "since the 1st" range, so the spend sums the last 31 days of
    the cost per hour (one sample an hour, each worth one hour) keeping only the samples whose
    month is the evaluation's month (`trainforge:month @ end()`: the value recorded at the
    evaluation time, one rule earlier in this group; the `@` modifier is on by default since
    Prometheus 2.33, and the rehearsal's promtool evaluates it)."""
    this_month = f"year() * 100 + month() == on () {MONTH} @ end()"
    rules: list[dict[str, Any]] = [
        {"record": COST_PER_HOUR, "expr": namespace_cost_expr()},
        {"record": MONTH, "expr": "year() * 100 + month()"},
        {
            "record": SPEND_MONTH_TO_DATE,
            "expr": f"sum_over_time(({COST_PER_HOUR} and on () ({this_month}))[{SPEND_WINDOW}:1h])",
        },
    ]
    for team, usd in sorted(budgets.items()):
        rules.append(
            {
                "record": BUDGET,
                "expr": f"vector({float(usd)!r})",
                "labels": {"namespace": team, "trainforge_io_team": team},
            }
        )
    if budgets:
        frac = cfg.budget_fraction
        rules.append(
            _alert(
                cfg,
                "TrainforgeTeamSpendOverBudget",
                f"{SPEND_MONTH_TO_DATE} > on (namespace) group_left (trainforge_io_team) "
                f"({frac!r} * {BUDGET})",
                "warning",
                'Team {{ $labels.trainforge_io_team }} has spent ${{ $value | printf "%.0f" }} '
                f"this month: over {frac:.0%} of its monthly budget",
                "The team's month-to-date spend (OpenCost: its pods' CPU, memory and GPU "
                "allocation priced at its nodes' prices) passed the fraction "
                "monitoring.alerts.budgetFraction of trainforge-policy:costCaps.teams.<team>."
                "teamPerMonth. The Grafana board 'trainforge / spend per team' shows which jobs.",
            )
        )
    return rules


def rule_groups(
    cfg: AlertsConfig, budgets: Mapping[str, float] | None = None, spend: bool = False
) -> list[dict[str, Any]]:
    """The rule groups of trainforge's PrometheusRule (also a promtool rules file). `spend`:
    OpenCost runs, so the spend rules (and the alert for each team in `budgets`) are added."""
    groups = [
        {"name": "trainforge-jobs", "rules": job_rules(cfg)},
        {"name": "trainforge-gpus", "rules": gpu_rules(cfg)},
        {"name": "trainforge-queues", "rules": queue_rules(cfg)},
    ]
    if spend:
        groups.append({"name": "trainforge-spend", "rules": spend_rules(cfg, budgets or {})})
    return groups


def prometheus_rule(
    cfg: AlertsConfig,
    namespace: str,
    budgets: Mapping[str, float] | None = None,
    spend: bool = False,
) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": RULE_NAME,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "trainforge"},
        },
        "spec": {"groups": rule_groups(cfg, budgets, spend)},
    }


# --- Alertmanager ------------------------------------------------------------------------------

NULL_RECEIVER = "null"


def _receiver(r: ReceiverConfig, secret: Any) -> dict[str, Any]:
    if r.type == "slack":
        slack: dict[str, Any] = {
            "api_url": secret,
            "send_resolved": True,
            "title": "[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }}",
            "text": "{{ range .Alerts }}{{ .Annotations.summary }}\n"
            "runbook: {{ .Annotations.runbook_url }}\n{{ end }}",
        }
        if r.channel:
            slack["channel"] = r.channel
        return {"name": r.name, "slack_configs": [slack]}
    if r.type == "pagerduty":
        return {
            "name": r.name,
            "pagerduty_configs": [
                {
                    "routing_key": secret,
                    "send_resolved": True,
                    "description": "{{ .CommonAnnotations.summary }}",
                }
            ],
        }
    return {"name": r.name, "webhook_configs": [{"url": secret, "send_resolved": True}]}


def _route(r: ReceiverConfig, group_wait: str) -> dict[str, Any]:
    matchers = [f'severity=~"{"|".join(r.severities)}"']
    if r.teams:
        matchers.append(f'trainforge_io_team=~"{"|".join(r.teams)}"')
    return {
        "receiver": r.name,
        "matchers": matchers,
        "group_wait": group_wait,
        "continue": True,
    }


def alertmanager_config(
    receivers: tuple[ReceiverConfig, ...],
    secrets: dict[str, Any] | None = None,
    group_wait: str = "30s",
    group_interval: str = "5m",
) -> dict[str, Any]:
    """Alertmanager's configuration: every alert goes to each receiver whose severities (and
    teams, when given) match; the chart's always-firing Watchdog and InfoInhibitor go
    nowhere. `secrets` maps a receiver name to its secret (a Pulumi secret Output in a
    deployment); by default the receiver's configured value is used."""
    secrets = secrets or {}
    routes: list[dict[str, Any]] = [
        {"receiver": NULL_RECEIVER, "matchers": ['alertname=~"Watchdog|InfoInhibitor"']}
    ]
    routes += [_route(r, group_wait) for r in receivers]
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": NULL_RECEIVER,
            "group_by": ["alertname", "namespace", "trainforge_io_job", "cluster_queue", "node"],
            "group_wait": group_wait,
            "group_interval": group_interval,
            "repeat_interval": "4h",
            "routes": routes,
        },
        "receivers": [
            {"name": NULL_RECEIVER},
            *[_receiver(r, secrets.get(r.name, r.secret)) for r in receivers],
        ],
        # a stalled job's checkpoint ages and its goodput falls: page once, not three times
        "inhibit_rules": [
            {
                "source_matchers": ['alertname="TrainforgeJobStalled"'],
                "target_matchers": ['alertname=~"TrainforgeCheckpointTooOld|TrainforgeGoodputLow"'],
                "equal": ["namespace", "trainforge_io_job"],
            }
        ],
    }
