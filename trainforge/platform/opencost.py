"""OpenCost on the platform's Prometheus: what each namespace (team) really costs.

Why: the plan's cost lines are estimates (list prices x declared pods); a team lead needs
what the team actually spent this month, and an alert before the budget is gone. OpenCost
(the CNCF project) prices every node from AWS's public Price List, splits each node's price
into CPU, memory and GPU prices, and exports per-container allocations; trainforge's rules
(trainforge.platform.alerts, `spend_rules`) turn them into a cost per namespace per hour, a
month-to-date spend and a budget alert, and a Grafana board shows them beside the jobs.

What it is given, and why:

* prices: OpenCost's AWS provider (it reads the nodes' `aws:///` provider IDs) downloads the
  public on-demand price list (`pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2`),
  which needs no AWS credential. trainforge grants it none: no IAM role, no keys, and the
  nodes' IMDSv2 hop limit of 1 keeps the node role out of its reach. Without a spot data feed
  OpenCost prices a spot node at its on-demand price (opencost pkg/cloud/aws/provider.go
  `createNode`: "marked preemptible but we have no data in spot feed" -> the public price),
  so spend on spot pools is an upper bound; docs/cost.md says so.
* Prometheus: the managed kube-prometheus-stack's own service, and a ServiceMonitor so that
  Prometheus scrapes OpenCost's metrics (it selects every ServiceMonitor).
* images: the chart's own, read from its values.yaml at the pinned version (vendored byte for
  byte: trainforge/platform/data/charts/opencost-<version>, read by
  trainforge.platform.chart_images), pulled through
  the stack's cache (a ghcr.io image needs the cache's github rule, else it is pulled from
  ghcr.io directly, which allows anonymous pulls). The UI and the MCP server are off: the
  Grafana board is the view, and neither is exposed.
* pod: non-root (the image's user 1001), no privilege escalation, every capability dropped,
  a read-only root filesystem with emptyDirs where OpenCost writes, resources set, on the
  system node group.
"""

from __future__ import annotations

from typing import Any

from trainforge.core import versions
from trainforge.core.image_routes import installed, parts
from trainforge.platform import chart_images
from trainforge.platform.placement import SYSTEM_NODE_SELECTOR

RELEASE = "opencost"
CHART = "opencost"
# The image's USER (opencost Dockerfile: `USER 1001`).
OPENCOST_UID = 1001
# Where OpenCost writes (its config directory, CONFIG_PATH's default, and temp files).
WRITABLE = ("/var/configs", "/tmp")
# The managed stack's Prometheus service (release kube-prometheus-stack: the chart names it
# `<fullname>-prometheus`, port 9090, http-web).
PROMETHEUS_SERVICE = "kube-prometheus-stack-prometheus"
PROMETHEUS_PORT = 9090


def chart_image(path: str) -> dict[str, str]:
    """`{registry, repository, tag}` of the pinned chart's image at value path `path`, as its
    vendored values.yaml names it (the tag with its digest; an empty tag is the chart's
    appVersion, its templates' `opencost.imageTag` rule)."""
    return chart_images.image_values(
        CHART, versions.OPENCOST_CHART_VERSION, path, app_version_tag=True
    )


def image_values(component: str, path: str) -> dict[str, str]:
    """Helm values `{registry, repository, tag}` for the chart's image at `path`, through the
    stack's cache; the tag stays the chart's. Recorded for the plan. A tag that carries its
    digest (the exporter's at 2.5.17) stays on its registry: the cache does not fetch an
    uncached image named by digest (image_routes.digest_pinned)."""
    image = chart_image(path)
    ref = f"{image['registry']}/{image['repository']}:{image['tag']}"
    host, repository, _, _ = parts(installed(component, ref))  # a digest: left as named
    return {"registry": host, "repository": repository, "tag": image["tag"]}


def pod_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": OPENCOST_UID,
        "runAsGroup": OPENCOST_UID,
        "fsGroup": OPENCOST_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": OPENCOST_UID,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def opencost_values(
    cluster_name: str, monitoring_namespace: str, component: str = RELEASE
) -> dict[str, Any]:
    """The chart's values (every key exists in the pinned chart: test_chart_values.py)."""
    volumes = [{"name": f"writable-{i}", "emptyDir": {}} for i, _ in enumerate(WRITABLE)]
    mounts = [{"name": f"writable-{i}", "mountPath": path} for i, path in enumerate(WRITABLE)]
    return {
        "clusterName": cluster_name,
        "podSecurityContext": pod_security_context(),
        "extraVolumes": volumes,
        "opencost": {
            "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
            # neither is exposed: the Grafana board is the view
            "ui": {"enabled": False},
            "mcp": {"enabled": False},
            "exporter": {
                "image": image_values(component, "opencost.exporter.image"),
                "defaultClusterId": cluster_name,
                "resources": {
                    "requests": {"cpu": "100m", "memory": "512Mi"},
                    "limits": {"memory": "2Gi"},  # no CPU limit: the chart sets none (throttling)
                },
                "securityContext": container_security_context(),
                "extraVolumeMounts": mounts,
            },
            "prometheus": {
                "internal": {
                    "enabled": True,
                    "serviceName": PROMETHEUS_SERVICE,
                    "namespaceName": monitoring_namespace,
                    "port": PROMETHEUS_PORT,
                },
            },
            # Prometheus scrapes OpenCost's cost metrics (node prices, allocations); their
            # `namespace`/`pod` labels are the priced pods', not the scrape target's (kept
            # by honorLabels, the chart's default, set here because the rules group on them)
            "metrics": {"serviceMonitor": {"enabled": True, "honorLabels": True}},
        },
    }


def team_budgets(teams: set[str] | frozenset[str]) -> dict[str, float]:
    """Each team's monthly budget (USD), `trainforge-policy:costCaps.teams.<team>.teamPerMonth`,
    from the running program's config: a policy key, so not in the platform's own config. The
    program checked every key before any resource (stack_check); a budget of a team the stack
    does not have was refused there, and is left out here."""
    from pulumi.runtime.config import CONFIG  # noqa: PLC0415 - the engine's config map

    from trainforge.stack.policy import CAPS_KEY, parse_caps  # noqa: PLC0415

    caps = parse_caps(dict(CONFIG.get()).get(CAPS_KEY), None, errors=[])
    return {
        name: float(c.team_per_month)
        for name, c in caps.teams.items()
        if c.team_per_month is not None and name in teams
    }
