"""The IAM rehearsal check (`iam_rehearsal.check`) on the shipped prod stack's recording, and on
that recording with one thing changed: each change that the rehearsal exists for must give
exactly its findings and counts, and each that must not matter must change nothing.

Fast: the prod stand-in run is recorded once for the session; every case edits a copy of its
recorded inputs and reruns only the check (well under a second each)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import replace
from types import SimpleNamespace

import pytest

from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import iam_rehearsal as R
from trainforge.plan.checks.aws_calls import ApiCall
from trainforge.plan.checks.iam_eval import Decision, Match, Request
from trainforge.plan.checks.iam_stack import (
    ASSOCIATION,
    KMS_KEY_POLICY,
    RoleFacts,
    StackIam,
)
from trainforge.plan.manifests import K8sObject, k8s_objects, to_object
from trainforge.plan.resource_types import IAM_ROLE_POLICY
from trainforge.plan.runner import UNKNOWN, Inventory, Recorded

ACCT = "123456789012"
MOCK = f"arn:aws:iam::{ACCT}:role"
KEY = f"arn:aws:kms:us-east-1:{ACCT}:key/mrk-0000a9fcaf29"
NOTE = (
    f"bucket platform-services-ckpt-id: key {KEY} has KMS's default key policy (delegates to IAM)"
)
LLM = "role platform-services-ckpt-llm (team llm, llm/training)"
VISION = "role platform-services-ckpt-vision (team vision, vision/training)"
LLM_TRUST = "trust of role platform-services-ckpt-llm (llm/training)"
KARPENTER = "role platform-karpenter-controller (Karpenter 1.14.1, kube-system/karpenter)"
EBS = "role platform-eks-ebs-csi (aws-ebs-csi-driver, kube-system/ebs-csi-controller-sa)"
FSX = "role platform-services-fsx-csi (aws-fsx-csi-driver, kube-system/fsx-csi-controller-sa)"
NODES = ("role platform-eks-node (node role)", "role platform-karpenter-node (node role)")
S3_ENDPOINT = "S3 gateway endpoint platform-net-s3 (policy)"

PROD = {  # principal: (allowed, denied as required)
    "trust of role platform-eks-ebs-csi (kube-system/ebs-csi-controller-sa)": (2, 4),
    "trust of role platform-karpenter-controller (kube-system/karpenter)": (2, 4),
    "trust of role platform-services-fsx-csi (kube-system/fsx-csi-controller-sa)": (2, 4),
    LLM_TRUST: (2, 4),
    "trust of role platform-services-ckpt-vision (vision/training)": (2, 4),
    LLM: (63, 123),
    VISION: (63, 123),
    KARPENTER: (57, 6),
    EBS: (10, 1),
    FSX: (2, 1),
    NODES[0]: (15, 0),  # AmazonEKS_CNI_Policy v6: 14 ipamd calls, + the Pod Identity agent
    NODES[1]: (15, 0),
    S3_ENDPOINT: (3, 3),  # a stack bucket read and written, ECR layers read; the rest denied
}


@pytest.fixture(scope="module")
def prod(prod_standin) -> Inventory:
    return prod_standin


def rehearse(inv: Inventory, standin: Inventory | None = None, declared=None, objects=()):
    ctx = PlanContext(
        inventory=inv,
        objects=list(objects),
        declared=declared or (standin or inv).declared,
        standin=(lambda: standin) if standin is not None else None,
    )
    result = R.check(ctx)
    (section,) = result.sections
    assert section.title == "IAM rehearsal"
    return result, section


def counts(section) -> dict[str, tuple[int, int, int]]:
    return {
        p["principal"]: (p["allowed"], p["denied"], p["failed"]) for p in section.data["principals"]
    }


def expected(**changes: tuple[int, int, int] | None) -> dict[str, tuple[int, int, int]]:
    """The prod counts (no failure) with some principals changed (None: not rehearsed)."""
    out = {k: (a, d, 0) for k, (a, d) in PROD.items()}
    for key, value in changes.items():
        name = KEYS[key]
        if value is None:
            del out[name]
        else:
            out[name] = value
    return out


KEYS = {
    "llm": LLM,
    "vision": VISION,
    "llm_trust": LLM_TRUST,
    "karpenter": KARPENTER,
    "ebs": EBS,
    "fsx": FSX,
    "node": NODES[0],
    "karpenter_node": NODES[1],
    "s3_endpoint": S3_ENDPOINT,
}


def find(inv: Inventory, type_suffix: str, name: str) -> Recorded:
    (rec,) = [r for r in inv.resources if r.name == name and r.type.endswith(type_suffix)]
    return rec


def edit(inv: Inventory, type_suffix: str, name: str, **inputs) -> Inventory:
    rec = find(inv, type_suffix, name)
    new = replace(rec, inputs={**copy.deepcopy(rec.inputs), **inputs})
    return replace(inv, resources=[new if r is rec else r for r in inv.resources])


def drop(inv: Inventory, gone: Callable[[Recorded], bool]) -> Inventory:
    return replace(inv, resources=[r for r in inv.resources if not gone(r)])


def is_addon(name: str) -> Callable[[Recorded], bool]:
    return lambda r: r.type == "aws:eks/addon:Addon" and r.inputs.get("addonName") == name


def line(principal: str, allowed: int, denied: int, failed: int = 0) -> str:
    return R.Tally(principal, allowed, denied, failed).line()


# --- the shipped stack --------------------------------------------------------------------


def test_prod_every_principal_counted_no_finding_and_the_key_note_last(prod):
    result, section = rehearse(prod)
    assert result.findings == []
    assert counts(section) == expected()
    assert section.data["notes"] == [NOTE]
    assert section.lines[-1] == NOTE
    assert sorted(section.lines[:-1]) == sorted(line(p, a, d) for p, (a, d) in PROD.items())
    assert f"{LLM}: 63 calls allowed, 123 denied as required" in section.lines


def test_the_stand_in_run_is_what_is_rehearsed(prod):
    """The preview's documents are unknown: the stand-in run's recording is judged when there
    is one, the inventory itself otherwise."""
    empty = replace(prod, resources=[])
    _, section = rehearse(empty, standin=prod)
    assert counts(section) == expected()
    _, section = rehearse(prod, standin=None)
    assert counts(section) == expected()


def test_a_stack_without_roles_says_so():
    result, section = rehearse(Inventory("p", "t", []))
    assert result.findings == []
    assert section.lines == [
        "no IAM role with a Pod Identity association or a known caller in this stack"
    ]
    assert section.data == {"principals": [], "notes": []}


# --- trust policies -------------------------------------------------------------------------

LLM_ROLE = "platform-services-ckpt-llm"
LLM_ARN = f"{MOCK}/{LLM_ROLE}-mock"


def trust_of(inv: Inventory, role: str) -> dict:
    return json.loads(find(inv, "role:Role", role).inputs["assumeRolePolicy"])


def own_context(namespace: str, sa: str, account: str = ACCT) -> str:
    """The request context a Pod Identity request carries, as a finding prints it."""
    return (
        f"aws:RequestTag/eks-cluster-arn=arn:aws:eks:us-east-1:{ACCT}:cluster/trainforge-prod, "
        "aws:RequestTag/eks-cluster-name=trainforge-prod, "
        f"aws:RequestTag/kubernetes-namespace={namespace}, "
        f"aws:RequestTag/kubernetes-pod-name={sa}-0, "
        "aws:RequestTag/kubernetes-pod-uid=00000000-0000-0000-0000-000000000000, "
        f"aws:RequestTag/kubernetes-service-account={sa}, "
        f"aws:SourceAccount={account}, "
        "aws:TagKeys=['eks-cluster-arn', 'eks-cluster-name', 'kubernetes-namespace', "
        "'kubernetes-service-account', 'kubernetes-pod-name', 'kubernetes-pod-uid']"
    )


def test_a_trust_policy_without_conditions_is_too_broad_for_every_foreign_request(prod):
    trust = trust_of(prod, LLM_ROLE)
    trust["Statement"][0].pop("Condition")
    result, section = rehearse(
        edit(prod, "role:Role", LLM_ROLE, assumeRolePolicy=json.dumps(trust))
    )
    assert counts(section) == expected(llm_trust=(2, 0, 4))
    assert f"{LLM_TRUST}: 2 calls allowed, 0 denied as required, 4 FAILED" in section.lines
    allowed_by = "trust of role platform-services-ckpt-llm AllowEksAuthToAssumeRoleForPodIdentity"
    msgs = []
    for action in ("sts:AssumeRole", "sts:TagSession"):
        msgs += [
            f"role {LLM_ROLE} ({LLM_ARN}) is allowed a Pod Identity association for another "
            f"ServiceAccount: {action} on {LLM_ARN} "
            f"[{own_context('some-other-namespace', 'default')}], which must be denied (only "
            f"its own ServiceAccount may assume the role); allowed by {allowed_by}",
            f"role {LLM_ROLE} ({LLM_ARN}) is allowed a Pod Identity association in another "
            f"account: {action} on {LLM_ARN} [{own_context('llm', 'training', '999999999999')}],"
            " which must be denied (confused deputy: aws:SourceAccount); allowed by " + allowed_by,
        ]
    assert [f.message for f in result.findings] == msgs
    for f in result.findings:
        assert (f.rule, f.resource, f.fix) == (
            R.TOO_BROAD,
            f"role {LLM_ROLE}",
            R.RULES[R.TOO_BROAD],
        )
        assert f.urn == find(prod, "role:Role", LLM_ROLE).urn
        assert f.names == frozenset({LLM_ROLE, LLM_ARN})


def test_a_trust_policy_for_another_namespace_denies_the_teams_own_pods(prod):
    trust = trust_of(prod, LLM_ROLE)
    trust["Statement"][0]["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-namespace"] = (
        "vision"
    )
    result, section = rehearse(
        edit(prod, "role:Role", LLM_ROLE, assumeRolePolicy=json.dumps(trust))
    )
    assert counts(section) == expected(llm_trust=(0, 4, 2))
    assert [(f.rule, f.resource) for f in result.findings] == [(R.DENIED, f"role {LLM_ROLE}")] * 2
    for f, action in zip(result.findings, ("sts:AssumeRole", "sts:TagSession"), strict=True):
        head, why = f.message.split(" -- ", 1)
        assert head == (
            f"role {LLM_ROLE} ({LLM_ARN}) is denied PodIdentityAssociation {LLM_ROLE}: "
            f"{action} on {LLM_ARN} [{own_context('llm', 'training')}]"
        )
        assert "kubernetes-namespace" in why
        assert f.fix == R.RULES[R.DENIED]


# --- team roles -----------------------------------------------------------------------------


def test_a_team_role_with_an_unreadable_policy_is_reported_and_still_rehearsed(prod):
    extra = f"arn:aws:iam::{ACCT}:policy/extra"
    result, section = rehearse(edit(prod, "role:Role", LLM_ROLE, managedPolicyArns=[extra]))
    assert counts(section) == expected()
    assert [(f.rule, f.resource, f.message) for f in result.findings] == [
        (
            R.UNREHEARSED,
            f"role {LLM_ROLE}",
            f"role {LLM_ROLE}: cannot read managed policy {extra} (not shipped with trainforge)",
        )
    ]
    assert result.findings[0].fix == R.RULES[R.UNREHEARSED]


def test_a_team_role_naming_no_declared_bucket_is_reported_not_rehearsed(prod):
    policy = find(prod, "RolePolicy", LLM_ROLE).inputs["policy"]
    result, section = rehearse(
        edit(
            prod,
            "RolePolicy",
            LLM_ROLE,
            policy=policy.replace("platform-services-ckpt-id", "somewhere-else"),
        )
    )
    assert counts(section) == expected(llm=(0, 0, 0))  # counted, nothing rehearsed
    assert [(f.rule, f.message) for f in result.findings] == [
        (R.UNREHEARSED, f"role {LLM_ROLE}: none of its policies names a bucket this stack declares")
    ]


def test_a_team_policy_without_abort_is_denied_exactly_where_the_runtime_aborts(prod):
    doc = json.loads(find(prod, "RolePolicy", LLM_ROLE).inputs["policy"])
    doc["Statement"][0]["Action"].remove("s3:AbortMultipartUpload")
    result, section = rehearse(edit(prod, "RolePolicy", LLM_ROLE, policy=json.dumps(doc)))
    assert counts(section) == expected(llm=(62, 123, 1))
    (f,) = result.findings
    assert f.rule == R.DENIED
    assert f.message.startswith(f"role {LLM_ROLE} ({LLM_ARN}) is denied s3:AbortMultipartUpload(")
    assert " during '" in f.message and ": s3:AbortMultipartUpload on arn:aws:s3:::" in f.message


def bucket_policy(inv: Inventory) -> dict:
    return json.loads(find(inv, "BucketPolicy", "platform-services-ckpt-tls-only").inputs["policy"])


def test_a_bucket_policy_without_its_vpc_restriction_lets_credentials_work_outside(prod):
    doc = bucket_policy(prod)
    doc["Statement"] = doc["Statement"][:1]  # TLS only
    inv = edit(prod, "BucketPolicy", "platform-services-ckpt-tls-only", policy=json.dumps(doc))
    result, section = rehearse(inv)
    assert counts(section) == expected(llm=(63, 82, 41), vision=(63, 82, 41))
    assert {f.rule for f in result.findings} == {R.TOO_BROAD}
    assert len(result.findings) == 82
    assert all(" from outside the VPC: " in f.message for f in result.findings)
    assert all(
        "(the team's credentials must be useless outside the VPC endpoint)" in f.message
        for f in result.findings
    )


def test_without_an_s3_gateway_endpoint_there_is_no_outside_the_vpc_case(prod):
    doc = bucket_policy(prod)
    doc["Statement"] = doc["Statement"][:1]
    inv = edit(prod, "BucketPolicy", "platform-services-ckpt-tls-only", policy=json.dumps(doc))
    inv = drop(inv, lambda r: r.name == "platform-net-s3" and r.type.endswith("VpcEndpoint"))
    result, section = rehearse(inv)
    assert result.findings == []
    assert counts(section) == expected(llm=(63, 82, 0), vision=(63, 82, 0), s3_endpoint=None)


def test_a_bucket_policy_open_to_another_team_prefix_is_too_broad(prod):
    """The other-prefix and other-bucket cases are judged by the bucket's own policy here: a
    team policy granting the whole bucket is caught on another team's prefix only."""
    doc = json.loads(find(prod, "RolePolicy", LLM_ROLE).inputs["policy"])
    doc["Statement"][0]["Resource"] = "arn:aws:s3:::platform-services-ckpt-id/*"
    doc["Statement"][1].pop("Condition")
    result, section = rehearse(edit(prod, "RolePolicy", LLM_ROLE, policy=json.dumps(doc)))
    got = counts(section)
    assert got == expected(llm=(63, 82, 41))
    assert all("another team's prefix must be out of reach" in f.message for f in result.findings)
    assert len(result.findings) == 41


