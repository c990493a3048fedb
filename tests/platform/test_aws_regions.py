"""The regions `aws:region` accepts are botocore's answer (platform/config.py aws_regions)."""

from __future__ import annotations

import botocore.session

from trainforge.platform.config import aws_regions


def test_aws_regions_are_what_a_botocore_session_lists_for_ec2_in_every_partition():
    session = botocore.session.get_session()
    want = {
        r
        for partition in session.get_available_partitions()
        for r in session.get_available_regions("ec2", partition)
    }
    assert aws_regions() == want
    assert {"us-east-1", "us-west-2", "eu-west-1", "cn-north-1", "us-gov-west-1"} <= want
