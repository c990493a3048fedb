"""Cluster: the EKS control plane (pulumi-eks), its KMS key, access entries, add-ons, the
system node group, and the node IAM role.

Why these defaults: the API endpoint is private unless an allow-list (or, with `endpoint.
deployFrom: deployer`, the address running `pulumi up`: endpoint.py) says otherwise; all five
control-plane log types go to CloudWatch; Kubernetes secrets are envelope-encrypted with a
customer key that rotates; access is granted with access entries (`authentication_mode: API`),
not the aws-auth ConfigMap; every add-on is pinned in versions.py.

pulumi-eks `Cluster` is a remote component: only its own outputs are read here (cluster name
is set explicitly; security group, OIDC and kubeconfig come from its outputs), which keeps
this working under mocks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from trainforge.core import versions
from trainforge.platform import endpoint
from trainforge.platform.addons import addon_version
from trainforge.platform.config import PlatformConfig
from trainforge.platform.iam import (
    CLUSTER_ADMIN_POLICY,
    NODE_POLICIES,
    assume_role_policy,
    pod_identity_trust,
)
from trainforge.platform.launch_template import launch_template

LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
SYSTEM_LABEL = "trainforge.io/system"
# The EBS CSI controller's ServiceAccount (the add-on's) and the AWS managed policy its docs
# require (aws-ebs-csi-driver docs/install.md: "AWS maintains a managed policy version of the
# example policy ... arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy").
EBS_CSI_SERVICE_ACCOUNT = ("kube-system", "ebs-csi-controller-sa")
EBS_CSI_POLICY = "iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"


@dataclass
class ClusterArgs:
    config: PlatformConfig
    vpc_id: pulumi.Input[str]
    private_subnet_ids: list[pulumi.Input[str]]
    tags: dict[str, str]
    # more CIDRs the public endpoint admits: a fleet worker's manager's egress (fleet.py)
    fleet_cidrs: tuple[str, ...] = ()


class Cluster(pulumi.ComponentResource):
    cluster_name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    node_security_group_id: pulumi.Output[str]
    node_role: aws.iam.Role
    oidc_provider_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainforge:index:Cluster", name, None, opts)
        cfg = args.config
        child = pulumi.ResourceOptions(parent=self)
        cname = cfg.cluster

        self.kms_key = aws.kms.Key(
            f"{name}-secrets",
            description=f"EKS secrets envelope encryption for {cname}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=args.tags,
            # The cluster's Secrets are encrypted with it: deleting or replacing it while the
            # cluster lives makes them unreadable. Protected (destroy: docs/services.md).
            opts=pulumi.ResourceOptions(parent=self, protect=True),
        )
        aws.kms.Alias(
            f"{name}-secrets",
            name=f"alias/{cname}-eks-secrets",
            target_key_id=self.kms_key.key_id,
            opts=child,
        )

        self.eks = eks.Cluster(
            name,
            eks.ClusterArgs(
                name=cname,
                version=versions.KUBERNETES_VERSION,
                vpc_id=args.vpc_id,
                private_subnet_ids=args.private_subnet_ids,
                node_associate_public_ip_address=False,
                endpoint_private_access=True,
                endpoint_public_access=cfg.endpoint.public or bool(args.fleet_cidrs),
                # the allow-list, plus the deployer's /32 with deployFrom: deployer (endpoint.py)
                # and a fleet worker's manager's egress addresses
                public_access_cidrs=endpoint.public_access_cidrs(
                    cfg.endpoint.public_access_cidrs
                    + tuple(
                        c for c in args.fleet_cidrs if c not in cfg.endpoint.public_access_cidrs
                    ),
                    cfg.endpoint.deploy_from,
                    cname,
                    pulumi.Config("aws").get("region"),
                ),
                authentication_mode=eks.AuthenticationMode.API,
                create_oidc_provider=True,
                enabled_cluster_log_types=list(LOG_TYPES),
                encryption_config_key_arn=self.kms_key.arn,
                skip_default_node_group=True,
                # add-ons are declared below as pinned aws.eks.Addon resources instead
                use_default_vpc_cni=True,
                coredns_addon_options={"enabled": False},
                kube_proxy_addon_options={"enabled": False},
                tags=args.tags,
            ),
            opts=child,
        )
        # Known at preview (the name is ours) but carries the dependency on the cluster, so
        # consumers (add-ons, pod identity associations) wait for the control plane.
        self.cluster_name = self.eks.urn.apply(lambda _: cname)
        self.kubeconfig = pulumi.Output.secret(self.eks.kubeconfig_json)
        self.node_security_group_id = self.eks.node_security_group_id
        self.oidc_provider_arn = self.eks.oidc_provider_arn
        after_cluster = pulumi.ResourceOptions(parent=self, depends_on=[self.eks])

        for i, arn in enumerate(cfg.admins):
            entry = aws.eks.AccessEntry(
                f"{name}-admin-{i}",
                cluster_name=cname,
                principal_arn=arn,
                type="STANDARD",
                opts=after_cluster,
            )
            aws.eks.AccessPolicyAssociation(
                f"{name}-admin-{i}",
                cluster_name=cname,
                principal_arn=arn,
                policy_arn=CLUSTER_ADMIN_POLICY,
                access_scope={"type": "cluster"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[entry]),
            )

        # Node role shared by managed node groups (EKS creates their access entries itself).
        self.node_role = aws.iam.Role(
            f"{name}-node",
            assume_role_policy=assume_role_policy("ec2.amazonaws.com"),
            tags=args.tags,
            opts=child,
        )
        for i, arn in enumerate(NODE_POLICIES):
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{i}", role=self.node_role.name, policy_arn=arn, opts=child
            )

        sys_cfg = cfg.system_node_group
        sys_lt = launch_template(
            f"{name}-system",
            root_volume_gib=sys_cfg.root_volume_gib,
            security_group_ids=[self.node_security_group_id],
            tags=args.tags,
            opts=child,
        )
        self.system_node_group = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=cname,
            node_group_name=f"{cname}-system",
            node_role_arn=self.node_role.arn,
            subnet_ids=args.private_subnet_ids,
            ami_type=versions.SYSTEM_AMI_TYPE,
            capacity_type="ON_DEMAND",
            instance_types=[sys_cfg.instance_type],
            scaling_config={
                "min_size": sys_cfg.min_size,
                "desired_size": sys_cfg.desired_size,
                "max_size": sys_cfg.max_size,
            },
            labels={SYSTEM_LABEL: "true"},
            launch_template={"id": sys_lt.id, "version": sys_lt.latest_version.apply(str)},
            update_config={"max_unavailable": 1},
            # CoreDNS, the CSI controllers, Karpenter and every platform service run here: EKS
            # node auto repair replaces a node whose NodeConditions stay unhealthy, as on the
            # GPU groups (node_health.py). No FSx startup taint here: add-ons installed before
            # the FSx driver would wait on it.
            node_repair_config={"enabled": cfg.node_health.auto_repair},
            tags=args.tags,
            opts=after_cluster,
        )

        # Add-ons that call AWS get their identity before they are installed.
        addon_identity: dict[str, list[pulumi.Resource]] = {
            "aws-ebs-csi-driver": self._ebs_csi_identity(name, cname, args.tags, after_cluster)
        }
        self.addons: dict[str, aws.eks.Addon] = {}
        for addon in versions.EKS_ADDON_VERSIONS:
            config_values = None
            if addon == "vpc-cni":
                # NetworkPolicies (team isolation) are enforced by the VPC CNI's agent.
                config_values = json.dumps({"enableNetworkPolicy": "true"})
            needs_nodes = addon in ("coredns", "aws-ebs-csi-driver")
            self.addons[addon] = aws.eks.Addon(
                f"{name}-{addon}",
                cluster_name=cname,
                addon_name=addon,
                addon_version=addon_version(addon),
                configuration_values=config_values,
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="PRESERVE",
                tags=args.tags,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    depends_on=[
                        *([self.eks, self.system_node_group] if needs_nodes else [self.eks]),
                        *addon_identity.get(addon, []),
                    ],
                ),
            )
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "nodeRoleArn": self.node_role.arn,
            }
        )

    def _ebs_csi_identity(
        self, name: str, cname: str, tags: dict[str, str], opts: pulumi.ResourceOptions
    ) -> list[pulumi.Resource]:
        """The EBS CSI controller's role (AmazonEBSCSIDriverPolicy) via EKS Pod Identity.

        Without it the controller cannot call ec2:CreateVolume and every gp3 claim (the
        Prometheus and MLflow volumes) stays Pending. The trainforge gp3 StorageClass uses the
        AWS managed EBS key, so no KMS grants are needed; a StorageClass with a customer
        `kmsKeyId` would need them, and the plan's IAM rehearsal reports that.
        """
        partition = aws.get_partition().partition
        account = aws.get_caller_identity().account_id
        namespace, service_account = EBS_CSI_SERVICE_ACCOUNT
        self.ebs_csi_role = aws.iam.Role(
            f"{name}-ebs-csi",
            assume_role_policy=pod_identity_trust(account, cname, namespace, service_account),
            description="EBS CSI controller (EKS Pod Identity)",
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        attachment = aws.iam.RolePolicyAttachment(
            f"{name}-ebs-csi",
            role=self.ebs_csi_role.name,
            policy_arn=f"arn:{partition}:{EBS_CSI_POLICY}",
            opts=pulumi.ResourceOptions(parent=self),
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-ebs-csi",
            cluster_name=cname,
            namespace=namespace,
            service_account=service_account,
            role_arn=self.ebs_csi_role.arn,
            tags=tags,
            opts=opts,
        )
        return [attachment, association]
