"""The platform's always-on services the price facts price: KMS keys (per key-month) and the
interface VPC endpoints (per endpoint per AZ-hour), looked up like every other service price,
so a cluster budget can be checked (newcomer review of 1eea5a9f: `clusterPerMonth` was always
TF_COST_PRICE_MISSING for `kms`, a price the code never looked up)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from tests.conftest import ROOT, prod_own_values
from trainforge.plan import core, cost
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import cost_check
from trainforge.plan.runner import Recorded

DAY = dt.date(2026, 11, 30)
VPCE = "aws:ec2/vpcEndpoint:VpcEndpoint"


def _endpoint(urn: str, kind: str, subnets: int) -> Recorded:
    inputs = {"vpcEndpointType": kind, "subnetIds": [f"subnet-{i}" for i in range(subnets)]}
    return Recorded(urn, VPCE, urn, None, True, inputs)


def test_kms_keys_and_interface_endpoints_are_priced_per_key_month_and_endpoint_az_hour():
    resources = [
        Recorded("k1", "aws:kms/key:Key", "k1", None, True, {"enableKeyRotation": True}),
        Recorded("k2", "aws:kms/key:Key", "k2", None, True, {}),
        _endpoint("sts", "Interface", 3),
        _endpoint("ecr", "Interface", 3),
        _endpoint("s3", "Gateway", 0),  # a gateway endpoint bills nothing
    ]
    kms, vpce = cost.fixed_costs(resources, "us-east-1", DAY)
    # $1 per key-month (aws.amazon.com/kms/pricing), as $/h over AWS's 730-hour month
    assert kms.hourly == pytest.approx(2 * 1.0 / 730) and kms.source == "kms-pricing"
    assert kms.monthly == pytest.approx(2.0)
    assert kms.note.startswith("1 rotated yearly: each rotation's new backing key adds $1/month")
    # two interface endpoints, each in 3 AZs: 6 endpoint-hours an hour at $0.01
    assert (vpce.what, vpce.quantity) == ("VPC interface endpoints", "2 endpoints x 3 AZs")
    assert vpce.hourly == pytest.approx(6 * 0.01) and vpce.source == "vpce-us-east-1"


def test_an_endpoint_price_no_source_gives_is_unknown_and_listed_missing():
    (vpce,) = cost.fixed_costs([_endpoint("sts", "Interface", 2)], "us-west-2", DAY)
    assert vpce.hourly is None and vpce.missing == "vpce.interface in us-west-2"
    assert vpce.note.endswith("(listed as missing)")
    (kms,) = cost.fixed_costs([Recorded("k", "aws:kms/key:Key", "k", None, True, {})], "us-west-2",
                              DAY)  # fmt: skip
    assert kms.hourly == pytest.approx(1 / 730)  # one figure for every region


@pytest.fixture(scope="module")
def prod_fsx125():
    """prod (its `YOURS:` values) with the FSx tier the price facts price in us-east-1 (125
    MB/s/TiB; prod's 250 has no dated price, listed missing)."""
    overrides = prod_own_values()
    overrides["trainforge:fsx"] = json.dumps(
        {"deploymentType": "PERSISTENT_2", "storageCapacityGiB": 4800}
    )
    result = core.plan_project(ROOT, "prod", standins=False, config_overrides=overrides)
    inv = result.inventory
    ctx = PlanContext(inventory=inv, objects=result.objects, declared=inv.declared, root=ROOT)
    return result, cost_check.build_report(ctx, today=DAY)


def test_a_cluster_budget_is_checked_when_every_fixed_price_is_known(prod_fsx125):
    _, report = prod_fsx125
    assert not report.fixed_missing() and not report.fixed_unknown
    fixed = {i.what: i for i in report.fixed}
    assert fixed["KMS keys"].hourly is not None
    # 8 interface endpoints (sts, ecr.api, ecr.dkr, eks-auth, ec2, sqs, ssm, fsx) x 3 AZs
    assert fixed["VPC interface endpoints"].quantity == "8 endpoints x 3 AZs"
    assert not cost_check.findings(report, cost_check.parse_caps({"clusterPerMonth": 1e6}))
    month = cost_check.cluster_month(report)
    assert month is not None and month > 30000
    (over,) = cost_check.findings(report, cost_check.parse_caps({"clusterPerMonth": 1}))
    assert over.rule == "TF_COST_CLUSTER_BUDGET" and f"${month:,.2f} in a month" in over.message


def test_without_fsx_no_fsx_endpoint_is_created_or_billed():
    result = core.plan_project(ROOT, "fleet", standins=False)  # fsx.enabled: false
    services = {
        r.inputs["serviceName"].split(".", 3)[-1]
        for r in result.inventory.resources
        if r.type == VPCE and r.inputs.get("vpcEndpointType") == "Interface"
    }
    assert services == {"sts", "ecr.api", "ecr.dkr", "eks-auth", "ec2", "sqs", "ssm"}
    report = cost_check.build_report(
        PlanContext(inventory=result.inventory, objects=result.objects,
                    declared=result.inventory.declared, root=ROOT), today=DAY)  # fmt: skip
    (vpce,) = [i for i in report.fixed if i.what == "VPC interface endpoints"]
    # Pulumi.fleet.yaml: network.availabilityZones 2, in us-east-1
    assert vpce.quantity == "7 endpoints x 2 AZs" and vpce.hourly == pytest.approx(14 * 0.01)
