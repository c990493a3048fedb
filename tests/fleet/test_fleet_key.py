"""`trainforge:fleet`: a stack's role in a MultiKueue fleet, one line per problem at its key,
and nothing changes for a stack without it."""

from __future__ import annotations

import pytest

from trainforge.platform.config import ConfigError, parse_config
from trainforge.stack.fleet import FleetConfig

W1 = {"name": "use1", "stack": "fleet-use1"}
W2 = {"name": "usw2", "stack": "fleet-usw2"}


def problems(fleet, jobs=None) -> list[str]:
    raw = {"cluster": "c", "fleet": fleet}
    if jobs is not None:
        raw["jobs"] = jobs
    try:
        parse_config(raw)
    except ConfigError as e:
        return e.errors
    return []


def test_a_manager_and_a_worker_parse():
    manager = parse_config({"cluster": "c", "fleet": {"role": "manager", "workers": [W1, W2]}})
    assert manager.fleet == FleetConfig(role="manager", workers=[W1, W2])
    assert [w.name for w in manager.fleet.workers] == ["use1", "usw2"]
    worker = parse_config({"cluster": "c", "fleet": {"role": "worker", "manager": "org/p/fleet"}})
    assert worker.fleet.worker_role and worker.fleet.manager == "org/p/fleet"


def test_without_the_key_a_stack_is_one_cluster():
    assert parse_config({"cluster": "c"}).fleet is None


@pytest.mark.parametrize(
    ("fleet", "jobs", "line"),
    [
        (
            {"role": "boss"},
            None,
            "trainforge:fleet.role: got 'boss'; expected one of 'manager', 'worker'",
        ),
        (
            {"role": "manager", "workers": [W1, {"name": "use1", "stack": "fleet-x"}]},
            None,
            "trainforge:fleet.workers[1].name: got 'use1'; expected a worker name not used by "
            "another worker",
        ),
        (
            {"role": "manager", "workers": [W1, {"name": "other", "stack": "fleet-use1"}]},
            None,
            "trainforge:fleet.workers[1].stack: got 'fleet-use1'; expected a stack not listed "
            "by another worker",
        ),
        (
            {"role": "manager", "workers": [{"name": "Use_1", "stack": "fleet-use1"}]},
            None,
            "trainforge:fleet.workers[0].name: got 'Use_1'; expected a DNS-1123 label "
            "(lowercase letters, digits, '-') of at most 52 characters",
        ),
        (
            {"role": "manager"},
            None,
            "trainforge:fleet.workers: got []; expected at least one worker {name, stack} "
            "(role: manager)",
        ),
        (
            {"role": "worker"},
            None,
            "trainforge:fleet.manager: missing; expected the manager's stack (role: worker), "
            "e.g. manager: fleet",
        ),
        (
            {"role": "worker", "manager": "fleet", "workers": [W1]},
            None,
            "trainforge:fleet.workers: got [{'name': 'use1', 'stack': 'fleet-use1'}]; expected "
            "no workers in a worker stack (role: worker); list them in its manager",
        ),
        (
            {"role": "manager", "workers": [W1], "manager": "fleet"},
            None,
            "trainforge:fleet.manager: got 'fleet'; expected unset in a manager stack (role: "
            "manager names its workers)",
        ),
        (
            {"role": "worker", "manager": "fleet"},
            [{"name": "mnist"}],
            "trainforge:jobs: got ['mnist']; expected no jobs in a fleet worker stack "
            "(trainforge:fleet.role: worker): declare them in the manager stack, whose Kueue "
            "dispatches them to its workers",
        ),
        (
            {"role": "manager", "workers": [W1], "region": "x"},
            None,
            "trainforge:fleet.region: unknown key; known keys: manager, role, workers",
        ),
    ],
)
def test_each_bad_fleet_is_one_line_at_its_key(fleet, jobs, line):
    assert problems(fleet, jobs) == [line]


def test_a_manager_may_declare_jobs():
    assert problems({"role": "manager", "workers": [W1]}, [{"name": "x"}]) == []


def test_a_fleet_stack_needs_kueue():
    raw = {
        "cluster": "c",
        "fleet": {"role": "worker", "manager": "fleet"},
        "kueue": {"enabled": False},
    }
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    assert e.value.errors == [
        "trainforge:kueue.enabled: got False; expected true in a fleet stack "
        "(trainforge:fleet is set): MultiKueue is Kueue's"
    ]
    assert parse_config({"cluster": "c", "kueue": {"enabled": False}}).fleet is None


@pytest.mark.parametrize(
    "extra",
    [{"jobBackend": "trainjob"}, {"jobBackends": ["trainjob"]},
     {"jobs": [{"name": "x", "team": "t", "backend": "trainjob"}]}],
)  # fmt: skip
def test_a_manager_with_the_trainjob_backend_is_refused_in_one_line(extra):
    """Trainer 2.2.1 (the pinned one) reconciles a TrainJob whatever its managedBy: on a
    manager it would build the dispatched job's JobSet there (trainforge.stack.fleet)."""
    from trainforge.core import versions

    raw = {"cluster": "c", "fleet": {"role": "manager", "workers": [W1]}, **extra}
    with pytest.raises(ConfigError) as e:
        parse_config(raw)
    [line] = e.value.errors
    assert line.startswith("trainforge:fleet.role: got 'manager'; expected a manager whose jobs")
    assert f"Kubeflow Trainer {versions.TRAINER_VERSION} ignores a TrainJob's spec.managedBy" in (
        line
    )
    # a worker, a single cluster, and a manager of other backends are not refused
    if "jobs" not in extra:  # (a worker declares no jobs)
        parse_config({"cluster": "c", "fleet": {"role": "worker", "manager": "fleet"}, **extra})
    parse_config({"cluster": "c", **extra})
    parse_config({"cluster": "c", "fleet": raw["fleet"], "jobBackends": ["pytorchjob"]})


def test_a_trainer_that_honours_managed_by_would_not_be_refused():
    from trainforge.stack.fleet import FleetConfig, trainjob_refusal

    manager = FleetConfig(role="manager", workers=[W1])
    assert trainjob_refusal(manager, ("trainjob",), "2.2.1") is not None
    assert trainjob_refusal(manager, ("trainjob",), "v2.3.0") is None
    assert trainjob_refusal(manager, ("pytorchjob",), "2.2.1") is None
