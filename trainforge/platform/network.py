"""Network: a new VPC with private node subnets across AZs, or an existing VPC from config.

Why: nodes never get public IPs; they reach AWS and registries through NAT. Subnets carry the
tags internal load balancers (`kubernetes.io/role/internal-elb`) and Karpenter's subnet
discovery (`karpenter.sh/discovery`) look for, also on existing subnets (as aws.ec2.Tag).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from trainforge.platform.config import NetworkConfig


@dataclass
class NetworkArgs:
    cluster_name: str
    config: NetworkConfig
    tags: dict[str, str]


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    private_subnet_ids: list[pulumi.Output[str]]
    vpc_cidr: pulumi.Output[str]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainforge:index:Network", name, None, opts)
        cfg = args.config
        child = pulumi.ResourceOptions(parent=self)
        discovery = {
            "karpenter.sh/discovery": args.cluster_name,
            "kubernetes.io/role/internal-elb": "1",
            f"kubernetes.io/cluster/{args.cluster_name}": "shared",
        }
        if cfg.vpc_id:
            self.vpc_id = pulumi.Output.from_input(cfg.vpc_id)
            self.vpc_cidr = pulumi.Output.from_input(aws.ec2.get_vpc(id=cfg.vpc_id).cidr_block)
            self.private_subnet_ids = [pulumi.Output.from_input(s) for s in cfg.private_subnet_ids]
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
        self.register_outputs({"vpcId": self.vpc_id, "privateSubnetIds": self.private_subnet_ids})

    def _new_vpc(self, name: str, args: NetworkArgs, discovery: dict, child) -> None:
        cfg = args.config
        zones = aws.get_availability_zones(state="available").names[: cfg.availability_zones]
        net = ipaddress.ip_network(cfg.cidr)
        blocks = list(net.subnets(prefixlen_diff=3))  # 8 blocks: private subnets get big ones
        public_blocks = list(blocks[-1].subnets(prefixlen_diff=2))
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=cfg.cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**args.tags, "Name": f"{args.cluster_name}-vpc"},
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
                tags={
                    **args.tags,
                    "kubernetes.io/role/elb": "1",
                    "Name": f"{args.cluster_name}-public-{zone}",
                },
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{i}", subnet_id=pub.id, route_table_id=public_rt.id, opts=child
            )
            if i == 0 or cfg.nat_gateways == "onePerAz":
                eip = aws.ec2.Eip(f"{name}-nat-{i}", domain="vpc", tags=args.tags, opts=child)
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
                tags={**args.tags, **discovery, "Name": f"{args.cluster_name}-private-{zone}"},
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
        self.vpc_id = vpc.id
        self.vpc_cidr = vpc.cidr_block
        self.private_subnet_ids = private
