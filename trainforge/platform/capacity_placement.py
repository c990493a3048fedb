"""Where GPU capacity can launch: the zones that offer an instance type, and the zone,
placement group and market of a capacity reservation, all read from EC2 at preview.

Why: an instance uses a capacity reservation only in the reservation's availability zone; a
reservation belongs to a cluster placement group only if it was created in it (an instance
launched into another placement group does not use it); a Capacity Block is used only by a
launch with market type `capacity-block` in a node group of capacity type `CAPACITY_BLOCK`.
A node group that gets any of these wrong stays at zero nodes with no error at deploy time.
And an EFA group or pool needs one zone (a cluster placement group cannot span zones) that
offers its instance type: "the first private subnet" may not.

The lookups (what a real `pulumi preview` asks EC2):
- `aws.ec2.get_instance_type_offerings` (location type availability-zone): the zones that
  offer a type;
- `aws.ec2.get_capacity_block_reservation(id=...)`: despite its name it reads any
  reservation by id (terraform-provider-aws `ec2_capacity_block_reservation_data_source.go`,
  the data source of pulumi-aws 7.51.1, read 2026-11-27: DescribeCapacityReservations with
  the id, no type filter), so its `reservation_type` decides: `capacity-block` is a Capacity
  Block, anything else an On-Demand Capacity Reservation. An id EC2 does not know fails with
  EC2's `InvalidCapacityReservationId.NotFound` (or `InvalidReservationNotFound`), which the
  provider turns into "couldn't find resource" (`findCapacityReservations`); only that is
  read as "not a Capacity Block". Throttling (`RequestLimitExceeded`), a denied call
  (`UnauthorizedOperation`) or any other failure stops the preview with a clear error: read
  as "not a block" it would launch a real Capacity Block without its market type, and it
  would never start;
- otherwise `aws.ec2.CapacityReservation.get(...)`, a read of the existing On-Demand Capacity
  Reservation (pulumi-aws 7.51.1 has no data source for those): its zone and placement group
  are outputs, so the subnet is picked when they resolve, and a zone without a private subnet
  fails the preview with the reason.
The offline plan's mocks answer all three (trainforge.plan.mocks: moto's bundled offerings,
stubbed reservations).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from trainforge.platform.config import ConfigError
from trainforge.stack.base import problem

CAPACITY_BLOCK = "CAPACITY_BLOCK"


class PlacementError(ConfigError):
    """No zone of the VPC can hold this capacity (the message says why and what is valid)."""

    def __init__(self, message: str):
        super().__init__([message])


def offering_zones(instance_types: Sequence[str]) -> set[str]:
    """Zones of the region that offer every one of `instance_types`."""
    result = aws.ec2.get_instance_type_offerings(
        filters=[{"name": "instance-type", "values": list(instance_types)}],
        location_type="availability-zone",
    )
    by_type: dict[str, set[str]] = {t: set() for t in instance_types}
    for t, zone in zip(result.instance_types or [], result.locations or [], strict=False):
        by_type.setdefault(t, set()).add(zone)
    zones = [by_type[t] for t in instance_types]
    return set.intersection(*zones) if zones else set()


def zone_index(where: str, instance_types: Sequence[str], subnet_zones: Sequence[str]) -> int:
    """The first private subnet whose zone offers every instance type; a one-line error
    naming the key, the types and the zones when none does."""
    offered = offering_zones(instance_types)
    for i, zone in enumerate(subnet_zones):
        if zone in offered:
            return i
    zones = ", ".join(sorted(offered)) or "no zone of this region"
    raise PlacementError(
        problem(
            f"{where}.instanceTypes",
            list(instance_types),
            f"a type offered in a zone of the VPC's private subnets ({', '.join(subnet_zones)}); "
            f"EC2 offers it in {zones}: use another type or a VPC with a subnet there",
        )
    )


def zone_indexes(instance_types: Sequence[str], subnet_zones: Sequence[str]) -> list[int]:
    """Every private subnet whose zone offers every instance type (a non-EFA group may span
    them); all of them when the lookup finds none, so a wrong offering table cannot empty a
    group."""
    offered = offering_zones(instance_types)
    found = [i for i, zone in enumerate(subnet_zones) if zone in offered]
    return found or list(range(len(subnet_zones)))


@dataclass
class Reservation:
    """What EC2 says about a capacity reservation (plain for a Capacity Block, outputs of a
    read for an On-Demand Capacity Reservation)."""

    id: str
    capacity_block: bool
    availability_zone: pulumi.Input[str]
    # the placement group NAME the reservation was created in ("" when none)
    placement_group: pulumi.Input[str]


def _group_name(arn: str | None) -> str:
    """arn:aws:ec2:<region>:<account>:placement-group/<name> -> <name>."""
    return (arn or "").rpartition("placement-group/")[2] if arn else ""


# How the provider says EC2 knows no reservation by this id (see the module docstring): EC2's
# error codes, and the provider's texts for them (retry.NotFoundError, EmptyResultError).
NOT_FOUND = (
    "InvalidCapacityReservationId.NotFound",
    "InvalidReservationNotFound",
    "couldn't find resource",
    "empty result",
)


class ReservationLookupError(pulumi.RunError):
    """EC2 could not be asked about a reservation (throttled, denied, unreachable): not the
    stack's configuration, and never to be read as "not a Capacity Block"."""


