"""What the IAM rehearsal reads from a stack (`iam_stack.read_stack`), fact by fact.

The rehearsal judges only what this reader found: a role it misses, a policy it ties to the
wrong role, a bucket endpoint read from the wrong resource, each turns a check off quietly.
So the facts are pinned exactly: first those of the shipped prod stack (its stand-in run,
recorded once for the module), then small hand-built inventories for the branches the
shipped stacks never reach (a role named by its bare name, an attachment to a customer
managed policy, an S3 endpoint of the wrong type, a key from outside the stack, ...)."""

from __future__ import annotations

import json

import pytest

from trainforge.plan import resource_types as R
from trainforge.plan.checks import iam_stack as S
from trainforge.plan.checks.aws_calls import BucketFacts
from trainforge.plan.checks.iam_stack import Association, read_stack
from trainforge.plan.mocks import DEFAULT_ACCOUNT, DEFAULT_REGION
from trainforge.plan.runner import UNKNOWN, Inventory, Recorded

# --- the shipped prod stack ----------------------------------------------------------------

MOCK = f"arn:aws:iam::{DEFAULT_ACCOUNT}:role"
PROD_KEY = f"arn:aws:kms:us-east-1:{DEFAULT_ACCOUNT}:key/mrk-0000a9fcaf29"
PROD_BUCKET = "platform-services-ckpt-id"

# role (Pulumi name) -> (ARN as read, its policies, sorted: the stand-in run registers
# resources concurrently, so their order may change from run to run)
PROD_ROLES = {
    # no name and no association: the reader's own stand-in ARN
    "platform-eks-node": (
        f"{MOCK}/platform-eks-node-standin",
        [
            "managed AmazonEKSWorkerNodePolicy",
            "managed AmazonEKS_CNI_Policy",
            "role platform-eks-node inline policy platform-images-node-pull-0",
        ],
    ),
    "platform-eks-ebs-csi": (
        f"{MOCK}/platform-eks-ebs-csi-mock",
        ["managed AmazonEBSCSIDriverPolicy"],
    ),
    # its explicit name
    "platform-karpenter-node": (
        f"{MOCK}/trainforge-prod-karpenter-node",
        [
            "managed AmazonEKSWorkerNodePolicy",
            "managed AmazonEKS_CNI_Policy",
            "role platform-karpenter-node inline policy platform-images-node-pull-1",
        ],
    ),
    "platform-karpenter-controller": (
        f"{MOCK}/platform-karpenter-controller-mock",
        ["role platform-karpenter-controller inline policy platform-karpenter-controller"],
    ),
    "platform-services-fsx-csi": (
        f"{MOCK}/platform-services-fsx-csi-mock",
        ["role platform-services-fsx-csi inline policy platform-services-fsx-csi"],
    ),
    "platform-services-ckpt-vision": (
        f"{MOCK}/platform-services-ckpt-vision-mock",
        ["role platform-services-ckpt-vision inline policy platform-services-ckpt-vision"],
    ),
    "platform-services-ckpt-llm": (
        f"{MOCK}/platform-services-ckpt-llm-mock",
        ["role platform-services-ckpt-llm inline policy platform-services-ckpt-llm"],
    ),
}

# (name, namespace, service account, role's Pulumi name); all PodIdentityAssociation resources
PROD_ASSOCIATIONS = sorted(
    [
        ("platform-eks-ebs-csi", "kube-system", "ebs-csi-controller-sa", "platform-eks-ebs-csi"),
        (
            "platform-karpenter-controller",
            "kube-system",
            "karpenter",
            "platform-karpenter-controller",
        ),
        (
            "platform-services-fsx-csi",
            "kube-system",
            "fsx-csi-controller-sa",
            "platform-services-fsx-csi",
        ),
        ("platform-services-ckpt-llm", "llm", "training", "platform-services-ckpt-llm"),
        ("platform-services-ckpt-vision", "vision", "training", "platform-services-ckpt-vision"),
    ]
)


