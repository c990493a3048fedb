"""`trainforge report RUN_DIR`: a PNG and a text summary from a recorded run's metrics file
(tests/fixtures/recorded-run: one crash at step 70, resumed from the step-40 checkpoint)."""

from __future__ import annotations

import json
import shutil
import struct
import sys

import pytest

from tests.conftest import ROOT
from trainforge import cli, demo, report

RECORDED = ROOT / "tests" / "fixtures" / "recorded-run"


@pytest.fixture
def run_dir(tmp_path):
    out = tmp_path / "run"
    shutil.copytree(RECORDED, out)
    return out


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_report_plots_a_recorded_run(run_dir, capsys):
    assert cli.main(["report", str(run_dir)]) == 0
    png = run_dir / "report.png"
    data = png.read_bytes()
    assert _png_size(data) == (1400, 900)
    assert len(data) > 40_000  # four panels of lines and text, not an empty canvas

    import matplotlib.image
    import numpy as np

    pixels = matplotlib.image.imread(png)[..., :3]
    colours = np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 100
    # the restart line (matplotlib's tab:red, #d62728) is drawn
    red = np.all(np.abs(pixels * 255 - (214, 39, 40)) < 8, axis=-1)
    assert red.sum() > 500

    text = (run_dir / "report.txt").read_text()
    assert text.startswith("run recorded-mlp: 120/120 steps, 1 x cpu, global batch 32")
    assert "loss: 2.3166 at step 10 -> 0.3933 at step 120" in text
    assert "checkpoints: 3 (steps 40, 80, 120)" in text
    # logged every 10th step, no ledger: step 70 is the last logged, not known as the last run
    assert "restarts: 1: after logged step 70, resumed at step 40 (at least 30 steps redone)" in (
        text
    )
    assert "MFU: n/a (CPU)" in text
    # summary.json's elapsed_seconds is the loop alone: not called the attempt's wall time
    assert "last attempt: set-up 2.7s, training loop 0.3s" in text
    assert "wall time" not in text
    out = capsys.readouterr().out
    assert text in out and f"wrote {run_dir / 'report.txt'} and {png}" in out


