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
        ["'PERSISTENT_1'", "one of 'PERSISTENT_2', 'SCRATCH_2'"],
    ),
    (
        {
            "fsx": {
                "deploymentType": "SCRATCH_2",
                "dataRepository": {"dataRepositoryPath": "s3://bucket/p"},
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
    ({"teams": {"name": "a"}}, "trainforge:teams", ["a list"]),
    (
        {"teams": [{"name": "a", "podSecurity": "privileged"}]},
        "trainforge:teams[0].podSecurity",
        ["one of 'baseline', 'restricted'"],
    ),
    (
        {"monitoring": {"mode": "grafana"}},
        "trainforge:monitoring.mode",
        ["'grafana'", "one of 'managed', 'external'"],
    ),
    ({"monitoring": {"retention": "2 weeks"}}, "trainforge:monitoring.retention", ["15d"]),
    (
        {"mlflow": {"backend": "postgres"}},
        "trainforge:mlflow.backend",
        ["one of 'pvc', 'sqlite-ephemeral'"],
    ),
    ({"mlflow": {"enabled": "yes"}}, "trainforge:mlflow.enabled", ["true or false"]),
    (
        {"trainingOperator": {"chart": {"repository": "https://charts.example.com"}}},
        "trainforge:trainingOperator.chart.version",
        ["missing", "pinned chart version"],
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
        ({"jobBackend": "v2"}, "trainforge:jobBackend: got 'v2'"),
        ({"jobBackends": "trainjob"}, "trainforge:jobBackends: got 'trainjob'"),
        ({"jobBackends": ["trainjob", "tfjob"]}, "trainforge:jobBackends: got"),
    ],
)
def test_bad_job_backends_name_the_key(raw, key):
    _, errors = parse(raw)
    assert len(errors) == 1 and errors[0].startswith(key)
    assert all(backend in errors[0] for backend in ("pytorchjob", "trainjob", "indexed-job"))


def test_team_ids_are_stable_when_teams_are_added_or_reordered():
    """A team's default UID/GID comes from its name, not its position: reordering the list
    (or adding a team in front) must not hand a team's FSx files to another team."""
    first, errors = parse({"teams": [{"name": "vision"}, {"name": "llm"}]})
    assert errors == []
    second, errors = parse({"teams": [{"name": "speech"}, {"name": "llm"}, {"name": "vision"}]})
    assert errors == []
    ids = {t.name: (t.run_as_user, t.run_as_group) for t in first.teams}
    again = {t.name: (t.run_as_user, t.run_as_group) for t in second.teams}
    assert ids["vision"] == again["vision"] and ids["llm"] == again["llm"]
    assert ids["vision"] != ids["llm"]
    assert all(uid >= 100000 and uid == gid for uid, gid in again.values())
    # explicit ids win; gid defaults to the uid
    cfg, errors = parse(
        {"teams": [{"name": "a", "uid": 20001}, {"name": "b", "uid": 20002, "gid": 30002}]}
    )
    assert errors == []
    assert [(t.run_as_user, t.run_as_group) for t in cfg.teams] == [(20001, 20001), (20002, 30002)]


@pytest.mark.parametrize(
    ("teams", "key", "fragments"),
    [
        (
            [{"name": "a", "uid": 20001}, {"name": "b", "uid": 20001}],
            "trainforge:teams[1].uid: got 20001",
            ["team 'a' has it"],
        ),
        (
            [{"name": "a", "uid": 20001}, {"name": "b", "uid": 20002, "gid": 20001}],
            "trainforge:teams[1].gid: got 20001",
            ["team 'a' has it"],
        ),
        (
            [{"name": "a", "uid": 999}],
            "trainforge:teams[0].uid: got 999",
            ["10000 to 2147483647"],
        ),
        (
            [{"name": "a", "uid": True}],
            "trainforge:teams[0].uid: got True",
            ["10000 to 2147483647"],
        ),
        (
            [{"name": "a", "cohort": "Shared Pool"}],
            "trainforge:teams[0].cohort: got 'Shared Pool'",
            ["DNS-1123"],
        ),
    ],
)
def test_bad_team_ids_and_cohorts_name_the_key(teams, key, fragments):
    _, errors = parse({"teams": teams})
    assert len(errors) == 1 and errors[0].startswith(key), errors
    assert all(f in errors[0] for f in fragments), errors


def test_a_derived_uid_colliding_with_an_explicit_one_is_refused():
    from trainforge.platform.services_config import default_team_id

    taken = default_team_id("vision")
    _, errors = parse({"teams": [{"name": "a", "uid": taken}, {"name": "vision"}]})
    assert len(errors) == 1  # its gid follows the uid: reported once
    assert errors[0].startswith(f"trainforge:teams[1].uid: got {taken}; expected a uid no other")
    assert "team 'a' has it; this one is derived from its name" in errors[0]
    assert "set uid explicitly" in errors[0]


POOLS = {"nodeGroups": [{"name": "p4d"}], "nodePools": [{"name": "g5"}, {"name": "cpu"}]}


def test_quota_per_pool_and_borrowing_limit():
    cfg, errors = parse(
        {
            **POOLS,
            "teams": [
                {
                    "name": "a",
                    "quota": {
                        "gpus": 8,
                        "cpu": 64,
                        "memory": "512Gi",
                        "pools": {"p4d": {"gpus": 8, "cpu": "48"}},
                        "borrowingLimit": {"gpus": 4},
                    },
                }
            ],
        }
    )
    assert errors == []
    quota = cfg.teams[0].quota
    assert dict(quota.pools)["p4d"].gpus == "8" and dict(quota.pools)["p4d"].memory is None
    assert quota.borrowing_limit.gpus == "4" and quota.borrowing_limit.cpu is None
    assert cfg.kueue.enabled and cfg.kueue.reclaim_within_cohort == "Any"


@pytest.mark.parametrize(
    ("quota", "key", "fragments"),
    [
        (
            {"pools": {"p5": {"gpus": 1}}},
            "trainforge:teams[0].quota.pools.p5: got 'p5'",
            ["one of the node pools: cpu, g5, p4d"],
        ),
        (
            {"gpus": 8, "pools": {"p4d": {"gpus": 8}, "g5": {"gpus": 4}}},
            "trainforge:teams[0].quota.pools: got",
            ["at most the team's quota.gpus (8)"],
        ),
        (
            {"pools": {"p4d": {"gpu": 8}}},
            "trainforge:teams[0].quota.pools.p4d.gpu: unknown key (did you mean 'gpus'?)",
            ["known keys: cpu, gpus, memory"],
        ),
        (
            {"borrowingLimit": {"gpus": "1.5"}},
            "trainforge:teams[0].quota.borrowingLimit.gpus: got",
            [],
        ),
        (
            {"borrowingLimit": 4},
            "trainforge:teams[0].quota.borrowingLimit: got 4",
            ["mapping"],
        ),
    ],
)
def test_bad_pool_quotas_name_the_key(quota, key, fragments):
    _, errors = parse({**POOLS, "teams": [{"name": "a", "quota": quota}]})
    assert len(errors) == 1 and errors[0].startswith(key), errors
    assert all(f in errors[0] for f in fragments), errors


@pytest.mark.parametrize(
    ("kueue", "key", "fragments"),
    [
        (
            {"preemption": {"reclaimWithinCohort": "Never"}},
            "trainforge:kueue.preemption.borrowWithinCohort: got 'LowerPriority'",
            ["Never while reclaimWithinCohort is Never"],
        ),
        (
            {"preemption": {"withinClusterQueue": "Always"}},
            "trainforge:kueue.preemption.withinClusterQueue: got 'Always'",
            ["LowerPriority"],
        ),
        (
            {"queueingStrategy": "LIFO"},
            "trainforge:kueue.queueingStrategy: got 'LIFO'",
            ["BestEffortFIFO"],
        ),
        (
            {"podsReadyTimeout": "half an hour"},
            "trainforge:kueue.podsReadyTimeout: got 'half an hour'",
            ["30m"],
        ),
    ],
)
def test_bad_kueue_settings_name_the_key(kueue, key, fragments):
    _, errors = parse({"kueue": kueue})
    assert len(errors) == 1 and errors[0].startswith(key), errors
    assert all(f in errors[0] for f in fragments), errors


def test_kueue_settings():
    cfg, errors = parse(
        {
            "kueue": {
                "queueingStrategy": "StrictFIFO",
                "podsReadyTimeout": False,
                "preemption": {"reclaimWithinCohort": "Never", "borrowWithinCohort": "Never"},
            }
        }
    )
    assert errors == []
    assert cfg.kueue.queueing_strategy == "StrictFIFO" and cfg.kueue.pods_ready_timeout is None
    assert cfg.kueue.borrow_within_cohort == "Never"
    assert parse({})[0].kueue.pods_ready_timeout == "30m"


def test_a_gid_following_the_uid_is_checked_against_other_teams_gids():
    _, errors = parse(
        {"teams": [{"name": "a", "uid": 20001, "gid": 30002}, {"name": "b", "uid": 30002}]}
    )
    assert errors == [
        "trainforge:teams[1].gid: got 30002; expected a gid no other team uses (team 'a' has "
        "it; this one is derived from its uid): set gid explicitly"
    ]


@pytest.mark.parametrize(
    ("repository", "chart", "repo"),
    [
        # a registry path: the chart is named whole in `chart`, nothing in repository_opts
        ("oci://ghcr.io/acme/charts", "oci://ghcr.io/acme/charts/training-operator", None),
        (
            "oci://ghcr.io/acme/charts/training-operator/",
            "oci://ghcr.io/acme/charts/training-operator",
            None,
        ),
        # a classic repository: its index.yaml lists the chart by name
        ("https://charts.example.com", "training-operator", "https://charts.example.com"),
    ],
)
def test_a_chart_repository_becomes_the_form_pulumi_kubernetes_resolves(repository, chart, repo):
    cfg, errors = parse(
        {"trainingOperator": {"chart": {"repository": repository, "version": "1.9.4"}}}
    )
    assert errors == []
    ref = cfg.training_operator.chart
    assert (ref.release_chart, ref.release_repo) == (chart, repo)


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        (
            {"teams": [{"name": "a", "quotas": {"gpus": 1}}]},
            "trainforge:teams[0].quotas: unknown key (did you mean 'quota'?); known keys: access, "
            "claims, cohort, defaults, gid, name, podSecurity, quota, uid",
        ),
        (
            {**POOLS, "teams": [{"name": "a", "quota": {"pools": {"p4e": {"gpus": 1}}}}]},
            "trainforge:teams[0].quota.pools.p4e: got 'p4e'; expected one of the node pools: cpu, "
            "g5, p4d (did you mean 'p4d'?)",
        ),
        (
            {"teams": [{"name": "vision"}], "monitoring": {"receivers": [{"teams": ["vison"]}]}},
            "trainforge:monitoring.receivers[0].teams[0]: got 'vison'; expected one of the teams: "
            "vision (did you mean 'vision'?)",
        ),
        (
            {"fsx": {"storageCapacityGib": 2400}},
            "trainforge:fsx.storageCapacityGib: unknown key (did you mean 'storageCapacityGiB'?); "
            "known keys: backupRetentionDays, dataRepository, deploymentType, enabled, mountPath, "
            "perUnitStorageThroughput, storageCapacityGiB",
        ),
    ],
)
def test_a_misspelt_key_or_name_gets_a_suggestion(raw, line):
    _, errors = parse(raw)
    assert line in errors, errors


