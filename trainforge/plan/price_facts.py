"""Dated price facts for the plan's cost report: one table, every figure with its source.

Why a table in the repository instead of the AWS Price List API: `trainforge plan` runs with
no credentials and no network, and a reviewer must be able to see which price a figure came
from and how old it is. A price that is not in this table is shown as "unknown" by the cost
report, never guessed: add a row (with its source and date) instead.

Spot prices change per Availability Zone and per hour; no dated, citable figure backs a spot
price here, so every spot price is unknown (the on-demand price is its ceiling: a spot
instance never costs more than on-demand).

All prices are USD, Linux, shared tenancy, before discounts (Savings Plans, reservations).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """Where figures come from: `dated` is the date of the figures themselves (when the
    source states one), `checked` the day we read them."""

    title: str
    url: str
    dated: str | None
    checked: str


SOURCES: dict[str, Source] = {
    "karpenter-1.14.1": Source(
        title="Karpenter v1.14.1 generated on-demand price table (from the AWS Price List API; "
        "the table the pinned Karpenter uses until it reaches the Pricing API)",
        url="https://github.com/aws/karpenter-provider-aws/blob/v1.14.1/"
        "pkg/providers/pricing/zz_generated.pricing_aws.go",
        dated="2026-07-06",  # "generated at 2026-07-06T14:20:29Z for us-east-1"
        checked="2026-11-23",
    ),
    "eks-pricing-blog": Source(
        title="AWS Containers blog: Amazon EKS extended support for Kubernetes versions "
        "pricing ($0.10 per cluster-hour in standard support, $0.60 in extended support)",
        url="https://aws.amazon.com/blogs/containers/"
        "amazon-eks-extended-support-for-kubernetes-versions-pricing/",
        dated="2024-04-01",  # effective from the April 2024 billing cycle
        checked="2026-11-23",
    ),
    "eks-calendar": Source(
        title="Amazon EKS Kubernetes release calendar (end of standard support per version), "
        "as listed by endoflife.date/amazon-eks and the EKS user guide",
        url="https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html",
        dated=None,
        checked="2026-11-23",
    ),
    "nat-us-east-1": Source(
        title="NAT gateway hourly charge in us-east-1 ($0.045 per NAT gateway-hour; data "
        "processing $0.045/GB is usage-based and not estimated)",
        url="https://basavytix.com/blog/aws-nat-gateway-pricing",
        dated=None,
        checked="2026-11-23",
    ),
    "nat-us-west-2": Source(
        title="AWS NAT gateway pricing 2026 reference: US West (Oregon) ~$0.045 per hour",
        url="https://cloudpipelines.pages.dev/guides/aws-nat-gateway-pricing-2026/",
        dated="2026",
        checked="2026-11-23",
    ),
    "public-ipv4": Source(
        title="Public IPv4 address charge, $0.005 per IP-hour (in force since 2024-02-01; "
        "cited in a 2026-02-24 NAT gateway pricing guide)",
        url="https://cloudburn.io/blog/aws-nat-gateway-pricing",
        dated="2026-02-24",
        checked="2026-11-23",
    ),
    "ebs-gp3-us-east-1": Source(
        title="EBS gp3 storage $0.08 per GiB-month in N. Virginia (3000 IOPS and 125 MiB/s "
        "included)",
        url="https://www.saisci.com/aws/gp3-throughput-explained/",
        dated="2021-01-13",
        checked="2026-11-23",
    ),
    "fsx-scratch2": Source(
        title="FSx for Lustre Scratch 2, ~$0.140 per GB-month (learning-aws cost notes)",
        url="https://learning-aws.readthedocs.io/en/latest/_sources/resources/pricing.rst.txt",
        dated=None,
        checked="2026-11-23",
    ),
    "fsx-persistent2-125": Source(
        title="FSx for Lustre SSD at 125 MB/s/TiB, ~$0.145 per GB-month (1.2 TB ~ $174/month)",
        url="https://c3x.dev/resources/aws/aws_fsx_lustre_file_system/",
        dated=None,
        checked="2026-11-23",
    ),
}

# The date of this table: the day every row above was last checked.
FACTS_DATE = "2026-11-23"
HOURS_PER_MONTH = 730  # AWS's convention for monthly figures (24 x 365 / 12)


@dataclass(frozen=True)
class Price:
    usd: float
    unit: str  # "hour" | "GB-month"
    source: str  # a key of SOURCES

    def hourly(self, quantity: float = 1.0) -> float:
        """USD per hour for `quantity` units (GB for GB-month prices)."""
        per_unit = self.usd if self.unit == "hour" else self.usd / HOURS_PER_MONTH
        return per_unit * quantity


# On-demand $/hour per instance, per region. us-west-2 has no row: no dated table for it was
# found, so its instance prices are reported as unknown.
_EC2_ON_DEMAND: dict[str, tuple[str, dict[str, float]]] = {
    "us-east-1": (
        "karpenter-1.14.1",
        {
            # c5
            "c5.large": 0.085,
            "c5.xlarge": 0.17,
            "c5.2xlarge": 0.34,
            "c5.4xlarge": 0.68,
            "c5.9xlarge": 1.53,
            "c5.12xlarge": 2.04,
            "c5.18xlarge": 3.06,
            "c5.24xlarge": 4.08,
            # c6i
            "c6i.large": 0.085,
            "c6i.xlarge": 0.17,
            "c6i.2xlarge": 0.34,
            "c6i.4xlarge": 0.68,
            "c6i.8xlarge": 1.36,
            "c6i.12xlarge": 2.04,
            "c6i.16xlarge": 2.72,
            "c6i.24xlarge": 4.08,
            "c6i.32xlarge": 5.44,
            # c7i
            "c7i.large": 0.08925,
            "c7i.xlarge": 0.1785,
            "c7i.2xlarge": 0.357,
            "c7i.4xlarge": 0.714,
            "c7i.8xlarge": 1.428,
            "c7i.12xlarge": 2.142,
            "c7i.16xlarge": 2.856,
            "c7i.24xlarge": 4.284,
            "c7i.48xlarge": 8.568,
            # m5
            "m5.large": 0.096,
            "m5.xlarge": 0.192,
            "m5.2xlarge": 0.384,
            "m5.4xlarge": 0.768,
            "m5.8xlarge": 1.536,
            "m5.12xlarge": 2.304,
            "m5.16xlarge": 3.072,
            "m5.24xlarge": 4.608,
            # m6i
            "m6i.large": 0.096,
            "m6i.xlarge": 0.192,
            "m6i.2xlarge": 0.384,
            "m6i.4xlarge": 0.768,
            "m6i.8xlarge": 1.536,
            "m6i.12xlarge": 2.304,
            "m6i.16xlarge": 3.072,
            "m6i.24xlarge": 4.608,
            "m6i.32xlarge": 6.144,
            # m7i
            "m7i.large": 0.1008,
            "m7i.xlarge": 0.2016,
            "m7i.2xlarge": 0.4032,
            "m7i.4xlarge": 0.8064,
            "m7i.8xlarge": 1.6128,
            "m7i.12xlarge": 2.4192,
            "m7i.16xlarge": 3.2256,
            "m7i.24xlarge": 4.8384,
            "m7i.48xlarge": 9.6768,
            # r5
            "r5.large": 0.126,
            "r5.xlarge": 0.252,
            "r5.2xlarge": 0.504,
            "r5.4xlarge": 1.008,
            "r5.8xlarge": 2.016,
            "r5.12xlarge": 3.024,
            "r5.16xlarge": 4.032,
            "r5.24xlarge": 6.048,
            # r6i
            "r6i.large": 0.126,
            "r6i.xlarge": 0.252,
            "r6i.2xlarge": 0.504,
            "r6i.4xlarge": 1.008,
            "r6i.8xlarge": 2.016,
            "r6i.12xlarge": 3.024,
            "r6i.16xlarge": 4.032,
            "r6i.24xlarge": 6.048,
            "r6i.32xlarge": 8.064,
            # t3
            "t3.nano": 0.0052,
            "t3.micro": 0.0104,
            "t3.small": 0.0208,
            "t3.medium": 0.0416,
            "t3.large": 0.0832,
            "t3.xlarge": 0.1664,
            "t3.2xlarge": 0.3328,
            # g4dn
            "g4dn.xlarge": 0.526,
            "g4dn.2xlarge": 0.752,
            "g4dn.4xlarge": 1.204,
            "g4dn.8xlarge": 2.176,
            "g4dn.12xlarge": 3.912,
            "g4dn.16xlarge": 4.352,
            # g5
            "g5.xlarge": 1.006,
            "g5.2xlarge": 1.212,
            "g5.4xlarge": 1.624,
            "g5.8xlarge": 2.448,
            "g5.16xlarge": 4.096,
            "g5.12xlarge": 5.672,
            "g5.24xlarge": 8.144,
            "g5.48xlarge": 16.288,
            # g6
            "g6.xlarge": 0.8048,
            "g6.2xlarge": 0.9776,
            "g6.4xlarge": 1.3232,
            "g6.8xlarge": 2.0144,
            "g6.16xlarge": 3.3968,
            "g6.12xlarge": 4.6016,
            "g6.24xlarge": 6.6752,
            "g6.48xlarge": 13.3504,
            # g6e
            "g6e.xlarge": 1.861,
            "g6e.2xlarge": 2.24208,
            "g6e.4xlarge": 3.00424,
            "g6e.8xlarge": 4.52856,
            "g6e.16xlarge": 7.57719,
            "g6e.12xlarge": 10.49264,
            "g6e.24xlarge": 15.06559,
            "g6e.48xlarge": 30.13118,
            # p4d
            "p4d.24xlarge": 21.957642,
            # p4de
            "p4de.24xlarge": 27.44705,
            # p5
            "p5.4xlarge": 6.88,
            "p5.48xlarge": 55.04,
            # p5en
            "p5en.48xlarge": 63.296,
            # p6-b200
            "p6-b200.48xlarge": 113.9328,
            # trn1
            "trn1.2xlarge": 1.34375,
            "trn1.32xlarge": 21.5,
            # trn1n
            "trn1n.32xlarge": 24.78,
        },
    ),
}

# Services, per region. Keys: "eks.standard" / "eks.extended" (per cluster-hour),
# "nat" (per NAT gateway-hour), "ipv4" (per public IPv4 address-hour), "ebs.gp3"
# (per GB-month), "fsx.<DEPLOYMENT_TYPE>[.<MB/s/TiB>]" (per GB-month of capacity).
_EKS = {
    "eks.standard": Price(0.10, "hour", "eks-pricing-blog"),
    "eks.extended": Price(0.60, "hour", "eks-pricing-blog"),
}
_SERVICES: dict[str, dict[str, Price]] = {
    "us-east-1": {
        **_EKS,
        "nat": Price(0.045, "hour", "nat-us-east-1"),
        "ipv4": Price(0.005, "hour", "public-ipv4"),
        "ebs.gp3": Price(0.08, "GB-month", "ebs-gp3-us-east-1"),
        "fsx.SCRATCH_2": Price(0.140, "GB-month", "fsx-scratch2"),
        "fsx.PERSISTENT_2.125": Price(0.145, "GB-month", "fsx-persistent2-125"),
    },
    "us-west-2": {
        **_EKS,
        "nat": Price(0.045, "hour", "nat-us-west-2"),
        "ipv4": Price(0.005, "hour", "public-ipv4"),
    },
}

# End of EKS standard support per Kubernetes minor version (extended support costs more
# after it; source "eks-calendar").
EKS_STANDARD_SUPPORT_END: dict[str, dt.date] = {
    "1.29": dt.date(2025, 3, 23),
    "1.30": dt.date(2025, 7, 23),
    "1.31": dt.date(2025, 11, 26),
    "1.32": dt.date(2026, 3, 23),
    "1.33": dt.date(2026, 7, 29),
    "1.34": dt.date(2026, 12, 2),
    "1.35": dt.date(2027, 3, 27),
}


def ec2_on_demand(region: str, instance_type: str) -> Price | None:
    """On-demand $/hour of one instance, or None when the table has no figure."""
    source, table = _EC2_ON_DEMAND.get(region, ("", {}))
    usd = table.get(instance_type)
    return Price(usd, "hour", source) if usd is not None else None


def ec2_spot(region: str, instance_type: str) -> Price | None:
    """Spot $/hour: always unknown (see the module docstring)."""
    return None


def service(region: str, key: str) -> Price | None:
    return _SERVICES.get(region, {}).get(key)


def eks_support(version: str | None, on: dt.date) -> str | None:
    """ "standard" or "extended" for an EKS version on a date; None when the calendar has no
    row for the version."""
    end = EKS_STANDARD_SUPPORT_END.get(version or "")
    if end is None:
        return None
    return "standard" if on <= end else "extended"


def regions() -> list[str]:
    return sorted(set(_EC2_ON_DEMAND) | set(_SERVICES))
