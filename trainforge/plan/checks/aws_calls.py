"""The AWS calls our runtime really makes (recorded from botocore's event hooks while the S3
mirror runs a job's life against moto), and the IAM requests AWS authorizes each one as:
docs/rehearsals.md, IAM rehearsal.
"""

from __future__ import annotations

import functools
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainforge.plan.checks.iam_eval import Request


@dataclass
class ApiCall:
    """One API call the client sent (or was about to send when a failure was injected)."""

    service: str  # botocore service id, e.g. "s3"
    operation: str  # e.g. "ListObjectsV2"
    params: dict[str, Any]  # API parameters, bodies left out
    secure: bool  # sent over https
    scenario: str = ""  # which rehearsal step made it

    def describe(self) -> str:
        keys = ("Bucket", "Key", "Prefix", "Delimiter", "MaxKeys")
        shown = ", ".join(f"{k}={self.params[k]!r}" for k in keys if k in self.params)
        if "Delete" in self.params:
            shown += f", {len(self.params['Delete'].get('Objects', []))} keys"
        return f"{self.service}:{self.operation}({shown})"


class CallRecorder:
    """Records every call a botocore client makes, from its own event hooks.

    `provide-client-params` sees the API parameters, `before-call` the serialized request
    (its URL says whether it goes over TLS). `fail_next` names an operation whose next call
    fails (non-retryable, as a broken connection mid-upload would after retries), so the
    runtime's and s3transfer's error paths run too.
    """

    def __init__(self, client: Any) -> None:
        self.calls: list[ApiCall] = []
        self.scenario = ""
        self.fail_next: str | None = None
        self._lock = threading.Lock()
        events = client.meta.events
        events.register("provide-client-params.*", self._params)
        events.register("before-call.*", self._before)

    def _params(self, params: dict, model: Any, context: dict, **_: Any) -> None:
        context["trainforge_params"] = {k: v for k, v in params.items() if k != "Body"}

    def _before(self, model: Any, params: dict, context: dict, **_: Any) -> Any:
        call = ApiCall(
            service=model.service_model.service_id.hyphenize(),
            operation=model.name,
            params=dict(context.get("trainforge_params", {})),
            secure=str(params.get("url", "")).startswith("https://"),
            scenario=self.scenario,
        )
        with self._lock:
            self.calls.append(call)
            inject = self.fail_next == model.name
            self.fail_next = None if inject else self.fail_next
        if not inject:
            return None
        from botocore.awsrequest import AWSResponse

        error = {"Code": "RequestTimeout", "Message": "rehearsal: injected failure"}
        body = {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}
        return AWSResponse(params.get("url", ""), 400, {}, None), body


@dataclass(frozen=True)
class S3Op:
    action: str
    on: str  # "bucket" | "object" | "each-key" (DeleteObjects: one request per key)
    kms: str | None = None  # the KMS action S3 calls on the caller's behalf (SSE-KMS)
    prefix_keys: bool = False  # ListBucket with s3:prefix/s3:delimiter/s3:max-keys