# --- controllers ----------------------------------------------------------------------------


def test_karpenter_is_rehearsed_for_the_release_namespace_and_service_account(prod):
    release = find(prod, "Release", "platform-karpenter")
    values = copy.deepcopy(release.inputs["values"])
    values.pop("serviceAccount")  # the chart's default name: karpenter
    _, section = rehearse(edit(prod, "Release", "platform-karpenter", values=values))
    assert counts(section) == expected()
    # a release without a namespace is in "default": no association there, nothing rehearsed
    rel = find(prod, "Release", "platform-karpenter")
    inputs = {k: v for k, v in rel.inputs.items() if k != "namespace"}
    no_namespace = [replace(r, inputs=inputs) if r is rel else r for r in prod.resources]
    _, section = rehearse(replace(prod, resources=no_namespace))
    assert counts(section) == expected(karpenter=None)
    # another ServiceAccount name, with its association: rehearsed under that name
    values = {**release.inputs["values"], "serviceAccount": {"name": "kp"}}
    inv = edit(prod, "Release", "platform-karpenter", values=values)
    inv = edit(inv, "PodIdentityAssociation", "platform-karpenter-controller", serviceAccount="kp")
    _, section = rehearse(inv)
    got = counts(section)
    assert got[KARPENTER.replace("/karpenter)", "/kp)")] == (57, 6, 0)
    assert KARPENTER not in got
    # the CRD chart (name ending in -crd) is no controller
    crd = drop(prod, lambda r: r.name == "platform-karpenter" and r.type.endswith("Release"))
    assert counts(rehearse(crd)[1]) == expected(karpenter=None)
    # a second Karpenter release first, in a namespace without its association: skipped, and
    # the real one is still rehearsed
    stray = replace(rel, urn=rel.urn + "-stray", name="stray", inputs=inputs)
    _, section = rehearse(replace(prod, resources=[stray, *prod.resources]))
    assert counts(section) == expected()


