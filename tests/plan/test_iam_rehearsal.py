"""The IAM rehearsal: the runtime's recorded S3 calls and every controller's calls through the
policies the platform renders. Each defect it is for is reproduced and must be reported."""

from __future__ import annotations

import functools
import json

import pytest

from tests.conftest import shipped_plan
from tests.plan.test_iam_rehearsal_findings import PROD
from trainforge.plan import core
from trainforge.plan.checks import iam_rehearsal as R
from trainforge.plan.checks.aws_calls import (
    ApiCall,
    BucketFacts,
    Caller,
    UnmappedCall,
    rehearse_s3_mirror,
    s3_requests,
)
from trainforge.plan.checks.iam_eval import Policy, evaluate
from trainforge.plan.checks.iam_reference import (
    KarpenterFacts,
    karpenter_calls,
    karpenter_reference,
)
from trainforge.platform import checkpoint_bucket
from trainforge.platform import karpenter as K

ACCT = "123456789012"
ROLE = f"arn:aws:iam::{ACCT}:role/team-research"
BUCKET = "tf-ckpt"
KEY = f"arn:aws:kms:us-west-2:{ACCT}:key/k"
CALLER = Caller(ROLE, ACCT, "us-west-2")
FACTS = BucketFacts(BUCKET, KEY, bucket_key=True)


@pytest.fixture(scope="module")
def calls():
    return rehearse_s3_mirror(BUCKET, "research/job", "us-west-2")


def _requests(calls: list[ApiCall]) -> list[tuple]:
    """Each call as IAM judges it: without the parameters that differ from run to run and
    never reach IAM (moto's UploadId; which part s3transfer's threads sent first)."""
    skip = {*R._PER_PART, "UploadId"}
    return [
        (c.scenario, c.service, c.operation, c.secure, sorted(c.params.items()))
        for c in calls
        for c in [R.replace(c, params={k: v for k, v in c.params.items() if k not in skip})]
    ]


def test_the_recorded_calls_rebound_to_a_bucket_and_prefix_are_the_calls_made_with_them(calls):
    """The plan records the runtime's calls once and rebinds them to each team's bucket and
    prefix (iam_rehearsal._mirror_calls): the same requests as a recording with those names."""
    rebound = R._mirror_calls(BUCKET, "research/job", "us-west-2")
    assert _requests(rebound) == _requests(R.distinct_calls(calls))
    assert {c.params["Bucket"] for c in rebound} == {BUCKET}
    keys = [c.params[k] for c in rebound for k in ("Key", "Prefix") if k in c.params]
    assert keys and all(k.startswith("research/job/") for k in keys), keys


def test_a_recording_started_early_is_the_one_the_teams_are_judged_with(monkeypatch):
    """`ahead` (called in the stand-in child: registry.run_checks) starts the recording for the
    stack's region where a contract has a checkpoint bucket; `_mirror_calls` then rebinds what
    that made instead of recording again. Nothing is started for a stack without one."""
    from types import SimpleNamespace as NS

    made = [
        ApiCall("s3", "GetObject", {"Bucket": R.RECORDED_BUCKET, "Key": R.RECORDED_PREFIX}, True)
    ]
    started = []

    def start(work):
        started.append(work)
        return lambda: made

    monkeypatch.setattr(R, "_early", {})
    inventory = NS(config={"aws:region": "eu-west-1"})
    team = NS(name="research")
    bare = NS(inventory=inventory, declared=NS(contracts=[NS(checkpoint_bucket=None, teams={})]))
    R.ahead(bare, start)
    assert started == [] and R._early == {}
    ctx = NS(
        inventory=inventory, declared=NS(contracts=[NS(checkpoint_bucket="b", teams={"r": team})])
    )
    R.ahead(ctx, start)
    assert [(w.func, w.args) for w in started] == [(R._recorded_calls, ("eu-west-1",))]
    rebound = R._mirror_calls("tb", "research/job", "eu-west-1")
    assert [c.params for c in rebound] == [{"Key": "research/job", "Bucket": "tb"}]


def team_policies(policy_text: str) -> list[Policy]:
    return [Policy("team", json.loads(policy_text))]


