"""Grafana dashboards as code: a training-job dashboard and a GPU fleet dashboard.

Why as code: a dashboard clicked together in the UI is lost with the Grafana pod and drifts
from the metrics the runtime exports. These are plain Grafana JSON models, shipped as
ConfigMaps that kube-prometheus-stack's Grafana sidecar loads (label `grafana_dashboard: "1"`,
searched in every namespace). Every query names only metrics that exist: the runtime's
`trainforge_*` gauges (`trainforge/training/metrics.py`) and the counters of the pinned DCGM
exporter's default CSV; a test checks each name against a real `/metrics` scrape and the
exporter's vendored list.

No module here imports Pulumi: `monitoring.py` turns `DASHBOARDS` into ConfigMaps.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# kube-prometheus-stack values `grafana.sidecar.dashboards.label` / `.labelValue` (the same in
# chart 66.2.1 and 88.5.3; checked 2026-11-23 in prometheus-community/helm-charts), with
# `searchNamespace: ALL`: a ConfigMap with this label in any namespace becomes a dashboard.
SIDECAR_LABEL = "grafana_dashboard"
SIDECAR_LABEL_VALUE = "1"

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# The pods of a job, on every backend (the DCGM exporter labels each GPU's series with the pod
# using it, by name only): PyTorchJob `<job>-master-0`, `<job>-worker-<i>`; TrainJob (JobSet
# replicated job `node`, one Job `<job>-node-0`) `<job>-node-0-<index>-<suffix>`; indexed Job
# `<job>-<index>-<suffix>` (Kubernetes names an indexed Job's pods
# `<job name>-<completion index>-<random suffix>`).
POD_NAME_PATTERN = "(master-[0-9]+|worker-[0-9]+|node-0-[0-9]+-[a-z0-9]+|[0-9]+-[a-z0-9]+)"
JOB_PODS = f'namespace="$namespace", pod=~"$run-{POD_NAME_PATTERN}"'
RUN = 'namespace="$namespace", run="$run"'


class _Layout:
    """Places panels left to right on Grafana's 24-column grid and hands out panel ids."""

    def __init__(self) -> None:
        self.x = self.y = self.row_h = 0
        self.next_id = 1

    def place(self, w: int, h: int) -> dict[str, int]:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        pos = {"x": self.x, "y": self.y, "w": w, "h": h}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def _panel(
    lay: _Layout,
    kind: str,
    title: str,
    targets: list[tuple[str, str]],
    *,
    w: int = 12,
    h: int = 8,
    unit: str = "short",
    description: str = "",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    panel: dict[str, Any] = {
        "id": lay.new_id(),
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": lay.place(w, h),
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": [
            {
                "refId": chr(ord("A") + i),
                "datasource": DATASOURCE,
                "expr": expr,
                "legendFormat": legend,
            }
            for i, (expr, legend) in enumerate(targets)
        ],  # fmt: skip
    }
    if kind == "timeseries":
        panel["options"] = {"legend": {"displayMode": "list", "placement": "bottom"}}
    panel.update(extra or {})
    return panel


def _text(lay: _Layout, title: str, content: str, w: int = 24, h: int = 4) -> dict[str, Any]:
    return {
        "id": lay.new_id(),
        "type": "text",
        "title": title,
        "gridPos": lay.place(w, h),
        "options": {"mode": "markdown", "content": content},
    }


def _row(lay: _Layout, title: str) -> dict[str, Any]:
    lay.x, lay.y, lay.row_h = 0, lay.y + lay.row_h, 0
    panel = {
        "id": lay.new_id(),
        "type": "row",
        "title": title,
        "collapsed": False,
        "gridPos": lay.place(24, 1),
        "panels": [],
    }
    lay.x = 24  # the next panel starts a new line
    return panel


def _datasource_var() -> dict[str, Any]:
    return {
        "name": "datasource",
        "label": "Prometheus",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
    }


def _query_var(name: str, label: str, query: str, multi: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-var"},
        "refresh": 2,  # on time-range change: jobs come and go
        "sort": 1,
        "multi": multi,
        "includeAll": multi,
        "current": {},
        "hide": 0,
    }


