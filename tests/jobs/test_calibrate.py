"""`trainforge calibrate RUN_DIR` on a recorded summary.

tests/jobs/data/summary-cpu-gpt.json is the summary.json of a real run of the runtime on this
project's 2-core CPU VM (2026-11-27, the runtime with steady-state rates):

    python -m trainforge.training --model gpt --layers 2 --d-model 64 --heads 4 --seq-len 64 \
        --vocab-size 512 --batch-size 8 --dataset-size 256 --steps 20 --log-every 10 \
        --output-dir /tmp/est/run1 --run-name cpu-gpt-small

A CPU run cannot calibrate GPU facts and is refused. To exercise the arithmetic on the GPU
path, one test relabels that recording as an A10G run (device fields only): those figures
are NOT a GPU measurement, and nothing here writes the repository's calibration file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainforge.cli import main as cli_main
from trainforge.core.errors import JobConfigError
from trainforge.jobs.estimate import estimate, facts
from trainforge.jobs.estimate.calibrate import CalibrationError, calibrate
from trainforge.training import gpus

from .test_estimate import A10G, job

RECORDED = Path(__file__).with_name("data") / "summary-cpu-gpt.json"


def run_dir(tmp_path: Path, **changes) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    summary = json.loads(RECORDED.read_text())
    summary.update(changes)
    (d / "summary.json").write_text(json.dumps(summary))
    return d


def test_a_cpu_run_is_refused(tmp_path, capsys):
    d = tmp_path / "cpu"
    d.mkdir()
    shutil.copy(RECORDED, d / "summary.json")
    target = tmp_path / "calibration.json"
    assert cli_main(["calibrate", str(d), "--file", str(target)]) == 2
    err = capsys.readouterr().err
    assert "a cpu run; calibration needs a GPU run" in err and "Traceback" not in err
    assert not target.exists()


def test_a_missing_summary_names_the_file(tmp_path, capsys):
    assert cli_main(["calibrate", str(tmp_path / "nowhere")]) == 2
    assert "summary.json: no such file" in capsys.readouterr().err


def test_a_gpu_run_records_its_mfu_with_its_provenance(tmp_path, capsys):
    d = run_dir(
        tmp_path,
        device="cuda",
        device_name="NVIDIA A10G",
        precision="bfloat16",
        peak_memory_allocated_bytes=9 * 2**30,
    )
    target = tmp_path / "calibration.json"
    target.write_text(json.dumps({"version": 1, "gpus": {}}))
    assert cli_main(["calibrate", str(d), "--file", str(target)]) == 0
    out = capsys.readouterr().out
    recorded = json.loads(RECORDED.read_text())
    # the steady windows' rate, never the whole run's (start-up and compilation included)
    steady = recorded["steady"]["samples_per_second"]
    assert steady > 1.1 * recorded["whole_run"]["samples_per_second"]
    expected = steady * recorded["flops_per_sample"] / 1 / 70e12
    entry = json.loads(target.read_text())["gpus"]["A10G"]
    assert entry["mfu"] == pytest.approx(expected, rel=1e-3)
    assert entry["measured_over"] == "steady state, steps 11-20 (1 log windows)"
    assert entry["run"] == "cpu-gpt-small" and entry["date"] == "2026-11-27"
    assert entry["previous_mfu"] == facts.MFU["A10G"].mid
    # old vs new, and the memory model against the measured peak
    assert "A10G: expected MFU 33.0% (extrapolated) -> " in out
    assert "measured by run cpu-gpt-small on 2026-11-27" in out
    assert "peak GPU memory (allocated by PyTorch): measured 9.0 GiB, memory model" in out
    # the estimator now plans A10G jobs with it
    e = estimate(job(), A10G, calibration=facts.load_calibration(target))
    assert e.basis.startswith("calibrated: run cpu-gpt-small on 2026-11-27")


def test_dry_run_writes_nothing(tmp_path):
    d = run_dir(tmp_path, device="cuda", device_name="NVIDIA H100 80GB HBM3", precision="float32")
    target = tmp_path / "calibration.json"
    assert cli_main(["calibrate", str(d), "--file", str(target), "--dry-run"]) == 0
    assert not target.exists()
    result = calibrate(d, target)
    assert result["gpu"] == "H100"
    # fp32 jobs run their matmuls in TF32 on GPUs: that is the peak the MFU is against
    recorded = json.loads(RECORDED.read_text())
    tf32 = gpus.GPUS["H100"].tf32_flops
    assert result["entry"]["mfu"] == pytest.approx(
        recorded["steady"]["samples_per_second"] * recorded["flops_per_sample"] / tf32, rel=1e-3
    )


def test_an_unknown_gpu_or_an_mlp_run_is_refused(tmp_path):
    d = run_dir(tmp_path, device="cuda", device_name="NVIDIA B200", precision="bfloat16")
    with pytest.raises(CalibrationError, match="not in trainforge/training/gpus.py"):
        calibrate(d)
    mlp = json.loads(RECORDED.read_text())
    mlp.update(device="cuda", device_name="NVIDIA A10G", precision="bfloat16")
    mlp["config"]["model"] = "mlp"
    (d / "summary.json").write_text(json.dumps(mlp))
    with pytest.raises(CalibrationError, match="an MLP run"):
        calibrate(d)


def test_a_measured_model_becomes_a_declared_model_size(tmp_path, capsys):
    """trainforge.training.measure on a local step -> `calibrate --declared` -> modelSize,
    which the planner then uses as stated (test_estimate: the declared form)."""
    import torch

    from trainforge.jobs.estimate.calibrate import main as calibrate_main
    from trainforge.jobs.spec import parse_job
    from trainforge.training.measure import model_size

    model = torch.nn.Sequential(torch.nn.Linear(16, 8, bias=False), torch.nn.ReLU(),
                                torch.nn.Linear(8, 1, bias=False))  # fmt: skip
    m = model_size(model, torch.randn(32, 16), out_dir=tmp_path)
    assert m["parameters"] == 16 * 8 + 8
    # forward 2 x (16x8 + 8x1) per sample, backward twice that (input and weight gradients;
    # the first layer's input needs none, which FlopCounterMode knows)
    assert m["flopsPerSample"] == 2 * (16 * 8 + 8) + 2 * (16 * 8) + 2 * 2 * 8
    # saved for backward, each storage once, no parameters: the input (16 floats) and the
    # ReLU's output (8), which is also the second Linear's input
    assert m["activationBytesPerSample"] == (16 + 8) * 4
    assert all(p.grad is None for p in model.parameters())
    assert calibrate_main(["--declared", str(tmp_path)]) == 0
    block = capsys.readouterr().out
    import yaml

    size = yaml.safe_load(block)["modelSize"]
    job = parse_job({"name": "x", "team": "t", "pool": "p", "image": "r/i:1",
                     "entrypoint": {"module": "m"}, "modelSize": size})  # fmt: skip
    assert job.model_size.declared and job.model_size.parameters == 136
    assert calibrate_main(["--declared", str(tmp_path / "nope")]) == 2


@pytest.mark.parametrize(
    "extra", [["--file", "cal.json"], ["--dry-run"], ["--file", "cal.json", "--dry-run"]]
)
def test_declared_with_file_or_dry_run_is_refused_not_ignored(tmp_path, capsys, extra):
    """`calibrate --declared` prints a block and writes nothing; --file and --dry-run were
    silently ignored with it. Refused in one line naming the flags, exit 2, nothing read."""
    from trainforge.jobs.estimate.calibrate import main as calibrate_main

    size = {"parameters": 136, "flopsPerSample": 816.0, "activationBytesPerSample": 96,
            "tokensPerSample": 1}  # fmt: skip
    (tmp_path / "model_size.json").write_text(json.dumps(size))
    assert calibrate_main(["--declared", str(tmp_path)]) == 0  # alone: prints the block
    assert "parameters: 136" in capsys.readouterr().out
    given = [f for f in extra if f.startswith("--")]
    assert calibrate_main(["--declared", str(tmp_path), *extra]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"trainforge calibrate: {' and '.join(given)} with --declared: ")
    assert not (tmp_path / "cal.json").exists()


def test_a_summary_without_steady_rates_is_refused(tmp_path, capsys):
    """A summary from before the steady-state rates (its samples/s includes compilation) or
    of a run with no steady window cannot calibrate: it would understate MFU."""
    gpu = {"device": "cuda", "device_name": "NVIDIA A10G", "precision": "bfloat16"}
    d = run_dir(tmp_path, **gpu, steady=None)
    assert cli_main(["calibrate", str(d), "--file", str(tmp_path / "c.json")]) == 2
    assert "no steady-state rates (written by a runtime before they existed" in (
        capsys.readouterr().err
    )
    recorded = json.loads(RECORDED.read_text())
    shutil.rmtree(d)
    d = run_dir(tmp_path, **gpu, steady={**recorded["steady"], "windows": 0})
    with pytest.raises(CalibrationError, match="no steady log window"):
        calibrate(d)


def test_the_recorded_mfu_is_the_steady_state_s_not_the_whole_run_s(tmp_path):
    """Rates scaled up (the CPU recording's MFU on a GPU rounds to 0): steady 4x the whole."""
    recorded = json.loads(RECORDED.read_text())
    fast = {**recorded["steady"], "samples_per_second": 4000.0}
    d = run_dir(tmp_path, device="cuda", device_name="NVIDIA A10G", precision="bfloat16",
                samples_per_second=4000.0, steady=fast,
                whole_run={**recorded["whole_run"], "samples_per_second": 1000.0})  # fmt: skip
    entry = calibrate(d)["entry"]
    assert entry["mfu"] == pytest.approx(4000.0 * recorded["flops_per_sample"] / 70e12, rel=1e-3)
    assert entry["mfu"] > 3 * 1000.0 * recorded["flops_per_sample"] / 70e12  # not the whole run


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\xff{", "not UTF-8 text (not a summary.json)"),
        (b"[]", "not a summary.json (a JSON object)"),
    ],
)
def test_a_summary_that_is_not_one_is_one_line(tmp_path, capsys, content, why):
    d = tmp_path / "run"
    d.mkdir()
    (d / "summary.json").write_bytes(content)
    assert cli_main(["calibrate", str(d)]) == 2
    assert capsys.readouterr().err == f"trainforge calibrate: {d / 'summary.json'}: {why}\n"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "not JSON (Expecting property name enclosed in double quotes: line 1 "),
        (b"\xff\xfe", "not UTF-8 text"),
        (b"[1]", "not a calibration file (no gpus mapping)"),
        (b'{"version": 1, "gpus": {"A10G": {"mfu": "high"}}}', "gpus.A10G: no numeric mfu"),
    ],
)
def test_a_broken_calibration_file_is_one_line_in_calibrate_and_the_estimate(
    tmp_path, capsys, content, why
):
    """The user's calibration file is read by every estimate (so every plan and preview of a
    stack with GPU jobs): a broken one was a JSONDecodeError traceback from all of them."""
    target = tmp_path / "calibration.json"
    target.write_bytes(content)
    d = run_dir(tmp_path, device="cuda", device_name="NVIDIA A10G", precision="bfloat16")
    assert cli_main(["calibrate", str(d), "--file", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trainforge calibrate: calibration file {target}: {why}")
    assert err.endswith("fix it or remove it\n") and len(err.splitlines()) == 1
    assert target.read_bytes() == content  # not overwritten
    with pytest.raises(facts.CalibrationFileError) as e:
        facts.load_calibration(target)
    assert isinstance(e.value, JobConfigError)  # the plan reports it as a configuration error


def test_a_broken_user_calibration_file_stops_a_plan_in_one_line(tmp_path, monkeypatch):
    """The dev stack plans a GPU job; its estimate reads $XDG_CONFIG_HOME's calibration."""
    xdg = tmp_path / "xdg"
    (xdg / "trainforge").mkdir(parents=True)
    (xdg / "trainforge" / "calibration.json").write_text("{not json")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "trainforge", "plan", "--stack", "dev", "--report",
         str(tmp_path / "r.txt")],
        cwd=root, capture_output=True, text=True, timeout=300,
        env={**os.environ, "XDG_CONFIG_HOME": str(xdg)},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert f"calibration file {xdg / 'trainforge' / 'calibration.json'}: not JSON" in proc.stderr
