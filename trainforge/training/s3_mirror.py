"""Mirror complete checkpoints to S3 and fetch the newest one onto a fresh node.

Protocol (``s3://bucket/prefix``)::

    prefix/step_000100/__0_0.distcp ...   uploaded by the rank that wrote each file
    prefix/step_000100/.metadata          uploaded by rank 0 after every rank's upload succeeded
    prefix/latest                         JSON marker, moved by rank 0 only after that

Each rank uploads the files it wrote itself: uploads run in parallel across ranks and nodes
(one rank would serialise the whole model through one NIC), and it stays correct even where a
rank's files are not visible to rank 0. ``latest`` moves only after all uploads are confirmed,
so a reader that follows it always finds a whole checkpoint; an interrupted upload leaves the
marker on the previous one.

boto3 is optional (the ``s3`` extra): it is imported only when ``--checkpoint-s3`` is used.
Credentials and endpoint come from the standard AWS chain (IRSA / Pod Identity on EKS,
``AWS_ENDPOINT_URL`` for S3-compatible stores and tests).

IAM: a team's role may list the bucket only under its own prefix (``s3:ListBucket`` with a
``StringLike s3:prefix <team>/*`` condition). Every call here therefore works inside that
prefix: the access check and the ``latest`` read are ListObjectsV2 calls with a ``Prefix``
(HeadBucket is authorized as ``s3:ListBucket`` with no ``s3:prefix`` key and would be denied),
and a missing key is detected by listing, never by a GetObject error: S3 answers a GetObject
on a missing key with 403, not 404, when the caller may not list the bucket, and a GetObject
request carries no ``s3:prefix``, so under a prefix-conditioned ListBucket a missing marker
would look exactly like a real denial. The offline plan rehearses these calls against the
platform's policies (trainforge.plan.checks.iam_rehearsal).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainforge.training.layout import (
    EXTRAS_FMT,
    METADATA_FILE,
    CheckpointError,
    inspect_checkpoint,
    parse_step,
)

LATEST_MARKER = "latest"
LogFn = Callable[[str], None]
# Checks a downloaded checkpoint directory: None when it is whole, else why not.
VerifyFn = Callable[[Path], "str | None"]


def _verify_dcp(path: Path) -> str | None:
    """Default check: the DCP `.metadata` reads as the restore reads it (layout.inspect_checkpoint,
    no torch)."""
    status = inspect_checkpoint(path)
    return None if status.complete else status.reason


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ("bucket", "a/b"); the prefix may be empty."""
    if not uri.startswith("s3://") or len(uri) <= len("s3://"):
        raise CheckpointError(f"--checkpoint-s3 must look like s3://bucket/prefix, got {uri!r}")
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    if not bucket:
        raise CheckpointError(f"--checkpoint-s3 {uri!r} has no bucket name")
    return bucket, prefix.strip("/")


def _import_boto3() -> Any:
    try:
        import boto3
    except ImportError as e:
        raise CheckpointError(
            "--checkpoint-s3 needs boto3, which is not installed in this environment: "
            "pip install 'trainforge[s3]' (boto3==1.44.5), or drop --checkpoint-s3"
        ) from e
    return boto3


def _transfer_errors() -> tuple[type[BaseException], ...]:
    """What an upload or download may raise: botocore's errors, OS errors, and boto3's own
    (s3transfer wraps a failed part as S3UploadFailedError, which is neither of the others;
    the plan's IAM rehearsal found a failed multipart upload escaping as a traceback)."""
    from botocore.exceptions import BotoCoreError, ClientError

    errors: tuple[type[BaseException], ...] = (ClientError, BotoCoreError, OSError)
    try:
        from boto3.exceptions import Boto3Error
    except ImportError:  # an injected non-boto3 client
        return errors
    return (*errors, Boto3Error)


