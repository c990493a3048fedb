"""The reachability rehearsal: a cluster the stack creates can be reached by the machine that
runs `pulumi up`, or the stack says how; and the deployer's /32 (endpoint.deployFrom:
deployer) is learned truthfully or refused in one line naming the key."""

from __future__ import annotations

import io

import pulumi
import pulumi_aws as aws
import pytest

from trainforge.plan import core
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import reachability
from trainforge.plan.checks.reachability import UNREACHABLE
from trainforge.plan.core import plan_program
from trainforge.plan.registry import CHECKS
from trainforge.plan.resource_types import EKS_COMPONENT
from trainforge.platform import endpoint


def _cluster(public, cidrs=None, vpc_id=None):
    if vpc_id is None:
        vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16")
        subnets = [
            aws.ec2.Subnet(f"s{i}", vpc_id=vpc.id, cidr_block=f"10.0.{i}.0/24") for i in (1, 2)
        ]
        ids = [s.id for s in subnets]
    else:
        ids = ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"]
    aws.eks.Cluster(
        "eks",
        role_arn="arn:aws:iam::123456789012:role/eks",
        vpc_config={
            "subnet_ids": ids,
            "endpoint_private_access": True,
            "endpoint_public_access": public,
            **({"public_access_cidrs": cidrs} if cidrs else {}),
        },
    )


def _run(prog, deploy_from=None):
    config = {"trainforge:endpoint": {"deployFrom": deploy_from}} if deploy_from else None
    result = plan_program(prog, config=config)
    (section,) = [s for s in result.sections if s.title.startswith("Reachability")]
    return [v for v in result.failing if v.rule == UNREACHABLE], "\n".join(section.lines)


def test_the_check_is_registered():
    assert reachability.check in [c.run for c in CHECKS]


def test_private_only_in_a_vpc_the_stack_creates_is_unreachable():
    found, text = _run(lambda: _cluster(False))
    assert len(found) == 1 and "private-only" in found[0].message
    assert "unreachable" in text


def test_a_runner_declared_in_the_vpc_or_an_allow_list_reaches_it():
    found, text = _run(lambda: _cluster(False), deploy_from="vpc")
    assert found == [] and "declared: `pulumi up` runs inside the VPC this stack creates" in text
    found, text = _run(lambda: _cluster(True, ["198.51.100.0/24"]))
    assert found == [] and "reachable from 198.51.100.0/24" in text


def test_private_only_in_an_existing_vpc_is_said_not_refused():
    found, text = _run(lambda: _cluster(False, vpc_id="vpc-0123"))
    assert found == [] and "existing VPC: `pulumi up` must run inside it" in text


def _stack_ctx(repo_root, stack, overrides=None):
    from trainforge.plan.runner import run_project

    inv = run_project(repo_root, stack, config_overrides=overrides)
    return PlanContext(inventory=inv, objects=[], declared=inv.declared)


def test_the_shipped_dev_stack_is_reachable_by_the_readme_s_path(repo_root):
    """dev creates its VPC: its endpoint admits the deployer's /32 (unknown until `up`)."""
    result = reachability.check(_stack_ctx(repo_root, "dev"))
    assert result.findings == []
    (row,) = result.sections[0].data
    assert row["public"] is True and row["vpcCreatedByStack"] is True
    assert row["deployFrom"] == "deployer"
    assert row["publicAccessCidrs"] == [endpoint.DEPLOYERS]


def test_mutation_dev_without_its_endpoint_setting_is_caught(repo_root):
    """dev as it was shipped (no trainforge:endpoint): private-only in its own new VPC."""
    result = reachability.check(_stack_ctx(repo_root, "dev", {"trainforge:endpoint": {}}))
    (f,) = result.findings
    assert f.rule == UNREACHABLE and "platform-eks" in f.message


