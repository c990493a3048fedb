"""The IAM evaluator behind the IAM rehearsal, against the rules AWS documents (Policy
evaluation logic, Condition operators, single- vs multi-valued keys, KMS key policies)."""

from __future__ import annotations

import json

import pytest

from trainforge.plan.checks.iam_eval import (
    Policy,
    Request,
    beyond_reference,
    condition_holds,
    evaluate,
    policy_doc,
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


# --- edges a mutation run found untested (docs/rehearsals.md, "Mutation testing") ---------


@pytest.mark.parametrize(
    "operator, policy, present, expected",
    [
        # each comparison at, below and above the policy value (the request value is `present`)
        ("NumericEquals", "5", "5", True),
        ("NumericEquals", "5", "6", False),
        ("NumericEquals", "5", "4", False),
        ("NumericNotEquals", "5", "5", False),
        ("NumericLessThan", "5", "5", False),
        ("NumericLessThan", "5", "6", False),
        ("NumericLessThanEquals", "5", "5", True),
        ("NumericLessThanEquals", "5", "4", True),
        ("NumericLessThanEquals", "5", "6", False),
        ("NumericGreaterThan", "5", "6", True),
        ("NumericGreaterThan", "5", "5", False),
        ("NumericGreaterThan", "5", "4", False),
        ("NumericGreaterThanEquals", "5", "5", True),
        ("NumericGreaterThanEquals", "5", "6", True),
        ("NumericEquals", "5", "five", False),  # not a number: no match, no crash
        ("DateEquals", "2026-11-23T00:00:00Z", "2026-11-23T00:00:00+00:00", True),
        ("DateEquals", "2026-11-23T00:00:00Z", "1795392000", True),  # epoch seconds
        ("DateEquals", "2026-11-23T00:00:00Z", "1795392001", False),
        ("DateGreaterThanEquals", "2026-11-23T00:00:00Z", "2026-11-23T00:00:00Z", True),
        ("DateLessThan", "2026-11-23T00:00:00Z", "not a date", False),
        ("DateLessThan", "2026-11-23T00:00:00", "2026-11-22T23:00:00Z", True),  # naive = UTC
        ("BinaryEquals", "QUJD", "QUJD", True),
        ("BinaryEquals", "QUJD", "QUJE", False),  # the policy's bytes sort first
        ("BinaryEquals", "QUJE", "QUJD", False),  # the request's bytes sort first
        ("IpAddress", "10.0.0.0/8", "not-an-ip", False),
        ("IpAddress", "10.0.0.0/8", "11.1.2.3", False),
        # ARNs whose resource part has colons (log streams): the sixth part takes the rest
        (
            "ArnLike",
            "arn:aws:logs:*:*:log-group:*",
            f"arn:aws:logs:us-west-2:{ACCT}:log-group:/aws/eks/c:log-stream:x",
            True,
        ),
        ("ArnLike", "arn:aws:logs:*:*:log-group:*", "arn:aws:logs:us-west-2", False),
        ("Null", "false", [], False),  # present but empty is null
        ("Null", "true", [], True),
        ("StringEqualsIgnoreCase", "b", "A", False),  # the policy's value sorts last
        ("BinaryEquals", "QUJD", "qujd", False),  # base64 is case-sensitive (not Bool)
        ("BinaryEqualsIfExists", "QUJD", "QUJD", True),
        ("NotIpAddressIfExists", "10.0.0.0/8", "10.1.2.3", False),
        ("IpAddress", "10.1.2.3/8", "10.200.0.1", True),  # host bits in the policy's CIDR
        ("ArnLikeIfExists", "arn:aws:iam::*:role/x", None, True),
    ],
)
def test_condition_operator_edges(operator, policy, present, expected):
    ctx = {} if present is None else {"k:key": present}
    assert condition_holds(operator, "k:key", policy, req(**ctx)) is expected


def test_a_context_key_is_found_by_its_name_wherever_it_is():
    r = req(**{"z:other": "wrong", "K:Key": "right"})
    assert condition_holds("StringEquals", "k:key", "right", r)


def test_policy_variables_only_in_string_and_arn_operators():
    r = req(**{"k:key": "4", "aws:PrincipalAccount": ACCT, "k:cidr": "10.0.0.0/8"})
    account_role = "arn:aws:iam::${aws:PrincipalAccount}:role/*"
    assert condition_holds("ArnLike", "k:arn", account_role, req(**{"k:arn": ROLE, **r.context}))
    for operator, value in (("NumericLessThan", "${k:key}9"), ("IpAddress", "${k:cidr}")):
        rr = req(**{**r.context, "k:key": "10.1.2.3" if operator == "IpAddress" else "4"})
        assert not condition_holds(operator, "k:key", value, rr), operator
    assert not condition_holds("DateEquals", "k:key", "${k:key}", req(**{"k:key": "5"}))


def test_for_any_value_of_a_negated_operator_needs_one_value_that_matches_none():
    both = req(**{"aws:TagKeys": ["Name", "team"]})
    assert not condition_holds("ForAnyValue:StringNotEquals", "aws:TagKeys", ["Name", "team"], both)


def test_glob_treats_only_star_and_question_mark_as_wildcards():
    p = pol(allow("s3:GetObject", f"{BUCKET}/a/x-1.bin"))
    assert evaluate(req(resource=f"{BUCKET}/a/x-1.bin"), [p]).allowed
    for other in ("a_x-1.bin", "a/x_1.bin", "a/x-1_bin", "a/x-1.bi"):
        assert not evaluate(req(resource=f"{BUCKET}/{other}"), [p]).allowed, other


def test_policy_variables_in_condition_values_and_multivalued_keys():
    own = {"StringEquals": {"s3:prefix": "${aws:username}/"}}
    p = pol(allow("s3:ListBucket", BUCKET, own))
    r = req("s3:ListBucket", BUCKET, **{"s3:prefix": "ann/", "aws:username": "ann"})
    assert evaluate(r, [p]).allowed
    assert not evaluate(req("s3:ListBucket", BUCKET, **{"s3:prefix": "ann/"}), [p]).allowed
    # a variable over a multivalued key does not match (AWS: single-valued keys only)
    q = pol(allow("s3:GetObject", f"{BUCKET}/${{aws:username}}/*"))
    two = req(resource=f"{BUCKET}/ann/x", **{"aws:username": ["ann", "bob"]})
    assert not evaluate(two, [q]).allowed
    none = req(resource=f"{BUCKET}/ann/x", **{"aws:username": []})
    assert not evaluate(none, [q]).allowed
    # an absent key makes the element not match, rather than an empty string
    home = pol(allow("s3:GetObject", f"{BUCKET}/home/${{aws:username}}*"))
    assert not evaluate(req(resource=f"{BUCKET}/home/x"), [home]).allowed
    assert evaluate(req(resource=f"{BUCKET}/home/ann", **{"aws:username": "ann"}), [home]).allowed


def test_statements_without_action_or_identity_resource_never_apply():
    assert not evaluate(req(), [pol({"Effect": "Allow", "Resource": "*"})]).allowed
    assert not evaluate(req(), [pol({"Effect": "Allow", "Action": "s3:*"})]).allowed


def test_every_statement_of_a_policy_is_considered():
    """A statement that does not match, or whose condition fails, does not end the scan."""
    p = pol(
        allow("s3:PutObject", f"{BUCKET}/*"),
        allow("s3:GetObject", f"{BUCKET}/*", {"Bool": {"aws:SecureTransport": "true"}}),
        allow("s3:GetObject", f"{BUCKET}/a/*"),
    )
    d = evaluate(req(), [p])
    assert d.allowed and [m.sid for m in d.allows] == ["#2"]


def test_principals_naming_the_account_and_json_parsed_policies():
    """Principals as the rehearsal reads them: parsed from the rendered JSON."""

    def bucket(principal) -> Policy:
        st = {"Effect": "Allow", "Principal": principal, "Action": "s3:GetObject",
              "Resource": f"{BUCKET}/*"}  # fmt: skip
        return Policy("bp", policy_doc(json.dumps({"Statement": [st]})))

    def kind(principal) -> str:
        identity = pol(allow("s3:GetObject", f"{BUCKET}/*"))
        cross = Request(ROLE, "s3:GetObject", f"{BUCKET}/a", {}, ACCT, resource_account="4")
        alone = evaluate(req(), [], [bucket(principal)]).allowed
        with_identity = evaluate(cross, [identity], [bucket(principal)]).allowed
        return {(True, True): "direct", (False, True): "account"}.get(
            (alone, with_identity), "none"
        )

    assert kind({"AWS": ROLE}) == "direct"
    assert kind({"AWS": ACCT}) == "account"  # a bare account id delegates
    assert kind({"AWS": f"arn:aws:iam::{ACCT}:root"}) == "account"
    assert kind({"AWS": f"arn:aws-us-gov:iam::{ACCT}:root"}) == "account"  # other partition
    assert kind({"AWS": f"arn:aws:iam::{ACCT}:role/other"}) == "none"  # same account only
    assert kind({"AWS": "arn:aws:iam::999988887777:root"}) == "none"
    assert kind({"AWS": "arn:aws:iam:root"}) == "none"  # no account part: no match, no crash
    svc = Request("svc:pods.eks.amazonaws.com", "sts:AssumeRole", ROLE, {})
    trust = {"Effect": "Allow", "Action": "sts:AssumeRole"}
    for principal, allowed in (
        ({"Service": "pods.eks.amazonaws.com"}, True),
        ({"AWS": [ROLE, "*"]}, True),  # a role ARN does not end the list for a service
        ({"AWS": ROLE}, False),
        ({"Federated": "pods.eks.amazonaws.com"}, False),  # only Service names a service
    ):
        doc = json.dumps({"Statement": [{**trust, "Principal": principal}]})
        assert evaluate(svc, resource=[Policy("t", policy_doc(doc))]).allowed is allowed, principal


def test_not_principal_denies_everyone_else():
    others = Policy(
        "bp",
        {
            "Statement": [
                {
                    "Effect": "Deny",
                    "NotPrincipal": {"AWS": ROLE},
                    "Action": "s3:*",
                    "Resource": f"{BUCKET}/*",
                }
            ]
        },
    )
    identity = pol(allow("s3:GetObject", f"{BUCKET}/*"))
    assert evaluate(req(), [identity], [others]).allowed
    stranger = Request(f"arn:aws:iam::{ACCT}:role/x", "s3:GetObject", f"{BUCKET}/a", {}, ACCT)
    d = evaluate(stranger, [identity], [others])
    assert not d.allowed and d.reason == "explicit deny by bp statement #0"


def test_a_resource_account_is_the_same_account_only_when_equal():
    identity = pol(allow("s3:GetObject", f"{BUCKET}/*"))
    for owner in ("000011112222", "999988887777"):
        cross = Request(ROLE, "s3:GetObject", f"{BUCKET}/a", {}, ACCT, resource_account=owner)
        assert not evaluate(cross, [identity], []).allowed, owner


def test_a_json_null_condition_and_effect():
    doc = {"Statement": [allow("s3:GetObject", "*", {"Null": {"aws:TokenIssueTime": "true"}})]}
    p = Policy("p", policy_doc(json.dumps(doc)))
    assert evaluate(req(), [p]).allowed
    assert not evaluate(req(**{"aws:TokenIssueTime": "2026-11-25"}), [p]).allowed


def test_cross_account_with_no_allow_at_all_says_so():
    cross = Request(ROLE, "s3:GetObject", f"{BUCKET}/a", {}, ACCT, resource_account="4")
    d = evaluate(cross, [], [])
    assert d.reason == f"implicit deny: no statement allows s3:GetObject on {BUCKET}/a"


def test_statement_within_accepts_narrower_condition_values():
    ref = allow("s3:GetObject", "*", {"StringEquals": {"aws:ResourceTag/team": ["a", "b"]}})
    narrower = allow("s3:GetObject", "*", {"StringEquals": {"aws:ResourceTag/team": "a"}})
    wider = allow("s3:GetObject", "*", {"StringEquals": {"aws:ResourceTag/team": ["a", "c"]}})
    assert statement_within(narrower, ref)
    assert not statement_within(wider, ref)
    assert statement_within({**narrower, "Action": "S3:GETOBJECT"}, ref)  # actions: any case
    assert not statement_within({**narrower, "Effect": "Deny"}, ref)
    not_resource = {"Effect": "Allow", "Action": "s3:GetObject", "NotResource": "x"}
    assert not statement_within(not_resource, allow("s3:GetObject", "*"))
    deny_first = pol({"Effect": "Deny", "Action": "*", "Resource": "*"}, {**wider, "Sid": "W"})
    assert beyond_reference(deny_first, [pol(ref)]) == ["W"]


def test_a_multivalued_key_without_a_set_operator_matches_any_value():
    tags = req(**{"aws:TagKeys": ["Name", "team"]})
    assert condition_holds("StringEquals", "aws:TagKeys", "team", tags)
    assert not condition_holds("StringEquals", "aws:TagKeys", "other", tags)
    assert condition_holds("ForAllValues:StringNotEquals", "aws:TagKeys", ["x"], tags)


@pytest.mark.parametrize(
    "operator, policy, present, expected",
    [
        # negated and Bool bases reached through ...IfExists (a sliced, not a literal, name)
        ("StringNotEqualsIfExists", "a", "a", False),
        ("StringNotLikeIfExists", "a*", "ab", False),
        ("BoolIfExists", "true", "true", True),
        ("Bool", "true", "false", False),
        ("StringEqualsIgnoreCase", "${aws:username}", "ANN", True),
        ("StringLike", "${aws:username}/*", "ann/x", True),
        ("StringNotLike", "${aws:username}/*", "ann/x", False),
        ("StringNotEqualsIgnoreCase", "${aws:username}", "ANN", False),
        ("Bool", "${aws:username}", "ann", False),  # no variables in Bool
    ],
)
def test_condition_operators_by_their_base(operator, policy, present, expected):
    r = req(**{"k:key": present, "aws:username": "ann"})
    assert condition_holds(operator, "k:key", policy, r) is expected


@pytest.mark.parametrize(
    "operator", ["NumericOther", "DateSoon", "StringFoo", "ForSomeValues:StringEquals"]
)
def test_an_unknown_condition_operator_is_an_error_not_a_guess(operator):
    with pytest.raises(ValueError, match="unknown condition"):
        condition_holds(operator, "k:key", "1", req(**{"k:key": "1"}))


def test_policy_variable_defaults():
    p = pol(allow("s3:GetObject", f"{BUCKET}/${{aws:username, 'anon'}}/*"))
    assert evaluate(req(resource=f"{BUCKET}/anon/x"), [p]).allowed
    assert not evaluate(req(resource=f"{BUCKET}/anon/x", **{"aws:username": "ann"}), [p]).allowed
    assert evaluate(req(resource=f"{BUCKET}/ann/x", **{"aws:username": "ann"}), [p]).allowed


def test_policies_as_mappings_or_json_text_are_the_same():
    doc = {"Statement": [allow("s3:GetObject", "*")]}
    assert (
        Policy("a", policy_doc(doc)).statements()
        == Policy("b", policy_doc(json.dumps(doc))).statements()
    )


def test_principal_kinds_and_order_in_a_json_policy():
    def allowed(principal, caller=ROLE) -> bool:
        st = {"Effect": "Allow", "Principal": principal, "Action": "s3:GetObject",
              "Resource": f"{BUCKET}/*"}  # fmt: skip
        bp = Policy("bp", policy_doc(json.dumps({"Statement": [st]})))
        return evaluate(Request(caller, "s3:GetObject", f"{BUCKET}/a", {}, ACCT), [], [bp]).allowed

    assert allowed({"Service": "ec2.amazonaws.com", "AWS": ROLE})  # a kind before AWS
    assert not allowed({"Federated": "*"})  # federated identities, not IAM roles
    assert not allowed({"AWS": "arn:aws:iam::000011112222:root"})  # sorts before ACCT
    assert not allowed({"AWS": f"arn:aws:iam::{ACCT}:role/a"})  # sorts before the caller


def test_json_effects_conditions_and_explanations():
    doc = {
        "Statement": [
            {"Sid": "D1", "Effect": "Deny", "Action": "s3:PutObject", "Resource": "*"},
            {"Sid": "D2", "Effect": "Deny", "Action": "s3:Put*", "Resource": "*"},
            {"Sid": "DC", "Effect": "Deny", "Action": "s3:GetObject", "Resource": "*",
             "Condition": {"StringEquals": {"aws:username": "mallory"}}},
            {"Sid": "A", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "*",
             "Condition": {"StringEquals": {"aws:username": "ann"}}},
        ]
    }  # fmt: skip
    p = Policy("p", policy_doc(json.dumps(doc)))
    d = evaluate(req("s3:PutObject"), [p])
    assert d.reason == "explicit deny by p statement D1" and [m.sid for m in d.denies] == [
        "D1", "D2"
    ]  # fmt: skip
    assert evaluate(req(**{"aws:username": "ann"}), [p]).allowed
    d = evaluate(req(**{"aws:username": "bob"}), [p])
    assert d.near_misses == [
        "p A does not apply: StringEquals aws:username ['ann'] (request has ['bob'])"
    ]  # only Allow statements are near misses
    assert beyond_reference(p, [pol(allow("s3:*", "*"))]) == []  # narrower: a condition
    assert beyond_reference(p, [pol(allow("s3:Put*", "*"))]) == ["A"]  # Denies are not judged


def test_same_account_is_decided_by_value():
    identity = pol(allow("s3:GetObject", f"{BUCKET}/*"))
    same = Request(
        ROLE, "s3:GetObject", f"{BUCKET}/a", {}, ACCT, resource_account=ACCT[:6] + ACCT[6:]
    )
    assert evaluate(same, [identity], []).allowed


def test_cross_account_reasons_name_the_missing_side():
    identity = pol(allow("s3:GetObject", f"{BUCKET}/*"))
    bucket = Policy("bp", {"Statement": [{"Effect": "Allow", "Principal": {"AWS": ROLE},
                                          "Action": "s3:GetObject", "Resource": f"{BUCKET}/*"}]})  # fmt: skip
    cross = Request(ROLE, "s3:GetObject", f"{BUCKET}/a", {}, ACCT, resource_account="4")
    assert evaluate(cross, [identity], []).reason == (
        "implicit deny: cross-account: the resource policy does not allow it"
    )
    assert evaluate(cross, [], [bucket]).reason == (
        "implicit deny: cross-account: no identity policy allows it"
    )


def test_statement_within_on_json_statements():
    ref = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}
    (ours, deny_ref) = Policy(
        "p", policy_doc(json.dumps({"Statement": [ref, {**ref, "Effect": "Deny"}]}))
    ).statements()
    assert statement_within(ours, ref) and statement_within(ref, ours)
    assert not statement_within(ours, deny_ref)
    assert not statement_within({"Effect": "Allow", "NotAction": "s3:Put*", "Resource": "*"}, ref)


