"""A pool type EC2 does not offer in the stack's region is an error at the pool, with offered
types of the same size and GPU count (the same GPU model first), whether or not AWS still
describes the type there (a live DescribeInstanceTypes may refuse it; moto's catalog answers)."""

from __future__ import annotations

from types import SimpleNamespace

from trainforge.platform import instance_types as it


def _facts(name: str, gpus: int, gpu: str) -> it.InstanceTypeFacts:
    return it.InstanceTypeFacts(name, 48, 196608, gpus, gpu, gpus * 24576, False, 0, 1,
                                ("x86_64",))  # fmt: skip


KNOWN = {
    "g6.12xlarge": _facts("g6.12xlarge", 4, "L4"),
    "g5.12xlarge": _facts("g5.12xlarge", 4, "A10G"),
    "g4dn.12xlarge": _facts("g4dn.12xlarge", 4, "T4"),
    "gr6.4xlarge": _facts("gr6.4xlarge", 1, "L4"),
    "g6.4xlarge": _facts("g6.4xlarge", 1, "L4"),
    "g5.4xlarge": _facts("g5.4xlarge", 1, "A10G"),
}


def _stub(monkeypatch, offered: set[str], describable: set[str]):
    def facts(name):
        if name not in describable:
            raise LookupError(name)
        return KNOWN[name]

    monkeypatch.setattr(it, "instance_type_facts", facts)
    # these stubs are EC2's answers (`pulumi up`), not the offline plan's data
    monkeypatch.setattr(it, "offline_data", lambda: None)
    monkeypatch.setattr(it, "offered_in_region", lambda types: frozenset(offered) & set(types))
    monkeypatch.setattr(it, "_region", lambda: "eu-west-1")
    monkeypatch.setattr(it, "offering_regions", lambda t: (["us-east-1", "us-west-2"], []))


def _pool(*types: str):
    return SimpleNamespace(instance_types=list(types), gpu=True, efa=False)


def test_not_offered_even_when_aws_still_describes_it(monkeypatch):
    _stub(monkeypatch, offered={"g5.12xlarge", "g4dn.12xlarge"}, describable=set(KNOWN))
    errors: list[str] = []
    assert it.resolve_pool(_pool("g6.12xlarge"), "trainforge:nodePools[0]", errors) is None
    assert errors == [
        "trainforge:nodePools[0].instanceTypes[0]: got 'g6.12xlarge'; expected an instance type"
        " offered in eu-west-1 (g6.12xlarge is not offered in eu-west-1: EC2 instance-type "
        "offerings), such as g4dn.12xlarge (4 x T4), g5.12xlarge (4 x A10G), or a region that "
        "offers g6.12xlarge (offered in: us-east-1, us-west-2)"
    ]


def test_not_offered_when_the_live_lookup_refuses_it(monkeypatch):
    _stub(monkeypatch, offered={"g5.4xlarge", "gr6.4xlarge"},
          describable=set(KNOWN) - {"g6.4xlarge"})  # fmt: skip
    errors: list[str] = []
    it.resolve_pool(_pool("g6.4xlarge"), "trainforge:nodePools[1]", errors)
    # the GPU count is unknown without the lookup: every same-size GPU type offered, L4 first
    assert errors == [
        "trainforge:nodePools[1].instanceTypes[0]: got 'g6.4xlarge'; expected an instance type "
        "offered in eu-west-1 (g6.4xlarge is not offered in eu-west-1: EC2 instance-type "
        "offerings), such as gr6.4xlarge (1 x L4), g5.4xlarge (1 x A10G), or a region that "
        "offers g6.4xlarge (offered in: us-east-1, us-west-2)"
    ]


def test_a_misspelt_type_says_it_exists_nowhere_and_what_was_meant(monkeypatch):
    """The review's `g6e.12xlarg`: no region was named, no close name offered, and nothing
    said the type exists nowhere (the EC2 API's own list of names, botocore's model)."""
    _stub(monkeypatch, offered=set(), describable=set(KNOWN))
    errors: list[str] = []
    it.resolve_pool(_pool("g6e.12xlarg"), "trainforge:nodePools[0]", errors)
    assert errors == [
        "trainforge:nodePools[0].instanceTypes[0]: got 'g6e.12xlarg'; expected an EC2 instance "
        "type offered in eu-west-1: g6e.12xlarg is no instance type in any region we know (the "
        f"{len(it.known_instance_types())} the EC2 API and the GPU catalog name) (did you mean "
        "'g6e.12xlarge'?)"
    ]


