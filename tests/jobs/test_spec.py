"""Parsing job declarations: defaults, presets, and every invalid declaration's message."""

from __future__ import annotations

import pytest

from trainforge.core.errors import JobConfigError
from trainforge.jobs import spec
from trainforge.jobs.spec import JobSpec as JobModel
from trainforge.jobs.spec import ModelFlags, parse_job, parse_jobs
from trainforge.stack.base import StackError, aliases

BASE = {"name": "gpt-small", "team": "research", "pool": "gpu-workloads"}


def test_defaults_and_camel_case_keys():
    job = parse_job(
        {**BASE, "workers": 2, "gpusPerWorker": 4, "dModel": 256, "heads": 4, "seqLen": 128}, "j"
    )
    assert (job.preset, job.strategy, job.workers, job.gpus_per_worker) == ("ddp", "ddp", 2, 4)
    assert job.training.d_model == 256 and job.training.seq_len == 128
    assert (
        job.checkpoint.grace_period == 90
        and job.checkpoint.every == 500
        and job.checkpoint.async_save
    )
    rp = job.run_policy
    assert (rp.clean_pod_policy, rp.ttl_seconds_after_finished, rp.backoff_limit) == (
        "Running",
        86400,
        6,
    )
    # unset: resolved per backend (wiring.default_restart_policy)
    assert job.restart_policy is None and job.code_source == "configmap" and job.image is None
    assert job.hang_timeout is None  # the runtime's default
    assert job.procs == 4 and job.uses_torchrun


def test_snake_case_keys_are_accepted_too():
    job = parse_job({**BASE, "gpus_per_worker": 1, "batch_size": 8}, "j")
    assert job.gpus_per_worker == 1 and job.training.batch_size == 8 and not job.uses_torchrun


def test_presets():
    job = {"team": "t", "pool": "p"}
    assert parse_job({**job, "name": "a", "preset": "fsdp", "workers": 2}).strategy == "fsdp"
    el = {"min_workers": 2, "max_workers": 4, "max_restarts": 5}
    e = parse_job({**job, "name": "b", "preset": "elastic", "elastic": el})
    assert (
        e.preset == "elastic"
        and e.workers == 4
        and e.elastic == spec.ElasticSpec(min_workers=2, max_workers=4, max_restarts=5)
    )
    assert e.uses_torchrun and e.min_workers == 2 and e.max_workers == 4
    assert parse_job({**job, "name": "c", "preset": "ddp"}).preset == "ddp"
    # an elastic block alone implies the elastic preset
    assert (
        parse_job({**BASE, "elastic": {"minWorkers": 1, "maxWorkers": 3}}, "j").preset == "elastic"
    )


def test_config_strings_from_the_cli_are_coerced():
    job = parse_job({**BASE, "workers": "3", "compile": "true", "lr": "0.001"}, "j")
    assert job.workers == 3 and job.training.compile and job.training.lr == 0.001


def test_env_is_in_dependency_order_and_reserved_names_are_refused():
    """By name (the order `pulumi up`'s engine hands a mapping over in), except that a
    variable follows those of the job it refers to: Kubernetes expands `$(X)` only from
    earlier variables (core.expansion.dependency_order)."""
    job = parse_job({**BASE, "env": {"B": 2, "A": "x"}}, "j")
    assert job.env == (("A", "x"), ("B", "2"))
    job = parse_job({**BASE, "env": {"RUN_ID": "exp7", "OUT_DIR": "/tmp/$(RUN_ID)"}}, "j")
    assert job.env == (("RUN_ID", "exp7"), ("OUT_DIR", "/tmp/$(RUN_ID)"))
    with pytest.raises(JobConfigError, match=r"j\.env\.MASTER_ADDR.*set by the operator"):
        parse_job({**BASE, "env": {"MASTER_ADDR": "x"}}, "j")


