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
    monkeypatch.setattr(it, "offered_in_region", lambda types: frozenset(offered) & set(types))
    monkeypatch.setattr(it, "_region", lambda: "eu-west-1")


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
        "offers g6.12xlarge"
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
        "offers g6.4xlarge"
    ]


def test_a_misspelt_type_keeps_its_own_message(monkeypatch):
    _stub(monkeypatch, offered=set(), describable=set(KNOWN))
    errors: list[str] = []
    it.resolve_pool(_pool("g6.12xlarg"), "trainforge:nodePools[0]", errors)
    assert errors == [
        "trainforge:nodePools[0].instanceTypes[0]: got 'g6.12xlarg'; expected an EC2 instance "
        "type offered in this region"
    ]