def decide(call: ApiCall, identity: list[Policy], bucket=FACTS):
    default_key = Policy(
        "default key policy",
        {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:aws:iam::{ACCT}:root"},
                    "Action": "kms:*",
                    "Resource": "*",
                }
            ]
        },
    )
    out = []
    for a in s3_requests(call, CALLER, bucket):
        if a.resource_policy == "kms-key":
            out.append((a, evaluate(a.request, identity, [default_key], key_policy=True)))
        else:
            out.append((a, evaluate(a.request, identity)))
    return out


def test_the_runtime_calls_are_recorded_from_botocore(calls):
    ops = [c.operation for c in calls]
    assert "HeadBucket" not in ops  # the runtime's access check lists under its prefix
    for op in ("CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"):
        assert op in ops  # a checkpoint shard over 8 MiB goes multipart
    assert "AbortMultipartUpload" in ops  # a failed part: s3transfer aborts the upload
    assert "DeleteObjects" in ops and "GetObject" in ops and "HeadObject" in ops
    lists = [c for c in calls if c.operation == "ListObjectsV2"]
    assert lists and all(c.params["Prefix"].startswith("research/job") for c in lists)
    fresh = [c for c in calls if c.scenario.startswith("fresh job")]
    # a fresh job learns that it has no `latest` marker by listing, not by a GetObject 403
    assert [c.operation for c in fresh] == ["ListObjectsV2", "ListObjectsV2"]
    assert all(c.secure for c in calls)


def test_own_prefix_allowed_other_team_and_bucket_denied(calls):
    identity = team_policies(
        checkpoint_bucket.team_policy(f"arn:aws:s3:::{BUCKET}", KEY, "research", "us-west-2")
    )
    for call in calls:
        for a, d in decide(call, identity):
            assert d.allowed, (call.describe(), a.describe(), d.explain())
    for call in calls:
        other = R._rebind(call, BUCKET, "research/job", "vision/job")
        for a, d in decide(other, identity):
            if a.resource_policy == "bucket":
                assert not d.allowed, a.describe()
        elsewhere = R._rebind(call, "someone-elses", "research/job", "research/job")
        for a, d in decide(elsewhere, identity, BucketFacts("someone-elses", KEY, True)):
            if a.resource_policy == "bucket":
                assert not d.allowed, a.describe()


def test_head_bucket_under_a_prefix_condition_is_reported_denied():
    identity = team_policies(
        checkpoint_bucket.team_policy(f"arn:aws:s3:::{BUCKET}", KEY, "research", "us-west-2")
    )
    head = ApiCall("s3", "HeadBucket", {"Bucket": BUCKET}, secure=True)
    ((authz, decision),) = decide(head, identity)
    assert authz.request.action == "s3:ListBucket"
    assert authz.request.resource == f"arn:aws:s3:::{BUCKET}"
    assert "s3:prefix" not in authz.request.context
    assert not decision.allowed
    assert "ListTeamPrefix does not apply: StringLike s3:prefix" in decision.explain()


def test_sse_kms_calls_need_the_key_through_s3(calls):
    ops = {}
    for call in calls:
        for a in s3_requests(call, CALLER, FACTS):
            if a.resource_policy == "kms-key":
                ops.setdefault(call.operation, set()).add(a.request.action)
                assert a.request.context["kms:ViaService"] == "s3.us-west-2.amazonaws.com"
                # bucket keys: the encryption context is the bucket's ARN
                assert (
                    a.request.context["kms:EncryptionContext:aws:s3:arn"]
                    == f"arn:aws:s3:::{BUCKET}"
                )
    assert ops["CreateMultipartUpload"] == {"kms:GenerateDataKey"}
    assert ops["UploadPart"] == {"kms:Decrypt"}
    assert ops["PutObject"] == {"kms:GenerateDataKey"}
    assert ops["GetObject"] == {"kms:Decrypt"}
    # the key only via S3 in the bucket's region
    identity = team_policies(
        checkpoint_bucket.team_policy(f"arn:aws:s3:::{BUCKET}", KEY, "research", "eu-west-1")
    )
    put = next(c for c in calls if c.operation == "PutObject")
    kms = [d for a, d in decide(put, identity) if a.resource_policy == "kms-key"]
    assert kms and not kms[0].allowed


def test_an_s3_operation_without_a_mapping_is_reported_not_skipped():
    with pytest.raises(UnmappedCall, match="GetBucketAcl"):
        s3_requests(ApiCall("s3", "GetBucketAcl", {"Bucket": BUCKET}, True), CALLER, FACTS)


