"""A job's spend so far, for `trainforge status`: OpenCost's figure when its Prometheus answers,
else an estimate from the job's pods' run time and their nodes' on-demand price.

Why both, and the basis printed: OpenCost's figure is what the cluster measured (each of the
job's containers' CPU, memory and GPU allocation, priced at its node's OpenCost prices,
summed minute by minute since the job was created). Where it cannot be read (OpenCost off,
an external Prometheus, or a user whose access does not reach the monitoring namespace) the
estimate is run time x price: each pod's time since it started, times its node's on-demand
list price (trainforge/plan/price_facts.py, the plan's table) x the pod's share of the node
(its GPUs of the node's, else the larger of its CPU and memory shares), the pod's requests
counted as OpenCost allocates them (its app containers', a limit standing for a missing
request: trainforge.core.pods.container_requests). The line always says
which of the two it is, and why OpenCost's was not used.

Prometheus is reached the way live/ reaches everything: GET through the API server (its
service proxy), with the user's kubeconfig.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trainforge.core import labels
from trainforge.core.contract import GPU_RESOURCE
from trainforge.core.quantity import parse_quantity
from trainforge.live.gather import cannot_read
from trainforge.live.kube import Api, KubeError
from trainforge.platform.dashboards import POD_NAME_PATTERN, allocation_cost_expr

# The managed stack's Prometheus (trainforge.platform.opencost.PROMETHEUS_SERVICE / _PORT,
# in monitoring.namespace; a test checks they agree).
PROMETHEUS_NAMESPACE = "monitoring"
PROMETHEUS_SERVICE = "kube-prometheus-stack-prometheus"
PROMETHEUS_PORT = 9090
GPU = GPU_RESOURCE
INSTANCE_TYPE = labels.INSTANCE_TYPE
REGION = labels.REGION
CAPACITY_TYPE = (labels.KARPENTER_CAPACITY_TYPE, "eks.amazonaws.com/capacityType")


@dataclass
class Spend:
    usd: float | None
    basis: str  # "OpenCost" | "estimate" | "nothing ran"
    detail: str

    def line(self) -> str:
        from trainforge.plan.price_facts import usd  # noqa: PLC0415 - the plan's dollar format

        amount = usd(self.usd)
        if self.basis == "estimate" and self.usd is not None:
            amount = f"~{amount}"
        return f"{'spend:':<12}{amount} so far ({self.detail})"


def _ts(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def query_path(namespace: str = PROMETHEUS_NAMESPACE) -> str:
    return (
        f"/api/v1/namespaces/{namespace}/services/{PROMETHEUS_SERVICE}:{PROMETHEUS_PORT}"
        "/proxy/api/v1/query"
    )


def opencost_query(namespace: str, job: str, seconds: int) -> str:
    """USD spent by the job's pods over the last `seconds`: their cost per hour sampled each
    minute, summed, / 60."""
    pods = f'namespace="{namespace}", pod=~"{job}-{POD_NAME_PATTERN}"'
    return f"sum(sum_over_time(({allocation_cost_expr('pod', pods)})[{seconds}s:1m])) / 60"


def from_opencost(api: Api, g: Any, now: datetime) -> tuple[float | None, str]:
    """(USD, "") from OpenCost's metrics, or (None, why not)."""
    created = _ts(g.job.get("metadata", {}).get("creationTimestamp"))
    seconds = max(60, int((now - created).total_seconds())) if created else 86400
    where = f"{PROMETHEUS_NAMESPACE}/{PROMETHEUS_SERVICE}"
    try:
        text = api.text(query_path(), query=opencost_query(g.namespace, g.name, seconds))
    except KubeError as e:
        return None, cannot_read(f"OpenCost's Prometheus {where}", e)
    if text is None:
        return None, f"no Prometheus service {where} (OpenCost off or an external Prometheus)"
    try:
        data = json.loads(text)
        result = data["data"]["result"]
    except (ValueError, KeyError, TypeError):
        return None, f"OpenCost's Prometheus {where} answered no query result"
    if not result:
        return None, "OpenCost has no cost series for the job's pods"
    return float(result[0]["value"][1]), ""


