"""The AWS regions, offline: botocore's bundled endpoint data (what `aws:region` accepts, and
where a type the stack's region lacks is looked for). A module of its own so that the config
(which checks the region) and the instance-type lookups (which name regions) share it without
importing each other.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _endpoints() -> Any:
    """botocore's bundled endpoint resolver (offline)."""
    from botocore.loaders import create_loader  # noqa: PLC0415 - only the program needs it
    from botocore.regions import EndpointResolver  # noqa: PLC0415

    return EndpointResolver(create_loader().load_data("endpoints"))


@functools.cache
def aws_regions() -> frozenset[str]:
    """Every region of every AWS partition with EC2 (botocore's bundled endpoint data,
    offline). botocore's own resolver, as `Session.get_available_regions("ec2", p)` uses it,
    without the session: that loads EC2's whole service model (~0.3 CPU s of each plan) only
    to read its endpoint prefix, "ec2" (botocore 1.44.5 data/ec2/2016-11-15/service-2.json
    metadata.endpointPrefix; tests/platform/test_aws_regions.py holds the two equal)."""
    resolver = _endpoints()
    return frozenset(
        r
        for partition in resolver.get_available_partitions()
        for r in resolver.get_available_endpoints("ec2", partition)
    )


def partition_regions(region: str) -> tuple[str, ...]:
    """The regions with EC2 in `region`'s partition (aws, aws-us-gov, aws-cn, ...), sorted:
    where one provider's credentials may look for a type `region` does not offer."""
    resolver = _endpoints()
    partition = resolver.get_partition_for_region(region)
    return tuple(sorted(resolver.get_available_endpoints("ec2", partition)))