def test_last_edges_of_matching():
    """Punctuation is literal in patterns; an ARN pattern of too few parts matches nothing;
    service principals are compared by equality; a decision explains itself alone."""
    p = pol(allow("s3:GetObject", f"{BUCKET}/run(1)!.bin"))
    assert evaluate(req(resource=f"{BUCKET}/run(1)!.bin"), [p]).allowed
    assert not evaluate(req(resource=f"{BUCKET}/run-x1)!.bin"), [p]).allowed
    assert not condition_holds("ArnLike", "k:key", "arn:aws:iam", req(**{"k:key": ROLE}))
    assert not condition_holds("StringEqualsIgnoreCase", "k:key", "a", req(**{"k:key": "B"}))
    with pytest.raises(ValueError, match="unknown condition"):
        condition_holds("BadOperator", "k:key", "1", req(**{"k:key": "1"}))
    pods = Request("svc:pods.eks.amazonaws.com", "sts:AssumeRole", ROLE, {})
    for services, allowed in (
        ("ec2.amazonaws.com", False),  # sorts before the caller's service
        (["ec2.amazonaws.com", "pods.eks.amazonaws.com"], True),  # a list: every value
    ):
        st = {"Effect": "Allow", "Principal": {"Service": services}, "Action": "sts:AssumeRole"}
        assert evaluate(pods, resource=[pol(st)]).allowed is allowed, services
    bp = pol({"Effect": "Allow", "Principal": {"AWS": "x:root"}, "Action": "s3:*",
              "Resource": "*"})  # fmt: skip
    assert not evaluate(req(), [], [bp]).allowed  # a two-part "ARN": no account, no crash
    d = evaluate(req(), [pol(allow("s3:GetObject", "*"))])
    assert d.explain() == d.reason == "allowed"


