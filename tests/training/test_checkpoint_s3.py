"""S3 mirror against moto (in-process ``mock_aws``): upload, fresh directory, download, resume;
the latest marker only moves after a whole upload; clear errors for a missing bucket, denied
access, a foreign marker and a missing boto3."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import fake_aws

boto3 = pytest.importorskip(
    "boto3", reason="boto3 is in the dev extra only (the runtime itself does not need it)"
)
moto = pytest.importorskip("moto", reason="moto (S3 stand-in) is in the dev extra only")

BUCKET = "tf-ckpt"
URI = f"s3://{BUCKET}/runs/exp1"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch):
    fake_aws(monkeypatch)
    with moto.mock_aws():
        yield boto3.client("s3", region_name="us-east-1")


def _model():
    import torch

    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3)
    return m, torch.optim.AdamW(m.parameters(), lr=0.1)


def _train(m, opt, n: int) -> None:
    import torch

    for i in range(n):
        m(torch.full((2, 4), float(i))).pow(2).sum().backward()
        opt.step()
        opt.zero_grad()


def _manager(root: Path, logs: list[str], **kw):
    from trainforge.training.checkpoint import CheckpointConfig, CheckpointManager

    cfg = CheckpointConfig(directory=str(root), s3_uri=URI, **kw)
    return CheckpointManager(cfg, log=logs.append)


def test_round_trip_upload_fresh_dir_download_resume(aws, tmp_path: Path) -> None:
    aws.create_bucket(Bucket=BUCKET)
    logs: list[str] = []
    m, opt = _model()
    cm = _manager(tmp_path / "node-a", logs, keep_last=2)
    for step in (1, 2, 3):
        _train(m, opt, 1)
        cm.save(step, m, opt)
    cm.close()
    keys = sorted(o["Key"] for o in aws.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert keys == [
        "runs/exp1/latest",
        "runs/exp1/step_000002/.metadata",
        "runs/exp1/step_000002/__0_0.distcp",
        "runs/exp1/step_000002/trainforge_rank00000.pt",
        "runs/exp1/step_000003/.metadata",
        "runs/exp1/step_000003/__0_0.distcp",
        "runs/exp1/step_000003/trainforge_rank00000.pt",
    ]
    marker = json.loads(aws.get_object(Bucket=BUCKET, Key="runs/exp1/latest")["Body"].read())
    assert marker == {"checkpoint": "step_000003", "step": 3}

    # a new node: empty local directory -> download the marker's checkpoint, then resume
    fresh = tmp_path / "node-b"
    m2, opt2 = _model()
    _train(m2, opt2, 5)  # different state, must be overwritten
    logs2: list[str] = []
    assert _manager(fresh, logs2).restore(m2, opt2) == 3
    assert (fresh / "step_000003" / ".metadata").is_file()
    assert any("downloaded s3://tf-ckpt/runs/exp1/step_000003" in line for line in logs2)
    for a, b in zip(m.parameters(), m2.parameters(), strict=True):
        assert a.equal(b)
    _train(m, opt, 2)
    _train(m2, opt2, 2)  # and training continues identically (optimizer state came along)
    for a, b in zip(m.parameters(), m2.parameters(), strict=True):
        assert a.equal(b)


def test_marker_moves_only_after_every_upload_succeeded(aws, tmp_path: Path) -> None:
    aws.create_bucket(Bucket=BUCKET)
    logs: list[str] = []
    m, opt = _model()
    cm = _manager(tmp_path, logs)
    cm.save(1, m, opt)
    cm.mirror.upload_own_files = lambda path, rank: False  # a rank's upload fails
    cm.save(2, m, opt)
    marker = json.loads(aws.get_object(Bucket=BUCKET, Key="runs/exp1/latest")["Body"].read())
    assert marker["checkpoint"] == "step_000001"
    assert any("step_000002 not published" in line for line in logs)
    assert (tmp_path / "step_000002" / ".metadata").is_file()  # the local one is still good


def test_local_checkpoint_wins_over_s3(aws, tmp_path: Path) -> None:
    aws.create_bucket(Bucket=BUCKET)
    m, opt = _model()
    cm = _manager(tmp_path, [])
    cm.save(4, m, opt)
    logs: list[str] = []
    assert _manager(tmp_path, logs).restore(*_model()) == 4
    assert not any("downloaded" in line for line in logs)


def test_missing_bucket_is_a_clear_error(aws, tmp_path: Path) -> None:
    from trainforge.training.checkpoint import CheckpointError

    with pytest.raises(CheckpointError, match=r"bucket 'tf-ckpt' does not exist"):
        _manager(tmp_path, [])


def test_access_denied_is_a_clear_error(aws, tmp_path: Path, monkeypatch) -> None:
    from moto.core import set_initial_no_auth_action_count

    from trainforge.training.checkpoint import CheckpointError

    @set_initial_no_auth_action_count(3)  # the 3 setup calls below run unauthenticated
    def run() -> None:
        aws.create_bucket(Bucket=BUCKET)
        iam = boto3.client("iam", region_name="us-east-1")
        iam.create_user(UserName="no-perms")
        key = iam.create_access_key(UserName="no-perms")["AccessKey"]
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
        with pytest.raises(CheckpointError, match=r"access denied \((403|AccessDenied)\)") as e:
            _manager(tmp_path, [])
        assert "s3:ListBucket on arn:aws:s3:::tf-ckpt" in str(e.value)

    run()


def test_foreign_marker_is_a_clear_error(aws, tmp_path: Path) -> None:
    from trainforge.training.checkpoint import CheckpointError

    aws.create_bucket(Bucket=BUCKET)
    aws.put_object(Bucket=BUCKET, Key="runs/exp1/latest", Body=b"step 7 I think")
    with pytest.raises(CheckpointError, match="is not a trainforge marker"):
        _manager(tmp_path, []).restore(*_model())


def test_without_boto3_the_error_says_how_to_install(monkeypatch, tmp_path: Path) -> None:
    from trainforge.training.checkpoint import CheckpointError

    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 -> ImportError
    with pytest.raises(CheckpointError, match=r"needs boto3.*trainforge\[s3\]"):
        _manager(tmp_path, [])
    # and without --checkpoint-s3 nothing imports it
    from trainforge.training.checkpoint import CheckpointConfig, CheckpointManager

    CheckpointManager(CheckpointConfig(directory=str(tmp_path)), log=lambda s: None)


def test_runtime_resumes_from_s3_on_a_fresh_node(aws, tmp_path: Path, capsys) -> None:
    """The runtime itself (1 process): train with the mirror, then start on an empty dir."""
    from trainforge.training.config import parse_args
    from trainforge.training.loop import train

    aws.create_bucket(Bucket=BUCKET)
    common = ["--model", "mlp", "--warmup-steps", "1", "--batch-size", "8"]
    common += ["--dataset-size", "64", "--checkpoint-every", "2", "--checkpoint-s3", URI]
    node_a = ["--checkpoint-dir", str(tmp_path / "a"), "--output-dir", str(tmp_path / "oa")]
    assert train(parse_args([*common, "--steps", "4", *node_a])) == 0
    node_b = ["--checkpoint-dir", str(tmp_path / "b"), "--output-dir", str(tmp_path / "ob")]
    assert train(parse_args([*common, "--steps", "6", *node_b])) == 0
    out = capsys.readouterr().out
    assert "s3 mirror: downloaded s3://tf-ckpt/runs/exp1/step_000004" in out
    assert "resumed from" in out and "step_000004 at step 4" in out
    summary = json.loads((tmp_path / "ob" / "summary.json").read_text())
    assert summary["steps"] == 6 and summary["steps_this_run"] == 2
    marker = json.loads(aws.get_object(Bucket=BUCKET, Key="runs/exp1/latest")["Body"].read())
    assert marker["checkpoint"] == "step_000006"


# --- calls that a prefix-scoped team role allows (issue 10; rehearsed by the plan) ----------


def _mirror(client, logs=None):
    from trainforge.plan.checks.aws_calls import CallRecorder
    from trainforge.training.s3_mirror import S3Mirror

    rec = CallRecorder(client)
    m = S3Mirror(URI, client=client, log=(logs if logs is not None else []).append)
    return m, rec


def test_access_check_and_fresh_marker_stay_under_the_job_prefix(aws) -> None:
    """No HeadBucket (ListBucket without s3:prefix, denied to a team role); a fresh job learns
    that it has no marker from a list under its prefix, never from a GetObject error."""
    aws.create_bucket(Bucket=BUCKET)
    m, rec = _mirror(aws)
    assert m.latest() is None
    assert [c.operation for c in rec.calls] == ["ListObjectsV2", "ListObjectsV2"]
    assert [c.params["Prefix"] for c in rec.calls] == ["runs/exp1/", "runs/exp1/latest"]


def test_a_denied_marker_read_is_fatal_not_absent(aws) -> None:
    """A marker the list has shown but GetObject refuses (e.g. kms:Decrypt) is a real denial."""
    from botocore.exceptions import ClientError

    from trainforge.training.checkpoint import CheckpointError

    aws.create_bucket(Bucket=BUCKET)
    aws.put_object(Bucket=BUCKET, Key="runs/exp1/latest", Body=b'{"checkpoint": "step_000001"}')
    m, _ = _mirror(aws)

    def denied(**kw):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetObject")

    m.client = type(
        "C",
        (),
        {"list_objects_v2": staticmethod(aws.list_objects_v2), "get_object": staticmethod(denied)},
    )()
    with pytest.raises(CheckpointError, match=r"access denied.*kms:GenerateDataKey/kms:Decrypt"):
        m.latest()


def test_a_failed_multipart_upload_is_logged_and_aborted_not_raised(aws, tmp_path: Path) -> None:
    """s3transfer raises S3UploadFailedError (not a ClientError) when a part fails; the rank
    must log it and return False, and the upload is aborted (s3:AbortMultipartUpload)."""
    aws.create_bucket(Bucket=BUCKET)
    logs: list[str] = []
    m, rec = _mirror(aws, logs)
    step = tmp_path / "step_000005"
    step.mkdir()
    with open(step / "__0_0.distcp", "wb") as f:
        f.truncate(9 * 1024 * 1024)  # over s3transfer's 8 MiB multipart threshold
    rec.fail_next = "UploadPart"
    assert m.upload_own_files(step, 0) is False
    assert any("rank 0: upload of step_000005 failed" in line for line in logs)
    assert "AbortMultipartUpload" in [c.operation for c in rec.calls]
