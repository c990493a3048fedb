"""Reserved capacity that launches: the prod stack's reserved p4d group under mocks that
stub EC2's answers (a reservation in a given zone and placement group; a Capacity Block;
instance-type offerings), asserted on the declared node group and launch template.

What is being checked (trainforge/platform/capacity_placement.py): an instance uses a
reservation only in its zone and, for a reservation made in a cluster placement group, only
in that group; a Capacity Block only with capacity type CAPACITY_BLOCK and market type
capacity-block. The offerings decide the one zone of EFA pools (and so of FSx).
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import OWN_RESERVATION, ROOT, prod_own_values
from trainforge.plan.mocks import TrainforgeMocks, run_mocked
from trainforge.platform.config import ConfigError
from trainforge.stack.file import read_stack_file

LT = "aws:ec2/launchTemplate:LaunchTemplate"
NG = "aws:eks/nodeGroup:NodeGroup"
PG = "aws:ec2/placementGroup:PlacementGroup"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
CR = OWN_RESERVATION  # the reservation a user gives Pulumi.prod.yaml
REGION = "us-east-1"


def run_prod(overrides: dict | None = None, **stubs):
    config = read_stack_file(ROOT / "Pulumi.prod.yaml").engine()
    config.update(prod_own_values())
    config["trainforge:jobs"] = "[]"  # placement only: the jobs add nothing here
    config.update(overrides or {})
    mocks = TrainforgeMocks(region=REGION, **stubs)
    return run_mocked(ROOT / "__main__.py", config, stack="prod", mocks=mocks)


def subnet_id(run, index: int) -> str:
    return run.find("aws:ec2/subnet:Subnet", f"platform-net-private-{index}").id


def test_an_on_demand_reservation_places_the_group_in_its_zone_and_placement_group():
    run = run_prod(
        capacity_reservations={
            CR: {
                "availabilityZone": f"{REGION}c",
                "placementGroupArn": f"arn:aws:ec2:{REGION}:123456789012:placement-group/p4d-res",
                "reservationType": "default",
                "instanceType": "p4d.24xlarge",
            }
        }
    )
    ng = run.find(NG, "platform-p4d-reserved")
    assert ng.inputs["subnetIds"] == [subnet_id(run, 2)]  # us-east-1c: the third subnet
    assert ng.inputs["capacityType"] == "ON_DEMAND"
    lt = run.find(LT, "platform-p4d-reserved-lt")
    assert lt.inputs["placement"] == {"groupName": "p4d-res"}  # the reservation's own group
    assert "instanceMarketOptions" not in lt.inputs
    assert not [r for r in run.of_type(PG) if "p4d" in r.name]  # none created for it


def test_a_capacity_block_gets_capacity_block_type_and_market():
    run = run_prod(
        capacity_reservations={
            CR: {
                "availabilityZone": f"{REGION}b",
                "placementGroupArn": "",
                "reservationType": "capacity-block",
                "instanceType": "p4d.24xlarge",
            }
        }
    )
    ng = run.find(NG, "platform-p4d-reserved")
    assert ng.inputs["capacityType"] == "CAPACITY_BLOCK"
    assert ng.inputs["subnetIds"] == [subnet_id(run, 1)]
    lt = run.find(LT, "platform-p4d-reserved-lt")
    assert lt.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt.inputs["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": CR}
    }
    assert "placement" not in lt.inputs


def test_capacity_block_config_for_an_on_demand_reservation_is_refused():
    groups = prod_own_values()["trainforge:nodeGroups"]
    groups = groups.replace('"efa": true', '"efa": true, "capacityType": "CAPACITY_BLOCK"')
    with pytest.raises(ConfigError) as err:
        run_prod({"trainforge:nodeGroups": groups})  # the default stub: an ODCR
    assert (
        "nodeGroups[0].capacityType: got 'CAPACITY_BLOCK'; expected ON_DEMAND: EC2 has no "
        "Capacity Block" in str(err.value)
    )


def test_efa_pools_and_fsx_go_to_the_first_zone_offering_the_type():
    # p5.48xlarge offered only in us-east-1b: the EFA pool's subnet and FSx follow it
    run = run_prod(offerings={"p5.48xlarge": [f"{REGION}b", f"{REGION}e"]})
    (nc,) = [n for n in run.of_type(NODECLASS) if n.inputs["metadata"]["name"] == "efa-training"]
    assert nc.inputs["spec"]["subnetSelectorTerms"] == [{"id": subnet_id(run, 1)}]
    (fsx,) = run.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fsx.inputs["subnetIds"] == subnet_id(run, 1)


def test_a_type_offered_in_no_zone_of_the_vpc_is_a_one_line_error():
    with pytest.raises(ConfigError) as err:
        run_prod(offerings={"p5.48xlarge": [f"{REGION}e"]})
    msg = str(err.value)
    assert (
        "nodePools[0].instanceTypes: got ['p5.48xlarge']; expected a type offered in a "
        "zone of the VPC's private subnets" in msg
    )
    assert f"EC2 offers it in {REGION}e" in msg


def test_a_reservation_in_a_zone_without_a_subnet_fails_with_the_reason():
    stub = {"availabilityZone": f"{REGION}d", "placementGroupArn": "", "reservationType": "default"}
    with pytest.raises(Exception) as err:  # raised when the reservation's zone resolves
        run_prod(capacity_reservations={CR: stub})
    assert f"capacityReservationId: got '{CR}'; expected a reservation in a zone" in str(err.value)
    assert f"it is in {REGION}d" in str(err.value)


class _Failing(TrainforgeMocks):
    """EC2 answering the reservation lookup with an error other than "not found"."""

    def __init__(self, failure: str, **kw):
        super().__init__(**kw)
        self.failure = failure

    def call(self, args):
        if args.token == "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation":
            self.calls.append(None)
            return {}, [("id", self.failure)]
        return super().call(args)


@pytest.mark.parametrize(
    "failure",
    [
        "reading EC2 Capacity Reservations: operation error EC2: DescribeCapacityReservations, "
        "api error RequestLimitExceeded: Request limit exceeded.",
        "reading EC2 Capacity Reservations: operation error EC2: DescribeCapacityReservations, "
        "api error UnauthorizedOperation: You are not authorized to perform this operation.",
    ],
)
def test_a_throttled_or_denied_lookup_stops_with_a_clear_error(failure):
    """Read as "not a Capacity Block", a real block would get no capacity-block market type
    and never launch: only EC2's not-found means "not a block"."""
    config = read_stack_file(ROOT / "Pulumi.prod.yaml").engine()
    config.update(prod_own_values())
    config["trainforge:jobs"] = "[]"
    with pytest.raises(Exception) as err:  # noqa: PT011 - the engine wraps the RunError
        run_mocked(
            ROOT / "__main__.py", config, stack="prod", mocks=_Failing(failure, region=REGION)
        )
    text = str(err.value)
    assert "nodeGroups[0].capacityReservationId: could not read reservation " + CR in text
    assert "not a configuration problem" in text
    assert failure.rsplit("api error ", 1)[1].split(":")[0] in text