def test_karpenter_from_a_chart_repository_is_rehearsed_too(prod):
    """A release of chart "karpenter" from a repository (no OCI path) is Karpenter, as the
    controller-identity check reads it (ordering.chart_name), so it is rehearsed."""
    repo = {"repo": "https://charts.karpenter.sh"}
    inv = edit(prod, "Release", "platform-karpenter", chart="karpenter", repositoryOpts=repo)
    assert counts(rehearse(inv)[1]) == expected()


def renamed_class(rec: Recorded) -> Recorded:
    if not rec.type.endswith(":EC2NodeClass"):
        return rec
    meta = rec.inputs["metadata"]
    return replace(
        rec, inputs={**rec.inputs, "metadata": {**meta, "name": "class-" + meta["name"]}}
    )


def test_karpenter_passes_the_node_roles_whole_arn_with_its_path(prod):
    """EC2NodeClass names the node role by name; Karpenter passes its ARN, path included: a
    controller policy that grants the ARN without the path is refused iam:PassRole."""
    result, section = rehearse(edit(prod, "role:Role", "platform-karpenter-node", path="/nodes/"))
    assert counts(section) == expected(karpenter=(56, 6, 1))
    assert [f.rule for f in result.findings] == [R.DENIED, R.BEYOND]
    assert (
        f"is denied Karpenter: iam:PassRole on {MOCK}/nodes/trainforge-prod-karpenter-node ["
        in result.findings[0].message
    )