# --- through the plan: the rendered stack -------------------------------------------------


def failing(result, rule=None):
    return [v for v in result.failing if rule is None or v.rule == rule]


def test_dev_plan_is_clean_and_reports_calls_per_principal():
    result = shipped_plan("dev")
    assert not [v for v in result.failing if v.rule.startswith("TRAINFORGE_IAM")]
    (section,) = [s for s in result.sections if s.title == "IAM rehearsal"]
    rows = {p["principal"]: p for p in section.data["principals"]}
    team = next(v for k, v in rows.items() if "team research" in k)
    assert (team["allowed"], team["denied"], team["failed"]) == (63, 123, 0)
    assert any("Karpenter" in k for k in rows) and any("aws-ebs-csi-driver" in k for k in rows)


def test_the_old_runtime_head_bucket_is_caught(repo_root, monkeypatch):
    """Issue 10 item 1, the runtime half: HeadBucket before listing."""
    from trainforge.training.s3_mirror import S3Mirror

    def old_check_access(self):
        self.client.head_bucket(Bucket=self.bucket)
        self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.key(""), MaxKeys=1)

    monkeypatch.setattr(S3Mirror, "check_access", old_check_access)
    # a cache of its own: the calls recorded here must not be reused by another test
    monkeypatch.setattr(R, "_recorded_calls", functools.cache(R._recorded_calls.__wrapped__))
    result = core.plan_project(repo_root, "dev", standins=False)
    denied = failing(result, R.DENIED)
    assert denied, [v.message for v in result.failing]
    msg = denied[0].message
    assert "s3:HeadBucket(Bucket=" in msg and "s3:ListBucket on arn:aws:s3:::" in msg
    assert "ListTeamPrefix does not apply" in msg and "key absent" in msg
    assert denied[0].resource.startswith("role platform-services-ckpt-research")
    # docs/rehearsals.md ("Reading a failure") quotes this finding as the verdict prints it
    from trainforge.plan import verdict

    head = f"  [{R.DENIED}] {denied[0].resource}"
    doc = (repo_root / "docs" / "rehearsals.md").read_text()
    want = [head, *doc.split(f"```\n{head}\n", 1)[1].split("```", 1)[0].splitlines()]
    printed = verdict.verdict_lines(result, stack="dev")
    assert head in printed, printed
    at = printed.index(head)
    assert printed[at : at + len(want)] == want, printed


def test_the_old_team_policy_without_abort_is_caught(repo_root, monkeypatch):
    """Issue 10 item 1, the policy half: no s3:AbortMultipartUpload."""
    real = checkpoint_bucket.team_policy

    def old_policy(bucket_arn, key_arn, team, region=None):
        doc = json.loads(real(bucket_arn, key_arn, team, region))
        doc["Statement"][0]["Action"].remove("s3:AbortMultipartUpload")
        return json.dumps(doc)

    monkeypatch.setattr(checkpoint_bucket, "team_policy", old_policy)
    result = core.plan_project(repo_root, "dev", standins=False)
    (v,) = failing(result, R.DENIED)
    assert "s3:AbortMultipartUpload on arn:aws:s3:::" in v.message
    assert "multipart upload fails half way" in v.message


REAL_CONTROLLER_POLICY = K.controller_policy


def _old_karpenter_policy(cluster, region, account, queue_arn, node_role_arn, partition="aws"):
    """The first wave's controller policy, in the parts issue 10 item 4 names."""
    doc = json.loads(REAL_CONTROLLER_POLICY(cluster, region, account, queue_arn, node_role_arn))
    for st in doc["Statement"]:
        cond = st.get("Condition", {})
        cond.get("StringLike", {}).pop("aws:ResourceTag/karpenter.sh/nodepool", None)
        cond.pop("ForAllValues:StringEquals", None)
        if st["Sid"] == "AllowScopedInstanceProfileActions":
            st.pop("Condition")
        if not cond.get("StringLike", True):
            cond.pop("StringLike")
    return json.dumps(doc)