def test_literal_variables_and_resource_statements_that_name_no_principal():
    """`${*}` in a pattern stands for `*` (IAM policy variables, "special characters"), not
    for a missing key; a resource-policy statement with a Principal that is neither "*" nor
    a map, or with no Principal at all, names nobody, so it allows no one."""
    star = pol(allow("s3:GetObject", f"{BUCKET}/a/${{*}}"))
    assert evaluate(req(resource=f"{BUCKET}/a/*"), [star]).allowed
    assert not evaluate(req(resource=f"{BUCKET}/a/x"), [star]).allowed  # the character, no wildcard
    for extra in ({"Principal": ROLE}, {}):
        bucket = pol(allow("s3:GetObject", f"{BUCKET}/*", **extra))
        assert not evaluate(req(), resource=[bucket]).allowed


def test_a_wildcard_a_policy_variable_brings_is_the_character():
    """A request value substituted into a pattern is matched as written (AWS: policy variables
    are replaced by the value; `*` or `?` in it is no wildcard), in a Resource and in a
    StringLike condition; in an exact comparison `${*}` is the character `*`."""
    ctx = {"aws:PrincipalTag/team": "a*"}
    own = pol(allow("s3:GetObject", f"{BUCKET}/${{aws:PrincipalTag/team}}/*"))
    assert evaluate(req(resource=f"{BUCKET}/a*/k", **ctx), [own]).allowed
    assert not evaluate(req(resource=f"{BUCKET}/ab/k", **ctx), [own]).allowed
    like = {"StringLike": {"s3:prefix": "${aws:PrincipalTag/team}/*"}}
    listing = pol(allow("s3:ListBucket", BUCKET, like))
    asks = {**ctx, "s3:prefix": "ab/x"}
    assert not evaluate(req("s3:ListBucket", BUCKET, **asks), [listing]).allowed
    asks = {**ctx, "s3:prefix": "a*/x"}
    assert evaluate(req("s3:ListBucket", BUCKET, **asks), [listing]).allowed
    exact = pol(allow("s3:ListBucket", BUCKET, {"StringEquals": {"s3:prefix": "${*}"}}))
    assert evaluate(req("s3:ListBucket", BUCKET, **{"s3:prefix": "*"}), [exact]).allowed
