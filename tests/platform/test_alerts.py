"""trainforge's alerts, rehearsed with the real Prometheus tools (Debian `prometheus` package).

`promtool check rules` parses the rendered rules (expressions and annotation templates);
`promtool test rules` replays synthetic series and checks that every alert fires when it
should and stays quiet when it should not (a job still stepping, a finished job, a job that
just started, a healthy GPU, a queue that admits). The unit tests compare alert labels only:
annotations are templated text, checked by `check rules` and, rendered for real, by the
end-to-end test (tests/platform/test_alerts_e2e.py).
"""

from __future__ import annotations

import copy
import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

from trainforge.platform import alerts
from trainforge.platform.services_config import (
    AlertsConfig,
    ReceiverConfig,
    parse_services_config,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROMTOOL = shutil.which("promtool")
AMTOOL = shutil.which("amtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool not found: install the Debian packages `prometheus prometheus-alertmanager` "
    "(make test and .ci/run do)",
)

JOB = 'namespace="team-a", trainforge_io_team="team-a", trainforge_io_job="{job}", pod="{job}-0"'


def job(name: str, pod: str | None = None) -> str:
    text = JOB.format(job=name)
    if pod:
        text = text.replace(f'pod="{name}-0"', f'pod="{pod}"')
    return "{" + text + "}"


def job_labels(name: str, severity: str) -> dict[str, str]:
    return {
        "namespace": "team-a",
        "trainforge_io_team": "team-a",
        "trainforge_io_job": name,
        "severity": severity,
        "platform": "trainforge",
    }


def labels(severity: str, **extra: str) -> dict[str, str]:
    return {"severity": severity, "platform": "trainforge", **extra}


GPU = 'gpu="0", UUID="GPU-1", Hostname="node-1", modelName="NVIDIA H100 80GB HBM3"'
GPU_LABELS = {
    "gpu": "0",
    "UUID": "GPU-1",
    "Hostname": "node-1",
    "modelName": "NVIDIA H100 80GB HBM3",
}

# (alert, input series, [(eval time, expected label sets)]) with the default thresholds:
# stalled 15m, restart storm 3 in 1h, checkpoint 2h, goodput 0.7 after 1h, queue 1h.
CASES = [
    (
        "TrainforgeJobStalled",
        [
            # steps for 20 minutes, then none; unfinished
            (f"trainforge_step{job('stuck')}", "0+1x20 20x40"),
            (f"trainforge_progress{job('stuck')}", "0.5x60"),
            # finished: flat step, progress 1
            (f"trainforge_step{job('done')}", "0+1x20 20x40"),
            (f"trainforge_progress{job('done')}", "0.5x19 1x41"),
            # still stepping
            (f"trainforge_step{job('busy')}", "0+1x60"),
            (f"trainforge_progress{job('busy')}", "0.5x60"),
            # started 10 minutes ago, still at step 0 (loading, compiling)
            (f"trainforge_step{job('young')}", "_x50 0x10"),
            (f"trainforge_progress{job('young')}", "_x50 0x10"),
        ],
        [(30, []), (50, [job_labels("stuck", "critical")])],
    ),
    (
        "TrainforgeJobMetricsDown",
        [
            (f"up{job('gone')}", "1x10 0x30"),
            (f"up{job('fine')}", "1x40"),
            ('up{job="kubelet", namespace="kube-system"}', "0x40"),  # not a training job
        ],
        [(20, []), (35, [job_labels("gone", "warning")])],
    ),
    (
        "TrainforgeRestartStorm",
        [
            # the ledger's count across pod re-creations: each pod is a new series
            (f"trainforge_restarts{job('loop', 'loop-a')}", "0x10 1x10 2x10"),
            (f"trainforge_restarts{job('loop', 'loop-b')}", "_x30 3x30"),
            (f"trainforge_restarts{job('once')}", "0x30 2x30"),
        ],
        [(25, []), (40, [job_labels("loop", "warning")])],
    ),
    (
        "TrainforgeCheckpointTooOld",
        [
            # 10 steps a minute (6 s each); never checkpointed since step 0
            (f"trainforge_step{job('old')}", "0+10x180"),
            (f"trainforge_step_seconds{job('old')}", "6x180"),
            (f"trainforge_checkpoint_step{job('old')}", "0x180"),
            (f"trainforge_progress{job('old')}", "0.5x180"),
            # checkpoints every 10 minutes
            (f"trainforge_step{job('saved')}", "0+10x180"),
            (f"trainforge_step_seconds{job('saved')}", "6x180"),
            (f"trainforge_checkpoint_step{job('saved')}", "0+100x18"),
            (f"trainforge_progress{job('saved')}", "0.5x180"),
        ],
        [(100, []), (150, [job_labels("old", "warning")])],
    ),
    (
        "TrainforgeGoodputLow",
        [
            (f"trainforge_goodput{job('poor')}", "0.5x120"),
            (f"trainforge_wall_seconds{job('poor')}", "0+60x120"),
            (f"trainforge_progress{job('poor')}", "0.5x120"),
            (f"trainforge_goodput{job('good')}", "0.9x120"),
            (f"trainforge_wall_seconds{job('good')}", "0+60x120"),
            (f"trainforge_progress{job('good')}", "0.5x120"),
        ],
        # start-up makes early goodput low: not judged before an hour of wall time
        [(50, []), (80, [job_labels("poor", "warning")])],
    ),
    (
        "TrainforgeGpuXidError",
        [
            (f'DCGM_FI_DEV_XID_ERRORS{{{GPU}, namespace="team-a", pod="p"}}', "0x10 79x10"),
            ('DCGM_FI_DEV_XID_ERRORS{gpu="1", UUID="GPU-2", Hostname="node-1"}', "0x20"),
        ],
        [(5, []), (15, [labels("critical", **GPU_LABELS, namespace="team-a", pod="p")])],
    ),
    (
        "TrainforgeGpuRowRemapFailure",
        [(f"DCGM_FI_DEV_ROW_REMAP_FAILURE{{{GPU}}}", "0x10 1x10")],
        [(5, []), (15, [labels("critical", **GPU_LABELS)])],
    ),
    (
        "TrainforgeGpuUncorrectableRemappedRows",
        [
            (f"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{{{GPU}}}", "0x10 2x20"),
            ('DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{gpu="1", UUID="GPU-2"}', "4x30"),
        ],
        [(5, []), (15, [labels("warning", **GPU_LABELS)])],
    ),
    (
        "TrainforgeNodeHardwareNotReady",
        [
            (
                'kube_node_status_condition{node="n1", condition="AcceleratedHardwareReady", '
                'status="false"}',
                "0x10 1x20",
            ),
            (
                'kube_node_status_condition{node="n1", condition="AcceleratedHardwareReady", '
                'status="true"}',
                "1x10 0x20",
            ),
            # not a hardware condition
            ('kube_node_status_condition{node="n2", condition="Ready", status="false"}', "1x30"),
        ],
        [
            (13, []),
            (20, [labels("critical", node="n1", condition="AcceleratedHardwareReady")]),
        ],
    ),
    (
        "TrainforgeQueueStarved",
        [
            ('kueue_pending_workloads{cluster_queue="llm", status="active"}', "2x120"),
            ('kueue_admitted_workloads_total{cluster_queue="llm"}', "5x120"),
            ('kueue_pending_workloads{cluster_queue="vision", status="active"}', "2x120"),
            ('kueue_admitted_workloads_total{cluster_queue="vision"}', "0+1x120"),
        ],
        [(30, []), (70, [labels("warning", cluster_queue="llm")])],
    ),
    (
        "TrainforgeQueueInadmissible",
        [
            ('kueue_pending_workloads{cluster_queue="llm", status="inadmissible"}', "0x10 1x80"),
            ('kueue_pending_workloads{cluster_queue="vision", status="active"}', "3x90"),
        ],
        [(50, []), (75, [labels("warning", cluster_queue="llm")])],
    ),
    (
        "TrainforgeNodeLaunchErrors",
        [
            (
                'karpenter_cloudprovider_errors_total{controller="nodeclaim.lifecycle", '
                'method="Create", provider="aws", error="InsufficientCapacityError"}',
                "0x10 1+1x40",
            ),
            (
                'karpenter_cloudprovider_errors_total{controller="nodeclaim.lifecycle", '
                'method="Get", provider="aws", error="NodeClaimNotFoundError"}',
                "0+1x50",
            ),
        ],
        [
            (20, []),
            (40, [labels("warning", method="Create", error="InsufficientCapacityError")]),
        ],
    ),
]


def rules_file(tmp: pathlib.Path, cfg: AlertsConfig | None = None, keep_text: bool = True) -> str:
    groups = alerts.rule_groups(cfg or AlertsConfig())
    if not keep_text:
        groups = copy.deepcopy(groups)
        for g in groups:
            for r in g["rules"]:
                r.pop("annotations")
    path = tmp / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return str(path)


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)