def test_karpenter_without_its_settings_or_node_classes_is_denied_what_it_needs(prod):
    release = find(prod, "Release", "platform-karpenter")
    values = {k: v for k, v in release.inputs["values"].items() if k != "settings"}
    inv = edit(prod, "Release", "platform-karpenter", values=values)
    # node classes named apart from their pools, so that the calls show which is which; and
    # another kind registered first (only NodePools name pools, whatever their place)
    sa = next(r for r in inv.resources if r.type == "kubernetes:core/v1:ServiceAccount")
    first = [sa, *(renamed_class(r) for r in inv.resources if r is not sa)]
    inv = replace(inv, resources=first)
    result, section = rehearse(inv)
    assert counts(section) == expected(karpenter=(26, 6, 31))
    # the calls on the cluster's resources, and every statement naming the cluster or queue
    assert [f.rule for f in result.findings] == [R.DENIED] * 31 + [R.BEYOND]
    assert "AllowInterruptionQueueActions, AllowZonalShiftStatusReadOnly grant more" in (
        result.findings[-1].message
    )
    # its calls are made for the stack's own node pools and node classes
    docs = [o.doc for o in k8s_objects(inv)]
    pools = {o["metadata"]["name"] for o in docs if o.get("kind") == "NodePool"}
    classes = {o["metadata"]["name"] for o in docs if o.get("kind") == "EC2NodeClass"}
    text = " ".join(f.message for f in result.findings)
    assert set(re.findall(r"karpenter.sh/nodepool=([\w-]+)", text)) <= pools
    assert set(re.findall(r"karpenter.k8s.aws/ec2nodeclass=([\w-]+)", text)) <= classes
    assert re.search(r"karpenter.sh/nodepool=([\w-]+)", text)
    assert re.search(r"karpenter.k8s.aws/ec2nodeclass=([\w-]+)", text)
    # no EC2NodeClass: no node role name, so iam:PassRole on ".../role/" is refused
    result, section = rehearse(drop(prod, lambda r: r.type.endswith("EC2NodeClass")))
    assert counts(section) == expected(karpenter=(56, 6, 1))
    assert [f.rule for f in result.findings] == [R.DENIED, R.BEYOND]
    assert f"is denied Karpenter: iam:PassRole on {MOCK}/ [" in result.findings[0].message
    assert result.findings[1].message == (
        "role platform-karpenter-controller: role platform-karpenter-controller inline policy "
        "platform-karpenter-controller statements AllowPassingInstanceRole grant more than "
        "Karpenter v1.14.1's reference controller policy (an action, resource or missing "
        "condition no reference statement covers)"
    )


def test_the_ebs_driver_needs_the_storage_class_key_and_only_with_its_add_on(prod):
    sc = find(prod, "StorageClass", "platform-services-monitoring-gp3")
    key = f"arn:aws:kms:us-east-1:{ACCT}:key/ebs"
    params = {**sc.inputs["parameters"], "kmsKeyId": key}
    result, section = rehearse(
        edit(prod, "StorageClass", "platform-services-monitoring-gp3", parameters=params)
    )
    assert counts(section) == expected(ebs=(10, 1, 3))
    assert [(f.rule, f.message.split(" [")[0]) for f in result.findings] == [
        (
            R.DENIED,
            f"role platform-eks-ebs-csi ({MOCK}/platform-eks-ebs-csi-mock) is denied EBS CSI "
            f"controller: {action} on {key}",
        )
        for action in (
            "kms:Decrypt",
            "kms:GenerateDataKeyWithoutPlaintext",
            "kms:CreateGrant",
        )
    ]
    _, section = rehearse(drop(prod, is_addon("aws-ebs-csi-driver")))
    assert counts(section) == expected(ebs=None)


