"""The AWS tags of the stack's resources, built here once, and AWS's limit on their number.

Why: AWS refuses a resource with more than 50 tags, tags whose key starts with `aws:` not
counted ("The maximum number of tags per resource is 50", AWS Billing User-Defined Tag
Restrictions, docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/allocation-tag-restrictions.html;
"Tags with this prefix do not count against your tags-per-resource limit", AWS Batch Tag
restrictions, docs.aws.amazon.com/batch/latest/userguide/tag-restrictions.html; both read
2026-11-30 through `search`). `trainforge:tags` go on every resource beside the platform's own
keys, so `tag_limit_problem` refuses at parse a stack whose tags leave a resource over 50,
counting the platform's keys with the builders below, the ones the resources are tagged with.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainforge.core.labels import KARPENTER_NODEPOOL, POOL_LABEL, cluster_tag
from trainforge.jobs.pod import TEAM_LABEL
from trainforge.stack.base import NS, problem
from trainforge.stack.platform import PlatformKeys

AWS_TAG_LIMIT = 50
# The tag every AWS resource of a stack carries; the cluster's budget filters cost on it.
CLUSTER_TAG = "trainforge.io/cluster"
# The tag on the private subnets (network) that Karpenter's EC2NodeClass selects them by
KARPENTER_DISCOVERY_TAG = "karpenter.sh/discovery"
NAME_TAG = "Name"
PURPOSE_TAG = "trainforge.io/purpose"
COMPONENT_TAG = "trainforge.io/component"


def resource_tags(config: PlatformKeys) -> dict[str, str]:
    """The AWS tags of every resource of the stack: its cluster, Pulumi, then `tags`."""
    return {CLUSTER_TAG: config.cluster, "managed-by": "pulumi", **dict(config.tags)}


def named(tags: Mapping[str, str], name: str) -> dict[str, str]:
    """`tags` plus the console's `Name`."""
    return {**tags, NAME_TAG: name}


def endpoint_tags(tags: Mapping[str, str], name: str, purpose: str) -> dict[str, str]:
    """An interface VPC endpoint's: `Name` and why the stack has it (a tag value's 256 cap)."""
    return {**named(tags, name), PURPOSE_TAG: purpose[:250]}


def discovery_tags(cluster: str) -> dict[str, str]:
    """What the private subnets carry for the load balancer controller and Karpenter."""
    return {
        KARPENTER_DISCOVERY_TAG: cluster,
        "kubernetes.io/role/internal-elb": "1",
        cluster_tag(cluster): "shared",
    }


def private_subnet_tags(tags: Mapping[str, str], cluster: str, name: str) -> dict[str, str]:
    """A new VPC's private subnet: the discovery tags and `Name`."""
    return named({**tags, **discovery_tags(cluster)}, name)


def public_subnet_tags(tags: Mapping[str, str], name: str) -> dict[str, str]:
    """A new VPC's public subnet: internet-facing load balancers and `Name`."""
    return named({**tags, "kubernetes.io/role/elb": "1"}, name)


def services_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The services area's resources (user tags win, as before)."""
    return {COMPONENT_TAG: "services", **tags}


def team_tags(tags: Mapping[str, str], team: str) -> dict[str, str]:
    """A team's IAM role and Pod Identity association."""
    return {**tags, TEAM_LABEL: team}


def node_class_tags(tags: Mapping[str, str], cluster: str, pool: str) -> dict[str, str]:
    """An EC2NodeClass's `spec.tags`, which Karpenter puts on what it launches."""
    return {**tags, KARPENTER_DISCOVERY_TAG: cluster, POOL_LABEL: pool}


# The keys Karpenter sets itself and its EC2NodeClass CRD refuses in spec.tags (v1.14.1
# pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml, the tags' x-kubernetes-validations:
# a prefix, then four exact keys)
KARPENTER_TAG_PREFIX = "kubernetes.io/cluster"
KARPENTER_OWN_KEYS = (
    "eks:eks-cluster-name",
    KARPENTER_NODEPOOL,
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
)


