"""Output the docs quote is what trainforge prints: configuration errors and plan sections.

tests/test_docs_run.py runs the docs' commands but reads no output; these lines are what a
user compares their own error with, so each is reproduced: the shipped stack with the one
mistake the doc describes, planned offline, and the doc's line (its `...` standing for text
left out) found in the error, piece by piece and in order. A quoted plan section is compared
with the section the plan computes, and the doc must name the flag that shows it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from tests.conftest import fake_aws, shipped_plan

ROOT = Path(__file__).resolve().parents[1]


def _p5_nowhere(cfg: dict[str, Any]) -> None:
    cfg["trainforge:jobs"][1]["pool"] = "p5-nowhere"


def _cpu_4_on_gpu_pool(cfg: dict[str, Any]) -> None:
    job = cfg["trainforge:jobs"][0]
    job.update(pool="gpu-workloads", cpu="4", memory="20Gi")  # two shortfalls on each type


def _8_workers_on_p4d(cfg: dict[str, Any]) -> None:
    cfg["trainforge:jobs"][0].update(team="llm", pool="p4d-reserved", workers=8)


def _3_workers_over_pool_limit(cfg: dict[str, Any]) -> None:
    cfg["trainforge:jobs"][0]["workers"] = 3
    pool = next(p for p in cfg["trainforge:nodePools"] if p["name"] == "gpu-workloads")
    pool["limits"]["gpus"] = 8
    vision = next(t for t in cfg["trainforge:teams"] if t["name"] == "vision")
    vision["quota"].update(gpus="8", pools={"gpu-workloads": {"gpus": 8}})


def _pool_limit_under_one_node(cfg: dict[str, Any]) -> None:
    pool = next(p for p in cfg["trainforge:nodePools"] if p["name"] == "gpu-workloads")
    pool["limits"]["gpus"] = 2


# (doc, how the quoted line starts, stack, the mistake)
CASES: list[tuple[str, str, str, Callable[[dict[str, Any]], None]]] = [
    ("README.md", "trainforge:jobs[1] (gpt-small-fsdp).pool: got 'p5-nowhere'", "dev", _p5_nowhere),
    (
        "docs/rehearsals.md",
        "trainforge:jobs[0] (mnist-ddp).cpu: got '4'",
        "dev",
        _cpu_4_on_gpu_pool,
    ),
    (
        "docs/rehearsals.md",
        "trainforge:jobs[0] (gpt-350m-fsdp).workers: got 8",
        "prod",
        _8_workers_on_p4d,
    ),
    (
        "docs/rehearsals.md",
        "trainforge:jobs[0] (gpt-350m-fsdp).workers: got 3",
        "prod",
        _3_workers_over_pool_limit,
    ),
    (
        "docs/rehearsals.md",
        "trainforge:nodePools[1].limits.gpus: got 2",
        "prod",
        _pool_limit_under_one_node,
    ),
]


def quoted_line(doc: str, start: str) -> str:
    lines = [ln for ln in (ROOT / doc).read_text().splitlines() if ln.startswith(start)]
    assert len(lines) == 1, f"{doc}: expected one line starting {start!r}, found {lines}"
    return lines[0]


def planned_error(tmp_path: Path, stack: str, mistake: Callable[[dict[str, Any]], None]) -> str:
    for name in ("Pulumi.yaml", "__main__.py", f"Pulumi.{stack}.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    path = tmp_path / f"Pulumi.{stack}.yaml"
    doc = yaml.safe_load(path.read_text())
    mistake(doc["config"])
    path.write_text(yaml.safe_dump(doc))

    from trainforge.plan import core
    from trainforge.plan.runner import find_config_error

    try:
        core.plan_project(tmp_path, stack, standins=False)
    except Exception as e:  # noqa: BLE001 - the config error is what the test reads
        err = find_config_error(e)
        assert err is not None, f"not a configuration error: {e!r}"
        return str(err)
    raise AssertionError(f"the plan of {stack} with the mistake passed")


@pytest.mark.parametrize(("doc", "start", "stack", "mistake"), CASES, ids=[c[1] for c in CASES])
def test_quoted_error_is_what_the_plan_prints(tmp_path, doc, start, stack, mistake):
    line = quoted_line(doc, start)
    error = planned_error(tmp_path, stack, mistake)
    pos = 0
    for piece in (p.strip() for p in line.split("...")):
        if not piece:
            continue
        found = error.find(piece, pos)
        assert found >= 0, f"{doc} quotes {piece!r}; the plan prints:\n{error}"
        pos = found + len(piece)


# Errors the docs quote inline, in backticks, inside a sentence: (doc, how the quote starts,
# the index `[N]` stands for, stack, the mistake)
INLINE: list[tuple[str, str, str, str, Callable[[dict[str, Any]], None]]] = [
    (
        "docs/troubleshooting.md",
        "trainforge:jobs[N] (mnist-ddp).cpu: got '4'",
        "0",
        "dev",
        _cpu_4_on_gpu_pool,
    ),
]


def inline_quote(doc: str, start: str) -> str:
    text = " ".join((ROOT / doc).read_text().split())  # a quote may wrap over lines
    quotes = [q for q in text.split("`")[1::2] if q.startswith(start)]
    assert len(quotes) == 1, f"{doc}: expected one `{start}...` quote, found {quotes}"
    return quotes[0]


@pytest.mark.parametrize(
    ("doc", "start", "index", "stack", "mistake"), INLINE, ids=[c[1] for c in INLINE]
)
def test_inline_quoted_error_is_what_the_plan_prints(tmp_path, doc, start, index, stack, mistake):
    quote = inline_quote(doc, start).replace("[N]", f"[{index}]")
    error = planned_error(tmp_path, stack, mistake)
    pos = 0
    for piece in (p.strip() for p in quote.split("...")):
        if not piece:
            continue
        found = error.find(piece, pos)
        assert found >= 0, f"{doc} quotes {piece!r}; the plan prints:\n{error}"
        pos = found + len(piece)


def _three_mistakes(cfg: dict[str, Any]) -> None:
    pool = cfg["trainforge:nodePools"][0]
    pool["consolidateAftr"] = pool.pop("consolidateAfter")
    cfg["trainforge:endpoint"]["publicAccessCidrs"] = ["0.0.0.0/0"]
    cfg["trainforge-policy:waivers"][0]["rule"] = "TF_COST_JOB_CAPP"


def test_configuration_md_example_is_what_the_plan_prints(tmp_path):
    """docs/configuration.md's example of every problem reported at once, line by line."""
    doc = (ROOT / "docs/configuration.md").read_text()
    block = doc.split("```\ninvalid stack configuration", 1)[1].split("```", 1)[0]
    lines = [
        "invalid stack configuration" + ln if i == 0 else ln
        for i, ln in enumerate(block.splitlines())
    ]
    error = planned_error(tmp_path, "prod", _three_mistakes)
    assert len(lines) == len(error.splitlines()), error
    for want, got in zip(lines, error.splitlines(), strict=True):
        pos = 0
        for piece in (p.strip() for p in want.split("...")):
            found = got.find(piece, pos) if piece else pos
            assert found >= 0, f"docs/configuration.md quotes {want!r}; the plan prints {got!r}"
            pos = found + len(piece)