def test_the_fsx_driver_is_rehearsed_on_the_file_systems_its_volumes_name(prod):
    _, section = rehearse(drop(prod, lambda r: r.type.endswith(":PersistentVolume")))
    assert counts(section) == expected(fsx=(1, 1, 0))
    _, section = rehearse(drop(prod, is_addon("aws-fsx-csi-driver")))
    assert counts(section) == expected(fsx=None)


def test_node_roles_make_the_agents_calls_unless_the_cni_has_its_own_identity(prod):
    _, section = rehearse(drop(prod, is_addon("eks-pod-identity-agent")))
    assert counts(section) == expected(node=(14, 0, 0), karpenter_node=(14, 0, 0))
    _, section = rehearse(drop(prod, is_addon("vpc-cni")))
    assert counts(section) == expected(node=(1, 0, 0), karpenter_node=(1, 0, 0))
    # an association for kube-system/aws-node: the CNI's calls are that role's, not the nodes'
    ebs = find(prod, "PodIdentityAssociation", "platform-eks-ebs-csi")
    cni = replace(
        ebs, urn=ebs.urn + "-cni", name="cni", inputs={**ebs.inputs, "serviceAccount": "aws-node"}
    )
    result, section = rehearse(replace(prod, resources=[*prod.resources, cni]))
    got = counts(section)
    assert got[NODES[0]] == got[NODES[1]] == (1, 0, 0)
    # (and that association's role, the EBS driver's, does not trust aws-node: reported)
    assert [f.rule for f in result.findings] == [R.DENIED, R.DENIED]


# --- the pieces ---------------------------------------------------------------------------


def test_a_tally_line_shows_failures_only_when_there_are_some():
    assert R.Tally("p").line() == "p: 0 calls allowed, 0 denied as required"
    t = R.Tally("p", 3, 2, 1)
    assert t.line() == "p: 3 calls allowed, 2 denied as required, 1 FAILED"


def role_facts() -> RoleFacts:
    return RoleFacts("urn:r", "r", f"{MOCK}/r", None)


def test_expect_counts_as_expected_and_reports_the_call_with_its_context():
    run = R._Run(StackIam(ACCT, "us-east-1", "aws", {}, [], {}, {}, {}))
    t = run.tally("p")
    req = Request(f"{MOCK}/r", "s3:GetObject", "arn:aws:s3:::b/k", {"b": "2", "a": "1"})
    allow = Decision(True, "allowed", allows=[Match("pol", "S1"), Match("pol2", "S2")])
    deny = Decision(False, "implicitly denied", near_misses=["S3 does not apply: x"])
    run.expect(t, role_facts(), req, allow, True, "GetObject")
    run.expect(t, role_facts(), req, deny, False, "GetObject")
    assert (t.allowed, t.denied, t.failed, run.findings) == (1, 1, 0, [])
    run.expect(t, role_facts(), req, allow, False, "GetObject", "not this one")
    run.expect(t, role_facts(), req, deny, True, "GetObject", "it reads")
    run.expect(t, role_facts(), req, deny, True, "GetObject")
    assert (t.allowed, t.denied, t.failed) == (1, 1, 3)
    what = "GetObject: s3:GetObject on arn:aws:s3:::b/k [a=1, b=2]"
    assert [(f.rule, f.message) for f in run.findings] == [
        (
            R.TOO_BROAD,
            f"role r ({MOCK}/r) is allowed {what}, which must be denied (not this one); allowed "
            "by pol S1, pol2 S2",
        ),
        (
            R.DENIED,
            f"role r ({MOCK}/r) is denied {what} (it reads) -- implicitly denied: S3 does not "
            "apply: x",
        ),
        (
            R.DENIED,
            f"role r ({MOCK}/r) is denied {what} -- implicitly denied: S3 does not apply: x",
        ),
    ]
    assert run.findings[0].names == frozenset({"r", f"{MOCK}/r"})
    assert run.findings[0].urn == "urn:r"
    run.finding(role_facts(), R.UNREHEARSED, "m")
    last = run.findings[-1]
    assert (last.resource, last.urn, last.names, last.message, last.fix) == (
        "role r",
        "urn:r",
        frozenset({"r", f"{MOCK}/r"}),
        "m",
        R.RULES[R.UNREHEARSED],
    )


def test_distinct_calls_keep_one_of_each_request_iam_judges():
    def part(n: int, key: str = "k", scenario: str = "s", secure: bool = True) -> ApiCall:
        params = {"Bucket": "b", "Key": key, "PartNumber": n, "ContentLength": n, "ContentMD5": n}
        return ApiCall("s3", "UploadPart", params, secure, scenario=scenario)

    calls = [part(1), part(2), part(3, "k2"), part(4, scenario="t"), part(5, secure=False)]
    assert R.distinct_calls(calls) == [calls[0], calls[2], calls[3], calls[4]]


def test_rebind_moves_every_key_and_prefix_to_the_other_bucket_and_prefix():
    call = ApiCall(
        "s3",
        "DeleteObjects",
        {
            "Bucket": "own",
            "Prefix": "research/job/x",
            "Delete": {"Objects": [{"Key": "research/job/a"}, {"Key": "other/b"}]},
            "MaxKeys": 1,
            "ACL": "private",
        },
        True,
        scenario="s",
    )
    moved = R._rebind(call, "theirs", "research/job", "vision/job")
    assert moved.params == {
        "Prefix": "vision/job/x",
        "Delete": {"Objects": [{"Key": "vision/job/a"}, {"Key": "other/b"}]},
        "MaxKeys": 1,
        "ACL": "private",
        "Bucket": "theirs",
    }
    assert (moved.operation, moved.scenario, moved.secure) == ("DeleteObjects", "s", True)
    assert call.params["Bucket"] == "own"  # the original call is unchanged


