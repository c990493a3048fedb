"""Kueue's LimitRange summary and validation (trainforge.core.pods `summarize`,
`outside_limit_range`) against Kueue's own test cases, tests/fixtures/upstream/limit_range.yaml
(TestSummarize, TestValidatePodSpec at release-0.19; the file names its source), and the API
server's LimitRanger defaults, which take several items in another order
(`limit_ranger_defaults`). In memory, milliseconds each."""

from __future__ import annotations

import pathlib
from fractions import Fraction
from typing import Any

import pytest
import yaml

from trainforge.core import pods as P
from trainforge.core.quantity import parse_quantity

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "upstream" / "limit_range.yaml"
DATA = yaml.safe_load(FIXTURE.read_text())


def _amounts(rl: Any) -> dict[str, Fraction]:
    return {k: parse_quantity(str(v)) for k, v in (rl or {}).items()}


@pytest.mark.parametrize("case", DATA["summarize"], ids=lambda c: c["case"])
def test_summarize_as_kueue(case: dict) -> None:
    got = P.summarize(case["ranges"])
    assert got.keys() == case["want"].keys()
    for kind, want in case["want"].items():
        for field in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            assert _amounts(got[kind][field]) == _amounts(want.get(field)), (kind, field)


@pytest.mark.parametrize("case", DATA["validatePodSpec"], ids=lambda c: c["case"])
def test_outside_limit_range_as_kueue(case: dict) -> None:
    spec = case.get("podSpec") or DATA["podSpec"]
    got = [list(e) for e in P.outside_limit_range(spec, case["ranges"])]
    assert got == case["want"]


def test_every_upstream_case_is_here() -> None:
    """TestSummarize has 3 cases and TestValidatePodSpec 11 at release-0.19 c90ed70."""
    assert (len(DATA["summarize"]), len(DATA["validatePodSpec"])) == (3, 11)


def test_the_refusal_prints_as_kueue_writes_it() -> None:
    """ValidateAdmissibility's `%s: %w` of ErrLimitRangeConstraintsUnsatisfiedResources and the
    aggregate (pkg/workload/resources.go at release-0.19); the pod's own path is the spec's."""
    case = next(c for c in DATA["validatePodSpec"] if c["case"] == "multiple")
    errors = P.outside_limit_range(DATA["podSpec"], case["ranges"])
    assert P.limit_range_refusal([[], errors]) == (
        "resources didn't satisfy LimitRange constraints: ["
        "spec.podSets[1].template.spec.initContainers[1]: Invalid value: "
        '["example.com/initContainerGpu"]: requests must not be above the limitRange max, '
        "spec.podSets[1].template.spec.containers[0]: Invalid value: "
        '["example.com/mainContainerGpu"]: requests must not be below the limitRange min, '
        'spec.podSets[1].template.spec: Invalid value: ["cpu"]: requests must not be above '
        "the limitRange max]"
    )
    assert P.limit_range_refusal([[], []]) == ""


def test_a_container_is_bounded_by_the_larger_of_its_request_and_limit() -> None:
    """Kueue checks max against the larger of request and limit, min against the smaller."""
    lr = [{"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "1"}}]}}]
    limited = {"containers": [{"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "3"}}}]}
    assert P.outside_limit_range(limited, lr) == [("containers[0]", ["cpu"], P.ABOVE_MAX)]
    low = {"containers": [{"resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "2"}}}]}
    assert P.outside_limit_range(low, lr) == [("containers[0]", ["cpu"], P.BELOW_MIN)]
    unnamed = {"containers": [{"resources": {"requests": {"memory": "1Gi"}}}]}
    assert P.outside_limit_range(unnamed, lr) == []


SEVERAL_ITEMS = {
    "spec": {
        "limits": [
            {"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "500m"}},
            {"type": "Container", "default": {"cpu": "2", "memory": "1Gi"}},
        ]
    }
}


def test_several_container_items_kueue_takes_the_first_the_limit_ranger_the_last() -> None:
    """One LimitRange, two Container items naming cpu: Kueue's Summarize keeps the first item's
    default (1), the API server's LimitRanger the last's (2: defaultContainerResourceRequirements
    assigns each item's values in turn); the second item's stored defaultRequest is its default
    (2), so the LimitRanger requests 2 CPUs and Kueue 500m."""
    bare = {"containers": [{"name": "t"}]}
    kueue = P.adjusted_pod_spec(bare, [SEVERAL_ITEMS])["containers"][0]["resources"]
    assert _amounts(kueue["limits"]) == {"cpu": 1, "memory": 2**30}
    assert _amounts(kueue["requests"]) == {"cpu": Fraction(1, 2), "memory": 2**30}
    stored = P.stored_pod_spec(bare, [SEVERAL_ITEMS])["containers"][0]["resources"]
    assert _amounts(stored["limits"]) == {"cpu": 2, "memory": 2**30}
    assert _amounts(stored["requests"]) == {"cpu": 2, "memory": 2**30}


def test_several_limit_ranges_the_limit_ranger_keeps_the_first_to_fill() -> None:
    """Across LimitRange objects the LimitRanger fills only what is missing, LimitRange after
    LimitRange (mergeContainerResources): the first to name a resource wins."""
    first = {"spec": {"limits": [{"type": "Container", "default": {"cpu": "3"}}]}}
    limits, requests = P.limit_ranger_defaults([first, SEVERAL_ITEMS])
    assert _amounts(limits) == {"cpu": 3, "memory": 2**30}
    assert _amounts(requests) == {"cpu": 3, "memory": 2**30}


def test_a_pod_runs_under_the_limit_ranges_default_limits() -> None:
    """`pod_limits`: what a GPU-only container (the Kubeflow SDK's resources_per_node={"gpu":
    1}, sent as requests and limits both) runs under, with the platform's team LimitRange
    (trainforge/platform/teams.py `limit_range_spec`, its default values): the LimitRanger
    fills the limits it names none of from `default` (cpu 2, memory 4Gi), not its requests'
    0.5 and 1Gi. A container without a limit leaves the pod unbounded in that resource."""
    from trainforge.platform.teams import limit_range_spec
    from trainforge.stack.services import TeamConfig

    team = TeamConfig.model_validate({"name": "research"})
    ranges = [{"kind": "LimitRange", "spec": limit_range_spec(team)}]
    gpu = {"nvidia.com/gpu": 1}
    spec = {"containers": [{"name": "node", "resources": {"requests": gpu, "limits": gpu}}]}
    assert P.pod_limits(spec) == {"nvidia.com/gpu": 1}
    assert P.pod_limits(spec, ranges) == {
        "nvidia.com/gpu": 1, "cpu": 2, "memory": 4 * 2**30,
    }  # fmt: skip
    side = {
        "containers": [*spec["containers"], {"name": "side", "resources": {"limits": {"cpu": "1"}}}]
    }
    assert P.pod_limits(side) == {}  # `node` has no cpu limit, `side` no GPU limit
    assert P.pod_limits(side, ranges) == {"cpu": 3, "memory": 8 * 2**30}