# Sources (AWS docs, checked 2026-11-23):
# - Amazon S3 API Reference, HeadBucket: "To use this operation, you must have permissions to
#   perform the s3:ListBucket action" -- and the request has no prefix, so no s3:prefix key.
# - Amazon S3 User Guide, "Actions, resources, and condition keys for Amazon S3": s3:prefix,
#   s3:delimiter and s3:max-keys are condition keys of ListBucket (ListObjects/ListObjectsV2).
# - S3 User Guide, "Multipart upload API and permissions": CreateMultipartUpload, UploadPart
#   and CompleteMultipartUpload need s3:PutObject; AbortMultipartUpload needs
#   s3:AbortMultipartUpload.
# - AWS re:Post Knowledge Center, "s3-large-file-encryption-kms-key": SSE-KMS multipart needs
#   kms:GenerateDataKey for CreateMultipartUpload and kms:Decrypt for UploadPart (S3 reads the
#   earlier parts' data key); CompleteMultipartUpload assembles encrypted parts (kms:Decrypt,
#   Knowledge Center "s3-multipart-kms-decrypt").
# - S3 User Guide, "Using server-side encryption with AWS KMS keys": PutObject needs
#   kms:GenerateDataKey, GetObject kms:Decrypt. HeadObject and GetObject need s3:GetObject
#   (HeadObject returns metadata only; no data key is decrypted).
# - S3 API Reference, DeleteObjects: each key needs s3:DeleteObject (s3:DeleteObjectVersion
#   when a VersionId is given).
S3_OPERATIONS: dict[str, S3Op] = {
    "HeadBucket": S3Op("s3:ListBucket", "bucket"),
    "ListObjectsV2": S3Op("s3:ListBucket", "bucket", prefix_keys=True),
    "GetObject": S3Op("s3:GetObject", "object", kms="kms:Decrypt"),
    "HeadObject": S3Op("s3:GetObject", "object"),
    "PutObject": S3Op("s3:PutObject", "object", kms="kms:GenerateDataKey"),
    "CreateMultipartUpload": S3Op("s3:PutObject", "object", kms="kms:GenerateDataKey"),
    "UploadPart": S3Op("s3:PutObject", "object", kms="kms:Decrypt"),
    "CompleteMultipartUpload": S3Op("s3:PutObject", "object", kms="kms:Decrypt"),
    "AbortMultipartUpload": S3Op("s3:AbortMultipartUpload", "object"),
    "DeleteObjects": S3Op("s3:DeleteObject", "each-key"),
}


# ListBucket's condition keys, from the API parameters they come from
_LIST_KEYS = {"Prefix": "s3:prefix", "Delimiter": "s3:delimiter", "MaxKeys": "s3:max-keys"}


class UnmappedCall(LookupError):
    """The runtime made a call this module does not know how to authorize."""


@dataclass(frozen=True)
class Caller:
    """Who makes the calls and where: the principal, its account and the region."""

    principal: str
    account: str
    region: str
    partition: str = "aws"

    def request(self, action: str, resource: str, **context: Any) -> Request:
        """Its request, with aws:PrincipalArn and aws:RequestedRegion (`context` may override)."""
        base = {"aws:PrincipalArn": self.principal, "aws:RequestedRegion": self.region}
        return Request(self.principal, action, resource, {**base, **context}, account=self.account)

    def arn(self, service: str, resource: str) -> str:
        """An ARN in the caller's account and region."""
        return f"arn:{self.partition}:{service}:{self.region}:{self.account}:{resource}"


@dataclass(frozen=True)
class BucketFacts:
    """What decides the KMS side of S3 calls: the bucket's default encryption."""

    name: str
    kms_key_arn: str | None = None
    bucket_key: bool = False


@dataclass
class Authz:
    """One IAM request a call needs, and which resource policy AWS consults with it."""

    request: Request
    resource_policy: str  # "bucket" | "kms-key"


def s3_requests(
    call: ApiCall, caller: Caller, bucket: BucketFacts, network: dict[str, Any] | None = None
) -> list[Authz]:
    """The IAM requests AWS evaluates for one S3 call (plus its KMS request, if any).

    `network`: keys the path of the request adds (`aws:SourceVpce` when it reaches S3
    through a VPC endpoint)."""
    op = S3_OPERATIONS.get(call.operation)
    if op is None:
        raise UnmappedCall(
            f"{call.describe()}: no IAM mapping for s3:{call.operation} in "
            "trainforge/plan/checks/aws_calls.py S3_OPERATIONS"
        )
    barn = f"arn:{caller.partition}:s3:::{call.params.get('Bucket', bucket.name)}"
    account = {"aws:PrincipalAccount": caller.account}
    base = {**account, "aws:SecureTransport": call.secure, **(network or {})}
    if op.on == "bucket":
        listing = _LIST_KEYS.items() if op.prefix_keys else ()
        ctx = {**base, **{key: str(call.params[p]) for p, key in listing if p in call.params}}
        return [Authz(caller.request(op.action, barn, **ctx), "bucket")]
    deleted = [o["Key"] for o in call.params.get("Delete", {}).get("Objects", [])]
    keys = deleted if op.on == "each-key" else [call.params.get("Key", "")]
    out: list[Authz] = []
    for key in keys:
        out.append(Authz(caller.request(op.action, f"{barn}/{key}", **base), "bucket"))
        if op.kms and bucket.kms_key_arn:
            # The KMS request S3 makes with the caller's credentials (KMS Developer Guide,
            # "kms:ViaService"). Its encryption context `aws:s3:arn` is the object ARN, or the
            # bucket ARN when S3 Bucket Keys are on (S3 User Guide, "Reducing the cost of
            # SSE-KMS with Amazon S3 Bucket Keys": "S3 Bucket Key objects use the bucket ARN as
            # their encryption context").
            context_arn = f"arn:{caller.partition}:s3:::{bucket.name}"
            context_arn += "" if bucket.bucket_key else f"/{key}"
            kms_context = {
                **account,
                "kms:ViaService": f"s3.{caller.region}.amazonaws.com",
                "kms:CallerAccount": caller.account,
                "kms:EncryptionContext:aws:s3:arn": context_arn,
                "kms:EncryptionContextKeys": ["aws:s3:arn"],
            }
            kms = caller.request(op.kms, bucket.kms_key_arn, **kms_context)
            out.append(Authz(kms, "kms-key"))
    return out