# --- more branches ---------------------------------------------------------------------------


def test_a_role_whose_trust_cannot_be_read_is_reported_once_not_skipped(prod):
    inv = edit(prod, "role:Role", LLM_ROLE, assumeRolePolicy=UNKNOWN)
    # its association first: the associations after it are still rehearsed
    assoc = find(inv, "PodIdentityAssociation", LLM_ROLE)
    inv = replace(inv, resources=[assoc, *(r for r in inv.resources if r is not assoc)])
    result, section = rehearse(inv)
    assert counts(section) == expected(llm_trust=None)
    assert [(f.rule, f.resource, f.message) for f in result.findings] == [
        (
            R.UNREHEARSED,
            f"role {LLM_ROLE}",
            f"role {LLM_ROLE}: cannot read its trust policy, so who may assume it through "
            f"PodIdentityAssociation {LLM_ROLE} (llm/training) is not rehearsed",
        )
    ]


def test_an_association_with_a_role_from_outside_the_stack_does_not_stop_the_others(prod):
    outside = Recorded(
        urn="urn:pulumi:prod::trainforge::x$aws:eks/podIdentityAssociation:PodIdentityAssociation::x",
        type=ASSOCIATION,
        name="x",
        parent=None,
        custom=True,
        inputs={
            "namespace": "ns",
            "serviceAccount": "sa",
            "clusterName": "trainforge-prod",
            "roleArn": f"{MOCK}/from-elsewhere",
        },
    )
    result, section = rehearse(replace(prod, resources=[outside, *prod.resources]))
    assert result.findings == [] and counts(section) == expected()


def test_teams_come_from_contracts_with_a_checkpoint_bucket_and_default_to_their_name(prod):
    (real,) = prod.declared.contracts
    ghost = replace(next(iter(real.teams.values())), name="ghost", namespace="ghost")
    no_bucket = SimpleNamespace(checkpoint_bucket=None, teams={"ghost": ghost})
    # a team without a checkpoint prefix writes under "<team>/"
    unprefixed = {n: replace(t, checkpoint_prefix="") for n, t in real.teams.items()}
    # a team without an association (the controller-identity check reports it) comes first
    unprefixed = {"ghost": ghost, **unprefixed}
    declared = SimpleNamespace(
        contracts=[
            no_bucket,
            SimpleNamespace(checkpoint_bucket=real.checkpoint_bucket, teams=unprefixed),
        ]
    )
    result, section = rehearse(prod, declared=declared)
    assert result.findings == [] and counts(section) == expected()
    # a prefix its policy does not grant: the runtime's calls are denied
    moved = {n: replace(t, checkpoint_prefix="shared/") for n, t in real.teams.items()}
    declared = SimpleNamespace(
        contracts=[SimpleNamespace(checkpoint_bucket=real.checkpoint_bucket, teams=moved)]
    )
    result, section = rehearse(prod, declared=declared)
    got = counts(section)
    assert got[LLM][2] > 0 and got[VISION][2] > 0
    assert {f.rule for f in result.findings} == {R.DENIED}
    assert all("shared/rehearsal-job" in f.message for f in result.findings)


def test_a_key_policy_that_does_not_delegate_to_iam_denies_the_teams_kms_calls(prod):
    """KMS needs the key policy's consent: the role policy's kms grant alone is not enough."""
    key = find(prod, "key:Key", "platform-services-data")
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "OnlyAdmins",
                "Effect": "Allow",
                "Principal": {"AWS": f"{MOCK}/admin"},
                "Action": "kms:*",
                "Resource": "*",
            }
        ],
    }
    kp = Recorded(
        urn=key.urn + "-policy",
        type=KMS_KEY_POLICY,
        name="data-key-policy",
        parent=None,
        custom=True,
        inputs={"keyId": key.id, "policy": json.dumps(policy)},
        dependencies={"keyId": [key.urn]},
    )
    result, section = rehearse(replace(prod, resources=[*prod.resources, kp]))
    got = counts(section)
    assert got[LLM] == got[VISION] == (41, 123, 22)
    assert section.data["notes"] == []  # the key's policy is declared now
    kms = [f for f in result.findings if ": kms:" in f.message]
    assert len(kms) == len(result.findings) == 44
    assert all("OnlyAdmins" not in f.message.split(" -- ")[0] for f in kms)


def test_the_ebs_drivers_key_grant_is_within_its_reference_when_a_storage_class_names_the_key(prod):
    sc = find(prod, "StorageClass", "platform-services-monitoring-gp3")
    key = f"arn:aws:kms:us-east-1:{ACCT}:key/ebs"
    inv = edit(
        prod,
        "StorageClass",
        "platform-services-monitoring-gp3",
        parameters={**sc.inputs["parameters"], "kmsKeyId": key},
    )
    role = find(prod, "role:Role", "platform-eks-ebs-csi")
    grant = {
        "Statement": [
            {
                "Sid": "EbsKey",
                "Effect": "Allow",
                "Action": ["kms:Decrypt", "kms:GenerateDataKeyWithoutPlaintext", "kms:CreateGrant"],
                "Resource": key,
            }
        ]
    }
    rp = Recorded(
        urn=role.urn + "-kms",
        type=IAM_ROLE_POLICY,
        name="ebs-kms",
        parent=None,
        custom=True,
        inputs={"role": "x", "policy": json.dumps(grant)},
        dependencies={"role": [role.urn]},
    )
    result, section = rehearse(replace(inv, resources=[*inv.resources, rp]))
    assert result.findings == []
    assert counts(section) == expected(ebs=(13, 1, 0))
    # without a StorageClass naming it, the same grant is beyond the driver's reference
    result, section = rehearse(replace(prod, resources=[*prod.resources, rp]))
    assert [(f.rule, f.message) for f in result.findings] == [
        (
            R.BEYOND,
            "role platform-eks-ebs-csi: role platform-eks-ebs-csi inline policy ebs-kms "
            "statements EbsKey grant more than AWS managed AmazonEBSCSIDriverPolicy (v15 of "
            "2026-05-13, moto 5.2.5's copy) (an action, resource or missing condition no "
            "reference statement covers)",
        )
    ]