def test_every_alert_has_a_case_severity_summary_and_runbook():
    names = [r["alert"] for g in alerts.rule_groups(AlertsConfig()) for r in g["rules"]]
    assert sorted(names) == sorted(c[0] for c in CASES)
    for g in alerts.rule_groups(AlertsConfig()):
        for r in g["rules"]:
            assert r["labels"]["severity"] in ("critical", "warning")
            assert r["annotations"]["summary"] and r["annotations"]["description"]


def test_runbook_links_point_at_headings_that_exist():
    doc = (ROOT / "docs" / alerts.RUNBOOK_PAGE).read_text()
    anchors = {alerts.anchor(m) for m in re.findall(r"^#{2,4} (.+)$", doc, re.M)}
    for g in alerts.rule_groups(AlertsConfig()):
        for r in g["rules"]:
            url = r["annotations"]["runbook_url"]
            assert url.startswith(AlertsConfig().runbook_base_url + alerts.RUNBOOK_PAGE + "#")
            assert url.split("#")[1] in anchors, f"{r['alert']}: no heading for {url}"


@needs_promtool
def test_promtool_checks_the_rendered_rules(tmp_path):
    res = promtool("check", "rules", rules_file(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(CASES)} rules found" in res.stdout


@needs_promtool
def test_promtool_rejects_a_broken_rule(tmp_path):
    path = tmp_path / "bad.yaml"
    bad = alerts.rule_groups(AlertsConfig())
    bad[0]["rules"][0]["expr"] = "max by (namespace (trainforge_step)"
    path.write_text(yaml.safe_dump({"groups": bad}))
    assert promtool("check", "rules", str(path)).returncode != 0


def unit_tests(cases: list) -> list[dict]:
    tests = []
    for alert, series, evals in cases:
        tests.append(
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "alert_rule_test": [
                    {
                        "eval_time": f"{t}m",
                        "alertname": alert,
                        "exp_alerts": [{"exp_labels": lab} for lab in expected],
                    }
                    for t, expected in evals
                ],
            }
        )
    return tests