def test_the_known_types_are_the_ec2_api_s_own_names():
    """The names `lookup_error` matches against: the EC2 model's InstanceType enum and the GPU
    catalog's types (p6e-gb300.36xlarge is newer than botocore 1.44.5's model)."""
    from trainforge.core import catalog

    known = set(it.known_instance_types())
    assert len(known) > 1000
    assert {
        "g6e.12xlarge",
        "p5.48xlarge",
        "m6i.xlarge",
        "c5.9xlarge",
        "p6e-gb300.36xlarge",
    } <= known
    assert set(catalog.family_instance_types()) - known == set()
    assert "g6e.12xlarg" not in known


def test_the_program_names_the_region_and_the_closest_type_at_each_key():
    """Through the stack check under the mocks (moto's catalog): the system node group and a
    pool, each misspelt, each with its own key, the stack's region and the closest name."""
    import copy

    from tests.conftest import ROOT
    from trainforge.plan.mocks import run_mocked
    from trainforge.platform.stack_check import check_stack
    from trainforge.stack.file import read_stack

    config = copy.deepcopy(read_stack(ROOT, "prod").config)
    config["trainforge:systemNodeGroup"]["instanceType"] = "m6i.xlarg"
    config["trainforge:nodePools"][0]["instanceTypes"] = ["p5.48xlarg"]
    errors = run_mocked(lambda: check_stack(config, lookups=True), config).result.errors
    region = config["aws:region"]
    for key, bad, meant in (
        ("trainforge:systemNodeGroup.instanceType", "m6i.xlarg", "m6i.xlarge"),
        ("trainforge:nodePools[0].instanceTypes[0]", "p5.48xlarg", "p5.48xlarge"),
    ):
        (line,) = [e for e in errors if e.startswith(f"{key}:")]
        assert line.startswith(
            f"{key}: got {bad!r}; expected an EC2 instance type offered in {region}: "
        )
        assert line.endswith(f"(did you mean {meant!r}?)")


def test_a_failed_lookup_of_an_offered_type_is_not_the_user_s_fault(monkeypatch):
    """The region offers the type but DescribeInstanceTypes failed (throttled, say): the line
    says so, with the provider's error, and blames no value."""
    _stub(monkeypatch, offered={"g6.12xlarge"}, describable=set())
    errors: list[str] = []
    it.resolve_pool(_pool("g6.12xlarge"), "trainforge:nodePools[0]", errors)
    assert errors == [
        "trainforge:nodePools[0].instanceTypes[0]: the lookup of 'g6.12xlarge', which eu-west-1 "
        "offers, failed: g6.12xlarge (an AWS or provider failure, not this key's: run again)"
    ]


def test_an_amd_gpu_type_ec2_describes_is_refused_for_the_catalogs_reason(monkeypatch):
    """`pulumi up`: EC2 describes g4ad (1 AMD Radeon Pro V520) and offers it; a pool of it,
    even one not marked for GPUs, is refused because the GPU catalog lists no g4ad family as
    NVIDIA GPU capacity, not admitted as a GPU pool no GPU job could use."""
    amd = {**KNOWN, "g4ad.4xlarge": _facts("g4ad.4xlarge", 1, "Radeon Pro V520")}
    _stub(monkeypatch, offered={"g4ad.4xlarge"}, describable=set(amd))
    monkeypatch.setattr(it, "instance_type_facts", amd.__getitem__)
    errors: list[str] = []
    pool = SimpleNamespace(instance_types=["g4ad.4xlarge"], gpu=None, efa=False)
    assert it.resolve_pool(pool, "trainforge:nodePools[2]", errors) is None
    assert errors == [
        "trainforge:nodePools[2].instanceTypes[0]: got 'g4ad.4xlarge'; expected an NVIDIA GPU "
        "type of the GPU catalog for a pool: the catalog lists no g4ad family as NVIDIA GPU "
        "capacity, so its nodes offer no nvidia.com/gpu to a job (g4ad: AMD Radeon; trn: "
        "Trainium; a newer NVIDIA family becomes one by adding it to core/data/gpu_catalog.json, "
        "docs/gpu-catalog.md)"
    ]
