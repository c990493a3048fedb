"""Dashboards as code: valid Grafana JSON, shipped for the sidecar when Grafana is on, and every
metric a panel queries is one that the runtime or the pinned DCGM exporter really exports."""

from __future__ import annotations

import csv
import json
import pathlib
import re
import urllib.request
from collections.abc import Iterator

import pytest
import yaml

from tests.conftest import shipped_plan
from trainforge.core import versions
from trainforge.plan import core
from trainforge.platform import dashboards as D
from trainforge.platform import monitoring

ROOT = pathlib.Path(__file__).resolve().parents[2]
FACTS = pathlib.Path(__file__).resolve().parent / "facts"


def _dcgm_metrics() -> tuple[str, set[str]]:
    """(chart version it was vendored for, metric names) from the exporter's counters CSV."""
    text = (FACTS / "dcgm-exporter-default-counters.csv").read_text()
    version = re.search(r"^# chart-version: (\S+)$", text, re.M).group(1)
    rows = csv.reader(line for line in text.splitlines() if line.strip() and line[0] != "#")
    names = {r[0].strip() for r in rows if r[1].strip() != "label"}
    return version, names


def _sidecar() -> dict:
    return yaml.safe_load((FACTS / "kube-prometheus-stack-grafana-sidecar.yaml").read_text())


# --- valid Grafana JSON -------------------------------------------------------------------------


def panels(dashboard: dict) -> Iterator[dict]:
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def queries(dashboard: dict) -> list[str]:
    """Every PromQL expression: panel targets and query variables."""
    out = [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            out.append(var["definition"])
    return out


@pytest.mark.parametrize("name", sorted(D.DASHBOARDS))
def test_dashboard_is_a_valid_grafana_model(name):
    board = D.DASHBOARDS[name]()
    assert json.loads(json.dumps(board)) == board  # plain JSON, nothing Python-only
    assert board["uid"] == name and board["title"] and isinstance(board["schemaVersion"], int)
    variables = {v["name"] for v in board["templating"]["list"]}
    ids, cells = set(), set()
    for p in panels(board):
        assert p["id"] not in ids, f"duplicate panel id {p['id']}"
        ids.add(p["id"])
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, (p["title"], g)
        area = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not area & cells, f"panel {p['title']!r} overlaps another"
        cells |= area
        if p["type"] in ("row", "text"):
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in p["targets"]]
        assert p["targets"] and len(set(refs)) == len(refs), p["title"]
    for q in queries(board):
        for brackets in ("()", "{}", "[]"):
            assert q.count(brackets[0]) == q.count(brackets[1]), q
        used = set(re.findall(r"\$\{?(\w+)", q))
        assert used <= variables, (q, used - variables)


def test_metric_names_are_read_from_promql():
    expr = (
        'sum by (pod) (rate(a_total{job="x", b="y"}[5m])) / on(pod) group_left(gpu) '
        'c_bytes{pod=~"$run-.*"} or vector(0)'
    )
    assert D.metric_names(expr) == {"a_total", "c_bytes"}
    assert D.metric_names('label_values(trainforge_step{namespace="$n"}, run)') == {
        "trainforge_step"
    }


# --- every queried metric exists ------------------------------------------------------------------