def _share(pod: dict, node: dict) -> float:
    """The pod's share of its node: its GPUs of the node's, else its larger CPU/memory share,
    of the requests OpenCost allocates it by (its app containers': `container_requests`, not
    the scheduler's `pod_requests`, which adds init containers, sidecars and overhead)."""
    from trainforge.core.pods import container_requests  # noqa: PLC0415

    req = container_requests(pod.get("spec") or {})
    alloc = node.get("status", {}).get("allocatable", {})
    if req.get(GPU) and alloc.get(GPU):
        return min(1.0, float(req[GPU] / parse_quantity(alloc[GPU])))
    shares = [
        float(req[k] / parse_quantity(alloc[k]))
        for k in ("cpu", "memory")
        if req.get(k) and alloc.get(k)
    ]
    return min(1.0, max(shares)) if shares else 1.0


def _ended(pod: dict, now: datetime) -> datetime:
    phase = pod.get("status", {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        ends = [
            _ts(cs.get("state", {}).get("terminated", {}).get("finishedAt"))
            for cs in pod.get("status", {}).get("containerStatuses", []) or []
        ]
        ends = [e for e in ends if e]
        if ends:
            return max(ends)
    return now


def estimate(api: Api, g: Any, now: datetime) -> tuple[float | None, str]:
    """(USD, how) from each pod's run time x its node's on-demand price x its share."""
    from trainforge.plan import price_facts  # noqa: PLC0415 - the plan's price table

    if not g.pods:
        return None, "estimate impossible: no pod of the job is left to measure"
    total, hours, types, spot, missing = 0.0, 0.0, set(), False, []
    for pod in g.pods:
        start = _ts(pod.get("status", {}).get("startTime"))
        node_name = pod.get("spec", {}).get("nodeName")
        if start is None or not node_name:
            continue
        try:
            node = api.get(f"/api/v1/nodes/{node_name}")
        except KubeError as e:
            missing.append(cannot_read(f"node {node_name}", e))
            continue
        if node is None:
            missing.append(f"node {node_name} is gone")
            continue
        labels = node.get("metadata", {}).get("labels", {})
        itype, region = labels.get(INSTANCE_TYPE), labels.get(REGION)
        price = price_facts.ec2_on_demand(region, itype) if itype and region else None
        if price is None:
            missing.append(f"no price for node {node_name} ({itype or '?'} in {region or '?'})")
            continue
        h = max(0.0, (_ended(pod, now) - start).total_seconds() / 3600)
        total += price.usd * _share(pod, node) * h
        hours += h
        types.add(f"{itype} at ${price.usd:,.3f}/h in {region}")
        spot = spot or any(labels.get(k, "").lower() == "spot" for k in CAPACITY_TYPE)
    if missing:
        return None, "estimate impossible: " + "; ".join(missing)
    how = (
        f"estimate: {hours:.1f} pod-hours on {', '.join(sorted(types))} on-demand "
        f"(price facts {price_facts.FACTS_DATE}) x each pod's share of its node"
    )
    if spot:
        how += "; spot nodes cost less: the on-demand price is the ceiling"
    return total, how


def never_ran(g: Any) -> bool:
    """No pod, and Kueue never let it start: a Workload not admitted that was never evicted."""
    wl = g.workload
    if g.pods or wl is None:
        return False
    conds = {c.get("type"): c.get("status") for c in wl.get("status", {}).get("conditions", [])}
    return conds.get("Admitted") != "True" and "Evicted" not in conds


def job_spend(api: Api, g: Any, now: datetime) -> Spend:
    if never_ran(g):
        return Spend(0.0, "nothing ran", "not admitted yet: no pod has run")
    usd, why_not = from_opencost(api, g, now)
    if usd is not None:
        return Spend(usd, "OpenCost", "OpenCost: its pods' CPU, memory and GPU allocation "
                     "priced at their nodes' prices, since it was created")  # fmt: skip
    est, how = estimate(api, g, now)
    return Spend(est, "estimate", f"{how}; not OpenCost: {why_not}")