def _dashboard(
    uid: str, title: str, panels: list[dict[str, Any]], variables: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "tags": ["trainforge"],
        "editable": False,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "utc",
        "graphTooltip": 1,
        "templating": {"list": variables},
        "annotations": {"list": []},
        "panels": panels,
    }


def training_dashboard() -> dict[str, Any]:
    """One job (namespace + run = job name): progress, loss, throughput, efficiency,
    checkpoints and restarts from the runtime; per-rank GPU use from DCGM."""
    lay = _Layout()
    p: list[dict[str, Any]] = [_row(lay, "Progress")]
    p.append(_panel(lay, "stat", "Progress", [(f"trainforge_progress{{{RUN}}}", "")],
                    w=4, h=4, unit="percentunit"))  # fmt: skip
    p.append(_panel(lay, "stat", "ETA", [(f"trainforge_eta_seconds{{{RUN}}}", "")],
                    w=4, h=4, unit="s",
                    description="Seconds to the last step at this run's average step time"))  # fmt: skip
    p.append(
        _panel(
            lay, "stat", "Step",
            [(f"trainforge_step{{{RUN}}}", "step"), (f"trainforge_total_steps{{{RUN}}}", "of")],
            w=4, h=4,
        )
    )  # fmt: skip
    p.append(_panel(lay, "stat", "Goodput", [(f"trainforge_goodput{{{RUN}}}", "")],
                    w=4, h=4, unit="percentunit",
                    description="Share of wall-clock time spent on steps that were kept"))  # fmt: skip
    p.append(_panel(lay, "stat", "Restarts", [(f"trainforge_restarts{{{RUN}}}", "")],
                    w=4, h=4, description="Times the job resumed after a failure"))  # fmt: skip
    p.append(_panel(lay, "stat", "Ranks", [(f"trainforge_world_size{{{RUN}}}", "")],
                    w=4, h=4))  # fmt: skip
    p.append(_row(lay, "Training"))
    p.append(_panel(lay, "timeseries", "Loss", [(f"trainforge_loss{{{RUN}}}", "loss")]))
    p.append(
        _panel(lay, "timeseries", "Step time", [(f"trainforge_step_seconds{{{RUN}}}", "step")],
               unit="s")
    )  # fmt: skip
    p.append(
        _panel(lay, "timeseries", "Tokens/s", [(f"trainforge_tokens_per_second{{{RUN}}}", "tokens/s")],
               w=8)
    )  # fmt: skip
    p.append(
        _panel(lay, "timeseries", "Samples/s",
               [(f"trainforge_samples_per_second{{{RUN}}}", "samples/s")], w=8)
    )  # fmt: skip
    p.append(
        _panel(lay, "timeseries", "MFU", [(f"trainforge_mfu{{{RUN}}}", "MFU")], w=8,
               unit="percentunit", description="Model FLOPs utilisation (GPU runs only)")
    )  # fmt: skip
    p.append(_row(lay, "Checkpoints and restarts"))
    p.append(
        _panel(
            lay, "timeseries", "Checkpoint stall",
            [
                (f"trainforge_checkpoint_blocked_seconds{{{RUN}}}", "training blocked"),
                (f"trainforge_checkpoint_seconds{{{RUN}}}", "until complete"),
            ],
            unit="s", description="Seconds training waited for the last checkpoint, and until "
            "it was complete (async saves finish in the background)",
        )
    )  # fmt: skip
    p.append(
        _panel(
            lay, "timeseries", "Last checkpoint step and restarts",
            [
                (f"trainforge_checkpoint_step{{{RUN}}}", "checkpoint step"),
                (f"trainforge_restarts{{{RUN}}}", "restarts"),
            ],
        )
    )  # fmt: skip
    p.append(_row(lay, "Per rank (GPU, from DCGM)"))
    p.append(
        _panel(lay, "timeseries", "GPU utilisation per rank",
               [(f"DCGM_FI_DEV_GPU_UTIL{{{JOB_PODS}}}", "{{pod}} gpu{{gpu}}")], unit="percent")
    )  # fmt: skip
    p.append(
        _panel(lay, "timeseries", "Tensor core activity per rank",
               [(f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{JOB_PODS}}}", "{{pod}} gpu{{gpu}}")],
               unit="percentunit")
    )  # fmt: skip
    p.append(
        _panel(lay, "timeseries", "GPU memory used per rank",
               [(f"DCGM_FI_DEV_FB_USED{{{JOB_PODS}}}", "{{pod}} gpu{{gpu}}")], unit="decmbytes")
    )  # fmt: skip
    p.append(
        _panel(lay, "timeseries", "GPU power per rank",
               [(f"DCGM_FI_DEV_POWER_USAGE{{{JOB_PODS}}}", "{{pod}} gpu{{gpu}}")], unit="watt")
    )  # fmt: skip
    variables = [
        _datasource_var(),
        _query_var("namespace", "Team namespace", "label_values(trainforge_step, namespace)"),
        _query_var("run", "Job", 'label_values(trainforge_step{namespace="$namespace"}, run)'),
    ]
    return _dashboard("trainforge-training", "trainforge / Training job", p, variables)


