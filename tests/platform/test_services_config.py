"""parse_services_config: defaults, and every bad value reported with its key, value and what is valid."""

from __future__ import annotations

import pytest

from trainforge.platform.services_config import (
    ServicesConfig,
    parse_services_config,
    valid_fsx_capacity,
)


def parse(raw):
    errors: list[str] = []
    cfg = parse_services_config(raw, errors)
    return cfg, errors


def test_defaults():
    cfg, errors = parse({"cluster": {"name": "x"}})  # other sections are ignored
    assert errors == []
    assert cfg == ServicesConfig()
    assert cfg.fsx.deployment_type == "PERSISTENT_2" and cfg.fsx.per_unit_storage_throughput == 125
    assert cfg.monitoring.mode == "managed" and cfg.mlflow.enabled is False
    assert cfg.training_operator.chart is None


def test_full_config_round_trip():
    cfg, errors = parse(
        {
            "fsx": {
                "deploymentType": "PERSISTENT_2",
                "storageCapacityGiB": 9600,
                "perUnitStorageThroughput": 1000,
                "mountPath": "/data",
                "dataRepository": {
                    "dataRepositoryPath": "s3://my-data/sets",
                    "fileSystemPath": "/datasets",
                    "importEvents": ["NEW"],
                    "exportEvents": [],
                },
            },
            "trainingOperator": {
                "chart": {"repository": "oci://r.example.com/charts", "version": "1.9.4"}
            },
            "teams": [
                {"name": "a", "quota": {"gpus": 4, "cpu": "1500m", "memory": "1.5Ti", "pods": 8}}
            ],
        }
    )
    assert errors == []
    assert cfg.fsx.storage_capacity_gib == 9600 and cfg.fsx.mount_path == "/data"
    assert cfg.fsx.data_repository.import_events == ("NEW",)
    assert cfg.fsx.data_repository.export_events == ()
    assert cfg.training_operator.chart.version == "1.9.4"
    assert cfg.teams[0].quota.gpus == "4" and cfg.teams[0].quota.memory == "1.5Ti"


@pytest.mark.parametrize("gib", [1200, 2400, 4800, 7200, 24000])
def test_allowed_capacities(gib):
    assert valid_fsx_capacity(gib)
    assert parse({"fsx": {"storageCapacityGiB": gib}})[1] == []
    assert parse({"fsx": {"deploymentType": "SCRATCH_2", "storageCapacityGiB": gib}})[1] == []


BAD = [
    # (raw config, key named in the message, fragments of the message)
    (
        {"fsx": {"storageCapacityGiB": 1000}},
        "trainforge:fsx.storageCapacityGiB",
        ["1000", "1200", "2400"],
    ),
    (
        {"fsx": {"deploymentType": "SCRATCH_2", "storageCapacityGiB": 3600}},
        "trainforge:fsx.storageCapacityGiB",
        ["3600", "SCRATCH_2", "multiple of 2400"],
    ),
    (
        {"fsx": {"perUnitStorageThroughput": 300}},
        "trainforge:fsx.perUnitStorageThroughput",
        ["300", "125, 250, 500, 1000"],
    ),
    (
        {"fsx": {"deploymentType": "SCRATCH_2", "perUnitStorageThroughput": 125}},
        "trainforge:fsx.perUnitStorageThroughput",
        ["SCRATCH_2"],
    ),
    (
        {"fsx": {"deploymentType": "PERSISTENT_1"}},
        "trainforge:fsx.deploymentType",
        ["PERSISTENT_1", "PERSISTENT_2, SCRATCH_2"],
    ),
    (
        {
            "fsx": {
                "deploymentType": "SCRATCH_2",
                "dataRepository": {"dataRepositoryPath": "s3://b/p"},
            }
        },
        "trainforge:fsx.dataRepository",
        ["PERSISTENT_2"],
    ),
    (
        {"fsx": {"dataRepository": {"dataRepositoryPath": "/local/path"}}},
        "trainforge:fsx.dataRepository.dataRepositoryPath",
        ["s3://"],
    ),
    ({"fsx": {"mountPath": "fsx"}}, "trainforge:fsx.mountPath", ["absolute path"]),
    (
        {"fsx": {"throughput": 125}},
        "trainforge:fsx.throughput",
        ["unknown key", "perUnitStorageThroughput"],
    ),
    (
        {"teams": [{"name": "vision", "quota": {"memory": "lots"}}]},
        "trainforge:teams[0].quota.memory",
        ["'lots'", "Kubernetes quantity"],
    ),
    (
        {"teams": [{"name": "vision", "quota": {"gpus": "1.5"}}]},
        "trainforge:teams[0].quota.gpus",
        ["1.5", "whole number"],
    ),
    (
        {"teams": [{"name": "vision", "quota": {"cpu": -4}}]},
        "trainforge:teams[0].quota.cpu",
        ["-4"],
    ),
    ({"teams": [{"name": "Team_A"}]}, "trainforge:teams[0].name", ["'Team_A'", "DNS-1123 label"]),
    ({"teams": [{"name": "a" * 64}]}, "trainforge:teams[0].name", ["DNS-1123 label"]),
    ({"teams": [{"name": "kube-system"}]}, "trainforge:teams[0].name", ["kube-system"]),
    ({"teams": [{"name": "a"}, {"name": "a"}]}, "trainforge:teams[1].name", ["'a'", "unique"]),
    ({"teams": {"name": "a"}}, "trainforge:teams", ["list of teams"]),
    (
        {"teams": [{"name": "a", "podSecurity": "privileged"}]},
        "trainforge:teams[0].podSecurity",
        ["baseline, restricted"],
    ),
    (
        {"monitoring": {"mode": "grafana"}},
        "trainforge:monitoring.mode",
        ["'grafana'", "managed, external"],
    ),
    ({"monitoring": {"retention": "2 weeks"}}, "trainforge:monitoring.retention", ["15d"]),
    ({"mlflow": {"backend": "postgres"}}, "trainforge:mlflow.backend", ["pvc, sqlite-ephemeral"]),
    ({"mlflow": {"enabled": "yes"}}, "trainforge:mlflow.enabled", ["true or false"]),
    (
        {"trainingOperator": {"chart": {"repository": "https://charts.example.com"}}},
        "trainforge:trainingOperator.chart.version",
        ["pinned chart version"],
    ),
    (
        {
            "trainingOperator": {
                "chart": {"repository": "kubeflow/training-operator", "version": "1.9.4"}
            }
        },
        "trainforge:trainingOperator.chart.repository",
        ["Helm repository URL"],
    ),
    (
        {"checkpoints": {"noncurrentVersionExpirationDays": 0}},
        "trainforge:checkpoints.noncurrentVersionExpirationDays",
        [">= 1"],
    ),
    ({"devicePlugins": "off"}, "trainforge:devicePlugins", ["a mapping"]),
]