def test_the_ebs_drivers_reference_is_the_managed_policy_it_attaches_not_the_example(prod):
    """AmazonEBSCSIDriverPolicy is judged as AWS serves it (moto's copy, v15), not as the
    driver's v1.50.1 example-iam-policy.json, which lacks ec2:LockSnapshot: the role's inline
    copy of v15's snapshot-lock statement is within its reference; a grant beyond v15 is not."""
    role = find(prod, "role:Role", "platform-eks-ebs-csi")
    lock = {
        "Sid": "LockOwnSnapshots",
        "Effect": "Allow",
        "Action": ["ec2:DeleteSnapshot", "ec2:LockSnapshot"],
        "Resource": "arn:aws:ec2:*:*:snapshot/*",
        "Condition": {"StringLike": {"ec2:ResourceTag/CSIVolumeSnapshotName": "*"}},
    }
    unconditional = {**lock, "Sid": "LockAnySnapshot"}
    del unconditional["Condition"]
    findings = []
    for statement in (lock, unconditional):
        rp = Recorded(
            urn=role.urn + "-lock",
            type=IAM_ROLE_POLICY,
            name="ebs-lock",
            parent=None,
            custom=True,
            inputs={"role": "x", "policy": json.dumps({"Statement": [statement]})},
            dependencies={"role": [role.urn]},
        )
        result, _ = rehearse(replace(prod, resources=[*prod.resources, rp]))
        findings.append(
            [(f.rule, f.message.split(" grant more than ")[0]) for f in result.findings]
        )
    assert findings == [
        [],
        [
            (
                R.BEYOND,
                "role platform-eks-ebs-csi: role platform-eks-ebs-csi inline policy ebs-lock "
                "statements LockAnySnapshot",
            )
        ],
    ]


def test_a_runtime_call_without_an_iam_mapping_is_reported_and_the_rest_still_rehearsed(
    prod, monkeypatch
):
    real = R._mirror_calls

    def with_unmapped(bucket: str, prefix: str, region: str) -> list[ApiCall]:
        odd = ApiCall("s3", "GetBucketAcl", {"Bucket": bucket}, True, scenario="audit")
        return [odd, *real(bucket, prefix, region)]

    monkeypatch.setattr(R, "_mirror_calls", with_unmapped)
    result, section = rehearse(prod)
    assert counts(section) == expected()
    assert [(f.rule, f.resource, f.message) for f in result.findings] == [
        (
            R.UNREHEARSED,
            f"role platform-services-ckpt-{team}",
            "s3:GetBucketAcl(Bucket='platform-services-ckpt-id'): no IAM mapping for "
            "s3:GetBucketAcl in trainforge/plan/checks/aws_calls.py S3_OPERATIONS",
        )
        for team in ("llm", "vision")  # the stack file's order
    ]


def test_only_ebs_storage_classes_add_keys_to_the_ebs_drivers_calls(prod):
    sc = find(prod, "StorageClass", "platform-services-monitoring-gp3")
    key = f"arn:aws:kms:us-east-1:{ACCT}:key/other"
    other = replace(
        sc,
        urn=sc.urn + "-other",
        name="other-sc",
        inputs={
            **sc.inputs,
            "metadata": {"name": "other"},
            "provisioner": "driver.longhorn.io",
            "parameters": {"kmsKeyId": key},
        },
    )
    not_a_class = replace(
        other,
        urn=sc.urn + "-cm",
        name="cm",
        type="kubernetes:core/v1:ConfigMap",
        inputs={
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"name": "cm"},
            "provisioner": "ebs.csi.aws.com",
            "parameters": {"kmsKeyId": key},
        },
    )
    efs = replace(
        other,
        urn=sc.urn + "-efs",
        name="efs-sc",
        inputs={**other.inputs, "metadata": {"name": "efs"}, "provisioner": "efs.csi.aws.com"},
    )
    extra = [other, efs, not_a_class]
    result, section = rehearse(replace(prod, resources=[*prod.resources, *extra]))
    assert result.findings == [] and counts(section) == expected()


def test_the_fsx_driver_counts_only_fsx_volumes(prod):
    pv = find(prod, ":PersistentVolume", "platform-services-fsx-pv-root")

    def other(driver: str, handle: str) -> Recorded:
        spec = {**pv.inputs["spec"], "csi": {"driver": driver, "volumeHandle": handle}}
        return replace(
            pv, urn=f"{pv.urn}-{handle}", name=handle, inputs={**pv.inputs, "spec": spec}
        )

    extra = [other("ebs.csi.aws.com", "vol-1"), other("s3.csi.aws.com", "s3-1")]
    result, section = rehearse(replace(prod, resources=[*prod.resources, *extra]))
    assert result.findings == [] and counts(section) == expected()


