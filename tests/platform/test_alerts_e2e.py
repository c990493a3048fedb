"""End to end: a stalled training run pages someone.

A real 2-rank training run (CPU, gloo) serves its metrics from rank 0; rank 1 is stopped with
SIGSTOP, so rank 0 waits in its all-reduce and the step counter freezes while the metrics
thread still answers. A real Prometheus (Debian package) scrapes it with trainforge's rendered
rules, a real Alertmanager with trainforge's rendered routes sends the alert to a webhook
receiver served by this test. Everything listens on 127.0.0.1 in a temp dir; intervals are
seconds so it ends well within a minute, and every process is stopped at the end.

Prometheus and Alertmanager cannot listen on port 0, so each is started on a random port and
started again on another if that one was taken (the server exits at once, saying so).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from trainforge.platform import alerts
from trainforge.platform.services_config import AlertsConfig, ReceiverConfig

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = shutil.which("prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None or ALERTMANAGER is None,
    reason="prometheus/alertmanager not found: install the Debian packages `prometheus "
    "prometheus-alertmanager` (make test and .ci/run do)",
)
JOB = {"namespace": "team-a", "trainforge_io_team": "team-a", "trainforge_io_job": "stall-e2e"}
DEADLINE = 50.0  # seconds for the whole rehearsal once everything runs
# The stall rule's window: 1 s scrapes put 4 samples of a stepping counter (steps of a few ms
# here) in it. It was 8 s, with a fixed 10 s of training (both ranks at full CPU) before the
# stop, in which the rule could fire only in its last ~1 s and a false page could not reach
# the webhook before the check (a rule broken to fire while training passed it).
STALL_S = 4
STALL = f"{STALL_S}s"


class Receiver:
    """A webhook receiver: records every notification Alertmanager posts."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.posts.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def firing(self, name: str) -> list[dict]:
        return [
            a
            for p in self.posts
            for a in p.get("alerts", [])
            if a["labels"].get("alertname") == name and a["status"] == "firing"
        ]


def start_on_free_port(argv_for, log: Path, ready_path: str, tries: int = 8):
    """Start a server on a random loopback port; try another if it exits (port taken)."""
    for _ in range(tries):
        port = random.randint(20000, 60000)
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv_for(port), stdout=out, stderr=subprocess.STDOUT)
        end = time.monotonic() + 15
        while time.monotonic() < end and proc.poll() is None:
            url = f"http://127.0.0.1:{port}{ready_path}"
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1):
                return proc, port
            time.sleep(0.2)
        stop(proc)
    raise AssertionError(f"could not start {argv_for(0)[0]}: {log.read_text()[-2000:]}")