@pytest.fixture(scope="module")
def prod(prod_standin):
    """The prod stack as the IAM rehearsal reads it: its stand-in run (every document built)."""
    return prod_standin, read_stack(prod_standin)


def test_prod_account_region_and_every_role_by_urn_and_by_arn(prod):
    inv, stack = prod
    assert (stack.account, stack.region, stack.partition) == (DEFAULT_ACCOUNT, "us-east-1", "aws")
    got = {r.name: (r.arn, sorted(p.name for p in r.policies)) for r in stack.roles.values()}
    assert got == PROD_ROLES
    role_urns = [r.urn for r in inv.resources if r.type == R.IAM_ROLE]
    assert list(stack.roles) == role_urns
    for urn, role in stack.roles.items():
        assert role.urn == urn and role.unreadable == [] and role.label == f"role {role.name}"
        assert role.trust is not None and role.trust.name == f"trust of role {role.name}"
        assert stack.role(urn) is role
        assert stack.role(copy(role.arn)) is role, role.arn
    # lookups that must miss
    assert stack.role(None) is None and stack.role("") is None
    assert stack.role(f"{MOCK}/platform-services-ckpt-nobody-mock") is None
    assert stack.role("arn:aws:iam::999999999999:role/zzz") is None
    assert stack.role("a") is None
    assert stack.role(role_urns[0] + "-other") is None


def test_prod_node_roles_are_the_two_ec2_trusted_roles(prod):
    _, stack = prod
    names = sorted(r.name for r in stack.node_roles())
    assert names == ["platform-eks-node", "platform-karpenter-node"]


def test_prod_associations_name_their_role(prod):
    _, stack = prod
    by_urn = {r.urn: r for r in stack.roles.values()}
    got = sorted(
        (a.name, a.namespace, a.service_account, by_urn[a.role_urn].name)
        for a in stack.associations
    )
    assert got == PROD_ASSOCIATIONS
    for a in stack.associations:
        assert a.cluster == "trainforge-prod" and a.via == "PodIdentityAssociation"
        assert a.role_arn == PROD_ROLES[by_urn[a.role_urn].name][0]
        assert a.urn.endswith(f"podIdentityAssociation:PodIdentityAssociation::{a.name}")
    (llm,) = stack.associations_for("llm", "training")
    assert llm.name == "platform-services-ckpt-llm"
    assert [a.name for a in stack.associations_for("kube-system", "karpenter")] == [
        "platform-karpenter-controller"
    ]
    assert stack.associations_for("llm", "default") == []
    assert stack.associations_for("research", "training") == []


def test_prod_bucket_its_key_its_policy_its_gateway_endpoint_and_notes(prod):
    _, stack = prod
    assert stack.buckets == {PROD_BUCKET: BucketFacts(PROD_BUCKET, PROD_KEY, bucket_key=True)}
    assert list(stack.bucket_policies) == [PROD_BUCKET]
    policy = stack.bucket_policies[PROD_BUCKET]
    assert policy.name == "bucket policy platform-services-ckpt-tls-only"
    assert [st["Sid"] for st in policy.statements()] == [
        "DenyInsecureTransport",
        "TeamRolesOnlyThroughTheVpcEndpoint",
    ]
    # the S3 gateway endpoint's id (the eight Interface endpoints do not count)
    assert stack.bucket_endpoints == {PROD_BUCKET: "platform-net-s3-id"}
    # the key is declared without a key policy: KMS gives it the default one
    assert stack.key_policies == {}
    key_policy = stack.key_policy(PROD_KEY)
    assert key_policy.name == "default key policy"
    assert key_policy.statements()[0]["Principal"] == {
        "AWS": f"arn:aws:iam::{DEFAULT_ACCOUNT}:root"
    }
    assert stack.notes == [
        f"bucket {PROD_BUCKET}: key {PROD_KEY} has KMS's default key policy (delegates to IAM)"
    ]


# --- hand-built inventories: the branches the shipped stacks do not reach -----------------

ACCT = "210987654321"  # not the mocks' account: an account read from the stack shows