@pytest.mark.parametrize(
    ("change", "where", "message"),
    [
        (
            {"gpuPerWorker": 4},
            "trainforge:jobs[0].gpuPerWorker",
            "unknown key (did you mean 'gpusPerWorker'?); known keys: activationCheckpointing",
        ),
        ({"name": "GPT_small"}, "trainforge:jobs[0].name", "DNS-1035"),
        ({"name": "1gpt"}, "trainforge:jobs[0].name", "DNS-1035"),
        ({"name": "a" * 53}, "trainforge:jobs[0].name", "at most 52 characters"),
        (
            {"name": None},
            "trainforge:jobs[0].name",
            "missing; expected the job's name: a DNS-1035 label",
        ),
        ({"team": None}, "trainforge:jobs[0].team", "missing; expected the team the job runs as"),
        (
            {"pool": None},
            "trainforge:jobs[0].pool",
            "missing; expected the node pool the job runs on",
        ),
        ({"workers": 0}, "trainforge:jobs[0].workers", "got 0; expected a value >= 1"),
        ({"workers": 2.5}, "trainforge:jobs[0].workers", "expected an integer"),
        ({"gpusPerWorker": -1}, "trainforge:jobs[0].gpusPerWorker", ">= 0"),
        ({"strategy": "zero3"}, "trainforge:jobs[0].strategy", "expected one of 'ddp', 'fsdp'"),
        (
            {"preset": "deepspeed"},
            "trainforge:jobs[0].preset",
            "expected one of 'ddp', 'fsdp', 'elastic'",
        ),
        (
            {"preset": "fsdp", "strategy": "ddp"},
            "trainforge:jobs[0].strategy",
            "fsdp preset runs strategy fsdp",
        ),
        (
            {"preset": "ddp", "elastic": {"minWorkers": 1}},
            "trainforge:jobs[0].elastic",
            "need preset: elastic",
        ),
        (
            {"preset": "elastic", "elastic": {"minWorkers": 4, "maxWorkers": 2}},
            "trainforge:jobs[0].elastic.minWorkers",
            "got 4; expected a value <= maxWorkers (2)",
        ),
        (
            {"preset": "elastic", "workers": 9, "elastic": {"minWorkers": 2, "maxWorkers": 4}},
            "trainforge:jobs[0].workers",
            "within elastic minWorkers..maxWorkers (2..4)",
        ),
        ({"preset": "elastic"}, "trainforge:jobs[0].elastic.maxWorkers", "needs maxWorkers"),
        (
            {"image": "pytorch/pytorch"},
            "trainforge:jobs[0].image",
            "pinned with a version tag (not 'latest')",
        ),
        (
            {"image": "pytorch/pytorch:latest"},
            "trainforge:jobs[0].image",
            "pinned with a version tag (not 'latest')",
        ),
        ({"image": "Not An Image:1"}, "trainforge:jobs[0].image", "expected an image reference"),
        ({"image": "repo/x@sha256:abc"}, "trainforge:jobs[0].image", "expected an image reference"),
        (
            {"codeSource": "image"},
            "trainforge:jobs[0].image",
            "codeSource: image runs trainforge from your image",
        ),
        (
            {"codeSource": "git"},
            "trainforge:jobs[0].codeSource",
            "expected one of 'configmap', 'image'",
        ),
        ({"cpu": "lots"}, "trainforge:jobs[0].cpu", "Kubernetes quantity"),
        ({"memory": "-1Gi"}, "trainforge:jobs[0].memory", "Kubernetes quantity"),
        # the wave-19 review: `memory: "64"` was 64 bytes (valid Kubernetes syntax)
        (
            {"memory": "64"},
            "trainforge:jobs[0].memory",
            "got '64'; expected memory of at least 1Mi, such as 64Gi or 512Mi: a number without "
            "a unit is bytes (did you mean 64Gi?)",
        ),
        ({"shmSize": 512}, "trainforge:jobs[0].shmSize", "(did you mean 512Gi?)"),
        ({"memory": "0"}, "trainforge:jobs[0].memory", "got '0'; expected a positive"),
        ({"model": "resnet"}, "trainforge:jobs[0].model", "expected one of 'mlp', 'gpt'"),
        ({"dataset": "tokens"}, "trainforge:jobs[0].dataPath", "needs dataPath"),
        (
            {"dataset": "tokens", "dataPath": "s3://corpus/owt-train.bin"},
            "trainforge:jobs[0].dataPath",
            "got 's3://corpus/owt-train.bin'; expected a file the pods read (relative: on the team",
        ),
        ({"vocabSize": 70000, "model": "gpt"}, "trainforge:jobs[0].vocabSize", "exceeds 65536"),
        ({"preset": "fsdp", "elastic": {"maxWorkers": 4}}, "trainforge:jobs[0].elastic", "preset"),
        (
            {"dataPath": "/fsx/x.bin"},
            "trainforge:jobs[0].dataPath",
            "only read with dataset: tokens",
        ),
        (
            {"dModel": 100, "heads": 3},
            "trainforge:jobs[0].heads",
            "got 3; expected a number that divides dModel (100)",
        ),
        ({"lr": 0}, "trainforge:jobs[0].lr", "got 0; expected a value > 0"),
        (
            {"precision": "fp16"},
            "trainforge:jobs[0].precision",
            "one of 'auto', 'bf16', 'fp32', 'fp8'",
        ),
        ({"checkpoint": {"every": 0}}, "trainforge:jobs[0].checkpoint.every", ">= 1"),
        (
            {"checkpoint": {"gracePeriod": 7200}},
            "trainforge:jobs[0].checkpoint.gracePeriod",
            "got 7200; expected a value <= 3600",
        ),
        (
            {"checkpoint": {"resume": "latest"}},
            "trainforge:jobs[0].checkpoint.resume",
            "auto, never, or an absolute",
        ),
        (
            {"checkpoint": {"evry": 5}},
            "trainforge:jobs[0].checkpoint.evry",
            "unknown key (did you mean 'every'?); known keys: async, dir, every",
        ),
        (
            {"runPolicy": {"cleanPodPolicy": "Always"}},
            "trainforge:jobs[0].runPolicy.cleanPodPolicy",
            "one of 'None', 'Running', 'All'",
        ),
        (
            {"restartPolicy": "Always"},
            "trainforge:jobs[0].restartPolicy",
            "one of 'OnFailure', 'ExitCode', 'Never'",
        ),
        (
            {"metricsPort": 70000},
            "trainforge:jobs[0].metricsPort",
            "got 70000; expected a value <= 65535",
        ),
        ({"hangTimeout": -5}, "trainforge:jobs[0].hangTimeout", "got -5; expected a value >= 0"),
        ({"hangTimeout": "soon"}, "trainforge:jobs[0].hangTimeout", "expected an integer"),
        ({"efa": "yes"}, "trainforge:jobs[0].efa", "true or false"),
    ],
)
def test_invalid_declarations_name_the_field_value_and_valid_choices(change, where, message):
    raw = {**BASE, **change}
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises(JobConfigError) as err:
        parse_jobs([raw])
    lines = err.value.errors
    mine = [line for line in lines if line.startswith(where + ":")]
    assert mine, lines
    assert message in mine[0], mine