def test_pulumi_string_values_are_read_as_pulumi_gives_them():
    cfg, errors = parse(
        {
            "fsx": {"storageCapacityGiB": "2400", "enabled": "false", "backupRetentionDays": "0"},
            "kueue": {"podsReadyTimeout": "false"},
            "teams": [{"name": "a", "uid": "20001", "quota": {"gpus": "8"}}],
        }
    )
    assert errors == []
    assert (cfg.fsx.storage_capacity_gib, cfg.fsx.enabled, cfg.fsx.backup_retention_days) == (
        2400,
        False,
        0,
    )
    assert cfg.kueue.pods_ready_timeout is None and cfg.teams[0].run_as_user == 20001
    # but not what Pulumi never gives for a boolean or a number
    _, errors = parse({"fsx": {"enabled": "yes", "storageCapacityGiB": True}})
    assert sorted(errors) == [
        "trainforge:fsx.enabled: got 'yes'; expected true or false",
        "trainforge:fsx.storageCapacityGiB: got True; expected a number, not true or false",
    ]


def test_rules_across_teams_still_run_when_a_team_is_broken():
    _, errors = parse(
        {
            "teams": [
                {"name": "a", "uid": 20001},
                {"name": "b", "quota": {"memory": "lots"}},
                {"name": "c", "uid": 20001},
            ]
        }
    )
    assert sorted(errors) == [
        "trainforge:teams[1].quota.memory: got 'lots'; expected a Kubernetes quantity such as "
        "8, 500m, 64Gi or 1.5",
        "trainforge:teams[2].uid: got 20001; expected a uid no other team uses (team 'a' has "
        "it): choose another uid",
    ]