class S3Mirror:
    """Uploads complete checkpoints and downloads the newest one; see the module docstring."""

    def __init__(
        self,
        uri: str,
        *,
        log: LogFn = print,
        client: Any | None = None,
        verify: VerifyFn | None = None,
    ) -> None:
        self.uri = uri.rstrip("/")
        self.bucket, self.prefix = parse_s3_uri(uri)
        self.log = log
        # the offline plan's IAM rehearsal passes a check that needs no torch
        self.verify = verify or _verify_dcp
        if client is None:
            boto3 = _import_boto3()
            # own session: thread-safe use from the async checkpoint thread, fresh credentials
            client = boto3.session.Session().client("s3")
        self.client = client
        self.check_access()

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def _explain(self, e: Exception, action: str) -> CheckpointError:
        """Turn a botocore ClientError into a message naming the bucket and the fix."""
        code = str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))
        if code in ("NoSuchBucket", "404"):
            return CheckpointError(
                f"--checkpoint-s3 {self.uri}: bucket {self.bucket!r} does not exist (while "
                f"{action}); create it (the platform's checkpoint bucket) or fix the name"
            )
        if code in (
            "AccessDenied",
            "403",
            "AllAccessDisabled",
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "ExpiredToken",
        ):
            where = f"{self.prefix}/" if self.prefix else ""
            return CheckpointError(
                f"--checkpoint-s3 {self.uri}: access denied ({code}) while {action}; the "
                f"job's IAM role needs s3:ListBucket on arn:aws:s3:::{self.bucket} (s3:prefix "
                f"{where}*), s3:GetObject/PutObject/DeleteObject/AbortMultipartUpload on "
                f"arn:aws:s3:::{self.bucket}/{where}* and, for an SSE-KMS bucket, "
                "kms:GenerateDataKey/kms:Decrypt on its key"
            )
        return CheckpointError(f"--checkpoint-s3 {self.uri}: {action} failed: {code or e}")

    def check_access(self) -> None:
        """Fail before training starts, not at the first checkpoint an hour later.

        One ListObjectsV2 under the job's prefix: it proves the bucket exists (NoSuchBucket
        otherwise) and that the role may list where the runtime lists, and it is allowed by
        a prefix-conditioned ListBucket (HeadBucket is not; see the module docstring). The
        prefix ends in "/": the grant an access denial asks for, `s3:prefix <prefix>/*`, does
        not match the bare `<prefix>`.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        base = self.key("") + ("/" if self.prefix else "")
        try:
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=base, MaxKeys=1)
        except ClientError as e:
            raise self._explain(e, "checking the bucket") from e
        except BotoCoreError as e:
            raise CheckpointError(f"--checkpoint-s3 {self.uri}: cannot reach S3: {e}") from e

    # -- upload ---------------------------------------------------------------------------

    def own_files(self, path: Path, rank: int) -> list[Path]:
        """Files rank ``rank`` wrote: its DCP shards (``__<rank>_*.distcp``) and extras file."""
        files = sorted(path.glob(f"__{rank}_*.distcp"))
        extras = path / EXTRAS_FMT.format(rank=rank)
        if extras.is_file():
            files.append(extras)
        return files

    def upload_own_files(self, path: Path, rank: int) -> bool:
        """Upload this rank's files of a complete checkpoint; False (logged) on failure."""
        from botocore.exceptions import ClientError

        try:
            for f in self.own_files(path, rank):
                self.client.upload_file(str(f), self.bucket, self.key(path.name, f.name))
        except _transfer_errors() as e:
            err = self._explain(e, f"uploading {path.name}") if isinstance(e, ClientError) else e
            self.log(f"s3 mirror: rank {rank}: upload of {path.name} failed: {err}")
            return False
        return True

    def publish(self, path: Path, keep_last: int = 0) -> bool:
        """Rank 0, after every rank uploaded: `.metadata`, then the `latest` marker, then prune.

        A failure is logged, not raised: the local checkpoint is complete either way and the
        marker still names the previous whole checkpoint.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.upload_file(
                str(path / METADATA_FILE), self.bucket, self.key(path.name, METADATA_FILE)
            )
            marker = json.dumps({"checkpoint": path.name, "step": parse_step(path.name)})
            self.client.put_object(
                Bucket=self.bucket,
                Key=self.key(LATEST_MARKER),
                Body=marker.encode(),
                ContentType="application/json",
            )
        except _transfer_errors() as e:
            err = self._explain(e, f"publishing {path.name}") if isinstance(e, ClientError) else e
            self.log(f"s3 mirror: {path.name} not published: {err}")
            return False
        self.log(
            f"s3 mirror: uploaded {path.name} to {self.uri}/{path.name}; latest -> {path.name}"
        )
        if keep_last:
            try:
                self._prune(keep_last)
            except (ClientError, BotoCoreError) as e:
                self.log(f"s3 mirror: pruning old checkpoints failed (will retry next time): {e}")
        return True

    def _step_prefixes(self) -> list[str]:
        names: list[str] = []
        paginator = self.client.get_paginator("list_objects_v2")
        base = self.key("") + ("/" if self.prefix else "")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=base, Delimiter="/"):
            for cp in page.get("CommonPrefixes", []):
                name = cp["Prefix"][len(base) :].rstrip("/")
                if parse_step(name) is not None:
                    names.append(name)
        return sorted(names, key=lambda n: parse_step(n) or 0)

    def _prune(self, keep_last: int) -> None:
        """Delete step prefixes older than the newest ``keep_last`` (never the marker's)."""
        names = self._step_prefixes()
        for name in names[:-keep_last]:
            keys = [o["Key"] for o in self._list(name)]
            for i in range(0, len(keys), 1000):
                self.client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in keys[i : i + 1000]], "Quiet": True},
                )
            self.log(f"s3 mirror: removed {self.uri}/{name} (keep-last {keep_last})")

    def _list(self, name: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.key(name) + "/"):
            out.extend(page.get("Contents", []))
        return out

    # -- download -------------------------------------------------------------------------

    def _exists(self, key: str) -> bool:
        """Is `key` in the bucket? Asked by listing under the key itself (allowed by the
        team's prefix-conditioned ListBucket), never inferred from a GetObject error."""
        page = self.client.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=1)
        return any(o.get("Key") == key for o in page.get("Contents", []))

    def latest(self) -> str | None:
        """The checkpoint the marker names, or None when the prefix has none yet.

        A fresh job has no marker: the list says so. Only a marker the list has shown is
        read, so a 403 from GetObject is a real denial (e.g. kms:Decrypt) and fatal; a 404
        there means the marker was deleted in between, which is "none yet" again.
        """
        from botocore.exceptions import ClientError

        marker = self.key(LATEST_MARKER)
        try:
            if not self._exists(marker):
                return None
            body = self.client.get_object(Bucket=self.bucket, Key=marker)["Body"]
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._explain(e, "reading the latest marker") from e
        try:
            name = json.loads(body.read())["checkpoint"]
        except (ValueError, KeyError, TypeError) as e:
            raise CheckpointError(
                f"--checkpoint-s3 {self.uri}: {self.key(LATEST_MARKER)} is not a trainforge "
                "marker (expected JSON with a 'checkpoint' key); delete it or use another prefix"
            ) from e
        if parse_step(str(name)) is None:
            raise CheckpointError(
                f"--checkpoint-s3 {self.uri}: marker names {name!r}, not step_NNNNNN"
            )
        return str(name)

    def download_latest(self, root: Path) -> Path | None:
        """Fetch the marker's checkpoint into ``root``; `.metadata` last, then an atomic rename."""
        from botocore.exceptions import ClientError

        name = self.latest()
        if name is None:
            self.log(f"s3 mirror: no checkpoint under {self.uri} yet")
            return None
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".trainforge-download-{name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            objects = self._list(name)
            objects.sort(key=lambda o: o["Key"].endswith("/" + METADATA_FILE))  # metadata last
            for obj in objects:
                rel = obj["Key"][len(self.key(name)) + 1 :]
                if not rel or "/" in rel:
                    continue
                self.client.download_file(self.bucket, obj["Key"], str(tmp / rel))
        except _transfer_errors() as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(e, ClientError):
                raise self._explain(e, f"downloading {name}") from e
            raise CheckpointError(
                f"--checkpoint-s3 {self.uri}: downloading {name} failed: {e}"
            ) from e
        final = root / name
        if not (tmp / METADATA_FILE).is_file():
            shutil.rmtree(tmp, ignore_errors=True)
            raise CheckpointError(
                f"--checkpoint-s3 {self.uri}: marker points at {name} but it has no .metadata "
                "in S3; the bucket was modified outside trainforge"
            )
        if final.exists():
            shutil.rmtree(final)  # a partial local copy of the same step
        os.rename(tmp, final)
        problem = self.verify(final)
        if problem is not None:
            raise CheckpointError(
                f"checkpoint {name} downloaded from {self.uri} is not readable: {problem}"
            )
        self.log(f"s3 mirror: downloaded {self.uri}/{name} to {final} ({len(objects)} files)")
        return final