def test_name_room_grows_with_worker_count():
    parse_job({**BASE, "name": "a" * 52, "workers": 1000}, "j")
    with pytest.raises(JobConfigError, match="at most 51 characters"):
        parse_job({**BASE, "name": "a" * 52, "workers": 1001}, "j")


def test_duplicate_names_in_a_team_are_rejected():
    with pytest.raises(
        JobConfigError, match=r"trainforge:jobs\[1\]\.name.*already used by trainforge:jobs\[0\]"
    ):
        parse_jobs([BASE, BASE])
    # the same name in two teams is two namespaces: fine
    assert len(parse_jobs([BASE, {**BASE, "team": "vision"}])) == 2


def test_jobs_must_be_a_list():
    with pytest.raises(JobConfigError, match="expected a list of jobs"):
        parse_jobs({"name": "x"})
    assert parse_jobs(None) == []


def test_three_bad_jobs_report_every_problem_in_one_run_with_suggestions():
    raw = [
        {**BASE, "gpuPerWorker": 4, "workers": 0},
        {**BASE, "name": "b", "checkpoint": {"evry": 5, "gracePeriod": 7200}},
        {**BASE, "name": "c", "env": {"RANK": "1"}, "preset": "elastc"},
        {**BASE, "name": "fine"},
        {**BASE, "name": "fine"},
    ]
    with pytest.raises(StackError) as err:
        parse_jobs(raw)
    assert err.value.errors == [
        "trainforge:jobs[0].workers: got 0; expected a value >= 1",
        "trainforge:jobs[0].gpuPerWorker: unknown key (did you mean 'gpusPerWorker'?); known keys: "
        + ", ".join(sorted(aliases(JobModel))),
        "trainforge:jobs[1].checkpoint.gracePeriod: got 7200; expected a value <= 3600",
        "trainforge:jobs[1].checkpoint.evry: unknown key (did you mean 'every'?); known keys: "
        "async, dir, every, fingerprint, gracePeriod, keepLast, resume, s3Mirror",
        "trainforge:jobs[2].preset: got 'elastc'; expected one of 'ddp', 'fsdp', 'elastic'",
        "trainforge:jobs[2].env.RANK: got 'RANK'; expected a name other than those set by the "
        "operator or the platform, which cannot be overridden",
        "trainforge:jobs[4].name: got 'fine'; expected a name not used yet in team 'research' "
        "(already used by trainforge:jobs[3]); names must be unique per team",
    ]


