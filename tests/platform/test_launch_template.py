"""The EFA node group's launch template launches: no associate_public_ip_address on any of its
several network interfaces (EC2 rejects the parameter with more than one interface)."""

from __future__ import annotations

import pathlib

import pytest

from trainforge.plan.mocks import run_mocked
from trainforge.platform.launch_template import launch_template
from trainforge.stack.file import read_stack_file

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prod():
    return run_mocked(ROOT / "__main__.py", read_stack_file(ROOT / "Pulumi.prod.yaml").engine())


def test_p4d_template_has_every_efa_interface_and_no_public_ip_parameter(prod):
    templates = [
        r for r in prod.of_type("aws:ec2/launchTemplate:LaunchTemplate") if "p4d" in r.name
    ]
    assert len(templates) == 1
    nics = templates[0].inputs["networkInterfaces"]
    assert len(nics) == 4  # p4d.24xlarge: 4 EFA interfaces, one per network card
    assert all("associatePublicIpAddress" not in nic for nic in nics)
    assert [nic["interfaceType"] for nic in nics] == ["efa", "efa-only", "efa-only", "efa-only"]


def test_a_multi_interface_template_with_the_parameter_is_refused():
    nics = [{"device_index": 0}, {"device_index": 1, "associate_public_ip_address": "false"}]
    with pytest.raises(ValueError, match="several network interfaces"):
        launch_template(
            "lt",
            root_volume_gib=100,
            security_group_ids=[],
            tags={},
            opts=None,
            network_interfaces=nics,
        )