def test_performance_md_estimate_is_the_prod_plans_section():
    """docs/performance.md quotes the prod plan's "Memory per GPU and expected duration"
    section and says where a user finds it (the full report, not the verdict screen)."""

    doc = (ROOT / "docs/performance.md").read_text()
    intro, block = doc.split("```\nMemory per GPU and expected duration", 1)
    assert "--full" in intro.rstrip().rsplit("\n\n", 1)[-1], (
        "the doc must name the flag that prints it"
    )
    lines = ["Memory per GPU and expected duration" + block.split("```", 1)[0]]
    lines = [ln for ln in lines[0].splitlines() if ln.strip()]
    result = shipped_plan("prod")
    section = next(s for s in result.sections if s.title.startswith(lines[0].rstrip(":")))
    printed = [section.title.rstrip(":") + ":", *section.lines]
    for want in lines:
        pieces = [p for p in want.split("...") if p.strip()]
        assert any(all(p.strip() in got for p in pieces) for got in printed), (
            f"docs/performance.md line not printed by the plan: {want!r}\nplan: {printed}"
        )


def test_images_md_pod_lines_name_what_the_platform_renders():
    """docs/images.md's first lines of a pod: the MLflow URI the platform sets and the S3
    layout the jobs layer renders (bucket/<team>/checkpoints/<job>)."""
    from trainforge.jobs.entrypoint import s3_uri
    from trainforge.platform.monitoring import MLFLOW_TRACKING_URI

    doc = (ROOT / "docs/images.md").read_text()
    block = doc.split("```\ntrainforge runtime: ", 1)[1].split("```", 1)[0]
    mlflow = next(ln for ln in block.splitlines() if ln.startswith("MLflow: on "))
    assert mlflow.split()[2] == MLFLOW_TRACKING_URI, mlflow
    s3 = next(ln for ln in block.splitlines() if ln.startswith("S3 mirror: on "))
    target = SimpleNamespace(checkpoint_prefix="llm/", checkpoint_bucket="BUCKET")
    want = s3_uri(target, SimpleNamespace(name="gpt-13b")).split("BUCKET", 1)[1]
    assert s3.split()[3].endswith(want), s3