def karpenter_node_tags(tags: Mapping[str, str], cluster: str, pool: str) -> dict[str, str]:
    """A Karpenter node's instance: the node class's tags plus Karpenter's own, which a node
    class may not set (karpenter-provider-aws v1.14.1, commit bde0065 of 2026-08-20:
    pkg/utils/utils.go GetTags at launch; pkg/controllers/nodeclaim/tagging/controller.go
    `Name` and `karpenter.sh/nodeclaim` after it; RestrictedTagPatterns in
    pkg/apis/v1/labels.go and the CRD's rules refuse them in spec.tags)."""
    own = dict.fromkeys(KARPENTER_OWN_KEYS, "<set by Karpenter>")
    return {
        **node_class_tags(tags, cluster, pool),
        cluster_tag(cluster): "owned",
        **own,
        NAME_TAG: "-",
    }


def eks_node_security_group_tags(tags: Mapping[str, str], cluster: str) -> dict[str, str]:
    """pulumi-eks's node security group: `Name` and the cluster tag under the stack's tags
    (pulumi-eks nodejs/eks/nodes/securitygroup.ts at commit 7bf0c1b of 2026-08-12, the
    newest stored; tag v4.4.0 itself was not in the mirror)."""
    return {NAME_TAG: "<name>-nodeSecurityGroup", cluster_tag(cluster): "owned", **tags}


def _counted(tags: Mapping[str, str]) -> int:
    return sum(not k.lower().startswith("aws:") for k in tags)


def largest(config: PlatformKeys) -> tuple[int, str]:
    """The most counted tags one resource of `config` carries, and which resource."""
    base, cname = resource_tags(config), config.cluster
    built = {
        "an interface VPC endpoint": endpoint_tags(base, "-", "-"),
        "a team's IAM role": team_tags(services_tags(base), "-"),
        "pulumi-eks's node security group": eks_node_security_group_tags(base, cname),
    }
    if not config.network.vpc_id:
        built["a private subnet"] = private_subnet_tags(base, cname, "-")
    for i, pool in enumerate(config.node_pools):
        built[f"a node of nodePools[{i}]"] = karpenter_node_tags(base, cname, pool.name)
    where = max(built, key=lambda k: _counted(built[k]))
    return _counted(built[where]), where


def tag_limit_problem(config: PlatformKeys) -> str | None:
    """The one-line refusal of `tags` that leave a resource over AWS's limit; None if none."""
    count, where = largest(config)
    if count <= AWS_TAG_LIMIT:
        return None
    own = count - _counted(dict(config.tags))
    return problem(
        f"{NS}:tags",
        f"{len(config.tags)} tags",
        f"at most {AWS_TAG_LIMIT - own}: AWS allows {AWS_TAG_LIMIT} tags on a resource and the "
        f"platform sets {own} more on {where}",
    )


# The platform's own tag keys (its cluster, component, purpose, team, pool) share this prefix.
# A stack tag under it would replace one of them where the stack's tags come last (the cluster
# tag every AWS Budget of the stack filters on: budgets.py) or be replaced where the platform's
# come last: neither is what the user asked for, so the prefix is the platform's, as `aws:` is AWS's.
PLATFORM_TAG_PREFIX = "trainforge.io/"


def platform_key_problems(config: PlatformKeys) -> list[str]:
    """`tags` keys in the platform's own prefix, one line each."""
    return [
        problem(
            f"{NS}:tags.{key}",
            value,
            f"a key not starting with {PLATFORM_TAG_PREFIX!r}: the platform sets its own tags "
            f"there ({CLUSTER_TAG}, which the stack's budgets filter cost on, {COMPONENT_TAG}, "
            f"{PURPOSE_TAG}, {TEAM_LABEL}, {POOL_LABEL})",
        )
        for key, value in config.tags
        if key.startswith(PLATFORM_TAG_PREFIX)
    ]


def karpenter_key_problems(config: PlatformKeys) -> list[str]:
    """`tags` keys the EC2NodeClass of a node pool may not carry, one line each (none
    without pools: the tags then reach no EC2NodeClass)."""
    if not config.node_pools:
        return []
    keys = ", ".join((f"{KARPENTER_TAG_PREFIX}*", *KARPENTER_OWN_KEYS))
    return [
        problem(
            f"{NS}:tags.{key}",
            value,
            f"a key other than {keys}: Karpenter sets those on its nodes itself and its "
            "EC2NodeClass refuses them",
        )
        for key, value in config.tags
        if key.startswith(KARPENTER_TAG_PREFIX) or key in KARPENTER_OWN_KEYS
    ]
