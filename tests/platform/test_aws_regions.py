"""The regions `aws:region` accepts are botocore's answer (platform/regions.py aws_regions)."""

from __future__ import annotations

import botocore.session

from trainforge.platform.regions import aws_regions


def test_aws_regions_are_what_a_botocore_session_lists_for_ec2_in_every_partition():
    session = botocore.session.get_session()
    want = {
        r
        for partition in session.get_available_partitions()
        for r in session.get_available_regions("ec2", partition)
    }
    assert aws_regions() == want
    assert {"us-east-1", "us-west-2", "eu-west-1", "cn-north-1", "us-gov-west-1"} <= want


def test_a_misspelt_region_names_the_closest_one():
    """The review's `us-west2`: the examples were us-east-1, us-east-2, us-gov-east-1 and
    us-gov-west-1, and nothing pointed at us-west-2."""
    from trainforge.platform.config import _check_region

    errors: list[str] = []
    for region in ("us-west2", "us-gov-west1", "us-west-2", "us-gov-west-1"):
        _check_region(errors, region)
    assert errors == [
        f"aws:region: got {bad!r}; expected an AWS region with EC2 (botocore's endpoint data: "
        f"{len(aws_regions())} regions), such as us-east-1, us-east-2, us-west-1, us-west-2 "
        f"(did you mean {meant!r}?)"
        for bad, meant in (("us-west2", "us-west-2"), ("us-gov-west1", "us-gov-west-1"))
    ]


def test_partition_regions_stay_in_the_region_s_partition():
    from trainforge.platform.regions import partition_regions

    assert "us-west-2" in partition_regions("eu-west-1")
    assert "us-gov-west-1" not in partition_regions("eu-west-1")
    assert set(partition_regions("us-gov-west-1")) == {"us-gov-east-1", "us-gov-west-1"}