def rec(type_: str, name: str, inputs: dict, deps: dict | None = None, id_: str | None = None):
    return Recorded(
        urn=f"urn:pulumi:t::p::{type_}::{name}",
        type=type_,
        name=name,
        parent=None,
        custom=True,
        inputs=inputs,
        dependencies=deps or {},
        id=id_,
    )


def copy(text: str) -> str:
    """An equal string that is another object (as the engine's deserialized URNs are)."""
    return (text + " ")[:-1]


def inventory(*resources: Recorded, config: dict | None = None) -> Inventory:
    return Inventory("p", "t", list(resources), config=config or {})


def doc(sid: str, service: str | None = None) -> str:
    st: dict = {"Sid": sid, "Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}
    if service:
        st = {**st, "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
    return json.dumps({"Version": "2012-10-17", "Statement": [st]})


def role(pulumi_name: str, **inputs) -> Recorded:
    trust = doc("Trust", "pods.eks.amazonaws.com")
    return rec(R.IAM_ROLE, pulumi_name, {"assumeRolePolicy": trust, **inputs})


def assoc(name: str, role_arn: str, role_rec: Recorded | None = None, ns="ns", sa="sa"):
    deps = {"roleArn": [role_rec.urn]} if role_rec else {}
    inputs = {"namespace": ns, "serviceAccount": sa, "clusterName": "c", "roleArn": role_arn}
    return rec(S.ASSOCIATION, name, inputs, deps)


def test_account_from_the_first_association_with_a_whole_arn():
    """Too short an ARN (or none) is passed over; the first whole one decides; a role's ARN is
    the association's where it has one (a known ARN), else from its name, else a stand-in."""
    a = role("a")
    b = role("b", name="b-real")
    c = role("c", name=copy(UNKNOWN))
    d = role("d", name="d-real")
    e = role("e", name="0-e")  # IAM allows names that sort before "<unknown>"
    stack = read_stack(
        inventory(
            a,
            b,
            c,
            d,
            e,
            assoc("x0", UNKNOWN),
            assoc("x1", "arn:aws:iam"),
            assoc("x2", "arn:aws:iam:x"),  # four parts: no account field
            assoc("x4", f"arn:aws:iam::{ACCT}:role/a-assoc", a),
            assoc("x5", "arn:aws:iam::333333333333:role/later"),
            assoc("x6", UNKNOWN, d),
        )
    )
    assert (stack.account, stack.region) == (ACCT, DEFAULT_REGION)
    assert {r.name: r.arn for r in stack.roles.values()} == {
        "a": f"arn:aws:iam::{ACCT}:role/a-assoc",
        "b": f"arn:aws:iam::{ACCT}:role/b-real",
        "c": f"arn:aws:iam::{ACCT}:role/c-standin",
        "d": f"arn:aws:iam::{ACCT}:role/d-real",
        "e": f"arn:aws:iam::{ACCT}:role/0-e",
    }
    assert stack.role(f"arn:aws:iam::{ACCT}:role/d-real") is stack.roles[d.urn]
    assert stack.role(f"arn:aws:iam::{ACCT}:role/b-real") is stack.roles[b.urn]
    assert read_stack(inventory(a)).account == DEFAULT_ACCOUNT  # no association at all
    # a path is part of the ARN (an unknown one is left out)
    paths = read_stack(
        inventory(
            role("p1", name="p1-real", path="/nodes/"),
            role("p2", path="/x/"),
            role("p3", name="p3-real", path=copy(UNKNOWN)),
        )
    )
    assert [r.arn for r in paths.roles.values()] == [
        f"arn:aws:iam::{DEFAULT_ACCOUNT}:role/nodes/p1-real",
        f"arn:aws:iam::{DEFAULT_ACCOUNT}:role/x/p2-standin",
        f"arn:aws:iam::{DEFAULT_ACCOUNT}:role/p3-real",
    ]
    # an ARN with an account field and nothing after it still names the account
    assert read_stack(inventory(assoc("y", f"arn:aws:iam::{ACCT}"))).account == ACCT
    assert read_stack(inventory(a, config={"aws:region": "eu-west-1"})).region == "eu-west-1"


def test_unreadable_trust_inline_and_managed_policies_are_listed():
    r = rec(
        R.IAM_ROLE,
        "r",
        {
            "assumeRolePolicy": UNKNOWN,
            "inlinePolicies": [
                {"name": "ok", "policy": doc("Inline0")},
                {"name": "later", "policy": UNKNOWN},
                "not a policy",
                {"name": "ok2", "policy": json.loads(doc("Inline3"))},
            ],
            "managedPolicyArns": [
                "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",  # shipped with its document
                "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",  # known, not judged
                f"arn:aws:iam::{ACCT}:policy/custom",
            ],
        },
    )
    (facts,) = read_stack(inventory(r)).roles.values()
    assert facts.trust is None
    assert [p.name for p in facts.policies] == [
        "role r inline 0",
        "role r inline 3",
        "managed AmazonEKS_CNI_Policy",
    ]
    assert facts.policies[0].statements()[0]["Sid"] == "Inline0"
    assert facts.unreadable == [
        "trust policy",
        "inline policy 1",
        "inline policy 2",
        f"managed policy arn:aws:iam::{ACCT}:policy/custom (not shipped with trainforge)",
    ]


def test_node_roles_are_those_ec2_may_assume():
    node = rec(R.IAM_ROLE, "node", {"assumeRolePolicy": doc("T", "ec2.amazonaws.com")})
    cn = rec(R.IAM_ROLE, "cn", {"assumeRolePolicy": doc("T", "ec2.amazonaws.com.cn")})
    pods = role("pods")
    unknown = rec(R.IAM_ROLE, "unknown", {"assumeRolePolicy": UNKNOWN})
    no_principal = rec(
        R.IAM_ROLE, "np", {"assumeRolePolicy": json.dumps({"Statement": {"Effect": "Allow"}})}
    )
    # a trust policy whose Principal is "*" (anyone) names no service: not a node role
    anyone = {"Effect": "Allow", "Principal": "*", "Action": "sts:AssumeRole"}
    star = rec(R.IAM_ROLE, "star", {"assumeRolePolicy": json.dumps({"Statement": [anyone]})})
    stack = read_stack(inventory(pods, unknown, no_principal, star, node, cn))
    assert [r.name for r in stack.node_roles()] == ["node", "cn"]


def test_role_policies_and_attachments_find_their_role_by_any_name():
    """Without a recorded dependency a policy names its role by the Pulumi name, the whole
    ARN or the ARN's last part (the role's name in AWS); a name no role has is passed over."""
    r1 = role("r1", name="r1-real")
    r2 = role("r2")
    r2_arn = f"arn:aws:iam::{ACCT}:role/path/r2-arn"

    def rp(name: str, ref: str, policy: str | None = None):
        return rec(R.IAM_ROLE_POLICY, name, {"role": ref, "policy": policy or doc(name)})

    resources = [
        r1,
        r2,
        assoc("a2", r2_arn, r2),
        rp("p-nobody", "nobody"),
        rp("p-by-pulumi-name", "r1"),
        rp("p-by-last-part", "r1-real"),
        rp("p-by-arn", r2_arn),
        rp("p-by-arn-last-part", "r2-arn"),
        rp("p-unknown", "r2", UNKNOWN),
        rec(
            R.IAM_ROLE_POLICY, "p-by-dep", {"role": "zzz", "policy": doc("dep")}, {"role": [r2.urn]}
        ),
        rec(
            S.ATTACHMENT,
            "att",
            {"role": "r1-real", "policyArn": "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"},
        ),
        rec(
            S.ATTACHMENT,
            "att-nobody",
            {"role": "nobody", "policyArn": f"arn:aws:iam::{ACCT}:policy/x"},
        ),
    ]
    stack = read_stack(inventory(*resources))
    got = {r.name: ([p.name for p in r.policies], r.unreadable) for r in stack.roles.values()}
    assert got == {
        "r1": (
            [
                "role r1 inline policy p-by-pulumi-name",
                "role r1 inline policy p-by-last-part",
                "managed AmazonEKS_CNI_Policy",
            ],
            [],
        ),
        "r2": (
            [
                "role r2 inline policy p-by-arn",
                "role r2 inline policy p-by-arn-last-part",
                "role r2 inline policy p-by-dep",
            ],
            ["inline policy p-unknown"],
        ),
    }


def test_an_association_naming_no_role_arn_path_does_not_stop_the_reader():
    """An association's roleArn without a '/' (not a role ARN): read as given, matched whole."""
    r = role("r")
    odd = f"arn:aws:iam::{ACCT}:root"
    stack = read_stack(
        inventory(
            r, assoc("a", odd, r), rec(R.IAM_ROLE_POLICY, "p", {"role": odd, "policy": doc("P")})
        )
    )
    (facts,) = stack.roles.values()
    assert facts.arn == odd
    assert [p.name for p in facts.policies] == ["role r inline policy p"]


def test_attachments_to_managed_policies_follow_the_policy_they_depend_on():
    """The attachment's policy is the Policy resource its policyArn came from (by URN, not
    by its place in the stack); with no such resource, the ARN's managed policy."""
    pol_b = rec(R.IAM_POLICY, "pol-b", {"policy": doc("B")})
    pol_a = rec(R.IAM_POLICY, "pol-a", {"policy": doc("A")})
    pol_c = rec(R.IAM_POLICY, "pol-c", {"policy": UNKNOWN})
    r = role("r")
    other = rec("aws:iam/user:User", "someone", {})

    def att(name: str, arn: str, policy: Recorded | None):
        # the engine's recorded URNs are equal strings, never the same object
        deps = {"role": [r.urn]} | ({"policyArn": [copy(policy.urn)]} if policy else {})
        return rec(S.ATTACHMENT, name, {"role": "r", "policyArn": arn}, deps)

    stack = read_stack(
        inventory(
            pol_b,
            pol_a,
            pol_c,
            r,
            other,
            att("to-a", f"arn:aws:iam::{ACCT}:policy/pol-a-1234", pol_a),
            att("to-c", f"arn:aws:iam::{ACCT}:policy/pol-c-1234", pol_c),
            att("to-b", f"arn:aws:iam::{ACCT}:policy/pol-b-1234", pol_b),
            # its policy URN is no Policy resource: the AWS managed policy its ARN names
            att("to-other", "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy", other),
            att("to-unshipped", f"arn:aws:iam::{ACCT}:policy/elsewhere", None),
        )
    )
    (facts,) = stack.roles.values()
    assert [p.name for p in facts.policies] == [
        "policy pol-a",
        "policy pol-b",
        "managed AmazonEKSWorkerNodePolicy",
    ]
    assert [p.statements()[0]["Sid"] for p in facts.policies[:2]] == ["A", "B"]
    assert facts.unreadable == [
        "managed policy pol-c",
        f"managed policy arn:aws:iam::{ACCT}:policy/elsewhere (not shipped with trainforge)",
    ]


def test_an_add_ons_own_pod_identity_associations_are_associations():
    r = role("ebs")
    arn = f"arn:aws:iam::{ACCT}:role/ebs"
    addon = rec(
        R.EKS_ADDON,
        "ebs-addon",
        {
            "addonName": "aws-ebs-csi-driver",
            "clusterName": "c1",
            "podIdentityAssociations": [
                "not an association",
                {"serviceAccount": "ebs-csi-controller-sa", "roleArn": arn},
            ],
        },
        {"podIdentityAssociations": [r.urn]},
    )
    bare = rec(R.EKS_ADDON, "coredns", {"addonName": "coredns", "clusterName": "c1"})
    stack = read_stack(inventory(r, bare, addon))
    assert stack.associations == [
        Association(
            name="ebs-addon#1",
            urn=addon.urn,
            namespace="kube-system",
            service_account="ebs-csi-controller-sa",
            cluster="c1",
            role_urn=r.urn,
            role_arn=arn,
            via="add-on aws-ebs-csi-driver podIdentityAssociations",
        )
    ]
    assert stack.associations_for("kube-system", "ebs-csi-controller-sa") == stack.associations
    assert stack.role(stack.associations[0].role_urn) is stack.roles[r.urn]


KEY_A = f"arn:aws:kms:us-west-2:{ACCT}:key/a"
KEY_OUT = f"arn:aws:kms:us-west-2:{ACCT}:key/outside"


def sse(name: str, bucket, rules: list, key: Recorded | None = None) -> Recorded:
    deps = {"rules": [key.urn]} if key else {}
    return rec(R.S3_SSE, name, {"bucket": bucket, "rules": rules}, deps)


def kms_rule(key_arn: str, algorithm="aws:kms", bucket_key=None) -> dict:
    rule: dict = {
        "applyServerSideEncryptionByDefault": {
            "sseAlgorithm": algorithm,
            "kmsMasterKeyId": key_arn,
        }
    }
    if bucket_key is not None:
        rule["bucketKeyEnabled"] = bucket_key
    return rule


def test_bucket_encryption_and_key_policies_are_read_per_bucket():
    key_a = rec(R.KMS_KEY, "key-a", {"policy": doc("KeyA")})
    key_b = rec(R.KMS_KEY, "key-b", {})  # no policy: KMS's default
    key_b_arn = f"arn:aws:kms:us-west-2:{ACCT}:key/b"
    stack = read_stack(
        inventory(
            key_a,
            key_b,
            sse("s-unknown", copy(UNKNOWN), [kms_rule(KEY_OUT)], key_b),  # name not known yet
            sse("s-a", "b-a", [kms_rule(KEY_A, bucket_key=True)], key_a),
            sse("s-b", "b-b", [kms_rule(key_b_arn)], key_b),
            sse("s-out", "b-out", [kms_rule(KEY_OUT, bucket_key=False)]),
            # SSE-S3: S3's own keys, whatever kmsMasterKeyId says; depends on key-a anyway
            sse("s-aes", "b-aes", [kms_rule(KEY_OUT, algorithm="AES256")], key_a),
            sse("s-none", "b-none", []),  # no rule at all
            sse("s-id", 42, [kms_rule(KEY_OUT)], key_b),
            sse("s-digit", "0-data", [kms_rule(KEY_A)], key_a),  # sorts before "<unknown>"
            # dual-layer SSE with KMS: the key is used, S3 Bucket Keys are not
            sse("s-dsse", "b-dsse", [kms_rule(KEY_A, "aws:kms:dsse", bucket_key=True)]),
            # a bucket known only from its bucket policy
            rec(R.S3_POLICY, "bp-pol", {"bucket": "b-pol", "policy": doc("BP")}),
            rec(R.S3_POLICY, "bp-unknown", {"bucket": "b-x", "policy": UNKNOWN}),
            rec(R.S3_POLICY, "bp-unnamed", {"bucket": UNKNOWN + "x", "policy": None}),
        )
    )
    assert stack.buckets == {
        "b-a": BucketFacts("b-a", KEY_A, True),
        "b-b": BucketFacts("b-b", key_b_arn, False),
        "b-out": BucketFacts("b-out", KEY_OUT, False),
        "b-aes": BucketFacts("b-aes", None, False),
        "b-none": BucketFacts("b-none", None, False),
        "0-data": BucketFacts("0-data", KEY_A, False),
        "b-dsse": BucketFacts("b-dsse", KEY_A, False),
        "b-pol": BucketFacts("b-pol", None, False),
    }
    assert {k: p.name for k, p in stack.bucket_policies.items()} == {
        "b-pol": "bucket policy bp-pol"
    }
    assert {k: p.name for k, p in stack.key_policies.items()} == {KEY_A: "key policy of key-a"}
    assert stack.key_policy(KEY_A) == stack.key_policies[KEY_A]
    assert key_b_arn not in stack.key_policies
    assert stack.key_policy(key_b_arn).name == "default key policy"
    # a note per bucket whose key policy is not declared here: whose key is it?
    assert stack.notes == [
        f"bucket b-b: key {key_b_arn} has KMS's default key policy (delegates to IAM)",
        f"bucket b-out: key {KEY_OUT} has a key policy outside this stack; assumed to delegate"
        " to IAM",
    ]
    assert stack.bucket_endpoints == {}  # no S3 gateway endpoint declared


def test_a_key_policy_resource_is_the_keys_policy():
    key = rec(R.KMS_KEY, "key", {"policy": doc("Inline")})
    kp = rec(S.KMS_KEY_POLICY, "kp", {"keyId": "k", "policy": doc("Own")}, {"keyId": [key.urn]})
    stray = rec(S.KMS_KEY_POLICY, "stray", {"keyId": "z", "policy": doc("Stray")})
    unknown = rec(S.KMS_KEY_POLICY, "kp2", {"keyId": "k", "policy": UNKNOWN}, {"keyId": [key.urn]})
    stack = read_stack(inventory(key, sse("s", "b", [kms_rule(KEY_A)], key), kp, stray, unknown))
    policy = stack.key_policy(KEY_A)
    assert KEY_A in stack.key_policies and policy.name == "key policy kp"
    assert policy.statements()[0]["Sid"] == "Own"
    assert list(stack.key_policies) == [KEY_A] and stack.notes == []


def endpoint(name: str, service: str, type_: str | None, id_: str | None = "") -> Recorded:
    inputs = {"serviceName": f"com.amazonaws.us-west-2.{service}", "vpcId": "vpc-1"}
    if type_ is not None:
        inputs["vpcEndpointType"] = type_
    return rec(R.VPC_ENDPOINT, name, inputs, id_=f"vpce-{name}" if id_ == "" else id_)


def test_bucket_endpoints_come_from_the_declared_s3_gateway_endpoints():
    """Only a Gateway endpoint for S3 puts a bucket behind the VPC: an Interface endpoint for
    S3 or a gateway for another service does not. A bucket policy built from one of several
    gateways is linked to it; other buckets get the first."""
    gw1 = endpoint("gw1", "s3", "Gateway")
    gw2 = endpoint("gw2", "s3", None, id_=None)  # the provider's default type; id unknown
    resources = [
        endpoint("s3-interface", "s3", "Interface"),
        endpoint("ddb", "dynamodb", "Gateway"),
        endpoint("glb", "s3", "GatewayLoadBalancer"),
        gw1,
        gw2,
        sse("s", "b-first", [kms_rule(KEY_OUT)]),
        rec(
            R.S3_POLICY,
            "bp2",
            {"bucket": "b-second", "policy": doc("BP")},
            {"policy": [gw1.urn + "-not", gw2.urn], "bucket": [gw1.urn]},
        ),
    ]
    stack = read_stack(inventory(*resources))
    assert stack.bucket_endpoints == {
        "b-first": "vpce-gw1",
        "b-second": "<id of VPC endpoint gw2>",
    }
    no_gateway = read_stack(inventory(*resources[:3], *resources[5:]))
    assert no_gateway.bucket_endpoints == {}
    assert set(no_gateway.buckets) == {"b-first", "b-second"}


def test_stack_iam_reads_the_stand_in_inventory_once_per_plan(monkeypatch):
    """The rehearsal and the controller-identity check share one read (ctx.memo)."""
    from trainforge.plan.check_types import PlanContext

    preview, standin = inventory(role("r")), inventory(role("r"), role("s"))
    reads: list[Inventory] = []
    monkeypatch.setattr(S, "read_stack", lambda inv: reads.append(inv) or read_stack(inv))
    ctx = PlanContext(inventory=preview, objects=[], standin=lambda: standin)
    (inv, first), (_, second) = S.stack_iam(ctx), S.stack_iam(ctx)
    assert inv is standin and first is second and reads == [standin]
    assert len(first.roles) == 2
    plain = PlanContext(inventory=preview, objects=[])  # no stand-in run: the preview's
    assert S.stack_iam(plain)[0] is preview and len(S.stack_iam(plain)[1].roles) == 1
