"""Flags: bad values and impossible combinations fail at once, naming the flag; run-local
builds the torchrun command and validates before starting anything."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainforge import local
from trainforge.training.config import (
    CheckpointConfig,
    ConfigError,
    TrainConfig,
    as_dict,
    build_parser,
    check_values,
    check_world,
    from_flat,
    parse_args,
    settings,
    to_argv,
)
from trainforge.training.layout import CheckpointError


def _error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--batch-size", "0"], "--batch-size must be > 0, got 0"),
        (["--steps", "ten"], "--steps must be an integer, got 'ten'"),
        (["--strategy", "zero3"], "argument --strategy: invalid choice: 'zero3'"),
        (["--model", "gpt", "--d-model", "100", "--heads", "3"], "--d-model 100 is not divisible by --heads 3"),
        (["--dataset", "tokens", "--model", "gpt"], "--dataset tokens needs --data-path PATH"),
        (["--dataset", "tokens", "--model", "gpt", "--data-path", "/nope/tokens.bin"], "--data-path /nope/tokens.bin: no such file"),
        (["--dataset", "tokens", "--model", "gpt", "--data-path", "/"], "--data-path /: a folder; expected a uint16 token file"),
        (["--dataset", "tokens", "--data-path", __file__], "--dataset tokens needs --model gpt"),
        (["--data-path", __file__], "only read with --dataset tokens"),
        (["--model", "gpt", "--vocab-size", "70000"], "exceeds 65536"),
        (["--lr", "0"], "--lr must be > 0"),
        (["--checkpoint-every", "10"], "--checkpoint-every 10 needs --checkpoint-dir DIR"),
    ],
)  # fmt: skip
def test_bad_flags_fail_with_the_flag_named(argv: list[str], expected: str, capsys) -> None:
    assert expected in _error(argv, capsys)


def test_world_size_checks() -> None:
    cfg = TrainConfig(global_batch_size=30, grad_accum=1)
    with pytest.raises(
        ConfigError, match="--global-batch-size 30 is not divisible by world size 4"
    ):
        check_world(cfg, 4)
    assert check_world(cfg, 3).batch_size == 10
    with pytest.raises(
        ConfigError, match="--dataset-size 100 is smaller than one global batch of 128"
    ):
        check_world(TrainConfig(dataset_size=100, batch_size=32), 4, dataset_len=100)


def test_help_explains_every_flag(capsys) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    out = capsys.readouterr().out
    for flag in ("--strategy", "--model", "--steps", "--batch-size", "--grad-accum", "--lr",
                 "--seed", "--dataset-size", "--log-every", "--metrics-port", "--checkpoint-dir",
                 "--resume", "--grace-period", "--precision", "--compile"):  # fmt: skip
        assert flag in out
    assert "per rank" in out


def test_run_local_builds_the_torchrun_command(capsys) -> None:
    argv = ["--workers", "2", "--max-restarts", "3", "--strategy", "fsdp", "--steps", "5",
            "--run-name", "t", "--dry-run"]  # fmt: skip
    assert local.main(argv) == 0
    cmd = capsys.readouterr().out.split()
    assert cmd[1:4] == ["-m", "trainforge.training.launch", "--standalone"]
    assert cmd[cmd.index("--nproc-per-node") + 1] == "2"
    assert cmd[cmd.index("--max-restarts") + 1] == "3"
    i = cmd.index("trainforge.training")
    assert cmd[i - 1] == "-m"
    assert cmd[i + 1 :] == ["--strategy", "fsdp", "--steps", "5", "--run-name", "t"]


def test_run_local_names_the_run_once_for_all_ranks(capsys) -> None:
    assert local.main(["--workers", "2", "--dry-run"]) == 0
    cmd = capsys.readouterr().out.split()
    assert cmd[cmd.index("--run-name") + 1].startswith("mlp-ddp-")


def test_run_local_validates_before_launching(capsys) -> None:
    assert local.main(["--workers", "4", "--global-batch-size", "30", "--dry-run"]) == 2
    assert "--global-batch-size 30 is not divisible by world size 4" in capsys.readouterr().err
    # a bad training flag: one line under run-local's name, not the runtime's usage dump
    assert local.main(["--workers", "2", "--batch-size", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainforge run-local: error: argument --batch-size: ") and (
        "--batch-size must be > 0, got -1" in err and len(err.splitlines()) == 1
    ), err
    assert local.main(["--model", "resnet", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "--model: invalid choice: 'resnet' (choose from 'mlp', 'gpt')" in err, err
    assert len(err.splitlines()) == 1 and "python -m trainforge.training" not in err
    with pytest.raises(SystemExit):
        local.main(["--workers", "0"])
    assert "--workers must be >= 1" in capsys.readouterr().err


def test_run_local_splits_cores_between_workers(monkeypatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(local.os, "cpu_count", lambda: 8)
    assert local.child_env(2)["OMP_NUM_THREADS"] == "4"
    assert local.child_env(16)["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert local.child_env(2)["OMP_NUM_THREADS"] == "3"  # the user's choice wins


def test_every_flag_is_generated_from_one_field() -> None:
    """The parser's flags are exactly the dataclasses' settings (plus --help, --self-check), and
    a config survives the flat form summary.json records."""
    parser = build_parser()
    flags = {o for a in parser._actions for o in a.option_strings}
    declared = {s.flag for s in settings(TrainConfig)}
    assert flags - declared == {"-h", "--help", "--self-check"} and declared <= flags
    cfg = parse_args(["--steps", "7", "--checkpoint-dir", "/ck", "--keep-last", "1", "--compile"])
    assert (cfg.steps, cfg.checkpoint.directory, cfg.checkpoint.keep_last, cfg.compile) == (
        7, "/ck", 1, True,
    )  # fmt: skip
    flat = as_dict(cfg)
    assert flat["checkpoint_dir"] == "/ck" and flat["steps"] == 7
    assert from_flat(TrainConfig, flat) == cfg
    assert parse_args(to_argv(cfg)) == cfg and parse_args(to_argv(flat)) == cfg
    assert to_argv({"steps": 5, "lr": None, "async_checkpoint": False}) == ["--steps", "5"]
    every = next(s for s in settings(TrainConfig) if s.path == "checkpoint.every")
    assert (every.flag, every.type, every.default, every.ge, every.group) == (
        "--checkpoint-every", int, 0, 0, "checkpointing",
    )  # fmt: skip
    assert [s.path for s in settings(CheckpointConfig)][:2] == ["directory", "every"]
    with pytest.raises(
        ConfigError, match="--precision must be one of auto, bf16, fp32, fp8, got 'fp16'"
    ):
        check_values(TrainConfig(precision="fp16"))  # a job spec's value: same declaration


def _bad(s):
    if s.gt is not None:
        return s.type(s.gt)
    if s.ge is not None:
        return s.type(s.ge - 1)
    return s.type(s.le + 1)


@pytest.mark.parametrize(
    "s",
    [s for s in settings(TrainConfig) if (s.gt, s.ge, s.le) != (None, None, None)],
    ids=lambda s: s.flag,
)
def test_a_declared_bound_holds_for_flags_and_for_job_specs(s, capsys) -> None:
    """One bound, two ways in: the flag (argparse) and a TrainConfig built from a job spec."""
    bad = _bad(s)
    message = f"{s.flag} must be {s.bounds()}, got {bad}"
    assert message in _error([s.flag, str(bad)], capsys)
    if "." in s.path:  # a checkpoint setting: CheckpointConfig.validate (the library's way in)
        with pytest.raises(CheckpointError, match=re.escape(message)):
            CheckpointConfig(**{s.path.split(".")[1]: bad}).validate()
    else:
        with pytest.raises(ConfigError, match=re.escape(message)):
            check_values(TrainConfig(**{s.path: bad}))


def test_the_docs_flag_tables_name_every_flag_and_no_other() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs"
    rows = [
        line
        for doc in ("training.md", "checkpointing.md")
        for line in (docs / doc).read_text().splitlines()
        if line.startswith("| `--")
    ]
    documented = {f for row in rows for f in re.findall(r"--[a-z][a-z0-9-]*", row.split("|")[1])}
    documented -= {"--workers", "--max-restarts", "--dry-run", "--stack", "--pod-restarts"}
    assert documented == {s.flag for s in settings(TrainConfig)} | {"--self-check"}


@pytest.mark.parametrize(
    "s", [s for s in settings(TrainConfig) if s.le is not None], ids=lambda s: s.flag
)
def test_an_upper_bound_is_refused_in_one_line_by_the_runtime_and_run_local(s, capsys) -> None:
    """Above `le` (a port past 65535): the runtime's one-line error, not the socket's traceback,
    and run-local refuses it before it launches anything."""
    bad = s.type(s.le + 1)
    message = f"{s.flag} must be {s.bounds()}, got {bad}"
    assert message in _error([s.flag, str(bad)], capsys)
    assert local.main([s.flag, str(bad), "--dry-run"]) == 2
    assert message in capsys.readouterr().err


def test_the_metrics_port_bound_is_one_the_job_model_and_runtime_share(monkeypatch) -> None:
    """metricsPort (the stack's job), --metrics-port and TRAINFORGE_METRICS_PORT: one bound."""
    from trainforge.core.contract import MAX_PORT
    from trainforge.stack.jobs import JobModel
    from trainforge.training import contract

    port = next(s for s in settings(TrainConfig) if s.flag == "--metrics-port")
    limits = [m.le for m in JobModel.model_fields["metrics_port"].metadata if hasattr(m, "le")]
    assert port.le == MAX_PORT == 65535 and limits == [MAX_PORT]
    monkeypatch.setenv(contract.METRICS_PORT, str(MAX_PORT + 1))
    with pytest.raises(contract.ContractError, match="TRAINFORGE_METRICS_PORT='65536'"):
        contract.job_env()


def test_the_hang_timeout_bound_is_one_the_job_model_and_runtime_share(monkeypatch) -> None:
    """--hang-timeout 1e20 overflowed the process group's timedelta (a traceback): hangTimeout,
    --hang-timeout and TRAINFORGE_HANG_TIMEOUT now share one upper bound."""
    from trainforge.stack.jobs import JobModel
    from trainforge.training import contract
    from trainforge.training.timeouts import MAX_HANG_TIMEOUT_S

    hang = next(s for s in settings(TrainConfig) if s.flag == "--hang-timeout")
    limits = [m.le for m in JobModel.model_fields["hang_timeout"].metadata if hasattr(m, "le")]
    assert hang.le == MAX_HANG_TIMEOUT_S and limits == [MAX_HANG_TIMEOUT_S]
    monkeypatch.setenv(contract.HANG_TIMEOUT, "1e20")
    with pytest.raises(contract.ContractError, match="TRAINFORGE_HANG_TIMEOUT='1e20'"):
        contract.job_env()