@pytest.mark.parametrize(("raw", "key", "fragments"), BAD, ids=[b[1] for b in BAD])
def test_bad_config_is_reported_with_its_key(raw, key, fragments):
    _, errors = parse(raw)
    assert len(errors) == 1, errors
    message = errors[0]
    assert message.startswith(f"{key}:"), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_all_errors_are_reported_at_once():
    _, errors = parse(
        {
            "fsx": {"storageCapacityGiB": 1000, "perUnitStorageThroughput": 7},
            "teams": [{"name": "BAD"}, {"name": "ok", "quota": {"memory": "x"}}],
            "monitoring": {"mode": "nope"},
        }
    )
    keys = sorted(e.split(":", 2)[1].split(": ")[0] for e in errors)
    assert keys == sorted(
        [
            "fsx.storageCapacityGiB",
            "fsx.perUnitStorageThroughput",
            "teams[0].name",
            "teams[1].quota.memory",
            "monitoring.mode",
        ]
    )


def test_team_named_like_a_platform_namespace_is_rejected():
    _, errors = parse(
        {"monitoring": {"namespace": "observability"}, "teams": [{"name": "observability"}]}
    )
    assert errors and "observability" in errors[0] and "trainforge:teams" in errors[0]


def test_job_backends_default_and_what_the_jobs_name():
    cfg, errors = parse({})
    assert errors == [] and (cfg.job_backend, cfg.job_backends) == ("pytorchjob", ("pytorchjob",))
    # the default, the explicit list and every stack job's own backend, in a fixed order
    cfg, errors = parse(
        {
            "jobBackend": "indexed-job",
            "jobBackends": ["trainjob"],
            "jobs": [{"name": "a", "backend": "pytorchjob"}, {"name": "b"}],
        }
    )
    assert errors == []
    assert cfg.job_backend == "indexed-job"
    assert cfg.job_backends == ("pytorchjob", "trainjob", "indexed-job")
    # indexed-job alone: no controller to install
    cfg, _ = parse({"jobBackend": "indexed-job"})
    assert cfg.job_backends == ("indexed-job",)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"jobBackend": "v2"}, "trainforge:jobBackend: invalid value 'v2'"),
        ({"jobBackends": "trainjob"}, "trainforge:jobBackends: invalid value 'trainjob'"),
        ({"jobBackends": ["trainjob", "tfjob"]}, "trainforge:jobBackends: invalid value"),
    ],
)
def test_bad_job_backends_name_the_key(raw, key):
    _, errors = parse(raw)
    assert len(errors) == 1 and errors[0].startswith(key)
    assert "pytorchjob, trainjob, indexed-job" in errors[0]