def rewired(inv: Inventory, name: str) -> Inventory:
    """The association `name` moved to namespace "moved", and a copy for its ServiceAccount
    that names the role by its ARN only (no recorded dependency)."""
    assoc = find(inv, "PodIdentityAssociation", name)
    by_arn = replace(assoc, urn=assoc.urn + "-by-arn", name=name + "-by-arn", dependencies={})
    moved = replace(assoc, inputs={**assoc.inputs, "namespace": "moved"})
    return replace(inv, resources=[moved if r is assoc else r for r in inv.resources] + [by_arn])


def test_a_role_named_by_its_arn_alone_is_found(prod):
    """An association without a recorded dependency names its role by ARN: the trust, team and
    controller rehearsals find it by that ARN."""
    inv = rewired(rewired(prod, LLM_ROLE), "platform-eks-ebs-csi")
    result, section = rehearse(inv)
    moved = {
        f"trust of role {LLM_ROLE} (moved/training)": (0, 4, 2),
        "trust of role platform-eks-ebs-csi (moved/ebs-csi-controller-sa)": (0, 4, 2),
    }
    assert counts(section) == {**expected(), **moved}
    # the moved associations' own requests are refused by the roles' trust: reported
    assert [f.rule for f in result.findings] == [R.DENIED] * 4
    assert all(" is denied PodIdentityAssociation " in f.message for f in result.findings)


# --- the S3 paths a team's jobs name ------------------------------------------------------


def job(args: list[str], env: dict[str, str], sa: str = "training") -> K8sObject:
    """A Job of team vision (the plan's objects: the stand-in run declares no job) whose
    container names these arguments and literal env values."""
    c = {"name": "train", "image": "x", "command": ["python", "train.py", *args]}
    c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    meta = {"name": "reader", "namespace": "vision"}
    pod = {"containers": [c], "restartPolicy": "Never", "serviceAccountName": sa}
    spec = {"template": {"spec": pod}}
    inputs = {"metadata": meta, "spec": spec}
    return to_object(Recorded("urn:job", "kubernetes:batch/v1:Job", "reader", None, True, inputs))


JOB = "vision/Job/reader"
BUCKET = "platform-services-ckpt-id"


def test_a_job_path_outside_its_teams_reach_is_a_finding_naming_job_path_and_reach(prod):
    o = job(
        ["--data", "s3://someone-elses-datasets/imagenet"],
        {"TRAINFORGE_CHECKPOINT_S3": f"s3://{BUCKET}/llm/checkpoints/gpt-350m-fsdp"},
    )
    result, section = rehearse(prod, objects=[o])
    assert [f.rule for f in result.findings] == ["TRAINFORGE_IAM_JOB_PATH"] * 2
    read, write = (f.message for f in result.findings)
    assert read.startswith(
        f"job {JOB} reads s3://someone-elses-datasets/imagenet (command of container train), "
        f"but role platform-services-ckpt-vision ({MOCK}/platform-services-ckpt-vision-mock), its "
        "pods' identity, is denied s3:ListBucket on arn:aws:s3:::someone-elses-datasets (unless "
        "bucket someone-elses-datasets, not in this stack, has a policy that grants it): "
    ), read
    assert write.startswith(
        f"job {JOB} writes checkpoints to s3://{BUCKET}/llm/checkpoints/gpt-350m-fsdp (env "
        "TRAINFORGE_CHECKPOINT_S3 of container train), but role platform-services-ckpt-vision"
    ), write
    for message in (read, write):
        assert message.endswith(
            f"the job fails there with AccessDenied. The role may reach s3://{BUCKET}/vision/ "
            "(team vision's prefix of the checkpoint bucket)"
        ), message
    assert all(f.resource == JOB for f in result.findings)
    assert counts(section) == expected()  # the rehearsal's own counts are the shipped stack's


def test_a_job_path_in_its_teams_prefix_is_not_a_finding(prod):
    o = job(
        ["--data", f"s3://{BUCKET}/vision/datasets/train.bin"],
        {"TRAINFORGE_CHECKPOINT_S3": f"s3://{BUCKET}/vision/checkpoints/gpt-350m-fsdp"},
    )
    result, _ = rehearse(prod, objects=[o])
    assert result.findings == []


def test_a_job_path_of_pods_with_another_service_account_is_not_judged_by_the_teams_role(prod):
    o = job(["--data", "s3://someone-elses-datasets/imagenet"], {}, sa="default")
    result, _ = rehearse(prod, objects=[o])
    assert result.findings == []


def test_an_upload_to_another_teams_prefix_writes_and_is_denied_put_object(prod):
    """`aws s3 cp LOCAL s3://...` sends the pod's data: the finding says "writes" and names the
    action an upload needs (s3:PutObject), from the one model of uploads (jobs/fetches.py
    `_aws_s3`); a download from the same prefix still "reads"."""
    script = (
        f"aws s3 cp /fsx/vision/out.tar s3://{BUCKET}/llm/out.tar && "
        f"aws s3 cp s3://{BUCKET}/llm/in.tar /tmp/in.tar"
    )
    o = job([], {})
    o.doc["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", script]
    result, _ = rehearse(prod, objects=[o])
    write, read = (f.message for f in result.findings)
    assert write.startswith(
        f"job {JOB} writes s3://{BUCKET}/llm/out.tar (command of container train), but role "
        f"platform-services-ckpt-vision ({MOCK}/platform-services-ckpt-vision-mock), its pods' "
        f"identity, is denied s3:PutObject on arn:aws:s3:::{BUCKET}/llm/out.tar: "
    ), write
    assert read.startswith(f"job {JOB} reads s3://{BUCKET}/llm/in.tar (command"), read
    assert " is denied s3:GetObject on " in read or " is denied s3:ListBucket on " in read, read