def prom_query(port: int, query: str) -> list[dict]:
    """The instant vector Prometheus's HTTP API returns for `query` now."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)["data"]["result"]


def prom_alerts(port: int) -> list[dict]:
    """Prometheus's own pending and firing alerts (before Alertmanager's grouping waits)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/alerts", timeout=5) as resp:
        return json.load(resp)["data"]["alerts"]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def training_env(rank: int, port: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINFORGE_", "MLFLOW_"))}
    e.update(
        PYTHONPATH=str(ROOT),
        OMP_NUM_THREADS="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=port,
        RANK=str(rank),
        WORLD_SIZE="2",
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE="2",
    )
    return e


def start_training(tmp: Path) -> tuple[list[subprocess.Popen], int]:
    """Two ranks; rank 0 serves metrics. Ports are random and retried if taken."""
    for _ in range(5):
        metrics_port = random.randint(20000, 60000)
        master = str(random.randint(20000, 60000))
        args = [
            sys.executable,
            "-m",
            "trainforge.training",
            "--model",
            "mlp",
            "--dataset-size",
            "1024",
            "--steps",
            "1000000",
            "--log-every",
            "1",
            "--hang-timeout",
            "0",
            "--metrics-port",
            str(metrics_port),
            "--run-name",
            "stall-e2e",
        ]
        logs = [open(tmp / f"rank{r}.log", "wb") for r in range(2)]  # noqa: SIM115
        procs = [
            subprocess.Popen(
                args,
                cwd=ROOT,
                env=training_env(r, master),
                stdout=logs[r],
                stderr=subprocess.STDOUT,
            )
            for r in range(2)
        ]
        end = time.monotonic() + 40
        while time.monotonic() < end and all(p.poll() is None for p in procs):
            with contextlib.suppress(OSError):
                text = urllib.request.urlopen(
                    f"http://127.0.0.1:{metrics_port}/metrics", timeout=1
                ).read()
                step = re.search(rb"^trainforge_step\{[^}]*\} (\S+)$", text, re.M)
                if step and float(step.group(1)) > 0:  # training is stepping
                    return procs, metrics_port
            time.sleep(0.3)
        for p in procs:
            stop(p)
    raise AssertionError(
        "training never served metrics: " + (tmp / "rank0.log").read_text()[-3000:]
    )


def test_a_stopped_rank_pages_through_prometheus_and_alertmanager(tmp_path):
    receiver = Receiver()
    procs: list[subprocess.Popen] = []
    try:
        # Alertmanager with trainforge's routes; the webhook receiver gets everything
        am_cfg = alerts.alertmanager_config(
            (ReceiverConfig(name="e2e-hook", type="webhook", url=receiver.url),),
            group_wait="1s",
            group_interval="1s",
        )
        (tmp_path / "am.yaml").write_text(yaml.safe_dump(am_cfg))
        am, am_port = start_on_free_port(
            lambda port: [
                ALERTMANAGER,
                f"--config.file={tmp_path / 'am.yaml'}",
                f"--storage.path={tmp_path / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",  # no gossip: a single local instance
            ],
            tmp_path / "alertmanager.log",
            "/-/ready",
        )
        procs.append(am)

        train, metrics_port = start_training(tmp_path)
        procs += train

        # Prometheus: scrape rank 0 every second, evaluate the rendered rules every second
        rules = tmp_path / "rules.yaml"
        rules.write_text(
            yaml.safe_dump({"groups": alerts.rule_groups(AlertsConfig(stalled_after=STALL))})
        )
        prom_cfg = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "alerting": {
                "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]
            },
            "scrape_configs": [
                {
                    "job_name": "trainforge",
                    "static_configs": [
                        {"targets": [f"127.0.0.1:{metrics_port}"], "labels": dict(JOB)}
                    ],
                }
            ],
        }
        (tmp_path / "prometheus.yaml").write_text(yaml.safe_dump(prom_cfg))
        prom, prom_port = start_on_free_port(
            lambda port: [
                PROMETHEUS,
                f"--config.file={tmp_path / 'prometheus.yaml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--rules.alert.resend-delay=1s",
            ],
            tmp_path / "prometheus.log",
            "/-/ready",
        )
        procs.append(prom)

        # training makes progress: from the moment the rule can fire (a sample STALL old
        # exists, its offset clause), two more evaluations leave it quiet in Prometheus (no
        # pending or firing alert: `for` is 0) and at the webhook
        end = time.monotonic() + 30
        while not prom_query(prom_port, f"trainforge_step offset {STALL}"):
            assert time.monotonic() < end, "Prometheus scraped no step " + STALL + " ago"
            time.sleep(0.3)
        time.sleep(2.5)  # evaluations every second
        assert train[0].poll() is None and train[1].poll() is None
        stalled = [
            a for a in prom_alerts(prom_port) if a["labels"]["alertname"] == "TrainforgeJobStalled"
        ]
        assert stalled == [], f"stalled while training ran: {stalled}"
        assert receiver.firing("TrainforgeJobStalled") == [], "stalled while training ran"

        train[1].send_signal(signal.SIGSTOP)  # rank 1 frozen: rank 0 waits in all-reduce
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end and not receiver.firing("TrainforgeJobStalled"):
            time.sleep(0.5)
        got = receiver.firing("TrainforgeJobStalled")
        assert got, (
            "no TrainforgeJobStalled reached the webhook; prometheus log:\n"
            + (tmp_path / "prometheus.log").read_text()[-2000:]
        )
        alert = got[0]
        assert {k: alert["labels"][k] for k in JOB} == JOB
        assert alert["labels"]["severity"] == "critical"
        assert (
            alert["annotations"]["summary"]
            == f"Job team-a/stall-e2e made no optimizer step for {STALL}"
        )
        assert alert["annotations"]["runbook_url"].endswith(
            "troubleshooting.md#trainforgejobstalled"
        )
        # rank 0 still answers scrapes, so the stall is the only page, not a metrics outage
        assert receiver.firing("TrainforgeJobMetricsDown") == []
    finally:
        for p in reversed(procs):
            stop(p)
        receiver.httpd.shutdown()
