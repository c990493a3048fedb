"""trainforge.training as a library for user code: the public API, each piece configured by
the job contract's variables, and what each does on a laptop without them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

import pytest
import torch

import trainforge.training as tt
from trainforge.training import contract as c


@pytest.fixture(autouse=True)
def clean_contract(monkeypatch):
    for name in (*c.CONTRACT_VARIABLES, "MLFLOW_TRACKING_URI", "RANK", "TRAINFORGE_TEST_FAULT"):
        monkeypatch.delenv(name, raising=False)


def test_the_public_api():
    assert tt.__all__ == sorted(
        [
            "CheckpointConfig",
            "CheckpointError",
            "CheckpointManager",
            "DistEnv",
            "JobEnv",
            "MetricsReporter",
            "PREEMPTED_EXIT_CODE",
            "PreemptionHandler",
            "Watchdog",
            "cleanup_distributed",
            "init_distributed",
            "job_env",
        ]
    )
    from trainforge.training import CheckpointManager, MetricsReporter, PreemptionHandler

    assert CheckpointManager.__module__ == "trainforge.training.checkpoint"
    assert (MetricsReporter.__name__, PreemptionHandler.__name__) == (
        "MetricsReporter",
        "PreemptionHandler",
    )
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        tt.Nope  # noqa: B018


def test_importing_the_package_or_the_contract_does_not_import_torch():
    code = (
        "import sys, trainforge.training, trainforge.training.contract, trainforge.jobs.entrypoint;"
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_job_env_reads_the_contract(monkeypatch, tmp_path):
    monkeypatch.setenv(c.JOB_NAME, "mnist")
    monkeypatch.setenv(c.CHECKPOINT_DIR, str(tmp_path / "ck"))
    monkeypatch.setenv(c.CHECKPOINT_EVERY, "25")
    monkeypatch.setenv(c.KEEP_LAST, "2")
    monkeypatch.setenv(c.ASYNC_CHECKPOINT, "1")
    monkeypatch.setenv(c.GRACE_PERIOD, "45")
    env = c.job_env()
    assert (env.job_name, env.checkpoint_every, env.keep_last, env.grace_period) == (
        "mnist",
        25,
        2,
        45.0,
    )
    assert env.async_checkpoint and env.output_dir == "runs/mnist" and env.metrics_port == 0
    monkeypatch.setenv(c.KEEP_LAST, "two")
    with pytest.raises(c.ContractError, match="TRAINFORGE_KEEP_LAST='two': expected an integer"):
        c.job_env()
    monkeypatch.setenv(c.KEEP_LAST, "2")
    for raw, why in [
        ("soon", "expected a number of seconds$"),
        ("0", r"expected a number of seconds > 0$"),  # no grace = killed mid-save
    ]:
        monkeypatch.setenv(c.GRACE_PERIOD, raw)
        with pytest.raises(c.ContractError, match=f"TRAINFORGE_GRACE_PERIOD='{raw}': {why}"):
            c.job_env()
    monkeypatch.setenv(c.GRACE_PERIOD, "45")
    monkeypatch.setenv(c.HANG_TIMEOUT, "-1")
    with pytest.raises(c.ContractError, match=r">= 0 \(0 = off\)$"):
        c.job_env()
    monkeypatch.setenv(c.HANG_TIMEOUT, "0")
    assert c.job_env().hang_timeout == 0.0


def test_checkpoint_manager_from_env_saves_and_resumes(monkeypatch, tmp_path):
    monkeypatch.setenv(c.CHECKPOINT_DIR, str(tmp_path / "ck"))
    monkeypatch.setenv(c.CHECKPOINT_EVERY, "2")
    monkeypatch.setenv(c.KEEP_LAST, "1")
    logs: list[str] = []
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ckpt = tt.CheckpointManager.from_env(log=logs.append)
    assert ckpt.restore(model, opt) == 0
    for step in (1, 2, 3, 4):
        if ckpt.should_save(step):
            ckpt.save(step, model, opt)
    ckpt.close()
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["step_000004"]  # keep-last 1
    fresh = torch.nn.Linear(3, 2)
    again = tt.CheckpointManager.from_env(log=logs.append)
    assert again.restore(fresh, torch.optim.SGD(fresh.parameters(), lr=0.1)) == 4
    assert torch.equal(fresh.weight, model.weight)


def test_without_the_contract_checkpointing_is_off(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ckpt = tt.CheckpointManager.from_env()
    assert ckpt.restore(model, opt) == 0 and ckpt.save(1, model, opt) is None
    assert not ckpt.should_save(500) and list(tmp_path.iterdir()) == []


def test_the_rehearsal_hook_fires_in_should_save(monkeypatch, tmp_path):
    """TRAINFORGE_TEST_FAULT works for user code that uses the manager (once per process)."""
    monkeypatch.setenv("TRAINFORGE_TEST_FAULT", "0:3:TERM")
    seen: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
    try:
        ckpt = tt.CheckpointManager.from_env(log=lambda m: None)
        for step in range(1, 6):
            ckpt.should_save(step)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert seen == [signal.SIGTERM]


def test_preemption_handler_from_env_checkpoints_and_returns_143(monkeypatch):
    monkeypatch.setenv(c.GRACE_PERIOD, "30")
    logs: list[str] = []
    stop = tt.PreemptionHandler.from_env(log=logs.append)
    assert stop.grace_period == 30.0 and not stop.should_stop()
    signal.raise_signal(signal.SIGTERM)
    assert stop.should_stop()
    saved: list[bool] = []
    assert stop.shutdown(lambda: saved.append(True)) == tt.PREEMPTED_EXIT_CODE == 143
    assert saved == [True]
    assert "stop requested (SIGTERM on this rank)" in logs[0] and "checkpoint complete" in logs[1]
    assert signal.getsignal(signal.SIGTERM) is not stop._on_signal  # handler restored


def test_metrics_reporter_from_env(monkeypatch, tmp_path):
    from tests.ports import start_on_free_port

    monkeypatch.setenv(c.JOB_NAME, "mnist-user")
    monkeypatch.setenv(c.OUTPUT_DIR, str(tmp_path))

    def start(port: int):
        monkeypatch.setenv(c.METRICS_PORT, str(port))
        return tt.MetricsReporter.from_env(params={"lr": 0.1}), port

    reporter, port = start_on_free_port(start)
    with reporter as metrics:
        assert metrics.port == port
        metrics.log(10, loss=2.5, accuracy=0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert 'trainforge_loss{run="mnist-user"} 2.5' in text
        assert 'trainforge_step{run="mnist-user"} 10.0' in text
        with pytest.raises(ValueError, match="metric name 'bad-name'"):
            metrics.log(11, **{"bad-name": 1.0})
    line = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert line == {"step": 10.0, "loss": 2.5, "accuracy": 0.5}


def test_metrics_reporter_is_silent_on_other_ranks(monkeypatch, tmp_path):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv(c.OUTPUT_DIR, str(tmp_path / "out"))
    metrics = tt.MetricsReporter.from_env()
    metrics.log(1, loss=1.0)
    metrics.close()
    assert not (tmp_path / "out").exists()
