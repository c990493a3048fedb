"""The runtime says what is on and off, and why; --self-check fails when a configured one cannot work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trainforge.training import selfcheck

ROOT = Path(__file__).resolve().parents[2]


def _lines(fs: list[selfcheck.Feature]) -> dict[str, str]:
    return {f.name: f.line() for f in fs}


def test_nothing_configured_is_off_with_the_reason(monkeypatch):
    monkeypatch.setattr(selfcheck, "EFA_DEVICES", "/nonexistent/uverbs*")
    fs = selfcheck.features(None, env={})
    lines = _lines(fs)
    assert lines["MLflow"] == "MLflow: off (MLFLOW_TRACKING_URI not set)"
    assert lines["S3 mirror"].startswith("S3 mirror: off (no --checkpoint-s3")
    assert lines["NCCL net"].startswith("NCCL net: Socket (the image has no aws-ofi-nccl plugin")
    assert all(f.ok for f in fs)


def test_configured_but_missing_pieces_are_not_ok(monkeypatch):
    monkeypatch.setattr(selfcheck, "_installed", lambda module: None)
    env = {"MLFLOW_TRACKING_URI": "http://mlflow:5000", "FI_PROVIDER": "efa"}
    lines = _lines(selfcheck.features("s3://b/p", env=env))
    assert lines["MLflow"] == "MLflow: off (mlflow not installed) <- configured, cannot work"
    assert lines["S3 mirror"] == "S3 mirror: off (boto3 not installed) <- configured, cannot work"
    assert lines["NCCL net"].endswith("<- configured, cannot work")


def test_efa_with_plugin_libfabric_and_devices_is_aws_libfabric(tmp_path, monkeypatch):
    (tmp_path / "ofi").mkdir()
    (tmp_path / "ofi" / "libnccl-net-ofi.so").touch()
    (tmp_path / "efa").mkdir()
    (tmp_path / "efa" / "libfabric.so.1").touch()
    (tmp_path / "dev").mkdir()
    for i in range(4):
        (tmp_path / "dev" / f"uverbs{i}").touch()
    monkeypatch.setattr(selfcheck, "EFA_DEVICES", str(tmp_path / "dev" / "uverbs*"))
    env = {"FI_PROVIDER": "efa", "LD_LIBRARY_PATH": f"{tmp_path / 'ofi'}:{tmp_path / 'efa'}"}
    f = selfcheck.nccl_feature(env)
    assert (
        f.ok and f.line().startswith("NCCL net: AWS Libfabric (") and "4 EFA device(s)" in f.line()
    )
    # the same image on a pod that got no EFA devices: Socket, and not ok when EFA was asked for
    monkeypatch.setattr(selfcheck, "EFA_DEVICES", str(tmp_path / "none*"))
    f = selfcheck.nccl_feature(env)
    assert not f.ok and "no EFA devices" in f.line()


def test_self_check_command_exits_1_naming_what_cannot_work():
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "FI_PROVIDER": "efa"}
    r = subprocess.run(
        [sys.executable, "-m", "trainforge.training", "--self-check"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "NCCL net: Socket" in r.stdout and "self-check: FAILED: NCCL net" in r.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "trainforge.training", "--self-check", "mlflo"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "unknown feature(s) mlflo; valid: mlflow, s3, efa" in bad.stderr