def test_training_md_report_example_is_the_recorded_runs_report(tmp_path):
    """docs/training.md shows `trainforge report` of tests/fixtures/recorded-run: every line."""
    from trainforge import report

    run = tmp_path / "run"
    shutil.copytree(ROOT / "tests" / "fixtures" / "recorded-run", run)
    printed = report.summary_text(report.load_run(run)).splitlines()
    doc = (ROOT / "docs/training.md").read_text()
    block = doc.split("```\nrun recorded-mlp", 1)[1].split("```", 1)[0]
    lines = ["run recorded-mlp" + ln if i == 0 else ln for i, ln in enumerate(block.splitlines())]
    assert len(lines) == len(printed), printed
    for want, got in zip(lines, printed, strict=True):
        pieces = [p for p in want.split("...") if p]
        assert all(p in got for p in pieces), f"docs/training.md: {want!r}; report: {got!r}"


def test_training_md_metrics_port_is_the_one_pods_serve():
    """docs/training.md names the port a job's PodMonitor scrapes: the job model's default."""
    from trainforge.jobs.spec import JobSpec

    doc = (ROOT / "docs/training.md").read_text()
    para = doc.split("Metrics endpoint (", 1)[1].split(":\n", 1)[0]
    port = JobSpec.model_fields["metrics_port"].default
    assert f"serve it on {port}" in para, para


def _shape(line: str) -> str:
    """A printed line with its figures masked (a rate, a loss, a time, a step count, a date)."""
    return re.sub(r"\d[\d,]*(?:\.\d+)?(?:e[-+]\d+)?", "N", line.strip())


def _lines_match(want: str, got: str) -> bool:
    """The doc's line (its `...` standing for text left out) is the printed one, figures masked."""
    pieces, pos = [_shape(p) for p in want.split("...")], 0
    if not _shape(got).startswith(pieces[0]):
        return False
    for piece in pieces:
        found = _shape(got).find(piece, pos)
        if found < 0:
            return False
        pos = found + len(piece)
    return not pieces[-1] or _shape(got).endswith(pieces[-1])