def test_the_old_karpenter_controller_policy_and_trust_are_caught(repo_root, monkeypatch):
    """Issue 10 item 4: terminate/tag on the cluster tag only, unconditioned instance-profile
    actions, no aws:TagKeys limit, a trust any association may use."""
    monkeypatch.setattr(K, "controller_policy", _old_karpenter_policy)
    from trainforge.platform.iam import assume_role_policy

    monkeypatch.setattr(
        K,
        "pod_identity_trust",
        lambda *a: assume_role_policy("pods.eks.amazonaws.com", tag_session=True),
    )
    result = core.plan_project(repo_root, "dev", standins=False)
    msgs = [v.message for v in failing(result) if "karpenter" in v.resource]
    assert any("ec2:TerminateInstances" in m and "only the cluster tag" in m for m in msgs)
    assert any("ec2:CreateTags" in m and "aws:TagKeys" in m for m in msgs)
    assert any("iam:AddRoleToInstanceProfile" in m for m in msgs)
    assert any("sts:AssumeRole" in m and "another ServiceAccount" in m for m in msgs)
    assert any("aws:SourceAccount" in m for m in msgs)
    assert any(v.rule == R.BEYOND and "AllowScopedDeletion" in v.message for v in failing(result))


def test_karpenter_policy_is_upstreams_reference_statement_for_statement():
    facts = KarpenterFacts(
        cluster="c1",
        region="us-west-2",
        account=ACCT,
        queue_arn=f"arn:aws:sqs:us-west-2:{ACCT}:c1-karpenter",
        node_role_arn=f"arn:aws:iam::{ACCT}:role/c1-karpenter-node",
        node_pool="gpu",
        node_class="gpu",
    )
    ours = json.loads(
        K.controller_policy("c1", "us-west-2", ACCT, facts.queue_arn, facts.node_role_arn)
    )["Statement"]
    ref = karpenter_reference(facts).statements()

    def norm(st):
        return json.dumps(st, sort_keys=True)

    assert sorted(map(norm, ours)) == sorted(map(norm, ref))
    policy = [Policy("ours", {"Statement": ours})]
    calls = karpenter_calls(facts, "arn:aws:iam::1:role/karpenter")
    for c in calls:
        assert evaluate(c.request, policy).allowed is c.allowed, (c.why, c.request.action)
    # every call exactly once (as the prod plan counts them): a dropped case changes this
    allowed = [(c.request.action, c.request.resource) for c in calls if c.allowed]
    assert (len(allowed), len(set(allowed)), len(calls) - len(allowed)) == (57, 57, 6)


def _team_rows(result) -> dict[str, dict]:
    (section,) = [s for s in result.sections if s.title == "IAM rehearsal"]
    return {p["principal"]: p for p in section.data["principals"] if "(team " in p["principal"]}


# the shipped prod stack's exact counts, one copy (secnet added the S3 endpoint's tally there):
# own prefix 63 allowed; denied: 41 from outside the VPC, 41 on another team's prefix, 41 on
# another bucket
PROD_COUNTS = PROD


def test_prod_plan_counts_every_principals_calls_exactly():
    """Exact counts: a rehearsal that quietly drops a case (the outside-the-VPC calls, the
    other team's prefix, a controller's call) changes them."""
    result = shipped_plan("prod")
    assert not [v for v in result.failing if v.rule.startswith("TRAINFORGE_IAM")]
    (section,) = [s for s in result.sections if s.title == "IAM rehearsal"]
    got = {p["principal"]: (p["allowed"], p["denied"]) for p in section.data["principals"]}
    assert got == PROD_COUNTS
    assert all(p["failed"] == 0 for p in section.data["principals"])


def test_a_bucket_policy_without_its_vpc_restriction_is_caught(repo_root, monkeypatch):
    """The outside-the-VPC case applies because the stack declares an S3 gateway endpoint,
    not because the bucket policy under test names one."""
    real = checkpoint_bucket.bucket_policy
    monkeypatch.setattr(
        checkpoint_bucket, "bucket_policy", lambda arn, vpce, roles: real(arn, None, roles)
    )
    result = core.plan_project(repo_root, "prod", standins=False)
    wrong = failing(result, R.TOO_BROAD)
    assert wrong, [v.message for v in result.failing]
    assert all("from outside the VPC" in v.message for v in wrong), [v.message for v in wrong]
    assert all("useless outside the VPC endpoint" in v.message for v in wrong)
    assert len(wrong) == 82  # 41 per team role: each bucket-judged request from outside
    for row in _team_rows(result).values():
        assert (row["allowed"], row["denied"], row["failed"]) == (63, 82, 41)
