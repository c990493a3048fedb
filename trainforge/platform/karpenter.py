"""Karpenter: controller and node roles, the interruption queue and its EventBridge rules,
the pinned charts, and one EC2NodeClass + NodePool per configured pool.

Why these settings: GPU capacity must go back to zero when idle but a running training job
must never be evicted to save money, so pools consolidate only when empty (after a delay) and
nodes never expire; the AMI alias is pinned so a new AMI release does not drift nodes under a
job; IMDSv2 with hop limit 1 keeps pods away from node credentials; spot interruption,
rebalance, state-change and AWS Health events reach Karpenter through an encrypted queue so it
can drain nodes ahead of the interruption (the job checkpoints on SIGTERM).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from trainforge.core import versions
from trainforge.core.labels import ARCH, INSTANCE_TYPE, KARPENTER_CAPACITY_TYPE, OS, cluster_tag
from trainforge.platform import capacity_placement, chart_images
from trainforge.platform.chart_images import ChartImage
from trainforge.platform.config import (
    POOL_LABEL,
    NodePoolConfig,
    PlatformConfig,
)
from trainforge.platform.iam import NODE_POLICIES, assume_role_policy, pod_identity_trust
from trainforge.platform.instance_types import PoolTypeFacts
from trainforge.platform.node_groups import efa_security_group
from trainforge.platform.node_taints import GPU_TAINT_KEY, pool_taints, startup_taints
from trainforge.platform.placement import SYSTEM_NODE_SELECTOR
from trainforge.platform.tags import KARPENTER_DISCOVERY_TAG, node_class_tags

SERVICE_ACCOUNT = "karpenter"
# The controller's image, read from the vendored values of the pinned chart with its
# template's rule (karpenter 1.14.1 templates/_helpers.tpl `karpenter.controller.image`:
# `repository:tag@digest`, the tag defaulting to the chart's appVersion). Read 2026-11-27.
CONTROLLER_IMAGES = (ChartImage("controller.image", "{appVersion}"),)
INTERRUPTION_EVENTS = {
    "health": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "spot-interruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Spot Instance Interruption Warning"],
    },
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "state-change": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Instance State-change Notification"],
    },
    # upstream's CapacityReservationInterruptionRule (v1.14.1 cloudformation.yaml)
    "capacity-reservation-interruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
    },
}
METADATA_OPTIONS = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 1,
    "httpTokens": "required",
}


def efa_network_interfaces(count: int) -> list[dict]:
    """EC2NodeClass interfaces: the primary ENA on card 0, then `count` efa-only interfaces,
    one per network card (card 0 uses device index 1)."""
    out = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}]
    for card in range(count):
        out.append(
            {
                "networkCardIndex": card,
                "deviceIndex": 1 if card == 0 else 0,
                "interfaceType": "efa-only",
            }
        )
    return out


def controller_policy(
    cluster: str,
    region: str,
    account: str,
    queue_arn: str,
    node_role_arn: str,
    partition: str = "aws",
) -> str:
    """Karpenter's own reference controller policy for the pinned version, nothing more.

    Statement for statement the five KarpenterController*Policy documents of
    karpenter-provider-aws v1.14.1 (website/content/en/docs/getting-started/
    getting-started-with-karpenter/cloudformation.yaml, checked 2026-11-23; update together
    with versions.KARPENTER_VERSION). What matters: launch, tag and terminate only resources
    that carry BOTH the cluster tag and a `karpenter.sh/nodepool` tag (managed-node-group
    instances carry only the cluster tag, so system and reserved nodes are out of reach);
    after launch, only `eks:eks-cluster-name`, `karpenter.sh/nodeclaim` and `Name` may be
    tagged (aws:TagKeys); instance profiles only with Karpenter's ec2nodeclass/region tags.
    The plan's IAM rehearsal compares this document with its vendored copy of upstream's and
    runs Karpenter's calls through it (trainforge/plan/checks/iam_reference.py).
    """
    ec2 = f"arn:{partition}:ec2:{region}"
    owned_key = cluster_tag(cluster)
    profile = f"arn:{partition}:iam::{account}:instance-profile/*"
    cluster_arn = f"arn:{partition}:eks:{region}:{account}:cluster/{cluster}"
    created = [
        f"{ec2}:*:fleet/*",
        f"{ec2}:*:instance/*",
        f"{ec2}:*:volume/*",
        f"{ec2}:*:network-interface/*",
        f"{ec2}:*:launch-template/*",
        f"{ec2}:*:spot-instances-request/*",
    ]
    nodepool_resource = {"aws:ResourceTag/karpenter.sh/nodepool": "*"}
    nodepool_request = {"aws:RequestTag/karpenter.sh/nodepool": "*"}
    request_owned = {
        f"aws:RequestTag/{owned_key}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster,
    }
    statements = [
        {
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Resource": [
                f"{ec2}::image/*",
                f"{ec2}::snapshot/*",
                f"{ec2}:*:security-group/*",
                f"{ec2}:*:subnet/*",
                f"{ec2}:*:capacity-reservation/*",
                f"{ec2}:*:placement-group/*",
            ],
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Resource": f"{ec2}:*:launch-template/*",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Condition": {
                "StringEquals": {f"aws:ResourceTag/{owned_key}": "owned"},
                "StringLike": nodepool_resource,
            },
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Resource": created,
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Condition": {"StringEquals": request_owned, "StringLike": nodepool_request},
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Resource": created,
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": {
                    **request_owned,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": nodepool_request,
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Resource": f"{ec2}:*:instance/*",
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": {f"aws:ResourceTag/{owned_key}": "owned"},
                "StringLike": nodepool_resource,
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster},
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                },
            },
        },
        {
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Condition": {
                "StringEquals": {f"aws:ResourceTag/{owned_key}": "owned"},
                "StringLike": nodepool_resource,
            },
        },
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Resource": node_role_arn,
            "Action": "iam:PassRole",
            "Condition": {
                "StringEquals": {
                    "iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]
                }
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Resource": profile,
            "Action": ["iam:CreateInstanceProfile"],
            "Condition": {
                "StringEquals": {
                    **request_owned,
                    "aws:RequestTag/topology.kubernetes.io/region": region,
                },
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Resource": profile,
            "Action": ["iam:TagInstanceProfile"],
            "Condition": {
                "StringEquals": {
                    f"aws:ResourceTag/{owned_key}": "owned",
                    "aws:ResourceTag/topology.kubernetes.io/region": region,
                    **request_owned,
                    "aws:RequestTag/topology.kubernetes.io/region": region,
                },
                "StringLike": {
                    "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                },
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileActions",
            "Effect": "Allow",
            "Resource": profile,
            "Action": [
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            "Condition": {
                "StringEquals": {
                    f"aws:ResourceTag/{owned_key}": "owned",
                    "aws:ResourceTag/topology.kubernetes.io/region": region,
                },
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Resource": cluster_arn,
            "Action": "eks:DescribeCluster",
        },
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Resource": queue_arn,
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
        },
        {
            "Sid": "AllowZonalShiftStatusReadOnly",
            "Effect": "Allow",
            "Resource": "*",
            "Action": ["arc-zonal-shift:GetManagedResource"],
            "Condition": {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": cluster_arn}},
        },
        {
            # Describe* has no resource-level permissions: scoped to the region instead.
            "Sid": "AllowRegionalReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": [
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
        },
        {
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
            "Action": "ssm:GetParameter",
        },
        {
            # The pricing API has no resource-level permissions.
            "Sid": "AllowPricingReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": "pricing:GetProducts",
        },
        {
            "Sid": "AllowUnscopedInstanceProfileListAction",
            "Effect": "Allow",
            "Resource": "*",
            "Action": "iam:ListInstanceProfiles",
        },
        {
            "Sid": "AllowInstanceProfileReadActions",
            "Effect": "Allow",
            "Resource": profile,
            "Action": "iam:GetInstanceProfile",
        },
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


@dataclass
class KarpenterArgs:
    config: PlatformConfig
    facts: dict[str, PoolTypeFacts]
    node_security_group_id: pulumi.Input[str]
    vpc_id: pulumi.Input[str]
    private_subnet_ids: list[pulumi.Input[str]]
    k8s_provider: k8s.Provider
    depends_on: list[pulumi.Resource]
    tags: dict[str, str]
    # the zone of each private subnet (Network.private_subnet_zones): an EFA pool's one zone
    # is the first that offers its instance types; empty: subnet 0
    subnet_zones: list[str] = field(default_factory=list)


class Karpenter(pulumi.ComponentResource):
    node_role_name: pulumi.Output[str]
    interruption_queue_name: pulumi.Output[str]

    def __init__(self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainforge:index:Karpenter", name, None, opts)
        cfg = args.config
        cname = cfg.cluster
        child = pulumi.ResourceOptions(parent=self)
        region = aws.get_region().region
        account = aws.get_caller_identity().account_id
        after_cluster = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)

        # --- interruption queue + events ---
        self.queue = aws.sqs.Queue(
            f"{name}-interruption",
            name=f"{cname}-karpenter",
            message_retention_seconds=300,
            sqs_managed_sse_enabled=True,
            tags=args.tags,
            opts=child,
        )
        aws.sqs.QueuePolicy(
            f"{name}-interruption",
            queue_url=self.queue.url,
            policy=self.queue.arn.apply(
                lambda arn: json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Sid": "EventBridgeWrite",
                                "Effect": "Allow",
                                "Principal": {
                                    "Service": ["events.amazonaws.com", "sqs.amazonaws.com"]
                                },
                                "Action": "sqs:SendMessage",
                                "Resource": arn,
                            },
                            {
                                "Sid": "DenyHTTP",
                                "Effect": "Deny",
                                "Principal": "*",
                                "Action": "sqs:*",
                                "Resource": arn,
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            },
                        ],
                    }
                )
            ),
            opts=child,
        )
        for key, pattern in INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{key}", event_pattern=json.dumps(pattern), tags=args.tags, opts=child
            )
            aws.cloudwatch.EventTarget(
                f"{name}-{key}",
                rule=rule.name,
                arn=self.queue.arn,
                target_id="KarpenterInterruptionQueue",
                opts=child,
            )

        # --- node role (+ access entry so its nodes can join) ---
        self.node_role = aws.iam.Role(
            f"{name}-node",
            name=f"{cname}-karpenter-node",
            assume_role_policy=assume_role_policy("ec2.amazonaws.com"),
            tags=args.tags,
            opts=child,
        )
        for i, arn in enumerate(NODE_POLICIES):
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{i}", role=self.node_role.name, policy_arn=arn, opts=child
            )
        aws.eks.AccessEntry(
            f"{name}-node",
            cluster_name=cname,
            principal_arn=self.node_role.arn,
            type="EC2_LINUX",
            opts=after_cluster,
        )

        # --- controller role via Pod Identity ---
        self.controller_role = aws.iam.Role(
            f"{name}-controller",
            assume_role_policy=pod_identity_trust(
                account, cname, cfg.karpenter.namespace, SERVICE_ACCOUNT
            ),
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-controller",
            role=self.controller_role.id,
            policy=pulumi.Output.all(self.queue.arn, self.node_role.arn).apply(
                lambda a: controller_policy(cname, region, account, a[0], a[1])
            ),
            opts=child,
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-controller",
            cluster_name=cname,
            namespace=cfg.karpenter.namespace,
            service_account=SERVICE_ACCOUNT,
            role_arn=self.controller_role.arn,
            opts=after_cluster,
        )

        # --- charts (pinned) ---
        k8s_opts = pulumi.ResourceOptions(
            parent=self, provider=args.k8s_provider, depends_on=args.depends_on
        )
        # the controller through the stack's cache (ECR Public rule), recorded for the plan
        routed = chart_images.route(
            name, "karpenter", versions.KARPENTER_VERSION, CONTROLLER_IMAGES
        )
        crds = k8s.helm.v3.Release(
            f"{name}-crd",
            name="karpenter-crd",
            chart=f"{versions.KARPENTER_CHART_REPO}/{versions.KARPENTER_CRD_CHART}",
            version=versions.KARPENTER_VERSION,
            namespace=cfg.karpenter.namespace,
            opts=k8s_opts,
        )
        self.release = k8s.helm.v3.Release(
            name,
            name="karpenter",
            chart=f"{versions.KARPENTER_CHART_REPO}/{versions.KARPENTER_CHART}",
            version=versions.KARPENTER_VERSION,
            namespace=cfg.karpenter.namespace,
            skip_crds=True,  # CRDs come from the karpenter-crd release, which upgrades them
            values=chart_images.merge_into(
                {
                    "settings": {
                        "clusterName": cname,
                        "interruptionQueue": self.queue.name,
                        # Node repair (alpha in 1.14.1, off by default): replace nodes whose
                        # NodeConditions from the node monitoring agent stay unhealthy
                        # (node_health.py). Key checked 2026-11-23 in the chart's values.yaml at
                        # github.com/aws/karpenter-provider-aws v1.14.1: settings.featureGates.
                        "featureGates": {"nodeRepair": cfg.node_health.auto_repair},
                    },
                    "serviceAccount": {"name": SERVICE_ACCOUNT},
                    "replicas": 2,
                    # run on the system node group, never on the nodes Karpenter manages
                    "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
                    "controller": {
                        "resources": {
                            "requests": {"cpu": "500m", "memory": "1Gi"},
                            "limits": {"cpu": "1", "memory": "1Gi"},
                        }
                    },
                },
                routed,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.k8s_provider,
                depends_on=[*args.depends_on, crds, association],
            ),
        )

        # --- EC2NodeClass + NodePool per pool ---
        cr_opts = pulumi.ResourceOptions(
            parent=self, provider=args.k8s_provider, depends_on=[self.release]
        )
        self.node_pools: dict[str, k8s.apiextensions.CustomResource] = {}
        self.node_classes: dict[str, k8s.apiextensions.CustomResource] = {}
        fsx = cfg.services is not None and cfg.services.fsx.enabled
        for pool in cfg.node_pools:
            facts = args.facts[pool.name]
            self.node_classes[pool.name] = self._node_class(name, pool, facts, args, cr_opts)
            self.node_pools[pool.name] = k8s.apiextensions.CustomResource(
                f"{name}-{pool.name}",
                api_version="karpenter.sh/v1",
                kind="NodePool",
                metadata={"name": pool.name},
                spec=node_pool_spec(pool, facts, startup_taints(fsx)),
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=args.k8s_provider,
                    depends_on=[self.release, self.node_classes[pool.name]],
                ),
            )
        self.node_role_name = self.node_role.name
        self.interruption_queue_name = self.queue.name
        self.register_outputs(
            {
                "nodeRoleName": self.node_role_name,
                "interruptionQueueName": self.interruption_queue_name,
            }
        )

    def _node_class(
        self, name, pool: NodePoolConfig, facts: PoolTypeFacts, args: KarpenterArgs, opts
    ):
        cname = args.config.cluster
        child = pulumi.ResourceOptions(parent=self)
        spec: dict = {
            "role": self.node_role.name,
            "amiSelectorTerms": [{"alias": versions.KARPENTER_AMI_ALIAS}],
            "subnetSelectorTerms": [{"tags": {KARPENTER_DISCOVERY_TAG: cname}}],
            "securityGroupSelectorTerms": [{"id": args.node_security_group_id}],
            "metadataOptions": dict(METADATA_OPTIONS),
            "blockDeviceMappings": [
                {
                    "deviceName": "/dev/xvda",
                    "ebs": {
                        "volumeSize": f"{pool.root_volume_gib}Gi",
                        "volumeType": "gp3",
                        "encrypted": True,
                        "deleteOnTermination": True,
                    },
                }
            ],
            "tags": node_class_tags(args.tags, cname, pool.name),
        }
        if instance_store_raid0(pool, facts):
            spec["instanceStorePolicy"] = "RAID0"
        if pool.efa:
            pg = aws.ec2.PlacementGroup(
                f"{name}-{pool.name}-pg",
                name=f"{cname}-{pool.name}",
                strategy="cluster",
                tags=args.tags,
                opts=child,
            )
            sg = efa_security_group(f"{name}-{pool.name}-efa", args.vpc_id, args.tags, child)
            # One AZ: a cluster placement group cannot span zones. The first zone that offers
            # the pool's instance types (EC2's offerings, read at preview).
            where = f"trainforge:nodePools[{args.config.node_pools.index(pool)}]"
            zone = (
                capacity_placement.zone_index(where, pool.instance_types, args.subnet_zones)
                if args.subnet_zones
                else 0
            )
            spec["subnetSelectorTerms"] = [{"id": args.private_subnet_ids[zone]}]
            spec["securityGroupSelectorTerms"] = [
                {"id": args.node_security_group_id},
                {"id": sg.id},
            ]
            spec["placementGroupSelector"] = {"name": pg.name}
            spec["networkInterfaces"] = efa_network_interfaces(facts.efa_interfaces)
        return k8s.apiextensions.CustomResource(
            f"{name}-{pool.name}-class",
            api_version="karpenter.k8s.aws/v1",
            kind="EC2NodeClass",
            metadata={"name": pool.name},
            spec=spec,
            opts=opts,
        )


def instance_store_raid0(pool: NodePoolConfig, facts: PoolTypeFacts) -> bool:
    """Whether the pool's nodes put kubelet and containerd (images, emptyDir, /tmp of pods)
    on a RAID-0 of their local NVMe instance-store disks (EC2NodeClass
    `spec.instanceStorePolicy: RAID0`, an enum of one value in the vendored CRD,
    karpenter.k8s.aws_ec2nodeclasses.yaml at v1.14.1).

    Why: a p5.48xlarge has 8 x 3.8 TB NVMe that otherwise sit idle while multi-GB images and
    scratch land on the gp3 root volume. Only when every type of the pool has an instance
    store at least as large as the root volume it replaces for that data (EC2's
    TotalInstanceStorage, read at preview), so no pool ends up with less room."""
    return facts.instance_storage_gb > 0 and facts.instance_storage_gb >= pool.root_volume_gib


def pool_labels(pool: NodePoolConfig) -> dict[str, str]:
    return {**dict(pool.labels), POOL_LABEL: pool.name}


def node_pool_spec(
    pool: NodePoolConfig, facts: PoolTypeFacts, startup: list[dict] | None = None
) -> dict:
    limits: dict = {}
    if pool.limits.cpu is not None:
        limits["cpu"] = pool.limits.cpu
    if pool.limits.memory is not None:
        limits["memory"] = pool.limits.memory
    if pool.limits.gpus is not None:
        limits[GPU_TAINT_KEY] = pool.limits.gpus
    spec: dict = {
        "template": {
            "metadata": {"labels": pool_labels(pool)},
            "spec": {
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": pool.name,
                },
                "requirements": [
                    {
                        "key": INSTANCE_TYPE,
                        "operator": "In",
                        "values": list(pool.instance_types),
                    },
                    {
                        "key": KARPENTER_CAPACITY_TYPE,
                        "operator": "In",
                        "values": list(pool.capacity_types),
                    },
                    {"key": ARCH, "operator": "In", "values": [facts.architecture]},
                    {"key": OS, "operator": "In", "values": ["linux"]},
                ],
                "taints": pool_taints(pool, facts.gpus_per_node > 0),
                # Karpenter expects these to be removed by a DaemonSet and still binpacks
                # pods that do not tolerate them onto the node (Karpenter v1 NodePool docs)
                **({"startupTaints": startup} if startup else {}),
                # Never expire nodes: expiry is forceful and would kill a running job. The AMI
                # is pinned, so nodes are replaced deliberately by changing versions.py.
                "expireAfter": "Never",
            },
        },
        "disruption": {
            # Only empty nodes are consolidated (after a delay): running jobs are never moved.
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": pool.consolidate_after,
            "budgets": [{"nodes": "10%"}],
        },
    }
    if limits:
        spec["limits"] = limits
    if pool.weight is not None:
        spec["weight"] = pool.weight
    return spec