def test_rules_across_keys_each_name_their_key_in_one_run():
    raw = {
        **BASE,
        "name": "a" * 53,
        "preset": "fsdp",
        "strategy": "ddp",
        "codeSource": "image",
        "dataset": "tokens",
    }
    with pytest.raises(StackError) as err:
        parse_jobs([raw])
    where = [line.split(":")[1] for line in err.value.errors]
    assert where == ["jobs[0].strategy", "jobs[0].name", "jobs[0].image", "jobs[0].dataPath"]


def test_the_runtime_flags_are_the_runtimes_own_declaration():
    """A job's runtime flags and checkpoint settings are derived from the runtime's declared
    settings (training/config.py): the same names, choices, bounds and help."""
    from trainforge.jobs.spec import CheckpointSpec
    from trainforge.training.config import TrainConfig, settings

    declared = {s.path: s for s in settings(TrainConfig)}
    flags = ModelFlags.model_fields
    assert {"model", "layers", "lr", "precision", "compile"} <= set(flags) <= set(declared)
    for name, field in flags.items():
        s = declared[name]
        assert s.help in field.description and s.flag in field.description
        for bound in ("gt", "ge", "le"):
            value = getattr(s, bound)
            assert value is None or any(getattr(m, bound, None) == value for m in field.metadata)
    assert set(CheckpointSpec.model_fields) - {"s3_mirror", "fingerprint"} <= {
        p.removeprefix("checkpoint.") for p in declared
    }
    assert parse_job({**BASE, "model": "gpt"}, "j").training.model == "gpt"
    with pytest.raises(JobConfigError, match=r"j\.layers: got 0; expected a value > 0"):
        parse_job({**BASE, "layers": 0}, "j")
    with pytest.raises(JobConfigError, match=r"j\.seed: got -1; expected a value >= 0"):
        parse_job({**BASE, "seed": -1}, "j")
    with pytest.raises(JobConfigError, match=r"j\.model: got 'cnn'; expected one of 'mlp', 'gpt'"):
        parse_job({**BASE, "model": "cnn"}, "j")