@pytest.fixture(scope="module")
def runtime_metrics(tmp_path_factory) -> set[str]:
    """What a real training run serves on /metrics, scraped just before its server stops
    (after the last step and the final checkpoint)."""
    import torch

    from trainforge.training import loop, metrics
    from trainforge.training.__main__ import main

    scraped: list[str] = []
    close = metrics.MetricsServer.close

    class AnyPort(metrics.MetricsServer):
        """Binds port 0 (the kernel picks a free one) and serves there: self.port says which,
        so no port is chosen, released and hoped for."""

        def __init__(self, gauges, port, labels=None):
            super().__init__(gauges, 0, labels=labels)

    def scrape_then_close(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            scraped.append(r.read().decode())
        close(self)

    out = tmp_path_factory.mktemp("run")
    threads = torch.get_num_threads()
    mp = pytest.MonkeyPatch()
    mp.setattr(metrics.MetricsServer, "close", scrape_then_close)
    mp.setattr(metrics, "MetricsServer", AnyPort)
    # MFU is only exported where the device has a known peak (GPUs); give this CPU run the
    # H100 figure so the real Reporter computes and serves it as it would on a p5.
    mp.setattr(loop, "peak_flops", lambda device: metrics.PEAK_BF16_FLOPS["H100"])
    try:
        torch.set_num_threads(1)
        # a GPT: the boards read token rates, which a model without tokens does not export
        args = ["--model", "gpt", "--layers", "1", "--d-model", "32", "--heads", "2"]
        args += ["--seq-len", "16", "--vocab-size", "64", "--dataset-size", "256"]
        args += ["--steps", "8", "--log-every", "4"]
        args += ["--batch-size", "8", "--metrics-port", "9400", "--output-dir", str(out)]
        args += ["--checkpoint-dir", str(out / "ckpt"), "--checkpoint-every", "4"]
        assert main(args) == 0  # --metrics-port turns the server on; AnyPort binds port 0
    finally:
        mp.undo()
        torch.set_num_threads(threads)
    (text,) = scraped
    return set(re.findall(r"^(trainforge_\w+)[{ ]", text, re.M))


def test_runtime_scrape_is_real(runtime_metrics):
    assert {"trainforge_loss", "trainforge_mfu", "trainforge_checkpoint_step"} <= runtime_metrics


def test_dcgm_fact_matches_the_pinned_chart():
    version, names = _dcgm_metrics()
    assert version == versions.DCGM_EXPORTER_CHART_VERSION, (
        "re-vendor tests/platform/facts/dcgm-exporter-default-counters.csv from the counters "
        "CSV the new chart runs with"
    )
    assert "DCGM_FI_DEV_GPU_UTIL" in names and "DCGM_FI_PROF_SM_ACTIVE" not in names  # commented


@pytest.mark.parametrize("name", sorted(D.DASHBOARDS))
def test_every_queried_metric_is_exported(name, runtime_metrics):
    _, dcgm = _dcgm_metrics()
    board = D.DASHBOARDS[name]()
    queried = set().union(*(D.metric_names(q) for q in queries(board)))
    assert queried, "no metric read back from the queries"
    missing = sorted(queried - runtime_metrics - dcgm)
    assert not missing, f"{name} queries metrics nothing exports: {missing}"


def test_the_exporter_collects_the_charts_counters_profiling_only_when_switched_on():
    """What the DCGM exporter collects here: the chart's default counters, less the
    profiling (DCGM_FI_PROF_*) fields unless `monitoring.dcgmProfilingMetrics` is on."""
    _, chart = _dcgm_metrics()
    assert monitoring.dcgm_metrics(profiling=True) == chart
    assert monitoring.dcgm_metrics(profiling=False) == {
        m for m in chart if not m.startswith("DCGM_FI_PROF_")
    }


@pytest.mark.parametrize("profiling", [False, True])
@pytest.mark.parametrize("name", sorted(D.DASHBOARDS))
def test_shipped_panels_read_only_what_the_exporter_collects(name, profiling):
    exported = monitoring.dcgm_metrics(profiling)
    board = D.for_exported(D.DASHBOARDS[name](), exported, monitoring.PROFILING_HINT)
    dcgm = {m for q in queries(board) for m in D.metric_names(q) if m.startswith("DCGM_")}
    assert dcgm and dcgm <= exported
    hints = [p for p in panels(board) if p["type"] == "text" and "Not collected" in str(p)]
    tensor = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
    uses_tensor = tensor in set().union(*(D.metric_names(q) for q in queries(D.DASHBOARDS[name]())))
    # off: the tensor-core panel says how to switch profiling on instead of staying empty
    assert bool(hints) == (uses_tensor and not profiling)


# --- shipped with the monitoring stack -------------------------------------------------------------


def _dashboard_configmaps(result) -> dict[str, dict]:
    return {
        o.doc["metadata"]["name"]: o.doc
        for o in result.objects
        if o.doc["kind"] == "ConfigMap" and o.doc["metadata"]["name"] in D.DASHBOARDS
    }


def test_dashboards_ship_as_sidecar_configmaps_when_grafana_is_on():
    on = {"trainforge:monitoring": {"grafana": True}}
    result = core.plan_project(ROOT, "dev", standins=False, config_overrides=on)
    maps = _dashboard_configmaps(result)
    assert set(maps) == set(D.DASHBOARDS)
    sidecar = _sidecar()[versions.KUBE_PROMETHEUS_STACK_CHART_VERSION]  # KeyError: vendor it
    assert sidecar["enabled"] and sidecar["searchNamespace"] == "ALL"
    for cm_name, doc in maps.items():
        assert doc["metadata"]["labels"][sidecar["label"]] == sidecar["labelValue"]
        assert doc["metadata"]["namespace"] == "monitoring"
        shipped = D.for_exported(
            D.DASHBOARDS[cm_name](), monitoring.dcgm_metrics(False), monitoring.PROFILING_HINT
        )
        assert json.loads(doc["data"][f"{cm_name}.json"]) == shipped
    helm = {h["name"]: h for h in result.helm()}
    dcgm = [r for r in result.inventory.resources if r.name.endswith("-dcgm")]
    assert dcgm and dcgm[0].inputs["values"]["serviceMonitor"]["honorLabels"] is True
    assert helm  # the stack itself is installed
    # Grafana stays off by default, and then no dashboard is shipped
    off = shipped_plan("dev")
    assert not _dashboard_configmaps(off)


def test_per_rank_gpu_panels_match_the_pods_of_every_backend():
    """PyTorchJob, TrainJob (JobSet) and indexed-Job pod names all match the panels' selector
    (Prometheus regexes are anchored), and other jobs' pods do not."""
    import re as _re

    from trainforge.platform.dashboards import POD_NAME_PATTERN

    def matches(job: str, pod: str) -> bool:
        return _re.fullmatch(f"{_re.escape(job)}-{POD_NAME_PATTERN}", pod) is not None

    for pod in (
        "gpt-master-0",
        "gpt-worker-3",
        "gpt-node-0-0-x7k2p",
        "gpt-node-0-12-ab3cd",
        "gpt-0-q9zlm",
        "gpt-15-h2kd8",
    ):
        assert matches("gpt", pod), pod
    for pod in ("gpt2-master-0", "other-worker-1", "gpt-launcher-abc12", "gpt-master-0-x"):
        assert not matches("gpt", pod), pod