def test_training_md_output_is_what_rank_0_prints(tmp_path):
    """docs/training.md, "Output": every line of its example is a line rank 0 prints, in the
    order printed (a `...` line stands for the lines left out; the others follow each other),
    figures aside; and its summary line's figures can be one run's: the goodput (productive
    seconds over the wall time since the attempt started) is at most the loop's seconds over
    the set-up's and the loop's together (it read 97.2% after 3.1 s of set-up and a 4.9 s loop).
    One process of the doc's flags, shortened to 20 steps (~3 CPU s)."""
    from tests.training.runtime_helpers import env

    doc = (ROOT / "docs/training.md").read_text()
    block = doc.split("```\ntrainforge: ddp mlp on ", 1)[1].split("```", 1)[0]
    want = [
        "trainforge: ddp mlp on " + ln if i == 0 else ln for i, ln in enumerate(block.splitlines())
    ]
    args = ["--strategy", "ddp", "--model", "mlp", "--dataset-size", "1024", "--steps", "20"]
    proc = subprocess.run(
        [sys.executable, "-m", "trainforge.training", *args, "--log-every", "10"],
        cwd=tmp_path,  # the default --output-dir, runs/<run-name>, is under it
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    printed = out.splitlines()
    at, skip = -1, True  # before the first line: any printed lines may come first
    for line in want:
        if line.strip() == "...":
            skip = True
            continue
        after = range(at + 1, len(printed) if skip else min(at + 2, len(printed)))
        at = next((i for i in after if _lines_match(line, printed[i])), -2)
        assert at >= 0, f"docs/training.md: {line!r} is not the next line printed:\n{out}"
        skip = False
    summary = next(ln for ln in want if ln.startswith("summary: steps"))
    setup = float(re.search(r"start-up: setup ([\d.]+)s", summary)[1])
    loop = float(re.search(r"\| ([\d.]+)s \| goodput", summary)[1])
    goodput = float(re.search(r"goodput ([\d.]+)%", summary)[1]) / 100
    assert goodput <= (loop + 0.05) / (setup - 0.05 + loop - 0.05), summary


def test_checkpointing_md_s3_errors_are_what_the_mirror_says(monkeypatch):
    """docs/checkpointing.md quotes the three errors of a bad `--checkpoint-s3` before training
    starts: a missing bucket and a role that may not list it (S3 as moto answers, IAM enforced
    for the denied one), and no boto3; each is the mirror's message, word for word, and the
    boto3 pin it names is the one requirements.lock installs."""
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    from moto.core import set_initial_no_auth_action_count

    from trainforge.training.checkpoint import CheckpointError
    from trainforge.training.s3_mirror import S3Mirror

    doc = (ROOT / "docs/checkpointing.md").read_text()
    quoted = [ln for ln in doc.splitlines() if ln.startswith("--checkpoint-s3 ")]
    assert len(quoted) == 3, quoted
    uri = quoted[0].split()[1].rstrip(":")
    bucket = uri.removeprefix("s3://").split("/", 1)[0]
    fake_aws(monkeypatch)

    def said() -> str:
        with pytest.raises(CheckpointError) as e:
            S3Mirror(uri, log=lambda _: None)
        return str(e.value)

    printed = []
    with moto.mock_aws():
        printed.append(said())  # no bucket yet

        @set_initial_no_auth_action_count(3)  # the three set-up calls run unauthenticated
        def denied() -> None:
            boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=bucket)
            iam = boto3.client("iam", region_name="us-east-1")
            iam.create_user(UserName="no-perms")
            key = iam.create_access_key(UserName="no-perms")["AccessKey"]
            monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
            monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
            printed.append(said())

        denied()
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 -> ImportError
    printed.append(said())
    assert printed == quoted
    lock = (ROOT / "requirements.lock").read_text()
    pin = re.search(r"^boto3==(\S+)", lock, re.M)
    assert pin and f"(boto3=={pin[1]})" in quoted[2]


def test_performance_md_worked_example_figures_are_the_prod_plans():
    """docs/performance.md's worked example computes by hand what the prod plan estimates for
    gpt-350m-fsdp: each MiB of its memory table (judged on the pool), the FLOPs, and the step
    and duration on the type the pool launches for the job (its heading named g5.12xlarge,
    whose 4 GPUs the estimate does not time it on)."""
    doc = (ROOT / "docs/performance.md").read_text()
    part = doc.split("### Worked example: ", 1)[1].split("\n### ", 1)[0]
    text = " ".join(part.split())
    (est,) = next(
        s for s in shipped_plan("prod").sections if s.title.startswith("Memory per GPU")
    ).data
    run = est["runOn"]
    assert part.splitlines()[0].endswith(f"`{est['job']}` on {run['instanceType']}"), part[:80]

    rows = dict(re.findall(r"^\| ([a-z ]+) \| .* \| ([\d,.]+) \|$", part, re.M))
    assert len(rows) == 7, rows
    for name, mib in rows.items():
        assert mib == f"{est['memory_bytes'][name] / 2**20:,.1f}", (name, mib)
    total, capacity = est["memory_total_bytes"], est["memory_capacity_bytes"]
    share = f"{total / 2**30:.1f} GiB of {capacity / 2**30:.1f} GiB ({100 * total / capacity:.0f}%)"
    assert f"**{share}**" in text

    per_sample = est["flops_per_step"] / est["samples_per_step"]
    assert (
        f"= {per_sample / 1e12:.2f} TFLOP per sample) x {est['samples_per_step']} samples" in text
    )
    assert f"= {est['flops_per_step'] / 1e12:.1f} TFLOP." in text
    low, high = run["step_seconds_range"]
    step = f"**{run['step_seconds']:.2f} s per step** ({low:.2f} s with the best MFU"
    assert step in text and f"to {high:.2f} s with the worst MFU" in text
    hours = [run["duration_seconds"] / 3600, *(s / 3600 for s in run["duration_range"])]
    assert f"**{hours[0]:.1f} h ({hours[1]:.1f}-{hours[2]:.1f} h)**" in text