NODE = 'Hostname=~"$node"'


def gpu_fleet_dashboard() -> dict[str, Any]:
    """Every GPU the DCGM exporter sees: utilisation, memory, power, temperature, XID errors."""
    lay = _Layout()
    p: list[dict[str, Any]] = [_row(lay, "Fleet")]
    p.append(_panel(lay, "stat", "GPUs reporting", [(f"count(DCGM_FI_DEV_GPU_UTIL{{{NODE}}})", "")],
                    w=6, h=4))  # fmt: skip
    p.append(_panel(lay, "stat", "Average utilisation",
                    [(f"avg(DCGM_FI_DEV_GPU_UTIL{{{NODE}}})", "")], w=6, h=4, unit="percent"))  # fmt: skip
    p.append(_panel(lay, "stat", "GPUs with an XID error",
                    [(f"count(DCGM_FI_DEV_XID_ERRORS{{{NODE}}} != 0) or vector(0)", "")],
                    w=6, h=4, description="GPUs whose last XID error code is not 0"))  # fmt: skip
    p.append(_panel(lay, "stat", "Row-remap failures",
                    [(f"sum(DCGM_FI_DEV_ROW_REMAP_FAILURE{{{NODE}}}) or vector(0)", "")],
                    w=6, h=4, description="GPUs whose memory row remapping failed: drain them"))  # fmt: skip
    p.append(_row(lay, "Per GPU"))
    per_gpu = "{{Hostname}} gpu{{gpu}} {{modelName}}"
    p.append(_panel(lay, "timeseries", "Utilisation",
                    [(f"DCGM_FI_DEV_GPU_UTIL{{{NODE}}}", per_gpu)], unit="percent"))  # fmt: skip
    p.append(
        _panel(
            lay, "timeseries", "Memory used",
            [(f"DCGM_FI_DEV_FB_USED{{{NODE}}} / (DCGM_FI_DEV_FB_USED{{{NODE}}} + "
              f"DCGM_FI_DEV_FB_FREE{{{NODE}}})", per_gpu)],
            unit="percentunit",
        )
    )  # fmt: skip
    p.append(_panel(lay, "timeseries", "Power", [(f"DCGM_FI_DEV_POWER_USAGE{{{NODE}}}", per_gpu)],
                    unit="watt"))  # fmt: skip
    p.append(
        _panel(
            lay, "timeseries", "Temperature",
            [(f"DCGM_FI_DEV_GPU_TEMP{{{NODE}}}", f"{per_gpu} core"),
             (f"DCGM_FI_DEV_MEMORY_TEMP{{{NODE}}}", f"{per_gpu} memory")],
            unit="celsius",
        )
    )  # fmt: skip
    p.append(_panel(lay, "timeseries", "Tensor core activity",
                    [(f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{NODE}}}", per_gpu)], unit="percentunit"))  # fmt: skip
    p.append(
        _panel(
            lay, "table", "Last XID error per GPU",
            [(f"DCGM_FI_DEV_XID_ERRORS{{{NODE}}} != 0", "")],
            description="XID codes: see NVIDIA's XID catalogue; 0 = none since the driver loaded",
            extra={"transformations": [{"id": "reduce", "options": {"reducers": ["lastNotNull"]}}]},
        )
    )  # fmt: skip
    p.append(
        _text(
            lay,
            "EFA traffic",
            "No exporter installed by trainforge exports EFA traffic: the stock node-exporter's "
            "InfiniBand collector reads port counters that EFA devices do not fill (EFA "
            "publishes `hw_counters`, exported only by an EFA-specific collector). Read them on "
            "a node with `rdma statistic show` or `/sys/class/infiniband/*/ports/1/hw_counters`.",
        )
    )
    variables = [
        _datasource_var(),
        _query_var("node", "Node", "label_values(DCGM_FI_DEV_GPU_UTIL, Hostname)", multi=True),
    ]
    return _dashboard("trainforge-gpu-fleet", "trainforge / GPU fleet", p, variables)


# ConfigMap name -> builder; the JSON file in each ConfigMap is `<name>.json`.
# The Grafana sidecar files a dashboard under the folder its ConfigMap's annotation names
# (kube-prometheus-stack values grafana.sidecar.dashboards.folderAnnotation and
# .provider.foldersFromFilesStructure, grafana chart 12.11.1).
FOLDER_ANNOTATION = "grafana_folder"


def team_dashboard(team: str, namespace: str) -> dict[str, Any]:
    """The training dashboard fixed to one team's namespace: the team's own view of its jobs
    (a view, filed in the team's folder; Grafana access control is not per team)."""
    board = training_dashboard()
    board["uid"] = f"trainforge-team-{team}"[:40]
    board["title"] = f"trainforge / {team} / Training jobs"
    board["tags"] = ["trainforge", f"team:{team}"]
    fixed = []
    for var in board["templating"]["list"]:
        if var["name"] == "namespace":
            var = {
                "name": "namespace",
                "type": "constant",
                "query": namespace,
                "hide": 2,
                "label": "Team namespace",
            }
        fixed.append(var)
    board["templating"]["list"] = fixed
    return board


# --- spend per team (OpenCost; shipped only when OpenCost runs) ------------------------------

SPEND_DASHBOARD = "trainforge-spend"
# trainforge's recording rules over OpenCost's metrics (alerts.spend_rules)
COST_PER_HOUR = "trainforge:namespace_cost:usd_per_hour"
SPEND_MONTH_TO_DATE = "trainforge:namespace_spend_month_to_date:usd"
BUDGET = "trainforge:team_budget:usd_per_month"
TEAMS = 'namespace=~"$namespace"'
GIB = 1024**3


def allocation_cost_expr(by: str, selector: str = "") -> str:
    """USD per hour, summed `by` these labels: each container's CPU, memory and GPU allocation
    (OpenCost's `container_*_allocation`, on its node) priced at its node's OpenCost price for
    that resource (`node_*_hourly_cost`: per CPU, per GiB of memory, per GPU). The `resource`
    label keeps the three terms apart until they are summed."""
    sel = f"{{{selector}}}" if selector else ""

    def priced(alloc: str, price: str, resource: str) -> str:
        return (
            f"label_replace({alloc} * on (node) group_left () max by (node) ({price}), "
            f'"resource", "{resource}", "", "")'
        )

    parts = [
        priced(f"container_cpu_allocation{sel}", "node_cpu_hourly_cost", "cpu"),
        priced(f"container_memory_allocation_bytes{sel} / {GIB}", "node_ram_hourly_cost", "memory"),
        priced(f"container_gpu_allocation{sel}", "node_gpu_hourly_cost", "gpu"),
    ]
    return f"sum by ({by}) (" + " or ".join(parts) + ")"


def spend_dashboard() -> dict[str, Any]:
    """What each team (namespace) really costs, from OpenCost: cost per hour, month-to-date
    spend against the team's budget, and beside them the jobs running and each pod's cost."""
    lay = _Layout()
    usd = "currencyUSD"
    p: list[dict[str, Any]] = [_row(lay, "Spend per team (OpenCost)")]
    p.append(
        _panel(lay, "stat", "Month-to-date spend", [(f"{SPEND_MONTH_TO_DATE}{{{TEAMS}}}",
               "{{namespace}}")], w=8, h=5, unit=usd,
               description="This calendar month (UTC): the team's pods' CPU, memory and GPU "
               "allocation priced at their nodes' OpenCost prices; no storage, network or "
               "idle capacity")
    )  # fmt: skip
    p.append(
        _panel(lay, "bargauge", "Share of the monthly budget",
               [(f"{SPEND_MONTH_TO_DATE}{{{TEAMS}}} / on (namespace) {BUDGET}",
                 "{{namespace}}")], w=8, h=5, unit="percentunit",
               description="trainforge-policy:costCaps.teams.<team>.teamPerMonth; a team "
               "without a budget has no bar")
    )  # fmt: skip
    p.append(
        _panel(lay, "stat", "Cost per hour now", [(f"{COST_PER_HOUR}{{{TEAMS}}}",
               "{{namespace}}")], w=8, h=5, unit=usd)
    )  # fmt: skip
    p.append(
        _panel(lay, "timeseries", "Cost per hour by team",
               [(f"{COST_PER_HOUR}{{{TEAMS}}}", "{{namespace}}")], unit=usd)
    )  # fmt: skip
    p.append(
        _panel(lay, "timeseries", "Cluster: nodes vs what teams hold",
               [("sum(node_total_hourly_cost)", "all nodes"),
                (f"sum({COST_PER_HOUR})", "allocated to namespaces")], unit=usd,
               description="The gap is idle capacity and what runs outside the namespaces' "
               "allocations (system pods' unrequested share, empty nodes)")
    )  # fmt: skip
    p.append(_row(lay, "Jobs"))
    p.append(
        _panel(lay, "timeseries", "Cost per hour by pod (a job's pods are named after it)",
               [(allocation_cost_expr("namespace, pod", TEAMS), "{{namespace}}/{{pod}}")], unit=usd)
    )  # fmt: skip
    p.append(
        _panel(lay, "timeseries", "Jobs running (ranks)",
               [(f"trainforge_world_size{{{TEAMS}}}", "{{namespace}}/{{run}}")],
               description="trainforge runs reporting metrics, by job (run) and team")
    )  # fmt: skip
    variables = [
        _datasource_var(),
        _query_var("namespace", "Team namespace", f"label_values({COST_PER_HOUR}, namespace)",
                   multi=True),
    ]  # fmt: skip
    return _dashboard(SPEND_DASHBOARD, "trainforge / spend per team", p, variables)


DASHBOARDS: dict[str, Callable[[], dict[str, Any]]] = {
    "trainforge-training": training_dashboard,
    "trainforge-gpu-fleet": gpu_fleet_dashboard,
}


# --- reading metric names back (for_exported; the metric-existence test) ------------------


_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "and", "or", "unless", "inf", "nan",
}  # fmt: skip
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression (or a `label_values(metric, label)` variable query)
    reads: identifiers that are not functions, keywords, label names or label values."""
    lv = re.fullmatch(r"\s*label_values\((.*),\s*[A-Za-z_]\w*\s*\)\s*", expr)
    if lv:
        expr = lv.group(1)
    expr = _STRING.sub('""', expr)
    expr = _MATCHERS.sub("", expr)
    expr = _RANGE.sub("", expr)
    expr = _GROUPING.sub("", expr)
    names = set()
    for m in _IDENT.finditer(expr):
        rest = expr[m.end() :].lstrip()
        if rest.startswith("(") or m.group(0).lower() in _KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def for_exported(dashboard: dict[str, Any], exported: set[str], how: str) -> dict[str, Any]:
    """The dashboard with every panel that reads a DCGM metric the exporter does not collect
    (`exported`: its counters) replaced, in place, by a text panel saying `how` to get it:
    profiling (DCP) fields are off unless `monitoring.dcgmProfilingMetrics` is on, and an
    empty panel would read as "the GPUs are idle"."""
    out = dict(dashboard)
    new_panels = []
    for panel in dashboard.get("panels", []):
        wanted = set().union(*(metric_names(t["expr"]) for t in panel.get("targets", [])), set())
        missing = sorted(m for m in wanted if m.startswith("DCGM_") and m not in exported)
        if missing:
            panel = {
                "id": panel["id"],
                "type": "text",
                "title": panel["title"],
                "gridPos": panel["gridPos"],
                "options": {
                    "mode": "markdown",
                    "content": f"Not collected: {', '.join(missing)}. {how}",
                },
            }
        new_panels.append(panel)
    out["panels"] = new_panels
    return out
