"""`run-local --stack STACK JOB`: stack config -> run-local arguments, without Pulumi."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from trainforge.jobs.errors import JobConfigError
from trainforge.jobs.local import local_argv_for_job

STACK = textwrap.dedent(
    """
    config:
      aws:region: us-west-2
      trainforge:jobs:
        - name: gpt-fsdp
          team: research
          pool: gpu-workloads
          preset: fsdp
          workers: 2
          gpusPerWorker: 4
          model: gpt
          layers: 2
          dModel: 64
          heads: 4
          steps: 50
          batchSize: 8
          compile: true
          dataset: tokens
          dataPath: datasets/tiny.bin
          checkpoint: {every: 10, keepLast: 2, gracePeriod: 60}
        - name: mnist-elastic
          team: research
          pool: training-workloads
          preset: elastic
          elastic: {minWorkers: 1, maxWorkers: 3, maxRestarts: 4}
          model: mlp
    """
)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "Pulumi.dev.yaml").write_text(STACK)
    return tmp_path


def test_fsdp_job_becomes_local_processes(project):
    argv = local_argv_for_job("dev", "gpt-fsdp", project)
    assert argv[:2] == ["--workers", "8"]  # 2 pods x 4 GPUs
    joined = " ".join(argv)
    assert "--strategy fsdp --model gpt --layers 2 --d-model 64 --heads 4" in joined
    assert "--dataset tokens --data-path datasets/tiny.bin" in joined
    assert (
        "--checkpoint-dir ./runs/gpt-fsdp/checkpoints" in joined
        and "--output-dir ./runs/gpt-fsdp" in joined
    )
    assert "--checkpoint-every 10 --keep-last 2" in joined and "--grace-period 60" in joined
    assert "--metrics-port 0" in joined
    assert "--compile" not in argv and "--checkpoint-s3" not in argv and "/fsx" not in joined


def test_elastic_job_passes_max_restarts(project):
    argv = local_argv_for_job("dev", "mnist-elastic", project)
    assert argv[:4] == ["--workers", "3", "--max-restarts", "4"]
    assert "--strategy" in argv and argv[argv.index("--strategy") + 1] == "ddp"


def test_unknown_job_and_stack(project):
    with pytest.raises(
        JobConfigError, match="JOB: got 'nope'; stack 'dev' declares: gpt-fsdp, mnist-elastic"
    ):
        local_argv_for_job("dev", "nope", project)
    with pytest.raises(JobConfigError, match="no stack file .*Pulumi.prod.yaml; stacks here: dev"):
        local_argv_for_job("prod", "gpt-fsdp", project)


def test_bad_declaration_names_the_field(project):
    (project / "Pulumi.bad.yaml").write_text(
        "config:\n  trainforge:jobs:\n    - {name: x, team: t, pool: p, workers: 0}\n"
    )
    with pytest.raises(JobConfigError, match=r"trainforge:jobs\[0\]\.workers: got 0"):
        local_argv_for_job("bad", "x", project)


def test_does_not_import_pulumi(project):
    code = (
        "import sys; from trainforge.jobs.local import local_argv_for_job;"
        f"local_argv_for_job('dev', 'gpt-fsdp', {str(project)!r});"
        "assert not any(m == 'pulumi' or m.startswith('pulumi.') for m in sys.modules), 'pulumi imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_expand_stack_argv(project):
    from trainforge.jobs.local import expand_stack_argv

    base = local_argv_for_job("dev", "mnist-elastic", project)
    assert expand_stack_argv(["--stack", "dev", "mnist-elastic", "--steps", "5"], project) == [
        *base,
        "--steps",
        "5",
    ]
    assert expand_stack_argv(["--stack=dev", "mnist-elastic"], project) == base
    assert expand_stack_argv(["--workers", "2", "--steps", "5"], project) == [
        "--workers",
        "2",
        "--steps",
        "5",
    ]
    with pytest.raises(JobConfigError, match="usage: run-local --stack STACK JOB"):
        expand_stack_argv(["--stack", "dev"], project)
    with pytest.raises(JobConfigError, match="usage: run-local --stack STACK JOB"):
        expand_stack_argv(["--stack", "dev", "--steps", "5"], project)


def test_the_runtime_accepts_the_local_flags(project):
    from trainforge.training.config import parse_args

    argv = local_argv_for_job("dev", "mnist-elastic", project)
    cfg = parse_args(argv[4:])  # after --workers N --max-restarts R (run-local's own flags)
    assert (cfg.model, cfg.metrics_port, cfg.checkpoint_dir) == (
        "mlp",
        0,
        "./runs/mnist-elastic/checkpoints",
    )


@pytest.mark.parametrize("backend", ["pytorchjob", "trainjob", "indexed-job"])
def test_run_local_is_the_same_on_every_backend(project, backend):
    """The backend picks the controller in the cluster; the job run locally does not change."""
    plain = local_argv_for_job("dev", "gpt-fsdp", project)
    stack = re.sub(r"( +)preset: fsdp\n", rf"\g<0>\1backend: {backend}\n", STACK, count=1)
    assert f"backend: {backend}" in stack
    (project / "Pulumi.dev.yaml").write_text(stack)
    assert local_argv_for_job("dev", "gpt-fsdp", project) == plain