class _Answer(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_the_deployer_address_is_the_one_checkip_reports(monkeypatch):
    monkeypatch.setattr(endpoint.urllib.request, "urlopen", lambda *a, **k: _Answer(b"52.1.2.3\n"))
    assert endpoint.lookup() == "52.1.2.3/32"
    # listed already: not twice (EKS refuses duplicates)
    monkeypatch.setattr(endpoint, "under_mocks", lambda: False)
    assert endpoint.public_access_cidrs(("52.1.2.3/32",), "deployer") == ["52.1.2.3/32"]
    assert endpoint.public_access_cidrs((), "allowList") is None


@pytest.mark.parametrize("answer", [b"10.1.2.3", b"<html>captive portal</html>"])
def test_a_private_or_garbled_answer_is_refused_naming_the_key(monkeypatch, answer):
    monkeypatch.setattr(endpoint.urllib.request, "urlopen", lambda *a, **k: _Answer(answer))
    with pytest.raises(pulumi.RunError) as e:
        endpoint.lookup()
    line = str(e.value)
    assert line.startswith("trainforge:endpoint.deployFrom: got 'deployer'; ")
    assert "publicAccessCidrs" in line


def test_no_network_is_refused_naming_the_key(monkeypatch):
    def fail(*a, **k):
        raise OSError("Network is unreachable")

    monkeypatch.setattr(endpoint.urllib.request, "urlopen", fail)
    with pytest.raises(pulumi.RunError, match=r"deployFrom: got .deployer.; could not learn"):
        endpoint.lookup()


def _live_cluster(cidrs):
    """A live EKS cluster (moto) whose allow-list holds `cidrs`."""
    import boto3

    boto3.client("eks", region_name="us-east-1").create_cluster(
        name="tf",
        roleArn="arn:aws:iam::210987654321:role/eks",
        resourcesVpcConfig={"subnetIds": ["subnet-1"], "endpointPublicAccess": True,
                            "publicAccessCidrs": cidrs},
    )  # fmt: skip


def test_a_second_deployer_keeps_the_first_ones_address(monkeypatch):
    """Issue 41: each `up` used to replace the allow-list with its own /32, locking out the
    operator (or CI runner) that ran before; now earlier deployers' /32s are kept."""
    from moto import mock_aws

    monkeypatch.setattr(endpoint, "under_mocks", lambda: False)
    monkeypatch.setattr(endpoint, "lookup", lambda *a, **k: "52.9.9.9/32")
    monkeypatch.setattr(endpoint.pulumi.runtime, "is_dry_run", lambda: False)
    with mock_aws():
        _live_cluster(["52.94.76.0/22", "52.1.1.1/32"])
        got = endpoint.public_access_cidrs(("52.94.76.0/22",), "deployer", "tf", "us-east-1")
        assert got == ["52.94.76.0/22", "52.1.1.1/32", "52.9.9.9/32"]
        # a configured range is not a deployer's: dropping it from the config drops it
        assert endpoint.public_access_cidrs((), "deployer", "tf", "us-east-1") == [
            "52.1.1.1/32",
            "52.9.9.9/32",
        ]
        # before the cluster exists: the list and this machine
        assert endpoint.public_access_cidrs((), "deployer", "new", "us-east-1") == ["52.9.9.9/32"]


def test_a_preview_changes_nothing_on_a_live_cluster(monkeypatch):
    """A CI preview from a runner not in the list shows no ~publicAccessCidrs."""
    from moto import mock_aws

    monkeypatch.setattr(endpoint, "under_mocks", lambda: False)
    monkeypatch.setattr(endpoint, "lookup", lambda *a, **k: "52.9.9.9/32")
    monkeypatch.setattr(endpoint.pulumi.runtime, "is_dry_run", lambda: True)
    logged = []
    monkeypatch.setattr(endpoint.pulumi.log, "info", lambda msg, *a, **k: logged.append(msg))
    with mock_aws():
        _live_cluster(["52.1.1.1/32"])
        assert endpoint.public_access_cidrs((), "deployer", "tf", "us-east-1") == ["52.1.1.1/32"]
    assert "`pulumi up` from this machine adds 52.9.9.9/32" in logged[0]


def test_plan_diff_shows_the_allow_list_change(repo_root):
    """The offline plan names the deployers' entry (it was `<unknown>`), so `plan --diff`
    shows what turning `deployer` on or off changes, and two plans of the same stack agree."""
    from trainforge.plan.diff import diff_maps, render_markdown

    def eks(overrides):
        result = core.plan_project(repo_root, "dev", standins=False, config_overrides=overrides)
        return {r.urn: r.inputs for r in result.inventory.resources if r.type == EKS_COMPONENT}

    deployer = eks({})
    listed = eks({"trainforge:endpoint": {"publicAccessCidrs": ["52.94.76.0/22"]}})
    md = render_markdown(diff_maps(deployer, listed), diff_maps({}, {}))
    assert "publicAccessCidrs" in md and endpoint.DEPLOYERS in md and "52.94.76.0/22" in md
    assert not diff_maps(deployer, eks({})).changed
