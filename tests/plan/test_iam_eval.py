"""The IAM evaluator behind the IAM rehearsal, against the rules AWS documents (Policy
evaluation logic, Condition operators, single- vs multi-valued keys, KMS key policies)."""

from __future__ import annotations

import pytest

from trainforge.plan.checks.iam_eval import (
    Policy,
    Request,
    beyond_reference,
    condition_holds,
    evaluate,
    statement_within,
)

ACCT = "111122223333"
ROLE = f"arn:aws:iam::{ACCT}:role/team"
BUCKET = "arn:aws:s3:::ckpt"


def req(action="s3:GetObject", resource=f"{BUCKET}/a/x", **ctx) -> Request:
    return Request(ROLE, action, resource, ctx, account=ACCT)


def pol(*statements) -> Policy:
    return Policy("p", {"Version": "2012-10-17", "Statement": list(statements)})


def allow(action, resource, condition=None, **extra):
    st = {"Effect": "Allow", "Action": action, "Resource": resource, **extra}
    if condition:
        st["Condition"] = condition
    return st


def test_explicit_deny_beats_any_allow():
    identity = pol(allow("s3:*", "*"))
    bucket = Policy(
        "bp",
        {
            "Statement": [
                {
                    "Sid": "DenyInsecureTransport",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [BUCKET, f"{BUCKET}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ]
        },
    )
    d = evaluate(req(**{"aws:SecureTransport": False}), [identity], [bucket])
    assert not d.allowed and "explicit deny" in d.reason and "DenyInsecureTransport" in d.reason
    assert evaluate(req(**{"aws:SecureTransport": True}), [identity], [bucket]).allowed
    # absent key: Bool is a positive operator, so the Deny's condition is false
    assert evaluate(req(), [identity], [bucket]).allowed


def test_implicit_deny_and_action_resource_wildcards():
    p = pol(allow(["s3:Get*", "s3:?utObject"], f"{BUCKET}/a/*"))
    assert evaluate(req("s3:GetObject"), [p]).allowed
    assert evaluate(req("S3:getobject"), [p]).allowed  # actions are case-insensitive
    assert evaluate(req("s3:PutObject"), [p]).allowed
    assert not evaluate(req("s3:DeleteObject"), [p]).allowed
    assert not evaluate(req(resource=f"{BUCKET}/b/x"), [p]).allowed
    assert not evaluate(req(resource=f"{BUCKET}/A/x"), [p]).allowed  # resources are not
    d = evaluate(req("s3:DeleteObject"), [p])
    assert d.reason.startswith("implicit deny: no statement allows s3:DeleteObject")


def test_not_action_and_not_resource():
    p = pol({"Effect": "Allow", "NotAction": "s3:Delete*", "Resource": "*"})
    assert evaluate(req("s3:GetObject"), [p]).allowed
    assert not evaluate(req("s3:DeleteObject"), [p]).allowed
    p = pol({"Effect": "Allow", "Action": "s3:GetObject", "NotResource": f"{BUCKET}/secret/*"})
    assert evaluate(req(), [p]).allowed
    assert not evaluate(req(resource=f"{BUCKET}/secret/k"), [p]).allowed


def test_list_bucket_under_a_prefix_condition_denies_a_request_without_s3_prefix():
    """The defect the rehearsal exists for: HeadBucket is ListBucket with no s3:prefix."""
    p = pol(
        allow("s3:ListBucket", BUCKET, {"StringLike": {"s3:prefix": ["team/*"]}}, Sid="ListTeam")
    )
    assert evaluate(req("s3:ListBucket", BUCKET, **{"s3:prefix": "team/job"}), [p]).allowed
    assert not evaluate(req("s3:ListBucket", BUCKET, **{"s3:prefix": "other/job"}), [p]).allowed
    d = evaluate(req("s3:ListBucket", BUCKET), [p])
    assert not d.allowed
    assert "ListTeam does not apply" in d.explain() and "key absent" in d.explain()


@pytest.mark.parametrize(
    "operator, policy, present, expected",
    [
        # positive operators: absent key -> false
        ("StringEquals", "a", None, False),
        ("StringLike", "a*", None, False),
        ("ArnLike", "arn:aws:iam::*:role/x", None, False),
        ("NumericLessThan", "5", None, False),
        ("Bool", "true", None, False),
        ("IpAddress", "10.0.0.0/8", None, False),
        # negated operators: absent key -> true (documented)
        ("StringNotEquals", "a", None, True),
        ("StringNotLike", "a*", None, True),
        ("ArnNotLike", "arn:aws:iam::*:role/x", None, True),
        ("NotIpAddress", "10.0.0.0/8", None, True),
        # ...IfExists: absent key -> true, present key -> the operator decides
        ("StringEqualsIfExists", "a", None, True),
        ("StringEqualsIfExists", "a", "b", False),
        ("StringEqualsIfExists", "a", "a", True),
        # Null
        ("Null", "true", None, True),
        ("Null", "true", "x", False),
        ("Null", "false", "x", True),
        ("Null", "false", None, False),
        # values
        ("StringEquals", "a", "A", False),
        ("StringEqualsIgnoreCase", "a", "A", True),
        ("StringNotEquals", "a", "a", False),
        ("StringLike", "team/*", "team/x/y", True),
        ("StringLike", "t?am", "team", True),
        ("StringNotLike", "team/*", "other/x", True),
        ("NumericLessThan", "5", "4", True),
        ("NumericGreaterThanEquals", "5", "4", False),
        ("NumericNotEquals", "5", "4", True),
        ("DateLessThan", "2030-01-01T00:00:00Z", "2026-11-23T00:00:00Z", True),
        ("DateGreaterThan", "2030-01-01T00:00:00Z", "2026-11-23T00:00:00Z", False),
        ("Bool", "false", "false", True),
        ("IpAddress", "10.0.0.0/8", "10.1.2.3", True),
        ("NotIpAddress", "10.0.0.0/8", "10.1.2.3", False),
        ("ArnLike", "arn:aws:iam::*:role/x*", f"arn:aws:iam::{ACCT}:role/xy", True),
        ("ArnEquals", "arn:aws:iam::*:role/x", f"arn:aws:iam::{ACCT}:role/y", False),
        ("ArnNotEquals", "arn:aws:iam::*:role/x", f"arn:aws:iam::{ACCT}:role/y", True),
    ],
)
def test_condition_operators(operator, policy, present, expected):
    ctx = {} if present is None else {"k:key": present}
    assert condition_holds(operator, "k:key", policy, req(**ctx)) is expected


def test_condition_keys_are_case_insensitive_and_values_or_within_a_key():
    r = req(**{"S3:Prefix": "b/x"})
    assert condition_holds("StringLike", "s3:prefix", ["a/*", "b/*"], r)
    assert not condition_holds("StringNotLike", "s3:prefix", ["a/*", "b/*"], r)


def test_set_operators_over_multivalued_keys():
    allowed = ["Name", "karpenter.sh/nodeclaim"]
    two = req(**{"aws:TagKeys": ["Name", "karpenter.sh/nodeclaim"]})
    extra = req(**{"aws:TagKeys": ["Name", "karpenter.sh/nodepool"]})
    empty = req(**{"aws:TagKeys": []})
    assert condition_holds("ForAllValues:StringEquals", "aws:TagKeys", allowed, two)
    assert not condition_holds("ForAllValues:StringEquals", "aws:TagKeys", allowed, extra)
    # ForAllValues over an absent or empty key is vacuously true; ForAnyValue false
    assert condition_holds("ForAllValues:StringEquals", "aws:TagKeys", allowed, req())
    assert condition_holds("ForAllValues:StringEquals", "aws:TagKeys", allowed, empty)
    assert not condition_holds("ForAnyValue:StringEquals", "aws:TagKeys", allowed, req())
    assert condition_holds("ForAnyValue:StringEquals", "aws:TagKeys", ["x", "Name"], extra)
    assert condition_holds("ForAnyValue:StringNotEquals", "aws:TagKeys", allowed, extra)
    assert not condition_holds("ForAllValues:StringNotEquals", "aws:TagKeys", ["Name"], extra)


def test_conditions_and_across_operators_and_keys():
    cond = {
        "StringEquals": {"aws:ResourceTag/cluster": "owned"},
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }
    p = pol(allow("ec2:TerminateInstances", "*", cond))
    both = req(
        "ec2:TerminateInstances",
        "i",
        **{"aws:ResourceTag/cluster": "owned", "aws:ResourceTag/karpenter.sh/nodepool": "gpu"},
    )
    only_cluster = req("ec2:TerminateInstances", "i", **{"aws:ResourceTag/cluster": "owned"})
    assert evaluate(both, [p]).allowed
    assert not evaluate(only_cluster, [p]).allowed


def test_policy_variables_in_resources():
    p = pol(allow("s3:GetObject", f"{BUCKET}/${{aws:username}}/*"))
    assert evaluate(req(resource=f"{BUCKET}/ann/x", **{"aws:username": "ann"}), [p]).allowed
    assert not evaluate(req(resource=f"{BUCKET}/bob/x", **{"aws:username": "ann"}), [p]).allowed
    assert not evaluate(req(resource=f"{BUCKET}/ann/x"), [p]).allowed  # key absent


def test_same_account_identity_or_resource_policy_cross_account_both():
    bucket_allows_role = Policy(
        "bp",
        {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": ROLE},
                    "Action": "s3:GetObject",
                    "Resource": f"{BUCKET}/*",
                }
            ]
        },
    )
    identity = pol(allow("s3:GetObject", f"{BUCKET}/*"))
    assert evaluate(req(), [], [bucket_allows_role]).allowed  # resource policy alone
    assert evaluate(req(), [identity], []).allowed  # identity alone
    cross = Request(ROLE, "s3:GetObject", f"{BUCKET}/a", {}, ACCT, resource_account="444455556666")
    assert not evaluate(cross, [identity], []).allowed
    assert not evaluate(cross, [], [bucket_allows_role]).allowed
    assert evaluate(cross, [identity], [bucket_allows_role]).allowed
    other = Policy(
        "bp2",
        {
            "Statement": [
                {
                    **bucket_allows_role.statements()[0],
                    "Principal": {"AWS": "arn:aws:iam::1:role/x"},
                }
            ]
        },
    )
    assert not evaluate(req(), [], [other]).allowed


def test_kms_key_policy_must_allow_directly_or_delegate_to_the_account():
    key = f"arn:aws:kms:us-west-2:{ACCT}:key/k"
    kr = req("kms:Decrypt", key, **{"kms:ViaService": "s3.us-west-2.amazonaws.com"})
    identity = pol(
        allow(
            "kms:Decrypt", key, {"StringEquals": {"kms:ViaService": "s3.us-west-2.amazonaws.com"}}
        )
    )
    default = Policy(
        "default",
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
    assert evaluate(kr, [identity], [default], key_policy=True).allowed
    d = evaluate(kr, [], [default], key_policy=True)
    assert not d.allowed and "delegates to the account" in d.reason
    no_account = Policy(
        "k",
        {
            "Statement": [
                {**default.statements()[0], "Principal": {"AWS": "arn:aws:iam::1:role/admin"}}
            ]
        },
    )
    d = evaluate(kr, [identity], [no_account], key_policy=True)
    assert not d.allowed and "neither allows the principal" in d.reason
    other_region = req("kms:Decrypt", key, **{"kms:ViaService": "s3.eu-west-1.amazonaws.com"})
    assert not evaluate(other_region, [identity], [default], key_policy=True).allowed


def test_service_principal_in_a_trust_policy():
    trust = Policy(
        "trust",
        {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                    "Condition": {"StringEquals": {"aws:RequestTag/kubernetes-namespace": "team"}},
                }
            ]
        },
    )
    ok = Request(
        "svc:pods.eks.amazonaws.com",
        "sts:AssumeRole",
        ROLE,
        {"aws:RequestTag/kubernetes-namespace": "team"},
    )
    assert evaluate(ok, resource=[trust]).allowed
    assert not evaluate(
        Request("svc:ec2.amazonaws.com", "sts:AssumeRole", ROLE, ok.context), resource=[trust]
    ).allowed
    assert not evaluate(
        Request(ok.principal, ok.action, ROLE, {"aws:RequestTag/kubernetes-namespace": "x"}),
        resource=[trust],
    ).allowed


def test_statement_within_reference_compares_actions_resources_and_conditions():
    ref = allow(
        ["ec2:TerminateInstances"],
        "arn:aws:ec2:us-west-2:*:instance/*",
        {
            "StringEquals": {"aws:ResourceTag/cluster": "owned"},
            "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
        },
    )
    same = dict(ref)
    missing_condition = allow(
        "ec2:TerminateInstances",
        "arn:aws:ec2:us-west-2:*:instance/*",
        {"StringEquals": {"aws:ResourceTag/cluster": "owned"}},
    )
    wider_resource = {**ref, "Resource": "arn:aws:ec2:*:*:instance/*"}
    more_actions = {**ref, "Action": ["ec2:TerminateInstances", "ec2:StopInstances"]}
    assert statement_within(same, ref)
    assert not statement_within(missing_condition, ref)
    assert not statement_within(wider_resource, ref)
    assert not statement_within(more_actions, ref)
    assert beyond_reference(pol({**missing_condition, "Sid": "Del"}), [pol(ref)]) == ["Del"]