def test_rehearsals_md_holds_for_quota_is_what_the_prod_plan_prints():
    """docs/rehearsals.md quotes what a pool holds for the teams' quotas, and which type the
    plan assumed (jobs/quota.py `capacity_words`): the prod plan's Scheduling rehearsal line."""
    doc = " ".join((ROOT / "docs/rehearsals.md").read_text().split())
    quoted = re.search(r"`(holds for quota: [^`]+)`", doc)
    assert quoted, "docs/rehearsals.md names no 'holds for quota' line"
    section = next(
        s for s in shipped_plan("prod").sections if s.title.startswith("Scheduling rehearsal")
    )
    assert any(ln.strip() == quoted[1] for ln in section.lines), (quoted[1], section.lines)


def test_checkpointing_md_ctrl_c_line_is_what_the_runtime_says(tmp_path, monkeypatch):
    """docs/checkpointing.md quotes the exit line of a Ctrl-C (`run-local --stack dev
    mnist-ddp`, stopped 9 steps after its step_001400): the runtime's words for it
    (`Checkpointing.interrupted` inside `exits.exit_line`), word for word up to the bracket.
    The doc once promised a checkpoint on Ctrl-C that the runtime never saved."""
    from trainforge.training import exits
    from trainforge.training.checkpoint import Checkpointing
    from trainforge.training.config import CheckpointConfig

    doc = " ".join((ROOT / "docs/checkpointing.md").read_text().split())
    quoted = re.search(
        r"`(trainforge exit: interrupted code=130 \(rank 0, step \d+\): [^`]*)`", doc
    )
    assert quoted, "docs/checkpointing.md quotes no Ctrl-C exit line"
    step = int(re.search(r"step (\d+)\)", quoted[1])[1])
    saved = int(re.search(r"step_(\d+):", quoted[1])[1])
    lost = int(re.search(r"the (\d+) step\(s\) trained", quoted[1])[1])
    monkeypatch.chdir(tmp_path)
    ckpt = Checkpointing(CheckpointConfig(directory="runs/mnist-ddp/checkpoints"))
    try:
        ckpt.manager.last_saved_step = saved
        detail = ckpt.interrupted(saved + lost)
    finally:
        if ckpt.preemption is not None:
            ckpt.preemption.close()
    line = exits.exit_line(exits.INTERRUPTED, rank=0, step=step, detail=detail)
    assert quoted[1].removesuffix(" [...]") == line.split(" [")[0]


def test_jobs_md_own_code_ctrl_c_line_is_what_the_wrapper_says(tmp_path, monkeypatch):
    """docs/jobs.md quotes the exit line of your code's Ctrl-C under the wrapper (`run-local
    saver.py`, which saved step_5.pt): the wrapper's words (`layout.ctrl_c_detail` inside
    `exits.exit_line`, as usercode.run prints it), word for word up to the bracket, from a
    checkpoint directory holding that file. The line once said only `KeyboardInterrupt`."""
    from trainforge.training import exits
    from trainforge.training.layout import ctrl_c_detail

    doc = " ".join((ROOT / "docs/jobs.md").read_text().split())
    quoted = re.search(r"`(trainforge exit: interrupted code=130 \(rank 0\): [^`]*)`", doc)
    assert quoted, "docs/jobs.md quotes no Ctrl-C exit line of your code"
    saved = re.search(r"saved is (\S+): the next run", quoted[1])
    assert saved, quoted[1]
    monkeypatch.chdir(tmp_path)
    path = Path(saved[1])
    path.parent.mkdir(parents=True)
    path.write_bytes(b"x")
    detail = ctrl_c_detail(str(path.parent))
    line = exits.exit_line(exits.INTERRUPTED, rank=0, step=None, detail=detail)
    assert quoted[1].removesuffix(" [...]") == line.split(" [")[0]
