"""Network: a new VPC with private node subnets across AZs, or an existing VPC from config.

Why: nodes never get public IPs; they reach AWS and registries through NAT. Subnets carry the
tags internal load balancers (`kubernetes.io/role/internal-elb`) and Karpenter's subnet
discovery (`karpenter.sh/discovery`) look for, also on existing subnets (as aws.ec2.Tag).

VPC endpoints (`network.vpcEndpoints`, on by default): an S3 *gateway* endpoint on the
private route tables (multi-TB checkpoints and ECR image layers stay off the NAT gateway,
and the checkpoint bucket can require it: `aws:SourceVpce`), and *interface* endpoints with
private DNS for the AWS APIs nodes, controllers and jobs call (INTERFACE_ENDPOINTS), behind
a security group that admits HTTPS from the VPC only. Training namespaces' egress is then
narrowed to them (trainforge.platform.teams). In a VPC the platform creates, the interface
endpoints live in their own small subnets (one per AZ, carved from a block the node subnets
do not use), so a team's HTTPS egress names exactly those CIDRs: not the node subnets,
where the EKS control plane's cross-account ENIs (the API server) and every node and pod
live. In an existing VPC (whose layout is not ours) the endpoints use the given private
subnets and the egress stays the VPC CIDR (`endpoint_cidrs` is then the VPC CIDR, and the
program warns). S3 through a gateway endpoint still answers on S3's public address ranges, which
NetworkPolicy can only name as CIDRs, so they are read from the region's S3 managed prefix
list (`com.amazonaws.<region>.s3`) when the program runs (`s3_cidrs`). Since those ranges are
every bucket's, the S3 endpoint's policy (`s3_endpoint_policy`) is what keeps a pod from
writing to a bucket of another account; the interface endpoints' policies
(`interface_endpoint_policy`) refuse another account's credentials.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from trainforge.platform.tags import (
    discovery_tags,
    endpoint_tags,
    named,
    private_subnet_tags,
    public_subnet_tags,
)
from trainforge.stack.platform import NetworkConfig

# service -> why it needs an interface endpoint (com.amazonaws.<region>.<service>).
INTERFACE_ENDPOINTS: dict[str, str] = {
    "sts": "STS: SDKs in jobs and controllers that assume roles",
    "ecr.api": "ECR API: image pull authentication and manifests",
    "ecr.dkr": "ECR registry: image pulls (layers then come from S3, through the gateway)",
    "eks-auth": "EKS Pod Identity: the node agent's AssumeRoleForPodIdentity",
    "ec2": "EC2: Karpenter launches and describes instances; the VPC CNI manages ENIs",
    "sqs": "SQS: Karpenter's interruption queue",
    "ssm": "SSM: Karpenter resolves the pinned AMI alias from SSM parameters",
    "fsx": "FSx: the FSx CSI controller describes and grows the file system",
}
# Created only with the stack's FSx file system (each endpoint is billed per AZ-hour).
FSX_ONLY = frozenset({"fsx"})
HTTPS = 443

# AWS-owned buckets the nodes read through the S3 gateway endpoint (s3:GetObject only), as
# aws-samples/data-perimeter-policy-examples vpc_endpoint_policies/s3_endpoint_policy.json
# (commit 031eaa58, read 2026-12-01) "AllowRequestsToAWSOwnedResources" names them, and the
# ECR User Guide ("Amazon ECR interface VPC endpoints (AWS PrivateLink)", "Minimum Amazon S3
# bucket permissions for Amazon ECR": arn:aws:s3:::prod-<region>-starport-layer-bucket/*) for
# the layer bucket, which kubelet reads through presigned URLs; none is in the stack's account, so aws:ResourceAccount
# alone would break them:
AWS_OWNED_BUCKETS: dict[str, str] = {
    "prod-{region}-starport-layer-bucket": "ECR image layers (every image the nodes pull)",
    "al2023-repos-{region}-de612dc2": "Amazon Linux 2023 package repositories (dnf on nodes)",
    "aws-ssm-{region}": "SSM Agent updates and documents (the AL2023 AMIs run the agent)",
    "amazon-ssm-{region}": "SSM Agent installers and updates",
    "amazon-ssm-packages-{region}": "SSM Distributor packages",
    "{region}-birdwatcher-prod": "SSM Distributor manifests",
    "aws-ssm-document-attachments-{region}": "SSM document attachments",
}
# Left out: the ECR public gallery and the add-on registries are not S3 (their layers come
# through ECR's starport bucket above); nodeadm reads only the EKS API and IMDS (no bucket);
# the FSx data repository's bucket is named by the stack and added (`s3_endpoint_policy`).


# Interface endpoints given a policy: the identity perimeter of
# aws-samples/data-perimeter-policy-examples vpc_endpoint_policies/{ec2,ecr.api,ssm,sts}_
# endpoint_policy.json (read 2026-12-01), with this account for their organization: only
# principals of the stack's account (and AWS services) call the service through the VPC, so a
# pod holding another account's credentials cannot push an image to that account's ECR, put a
# parameter there or send to its queue from here. ecr.dkr is ECR's registry API (same
# service, same keys). SQS also gets the resource side: only this account's queues (the
# interruption queue), as a queue elsewhere may admit anyone. Left at AWS's default (full
# access): eks-auth (its one API, AssumeRoleForPodIdentity, answers only for this cluster's
# associations, so it carries nothing out) and fsx (not in those examples; its API manages
# file systems and moves no file data).
PRINCIPAL_PERIMETER = frozenset({"sts", "ecr.api", "ecr.dkr", "ec2", "sqs", "ssm"})
RESOURCE_PERIMETER = frozenset({"sqs"})


def interface_endpoint_policy(service: str, account: str) -> dict | None:
    """The policy of the interface endpoint of `service` (PRINCIPAL_PERIMETER), else None:
    AWS's default. STS also admits web-identity federation into this account's roles
    (AssumeRoleWithWebIdentity is unsigned: it has no principal account), as the examples'
    sts policy does."""
    if service not in PRINCIPAL_PERIMETER:
        return None
    ours: dict[str, str] = {"aws:PrincipalAccount": account}
    if service in RESOURCE_PERIMETER:
        ours["aws:ResourceAccount"] = account
    statements: list[dict] = [
        {
            "Sid": "ThisAccountsPrincipals",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "*",
            "Resource": "*",
            "Condition": {"StringEquals": ours},
        },
        {
            "Sid": "AwsServicePrincipals",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "*",
            "Resource": "*",
            "Condition": {"Bool": {"aws:PrincipalIsAWSService": "true"}},
        },
    ]
    if service == "sts":
        statements.append(
            {
                "Sid": "WebIdentityIntoThisAccountsRoles",
                "Effect": "Allow",
                "Principal": {"Federated": "*"},
                "Action": ["sts:AssumeRoleWithWebIdentity"],
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:ResourceAccount": account}},
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def s3_endpoint_policy(region: str, account: str, buckets: tuple[str, ...] = ()) -> dict:
    """The S3 gateway endpoint's policy. Why: without one the endpoint admits AWS's default
    (any principal, any action, any bucket of any account), so a pod holding another account's
    credentials or a presigned URL could write the team volume to a bucket anywhere. This
    one admits every S3 action on buckets of the stack's `account` (`aws:ResourceAccount`:
    the checkpoint bucket, the S3 mirror, a data repository in this account), reads of the
    AWS-owned buckets the nodes need (AWS_OWNED_BUCKETS), and every action on `buckets`
    the stack names itself (`fsx.dataRepository`, which may be another account's). Another
    account's bucket is denied. An endpoint policy grants nothing by itself: the caller's
    IAM policy and the bucket's policy still decide (VPC PrivateLink guide, "Control access
    to VPC endpoints using endpoint policies")."""
    owned = [f"arn:aws:s3:::{b.format(region=region)}/*" for b in AWS_OWNED_BUCKETS]
    statements: list[dict] = [
        {
            "Sid": "ThisAccountsBuckets",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:ResourceAccount": account}},
        },
        {
            "Sid": "AwsOwnedBucketsNodesRead",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": owned,
        },
    ]
    if buckets:
        named_ = sorted(set(buckets))
        statements.append(
            {
                "Sid": "StackNamedBuckets",
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [f"arn:aws:s3:::{b}" for b in named_]
                + [f"arn:aws:s3:::{b}/*" for b in named_],
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def s3_prefix_list_name(region: str) -> str:
    return f"com.amazonaws.{region}.s3"


def private_subnet_zones(cfg: NetworkConfig) -> list[str]:
    """The zone of each private subnet, as Network places them (read at preview): an existing
    VPC's subnets' own, else the region's first `availabilityZones` available zones. The
    stack's check reads the zones a pool's nodes can be in from here."""
    if cfg.vpc_id:
        return [aws.ec2.get_subnet(id=s).availability_zone for s in cfg.private_subnet_ids]
    return list(aws.get_availability_zones(state="available").names[: cfg.availability_zones])


@dataclass
class NetworkArgs:
    cluster_name: str
    config: NetworkConfig
    tags: dict[str, str]
    fsx: bool = True  # the stack has FSx for Lustre (`fsx.enabled`): its endpoint is needed
    # buckets the stack names outside its own (the FSx data repository's): the S3 endpoint's
    # policy admits them by name, as they may be another account's
    s3_buckets: tuple[str, ...] = ()


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    private_subnet_ids: list[pulumi.Output[str]]
    vpc_cidr: pulumi.Output[str]
    # None when the platform creates no endpoints (network.vpcEndpoints: false)
    s3_endpoint_id: pulumi.Output[str] | None
    # S3's address ranges in the region (its managed prefix list), for NetworkPolicies
    s3_cidrs: list[str]
    # the availability zone of each private subnet, same order (read at preview): where a
    # capacity reservation or an instance type's offerings can be placed
    private_subnet_zones: list[str]
    # Where the interface endpoints answer: their own subnets' CIDRs (new VPC), else the VPC's
    endpoint_cidrs: list[pulumi.Input[str]]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainforge:index:Network", name, None, opts)
        cfg = args.config
        child = pulumi.ResourceOptions(parent=self)
        discovery = discovery_tags(args.cluster_name)
        self.private_route_table_ids: list[pulumi.Input[str]] = []
        # the NAT gateways' public IPs (a fleet manager's egress); None: an existing VPC's
        self.nat_public_ips: list[pulumi.Input[str]] | None = None if cfg.vpc_id else []
        self.endpoint_subnet_ids: list[pulumi.Input[str]] = []
        self.endpoint_cidrs: list[pulumi.Input[str]] = []
        if cfg.vpc_id:
            self.vpc_id = pulumi.Output.from_input(cfg.vpc_id)
            self.vpc_cidr = pulumi.Output.from_input(aws.ec2.get_vpc(id=cfg.vpc_id).cidr_block)
            self.private_subnet_ids = [pulumi.Output.from_input(s) for s in cfg.private_subnet_ids]
            self.private_subnet_zones = private_subnet_zones(cfg)
            if cfg.vpc_endpoints:
                tables = [
                    aws.ec2.get_route_table(subnet_id=s).route_table_id
                    for s in cfg.private_subnet_ids
                ]
                self.private_route_table_ids = list(dict.fromkeys(tables))
            for i, subnet in enumerate(cfg.private_subnet_ids):
                for key, value in discovery.items():
                    slug = key.replace("/", "-").replace(".", "-")
                    aws.ec2.Tag(
                        f"{name}-subnet{i}-{slug}",
                        resource_id=subnet,
                        key=key,
                        value=value,
                        opts=child,
                    )
        else:
            self._new_vpc(name, args, discovery, child)
        region = aws.get_region().region
        # Read when the program runs (preview and up): a NetworkPolicy needs CIDRs, and S3
        # adds ranges now and then; the next `pulumi up` brings the policies up to date.
        prefix_list = aws.ec2.get_managed_prefix_list(name=s3_prefix_list_name(region))
        self.s3_cidrs = sorted(e.cidr for e in prefix_list.entries or [])
        self.s3_endpoint_id = None
        if not self.endpoint_cidrs:
            self.endpoint_cidrs = [self.vpc_cidr]
            if cfg.vpc_endpoints and cfg.vpc_id:
                pulumi.log.warn(
                    "trainforge:network.vpcId: in an existing VPC the interface endpoints share "
                    "the private subnets, so team pods may reach HTTPS anywhere in the VPC "
                    "(the API server's ENIs included); a VPC the platform creates gives the "
                    "endpoints their own subnets",
                    self,
                )
        if cfg.vpc_endpoints:
            self._endpoints(name, region, args, child)
        self.register_outputs({"vpcId": self.vpc_id, "privateSubnetIds": self.private_subnet_ids})

    def _endpoints(self, name: str, region: str, args: NetworkArgs, child) -> None:
        tags, fsx = args.tags, args.fsx
        account = aws.get_caller_identity().account_id
        s3 = aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=self.vpc_id,
            service_name=f"com.amazonaws.{region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=self.private_route_table_ids,
            policy=json.dumps(s3_endpoint_policy(region, account, args.s3_buckets)),
            tags=named(tags, f"{name}-s3"),
            opts=child,
        )
        self.s3_endpoint_id = s3.id
        sg = aws.ec2.SecurityGroup(
            f"{name}-endpoints",
            vpc_id=self.vpc_id,
            description="VPC interface endpoints: HTTPS from the VPC only",
            tags=named(tags, f"{name}-endpoints"),
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-endpoints-https",
            security_group_id=sg.id,
            cidr_ipv4=self.vpc_cidr,
            ip_protocol="tcp",
            from_port=HTTPS,
            to_port=HTTPS,
            description="HTTPS from the VPC to the interface endpoints",
            opts=child,
        )
        self.interface_endpoints: dict[str, aws.ec2.VpcEndpoint] = {}
        for service, why in INTERFACE_ENDPOINTS.items():
            if service in FSX_ONLY and not fsx:
                continue
            slug = service.replace(".", "-")
            policy = interface_endpoint_policy(service, account)
            self.interface_endpoints[service] = aws.ec2.VpcEndpoint(
                f"{name}-{slug}",
                vpc_id=self.vpc_id,
                service_name=f"com.amazonaws.{region}.{service}",
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,
                subnet_ids=self.endpoint_subnet_ids or self.private_subnet_ids,
                security_group_ids=[sg.id],
                policy=json.dumps(policy) if policy else None,
                tags=endpoint_tags(tags, f"{name}-{slug}", why),
                opts=child,
            )

    def _new_vpc(self, name: str, args: NetworkArgs, discovery: dict, child) -> None:
        cfg = args.config
        zones = private_subnet_zones(cfg)
        self.private_subnet_zones = zones
        net = ipaddress.ip_network(cfg.cidr)
        blocks = list(net.subnets(prefixlen_diff=3))  # 8 blocks: private subnets get big ones
        public_blocks = list(blocks[-1].subnets(prefixlen_diff=2))
        # Interface endpoints: their own subnets (block 6: node subnets use at most 0-3).
        endpoint_blocks = list(blocks[-2].subnets(prefixlen_diff=2))
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=cfg.cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=named(args.tags, f"{args.cluster_name}-vpc"),
            opts=child,
        )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=args.tags, opts=child)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            tags=args.tags,
            opts=child,
        )
        nats = []
        private = []
        for i, zone in enumerate(zones):
            # Public subnets only hold NAT gateways and public load balancers, never nodes.
            pub = aws.ec2.Subnet(
                f"{name}-public-{i}",
                vpc_id=vpc.id,
                cidr_block=str(public_blocks[i]),
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags=public_subnet_tags(args.tags, f"{args.cluster_name}-public-{zone}"),
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{i}", subnet_id=pub.id, route_table_id=public_rt.id, opts=child
            )
            if i == 0 or cfg.nat_gateways == "onePerAz":
                eip = aws.ec2.Eip(f"{name}-nat-{i}", domain="vpc", tags=args.tags, opts=child)
                self.nat_public_ips.append(eip.public_ip)
                nats.append(
                    aws.ec2.NatGateway(
                        f"{name}-nat-{i}",
                        allocation_id=eip.id,
                        subnet_id=pub.id,
                        tags=args.tags,
                        opts=child,
                    )
                )
            subnet = aws.ec2.Subnet(
                f"{name}-private-{i}",
                vpc_id=vpc.id,
                cidr_block=str(blocks[i]),
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags=private_subnet_tags(
                    args.tags, args.cluster_name, f"{args.cluster_name}-private-{zone}"
                ),
                opts=child,
            )
            nat = nats[i] if cfg.nat_gateways == "onePerAz" else nats[0]
            rt = aws.ec2.RouteTable(
                f"{name}-private-{i}",
                vpc_id=vpc.id,
                routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
                tags=args.tags,
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{i}", subnet_id=subnet.id, route_table_id=rt.id, opts=child
            )
            private.append(subnet.id)
            self.private_route_table_ids.append(rt.id)
            if cfg.vpc_endpoints:
                # No route table: endpoint ENIs only answer inside the VPC (the main table).
                endpoints_subnet = aws.ec2.Subnet(
                    f"{name}-endpoints-{i}",
                    vpc_id=vpc.id,
                    cidr_block=str(endpoint_blocks[i]),
                    availability_zone=zone,
                    map_public_ip_on_launch=False,
                    tags=named(args.tags, f"{args.cluster_name}-endpoints-{zone}"),
                    opts=child,
                )
                self.endpoint_subnet_ids.append(endpoints_subnet.id)
                self.endpoint_cidrs.append(str(endpoint_blocks[i]))
        self.vpc_id = vpc.id
        self.vpc_cidr = vpc.cidr_block
        self.private_subnet_ids = private