def test_an_unknown_id_is_read_as_an_on_demand_reservation():
    """EC2's NotFound (the provider's "couldn't find resource"): not a block; the ODCR read
    that follows is what reports a wrong id at `pulumi up`."""
    run = run_prod()  # no stub: the mocks answer NotFound for the block lookup
    assert run.find(NG, "platform-p4d-reserved").inputs["capacityType"] == "ON_DEMAND"


def test_a_reserved_group_s_subnet_outside_the_reservation_s_zone_is_refused():
    """subnetId used to win over the reservation's zone: the group launched in us-east-1a,
    its reservation in us-east-1c went unused."""
    ids = ["subnet-0a1", "subnet-0b2", "subnet-0c3"]
    zones = dict(zip(ids, (f"{REGION}a", f"{REGION}b", f"{REGION}c"), strict=True))
    stub = {"availabilityZone": f"{REGION}c", "placementGroupArn": "", "reservationType": "default"}
    network = (
        '{"vpcId": "vpc-0abc", "privateSubnetIds": ["subnet-0a1", "subnet-0b2", "subnet-0c3"]}'
    )

    def group(subnet: str) -> dict:
        config = read_stack_file(ROOT / "Pulumi.prod.yaml").engine()
        groups = json.loads(config["trainforge:nodeGroups"])
        groups[0].update(subnetId=subnet, capacityReservationId=CR)
        return {"trainforge:network": network, "trainforge:nodeGroups": json.dumps(groups)}

    with pytest.raises(Exception) as err:  # raised when the reservation's zone resolves
        run_prod(group("subnet-0a1"), capacity_reservations={CR: stub}, subnet_zones=zones)
    assert (
        "trainforge:nodeGroups[0].subnetId: got 'subnet-0a1'; expected the private subnet in "
        f"reservation {CR}'s zone {REGION}c: subnet-0c3 (an instance uses a reservation only "
        "in its zone), or unset"
    ) in str(err.value)
    run = run_prod(group("subnet-0c3"), capacity_reservations={CR: stub}, subnet_zones=zones)
    assert run.find(NG, "platform-p4d-reserved").inputs["subnetIds"] == ["subnet-0c3"]