def run_unit_tests(tmp: pathlib.Path, cases: list, cfg: AlertsConfig | None = None):
    rules = rules_file(tmp, cfg, keep_text=False)
    spec = tmp / "tests.yaml"
    spec.write_text(
        yaml.safe_dump(
            {"rule_files": [rules], "evaluation_interval": "1m", "tests": unit_tests(cases)},
            sort_keys=False,
        )
    )
    return promtool("test", "rules", str(spec))


@needs_promtool
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_alert_fires_when_it_should_and_only_then(tmp_path, case):
    res = run_unit_tests(tmp_path, [case])
    assert res.returncode == 0, res.stdout + res.stderr


@needs_promtool
def test_a_case_expecting_the_wrong_thing_fails(tmp_path):
    """The rehearsal can fail: a stalled job expected quiet, and a stall rule that looks at
    the wrong metric, are both caught."""
    name, series, _ = CASES[0]
    assert run_unit_tests(tmp_path, [(name, series, [(50, [])])]).returncode != 0
    broken = copy.deepcopy(alerts.rule_groups(AlertsConfig()))
    original = alerts.rule_groups
    try:
        alerts.rule_groups = lambda cfg: [  # type: ignore[assignment]
            {
                "name": g["name"],
                "rules": [
                    {**r, "expr": r["expr"].replace("trainforge_step[", "trainforge_loss[")}
                    for r in g["rules"]
                ],
            }
            for g in broken
        ]
        assert run_unit_tests(tmp_path, [CASES[0]]).returncode != 0
    finally:
        alerts.rule_groups = original


