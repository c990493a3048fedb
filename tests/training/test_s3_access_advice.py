"""The access-denied error of `--checkpoint-s3` tells the job's role what to grant; a role
granted exactly that must then do every call the mirror makes. The mirror's calls are recorded
under moto (a fresh job's access check and `latest` read, three saves pruned to two, a fresh
node's download) and each is matched against the grants the message names, with IAM's
`StringLike` (`*` any characters): the access check listed `Prefix=runs/exp1`, which a grant
of `s3:prefix runs/exp1/*` does not allow (the plan's IAM evaluator denies it the same way)."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from tests.conftest import fake_aws

boto3 = pytest.importorskip("boto3")
moto = pytest.importorskip("moto")

BUCKET = "tf-ckpt"
URI = f"s3://{BUCKET}/runs/exp1"

# S3 operation -> the IAM action it is authorized as, and what its request names
LIST = {"ListObjectsV2"}
OBJECT = {
    "GetObject": "s3:GetObject",
    "HeadObject": "s3:GetObject",
    "PutObject": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
    "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "DeleteObject": "s3:DeleteObject",
    "DeleteObjects": "s3:DeleteObject",
}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch):
    """Every S3 call any client makes, as (operation, params), under moto."""
    from botocore.client import BaseClient

    fake_aws(monkeypatch)
    seen: list[tuple[str, dict]] = []
    make = BaseClient._make_api_call

    def record(self, operation: str, params: dict):
        seen.append((operation, dict(params)))
        return make(self, operation, params)

    with moto.mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        seen.clear()
        monkeypatch.setattr(BaseClient, "_make_api_call", record)
        yield seen


def _grants(mirror) -> tuple[str, str, set[str]]:
    """(list prefix pattern, object ARN pattern, object actions) the denied message names."""
    from botocore.exceptions import ClientError

    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "ListObjectsV2")
    message = str(mirror._explain(denied, "checking the bucket"))
    listing = re.search(rf"s3:ListBucket on arn:aws:s3:::{BUCKET} \(s3:prefix (\S+)\)", message)
    objects = re.search(rf"s3:(GetObject(?:/\w+)*) on (arn:aws:s3:::{BUCKET}/\S+)", message)
    assert listing and objects, message
    actions = {f"s3:{a}" for a in objects[1].split("/")}
    return listing[1], objects[2], actions


def test_a_role_granted_what_the_denied_message_says_does_every_call(calls, tmp_path: Path):
    import torch

    from trainforge.training.checkpoint import CheckpointConfig, CheckpointManager

    def manager(root: Path, **kw) -> CheckpointManager:
        cfg = CheckpointConfig(directory=str(root), s3_uri=URI, **kw)
        return CheckpointManager(cfg, log=lambda _: None)

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    cm = manager(tmp_path / "node-a", keep_last=2)
    assert cm.restore(model, opt) == 0  # a fresh job: nothing here, nothing in S3 yet
    for step in (1, 2, 3):
        model(torch.ones(2, 4)).sum().backward()
        opt.step()
        opt.zero_grad()
        cm.save(step, model, opt)
    cm.close()
    fresh = manager(tmp_path / "node-b")
    assert fresh.restore(model, opt) == 3  # downloaded on a fresh node
    prefix, objects, actions = _grants(fresh.mirror)

    ops = {op for op, _ in calls}
    assert "ListObjectsV2" in ops and "PutObject" in ops and "GetObject" in ops, ops
    outside = []
    for op, params in calls:
        assert params.get("Bucket") == BUCKET, (op, params)
        if op in LIST:
            if not fnmatchcase(params.get("Prefix", ""), prefix):
                outside.append((op, f"Prefix={params.get('Prefix', '')!r}", f"s3:prefix {prefix}"))
        elif op in OBJECT:
            keys = (
                [params["Key"]]
                if "Key" in params
                else [o["Key"] for o in params["Delete"]["Objects"]]
            )
            for key in keys:
                arn = f"arn:aws:s3:::{BUCKET}/{key}"
                if OBJECT[op] not in actions or not fnmatchcase(arn, objects):
                    outside.append((op, arn, f"{sorted(actions)} on {objects}"))
        else:
            outside.append((op, "not an S3 call the message grants", ""))
    assert not outside, outside