MULTIPART_BYTES = 8 * 1024 * 1024 + 1024  # just over s3transfer's default 8 MiB threshold


def _no_torch_verify(path: Path) -> str | None:
    return None if (path / ".metadata").is_file() else "no .metadata"


@functools.cache
def _session(region: str) -> Any:
    """One boto3 session per region and process: a session loads the S3 service model (a few
    MB of JSON, ~0.2 s) for its first client; its later clients reuse it."""
    import boto3

    return boto3.session.Session("rehearsal", "rehearsal", region_name=region)


def _write_checkpoint(root: Path, step: int, ranks: int, big: bool) -> Path:
    """A directory laid out as the runtime writes one (contents do not matter to S3)."""
    from trainforge.training.layout import EXTRAS_FMT, METADATA_FILE, step_dir_name

    path = root / step_dir_name(step)
    path.mkdir(parents=True)
    for rank in range(ranks):
        size = MULTIPART_BYTES if (big and rank == 0) else 1024
        with open(path / f"__{rank}_0.distcp", "wb") as f:
            f.truncate(size)
        (path / EXTRAS_FMT.format(rank=rank)).write_bytes(b"extras")
    (path / METADATA_FILE).write_bytes(b"metadata")
    return path


def rehearse_s3_mirror(bucket: str, prefix: str, region: str) -> list[ApiCall]:
    """Run the runtime's S3 mirror through a job's life against moto; return its calls."""
    from moto import mock_aws

    from trainforge.training.s3_mirror import S3Mirror

    uri = f"s3://{bucket}/{prefix.strip('/')}"
    with mock_aws(), tempfile.TemporaryDirectory() as tmp:
        client = _session(region).client("s3", endpoint_url=f"https://s3.{region}.amazonaws.com")
        where = {} if region == "us-east-1" else {"LocationConstraint": region}
        kwargs = {"CreateBucketConfiguration": where} if where else {}
        client.create_bucket(Bucket=bucket, **kwargs)  # before recording: not the runtime's
        rec = CallRecorder(client)
        root = Path(tmp)

        def mirror() -> S3Mirror:
            return S3Mirror(uri, client=client, log=lambda line: None, verify=_no_torch_verify)

        rec.scenario = "fresh job: access check, no latest marker yet"
        first = mirror()
        first.download_latest(root / "fresh")
        for scenario, step, big in (
            ("save: every rank uploads its files (multipart), rank 0 publishes", 100, True),
            ("second save, prune past keep-last", 200, False),
        ):
            rec.scenario = scenario
            path = _write_checkpoint(root / "ckpt", step, ranks=2, big=big)
            for rank in range(2):
                first.upload_own_files(path, rank)
            first.publish(path, keep_last=1)

        rec.scenario = "resume on a fresh node: read latest, download the checkpoint"
        mirror().download_latest(root / "resume")

        rec.scenario = "multipart upload fails half way: s3transfer aborts it"
        step3 = _write_checkpoint(root / "ckpt", 300, ranks=1, big=True)
        rec.fail_next = "UploadPart"
        first.upload_own_files(step3, 0)
    return rec.calls