@needs_promtool
def test_thresholds_come_from_the_stack(tmp_path):
    cfg = AlertsConfig(stalled_after="45m")
    name, series, _ = CASES[0]
    # stalled since 20m: with 45m it is not yet an alert at 50m
    assert run_unit_tests(tmp_path, [(name, series, [(50, [])])], cfg).returncode == 0


# --- Alertmanager config ------------------------------------------------------------------------


def receivers() -> tuple[ReceiverConfig, ...]:
    return (
        ReceiverConfig(
            name="oncall", type="pagerduty", routing_key="pd-key", severities=("critical",)
        ),
        ReceiverConfig(
            name="ml-chat",
            type="slack",
            url="https://hooks.slack.com/services/T/B/X",
            channel="#ml",
        ),
        ReceiverConfig(
            name="llm-hook", type="webhook", url="https://llm.example.com/alerts", teams=("llm",)
        ),
    )


@pytest.mark.skipif(AMTOOL is None, reason="amtool not found: install prometheus-alertmanager")
def test_alertmanager_config_is_valid_and_routes_by_severity_and_team(tmp_path):
    path = tmp_path / "am.yaml"
    path.write_text(yaml.safe_dump(alerts.alertmanager_config(receivers())))
    res = subprocess.run([AMTOOL, "check-config", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr

    def route(**lab: str) -> set[str]:
        out = subprocess.run(
            [AMTOOL, "config", "routes", "test", f"--config.file={path}"]
            + [f"{k}={v}" for k, v in lab.items()],
            capture_output=True,
            text=True,
        )
        return set(out.stdout.strip().split(","))

    assert route(alertname="TrainforgeJobStalled", severity="critical") == {"oncall", "ml-chat"}
    assert route(alertname="TrainforgeGoodputLow", severity="warning") == {"ml-chat"}
    assert route(
        alertname="TrainforgeGoodputLow", severity="warning", trainforge_io_team="llm"
    ) == {"ml-chat", "llm-hook"}
    assert route(alertname="Watchdog", severity="none") == {"null"}


def test_receiver_config_errors_name_the_key():
    errors: list[str] = []
    parse_services_config(
        {
            "teams": [{"name": "llm"}],
            "monitoring": {
                "alerts": {"stalledAfter": "soon", "goodputMin": 2},
                "receivers": [
                    {"name": "a", "type": "slack"},
                    {"name": "b", "type": "pagerduty", "url": "https://x"},
                    {"name": "c", "type": "webhook", "url": "ftp://x", "teams": ["nope"]},
                    {"name": "d", "type": "email", "url": "https://x"},
                ],
            },
        },
        errors,
    )
    text = "\n".join(errors)
    assert "trainforge:monitoring.alerts.stalledAfter: got 'soon'" in text
    assert "trainforge:monitoring.alerts.goodputMin: got 2; expected a value < 1" in text
    assert "trainforge:monitoring.receivers[0].url: missing; expected the slack url" in text
    assert "trainforge:monitoring.receivers[1].url: got 'https://x'; expected no url" in text
    assert "trainforge:monitoring.receivers[1].routingKey: missing" in text
    assert "trainforge:monitoring.receivers[2].url: got 'ftp://x'" in text
    assert (
        "trainforge:monitoring.receivers[2].teams[0]: got 'nope'; expected one of the teams" in text
    )
    assert "trainforge:monitoring.receivers[3].type: got 'email'" in text
    assert len(errors) == 8, errors


def test_receiver_secrets_reach_the_chart_as_pulumi_secrets():
    """The Release's values carry each receiver's secret as a secret Output."""
    import pulumi

    from trainforge.platform import monitoring
    from trainforge.platform.services_config import MonitoringConfig

    cfg = MonitoringConfig(receivers=receivers())
    secrets = {r.name: pulumi.Output.secret(r.secret) for r in cfg.receivers}
    values = monitoring.prometheus_values(cfg, "trainforge-gp3", receiver_secrets=secrets)
    am = values["alertmanager"]["config"]
    by_name = {r["name"]: r for r in am["receivers"]}
    assert by_name["oncall"]["pagerduty_configs"][0]["routing_key"] is secrets["oncall"]
    assert by_name["ml-chat"]["slack_configs"][0]["api_url"] is secrets["ml-chat"]
    assert by_name["llm-hook"]["webhook_configs"][0]["url"] is secrets["llm-hook"]