def test_the_png_is_written_where_it_says(run_dir, tmp_path, capsys):
    """--png PATH without a suffix: matplotlib appended '.png' (wrote PATH.png, printed
    'wrote ... and PATH'); a folder or a file in the way were OSError lines without the flag."""
    png = tmp_path / "plot"
    assert cli.main(["report", str(run_dir), "--png", str(png)]) == 0
    assert f"and {png}\n" in capsys.readouterr().out
    assert _png_size(png.read_bytes()) == (1400, 900)
    assert not (tmp_path / "plot.png").exists()
    (run_dir / "report.txt").unlink()
    assert cli.main(["report", str(run_dir), "--png", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"trainforge report: --png {tmp_path}: a folder; expected a file to write the plot to\n"
    )
    assert cli.main(["report", str(run_dir), "--png", str(png / "x.png")]) == 2
    assert capsys.readouterr().err == (
        f"trainforge report: --png {png / 'x.png'}: {png} is a file, not a folder\n"
    )
    assert not (run_dir / "report.txt").exists()  # refused before writing anything


def test_a_metrics_line_with_bytes_that_are_not_utf8_is_skipped(run_dir, capsys):
    """A crash can leave a half-written record: a UnicodeDecodeError traceback before."""
    metrics = run_dir / "metrics.jsonl"
    metrics.write_bytes(metrics.read_bytes() + b'{"step": 1\xff\xfe\n')
    assert cli.main(["report", str(run_dir)]) == 0
    assert "loss: 2.3166 at step 10 -> 0.3933 at step 120" in capsys.readouterr().out


def test_run_restarts_are_read_from_the_steps(run_dir):
    run = report.load_run(run_dir)
    assert [len(a.records) for a in run.attempts] == [7, 8]
    assert run.attempts[1].resumed_from == 40 and run.restarts == 1
    assert run.checkpoints == [40, 80, 120]


def test_without_matplotlib_the_text_summary_is_still_written(run_dir, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert report.main([str(run_dir)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "matplotlib is not installed" in err and "pip install 'trainforge[report]'" in err
    assert (run_dir / "report.txt").read_text().startswith("run recorded-mlp")
    assert not (run_dir / "report.png").exists()


def test_a_folder_without_metrics_is_a_one_line_error(tmp_path, capsys):
    assert report.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainforge report: RUN_DIR") and "no metrics.jsonl" in err
    assert len(err.strip().splitlines()) == 1


def test_demo_ends_with_the_plots_of_its_runs(run_dir, tmp_path, capsys):
    other = tmp_path / "empty"
    other.mkdir()
    written = demo._plots([run_dir, other])
    assert written == {run_dir: run_dir / "report.png"}
    assert (run_dir / "report.png").is_file()
    captured = capsys.readouterr()
    assert f"wrote {run_dir / 'report.txt'} and {run_dir / 'report.png'}" in captured.out
    assert "no metrics.jsonl" in captured.err


def _ledger(ckpt, attempts):
    (ckpt / ".trainforge").mkdir(parents=True)
    doc = {"version": 1, "started_at": 0.0, "attempts": attempts, "productive_by_step": {}}
    (ckpt / ".trainforge" / "run.json").write_text(json.dumps(doc))


NODE_LOST = {
    "reason": "node_lost",
    "code": None,
    "rank": 1,
    "step": None,
    "detail": "rank(s) 1 left no exit record: killed (SIGKILL/OOM killer) or node lost",
}


def test_a_plain_script_without_metrics_gets_ledger_and_checkpoints(tmp_path, capsys):
    """What examples/plain leaves without its metrics line: checkpoint files and the ledger
    the launcher's wrapper keeps. No empty plot: the missing panels are named."""
    run = tmp_path / "runs" / "plain"
    ckpt = run / "checkpoints"
    ckpt.mkdir(parents=True)
    for step in (10, 20, 40):
        (ckpt / f"step_{step}.pt").write_bytes(b"x")
    _ledger(
        ckpt,
        [
            {"attempt": 0, "started_at": 1.0, "finished": False, "exit": NODE_LOST},
            {"attempt": 1, "started_at": 9.0, "finished": True, "exit": None},
        ],
    )
    assert report.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "run plain (finished, per the run ledger)" in out
    assert f"checkpoints: 3 (steps 10, 20, 40) in {ckpt}" in out
    assert "attempts: 2 (run ledger; the last finished)" in out
    assert "restarts: 1: attempt 0 ended with node_lost (rank 1): rank(s) 1 left no" in out
    assert "not shown: metrics: no " in out and "metrics.jsonl" in out
    assert not (run / "report.png").exists()


def test_a_diverged_loss_is_named_not_reported_missing(tmp_path, capsys):
    """The runtime with --lr 1e12 logs `"loss": NaN` at step 5 and stops (user_error). The
    report printed no loss line and "not shown: loss panel: no 'loss' in metrics.jsonl",
    though the file has one: the loss that stopped the run. The record is the runtime's line
    as `run-local --strategy ddp --model mlp --lr 1e12 --log-every 5` wrote it (trimmed)."""
    run = tmp_path / "runs" / "diverged"
    run.mkdir(parents=True)
    line = (
        '{"step": 5.0, "loss": NaN, "lr": 600000000000.0, "samples_per_second": 3212.4, '
        '"step_seconds": 0.0199, "startup_window": 1.0, "total_steps": 30.0, "progress": 0.1667}'
    )
    (run / "metrics.jsonl").write_text(line + "\n")
    assert report.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "loss not finite: nan at step 5, 1 of the 1 logged loss value(s)" in out
    assert "not shown: loss panel: no finite 'loss' (nan at step 5) in metrics.jsonl" in out
    assert "no 'loss' in metrics.jsonl" not in out
    # a finite start, then inf: both said
    first = line.replace("NaN", "0.25").replace('"step": 5.0', '"step": 1.0')
    (run / "metrics.jsonl").write_text(first + "\n" + line.replace("NaN", "Infinity") + "\n")
    assert report.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "loss: 0.2500 at step 1 -> 0.2500 at step 1" in out
    assert "loss not finite: inf at step 5, 1 of the 2 logged loss value(s)" in out


def test_without_a_summary_the_headline_is_the_last_logged_step_not_the_steps_run(tmp_path, capsys):
    """A newcomer's own loop (examples/resumable's, 32 steps, `metrics.log` every 10th step)
    finished: the report's headline said "run mine: 30 steps", the last metrics line's step,
    though the run did 32. Without summary.json that step is all it knows: said as such."""
    run = tmp_path / "runs" / "mine"
    _ledger(run / "checkpoints", [{"attempt": 0, "started_at": 1.0, "finished": True}])
    lines = [{"step": s, "loss": 2.0 - s / 100} for s in (10, 20, 30)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert report.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "run mine: logged up to step 30 (finished, per the run ledger)" in out
    assert "30 steps" not in out
    # with a total: "of N"
    lines[-1]["total_steps"] = 32
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert report.main([str(run)]) == 0
    assert "run mine: logged up to step 30 of 32 (finished" in capsys.readouterr().out


def test_no_plot_says_there_is_no_metrics_file_when_there_is_none(tmp_path, capsys):
    """A plain script's run (a ledger, no metrics.jsonl): "no plot: nothing in metrics.jsonl
    to draw" spoke of a file that is not there; the summary below says "no .../metrics.jsonl"."""
    run = tmp_path / "runs" / "plain"
    _ledger(run / "checkpoints", [{"attempt": 0, "started_at": 1.0, "finished": True}])
    assert report.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("trainforge report: no plot: no metrics.jsonl to draw (wrote the ")
    assert "nothing in metrics.jsonl" not in out


def test_a_run_that_stopped_for_good_says_how_its_last_attempt_ended(tmp_path, capsys):
    """A newcomer's script raises at step 5 on rank 1: the job stops (user_error, exit 1), and
    no next attempt writes that end into run.json (RunLedger.begin_attempt does). The report
    said "(no summary.json: the run has not finished, ...)" and "the last not finished", as
    of a run still going, though each rank's exit record says why it ended."""
    run = tmp_path / "runs" / "stepn"
    ckpt = run / "checkpoints"
    _ledger(ckpt, [{"attempt": 0, "started_at": 1.0, "finished": False, "exit": None}])
    exits_dir = ckpt / ".trainforge" / "exits" / "attempt_0000"
    exits_dir.mkdir(parents=True)
    for rank, reason, code, detail in (
        (0, "peer_lost", 202, "RuntimeError: Connection closed by peer"),
        (1, "user_error", 1, "RuntimeError: boom at step 5"),
    ):
        rec = {"reason": reason, "code": code, "rank": rank, "step": None, "detail": detail}
        (exits_dir / f"rank_{rank:05d}.json").write_text(json.dumps(rec))
    assert report.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "run stepn (its last attempt ended with user_error, per the run ledger)" in out
    assert "attempts: 1 (run ledger; the last ended with user_error (rank 1): RuntimeError: " \
        "boom at step 5 (other ranks: peer_lost))" in out  # fmt: skip
    assert "not finished" not in out
    # an attempt no rank has recorded an end for is still "not finished" (running, or killed)
    for p in exits_dir.iterdir():
        p.unlink()
    assert report.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "the last not finished" in out and "ended with" not in out


def test_a_restart_cause_from_summary_json_is_never_blank(run_dir, capsys):
    """The restart count says 1 but the steps never went back (the old report printed
    "restarts: 1: " and nothing): the cause comes from summary.json's attempts."""
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    kept = [r for r in lines if r["step"] > 70 or r["step"] <= 40]  # no redone steps logged
    for r in kept:
        r["restarts"] = 1 if r["step"] > 70 else 0
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["attempts"] = [
        {"attempt": 0, "resumed_step": None, "last_step": 70, "exit": {
            "reason": "hang", "code": 201, "rank": 1, "step": 71, "detail": "no progress"}},
        {"attempt": 1, "resumed_step": 40, "last_step": 120, "exit": None},
    ]  # fmt: skip
    (run_dir / "summary.json").write_text(json.dumps(summary))
    report.main([str(run_dir)])
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("restarts:"))
    assert (
        line == "restarts: 1: after step 70, resumed at step 40 (30 steps redone), attempt 0 ended "
        "with hang (rank 1, step 71): no progress"
    )  # the ledger's last step of attempt 0 and its resumed step


def _with_steady_rates(run_dir):
    """The recorded run as today's runtime writes it: the summary's steady, whole-loop and
    start-up rates, and each attempt's first window marked start-up in metrics.jsonl."""
    s = json.loads((run_dir / "summary.json").read_text())
    s.update(
        samples_per_second=7452.8,
        tokens_per_second=None,  # an MLP: samples, not tokens
        rates_basis="steady",
        steady={"windows": 7, "from_step": 51, "to_step": 120, "steps": 70, "seconds": 0.3,
                "samples_per_second": 7452.8, "tokens_per_second": None, "mfu": None},
        whole_run={"from_step": 41, "to_step": 120, "steps": 80, "seconds": 0.9,
                   "samples_per_second": 2844.4, "tokens_per_second": None, "mfu": None},
        startup={"windows": [[41, 50]], "seconds": 0.6, "steps": 10, "setup_seconds": 2.7},
    )  # fmt: skip
    (run_dir / "summary.json").write_text(json.dumps(s))
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    out, prev = [], None
    for line in lines:
        r = json.loads(line)
        r["startup_window"] = 1.0 if prev is None or r["step"] <= prev else 0.0
        prev = r["step"]
        out.append(json.dumps(r))
    (run_dir / "metrics.jsonl").write_text("\n".join(out) + "\n")


def test_the_report_shows_the_steady_state_and_the_whole_loop_apart(run_dir, capsys):
    _with_steady_rates(run_dir)
    assert cli.main(["report", str(run_dir)]) == 0
    text = (run_dir / "report.txt").read_text()
    assert (
        "steady state: 7,453 samples/s (steps 51-120, 7 log windows; the "
        "summary's headline)" in text
    )
    assert "whole loop: 2,844 samples/s (start-up included)" in text
    assert "tokens/s" not in text  # the MLP has no tokens: no rate of them anywhere
    assert "start-up: setup 2.7s, steps 41-50 0.6s (left out of the steady state)" in text
    import matplotlib.image
    import numpy as np

    pixels = matplotlib.image.imread(run_dir / "report.png")[..., :3] * 255
    green = np.all(np.abs(pixels - (44, 160, 44)) < 8, axis=-1)  # tab:green, #2ca02c
    assert green.sum() > 400  # the steady line across the panel and the circled windows (763)


def test_a_model_with_tokens_shows_its_tokens_per_s_beside_samples_per_s(run_dir):
    """The same lines for a GPT-like run (16 tokens a sample): tokens/s is where it is known."""
    _with_steady_rates(run_dir)
    s = json.loads((run_dir / "summary.json").read_text())
    for part in ("steady", "whole_run"):
        s[part]["tokens_per_second"] = 16 * s[part]["samples_per_second"]
    (run_dir / "summary.json").write_text(json.dumps(s))
    assert cli.main(["report", str(run_dir)]) == 0
    text = (run_dir / "report.txt").read_text()
    assert "steady state: 7,453 samples/s, 119,245 tokens/s (steps 51-120" in text
    assert "whole loop: 2,844 samples/s, 45,510 tokens/s (start-up included)" in text


def test_a_summary_from_before_steady_rates_adds_no_rate_lines(run_dir):
    assert cli.main(["report", str(run_dir)]) == 0
    text = (run_dir / "report.txt").read_text()
    assert "steady state" not in text and "whole loop" not in text


def test_the_median_throughput_is_over_the_summarys_steady_windows(run_dir):
    """One report, one story: the median line is taken over the windows the summary's steady
    state sums (the last attempt's, start-up left out) and says so; it used to take every
    window, start-up and the failed attempt's included, and sit beside the steady figure."""
    import statistics

    _with_steady_rates(run_dir)
    s = json.loads((run_dir / "summary.json").read_text())
    last = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()][-8:]
    assert last[0]["startup_window"] == 1.0 and last[0]["step"] == 50  # the resumed attempt
    steady = [r["samples_per_second"] for r in last[1:]]
    assert len(steady) == s["steady"]["windows"] == 7
    text = report.summary_text(report.load_run(run_dir))
    line = next(ln for ln in text.splitlines() if ln.startswith("throughput:"))
    assert line == (
        f"throughput: median {report._rate(statistics.median(steady))} samples/s over the "
        "steady state's 7 log windows (steps 51-120)"
    ), line
    step = next(ln for ln in text.splitlines() if ln.startswith("step time:"))
    step_s = [r["step_seconds"] for r in last[1:]]
    assert step.startswith(f"step time: median {statistics.median(step_s) * 1000:,.1f} ms"), step


def test_without_a_summary_the_median_leaves_the_start_up_windows_out(run_dir):
    _with_steady_rates(run_dir)
    (run_dir / "summary.json").unlink()
    text = report.summary_text(report.load_run(run_dir))
    assert "over 13 log windows (start-up windows left out)" in text, text


def test_a_second_run_appended_to_the_folder_is_not_a_restart(tmp_path, capsys):
    """run-local twice with one output directory: metrics.jsonl holds both runs' steps, so the
    step went back, and the report counted a restart ("restarts: 1 ... cause not recorded")
    and drew one, while the run ledger (fresh after the finished first run: c310d77) holds
    none. The ledger is the one source of restarts; the metrics' extra run is said as such."""
    from trainforge.training import exits
    from trainforge.training.ledger import RunLedger

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lines = [json.loads(x) for x in (RECORDED / "metrics.jsonl").read_text().splitlines()]
    first = lines[:7]  # the fixture's first attempt: steps 10-70, one run without a restart
    assert [r["step"] for r in first] == [10, 20, 30, 40, 50, 60, 70]
    ckpt = run_dir / "checkpoints"
    for _ in range(2):  # two runs, each finished, each appending its steps
        ledger = RunLedger(ckpt, rank=0, world_size=1, log=lambda m: None)
        ledger.begin_attempt()
        with (run_dir / "metrics.jsonl").open("a") as f:
            f.writelines(json.dumps(r) + "\n" for r in first)
        ledger.record_exit(exits.SUCCESS, step=70, detail="finished")
    run = report.load_run(run_dir)
    assert len(run.attempts) == 2 and len(run.ledger_attempts) == 1
    assert run.restarts == 0 and report.resumes(run) == []
    assert report.main([str(run_dir)]) == 0
    text = (run_dir / "report.txt").read_text()
    assert "restarts: 0\n" in text and "cause not recorded" not in text
    assert "runs in this folder: 2: metrics.jsonl's steps went back 1 time(s) more than the " \
        "run ledger has restarts" in text  # fmt: skip
    # a third run that fails and is restarted: one restart, after two runs appended before
    for reason in (exits.PEER_LOST, None):
        ledger = RunLedger(ckpt, rank=0, world_size=1, log=lambda m: None)
        ledger.begin_attempt()
        with (run_dir / "metrics.jsonl").open("a") as f:
            f.writelines(json.dumps(r) + "\n" for r in first)
        if reason is not None:
            ledger.record_exit(reason, step=70, detail="lost rank 1")
    run = report.load_run(run_dir)
    assert len(run.attempts) == 4 and len(run.ledger_attempts) == 2
    assert run.restarts == 1 and run.appended_runs == 2 and len(report.resumes(run)) == 1
    assert report.main([str(run_dir)]) == 0
    text = (run_dir / "report.txt").read_text()
    assert "restarts: 1: after logged step 70, resumed at step 40 (at least 30 steps redone), " \
        "attempt 2 ended with peer_lost (rank 0, step 70): lost rank 1" in text  # fmt: skip
    assert "runs in this folder: 3: metrics.jsonl's steps went back 2 time(s)" in text


def test_a_continued_run_is_no_restart_and_a_later_failure_names_its_own_attempt(tmp_path):
    """A finished run continued with more --steps (RunLedger.resumed) is one run: its attempts
    line says so, restarts count only the failure after it, named by the attempt that failed
    (not the finished one before the continuation)."""
    from trainforge.training import exits
    from trainforge.training.ledger import RunLedger

    ckpt = tmp_path / "checkpoints"
    ends = (exits.SUCCESS, exits.PEER_LOST, None)
    for resumed, end in zip((0, 20, 25), ends, strict=True):
        ledger = RunLedger(ckpt, rank=0, world_size=1, log=lambda m: None)
        ledger.begin_attempt()
        ledger.resumed(resumed)
        ledger.current.resumed_step = resumed
        ledger.current.last_step = resumed + 10
        if end is not None:
            ledger.record_exit(end, step=resumed + 10, detail="lost rank 1")
    assert ledger.restarts == 1
    run = report.load_run(tmp_path, ckpt)
    assert run.restarts == 1
    lines = report._attempt_lines(run)
    assert lines[0] == (
        "attempts: 3 (run ledger; attempt 2 continued the finished run from step 10; "
        "the last not finished)"
    )
    assert lines[1].startswith("restarts: 1: ") and "attempt 1 ended with peer_lost" in lines[1]