def read_block(where: str, reservation_id: str) -> Any:
    """The data source's answer for this id, or None when EC2 knows no such reservation."""
    try:
        return aws.ec2.get_capacity_block_reservation(id=reservation_id)
    except Exception as exc:  # noqa: BLE001 - the invoke raises a bare Exception
        text = str(exc)
        if any(marker in text for marker in NOT_FOUND):
            return None
        raise ReservationLookupError(
            f"{where}.capacityReservationId: could not read reservation {reservation_id} "
            f"from EC2 ({text.strip().splitlines()[-1] if text.strip() else type(exc).__name__})"
            ": not a configuration problem; retry when throttled, or grant the deploying "
            "role ec2:DescribeCapacityReservations"
        ) from None


def lookup_reservation(
    name: str, reservation_id: str, parent: pulumi.Resource, where: str = "trainforge:nodeGroups"
) -> Reservation:
    """A Capacity Block if EC2 says this id is one, else the On-Demand Capacity Reservation
    (read as a resource of the stack, under `parent`)."""
    block = read_block(where, reservation_id)
    if block is not None and block.reservation_type == "capacity-block":
        return Reservation(
            reservation_id,
            True,
            block.availability_zone,
            _group_name(block.placement_group_arn),
        )
    odcr = aws.ec2.CapacityReservation.get(
        f"{name}-reservation", reservation_id, opts=pulumi.ResourceOptions(parent=parent)
    )
    return Reservation(
        reservation_id,
        False,
        odcr.availability_zone,
        odcr.placement_group_arn.apply(_group_name),
    )


def reservation_subnet(
    where: str,
    reservation: Reservation,
    subnet_ids: Sequence[pulumi.Input[str]],
    subnet_zones: Sequence[str],
    pinned: str | None = None,
) -> pulumi.Output[str]:
    """The private subnet in the reservation's zone (the only zone where it is used); a group's
    own subnetId (`pinned`) must be that one, or its instances never use the reservation."""
    zones = list(subnet_zones)

    def pick(args: list) -> str:
        zone, *ids = args
        if zone not in zones:
            raise PlacementError(
                problem(
                    f"{where}.capacityReservationId",
                    reservation.id,
                    f"a reservation in a zone of the VPC's private subnets ({', '.join(zones)}); "
                    f"it is in {zone}, and an instance uses a reservation only in its zone",
                )
            )
        chosen = ids[zones.index(zone)]
        if pinned and pinned != chosen:
            raise PlacementError(
                problem(
                    f"{where}.subnetId",
                    pinned,
                    f"the private subnet in reservation {reservation.id}'s zone {zone}: "
                    f"{chosen} (an instance uses a reservation only in its zone), or unset",
                )
            )
        return chosen

    return pulumi.Output.all(reservation.availability_zone, *subnet_ids).apply(pick)
