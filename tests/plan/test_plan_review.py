"""The PR review: will a replaced job resume, what changes for it by name, against a plan
folder or the deployed state, verdict first."""

from __future__ import annotations

import json
import pathlib

import pytest

from trainforge.plan import ckpt_compat as CC
from trainforge.plan import cli
from trainforge.plan.checks.resume import call_fingerprint
from trainforge.plan.sides import SideError, load_side

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXPORT = ROOT / "tests" / "fixtures" / "deployed" / "prod-stack-export.json"

# the prod job's runtime flags as the plan renders them (Pulumi.prod.yaml, gpt-350m-fsdp)
PROD = [
    "--strategy",
    "fsdp",
    "--model",
    "gpt",
    "--layers",
    "24",
    "--d-model",
    "1024",
    "--heads",
    "16",
    "--seq-len",
    "1024",
    "--vocab-size",
    "32768",
    "--steps",
    "20000",
    "--batch-size",
    "8",
    "--precision",
    "bf16",
    "--compile",
    "--checkpoint-dir",
    "/fsx/checkpoints/vision/gpt-350m-fsdp",
    "--resume",
    "auto",
]
# the dev job's (Pulumi.dev.yaml, gpt-small-fsdp)
DEV = [
    "--strategy",
    "fsdp",
    "--model",
    "gpt",
    "--layers",
    "6",
    "--d-model",
    "384",
    "--heads",
    "6",
    "--seq-len",
    "256",
    "--vocab-size",
    "8192",
    "--steps",
    "5000",
    "--batch-size",
    "16",
    "--checkpoint-dir",
    "/fsx/checkpoints/research/gpt-small-fsdp",
]


def with_flag(args: list[str], flag: str, value: str) -> list[str]:
    out = list(args)
    if flag in out:
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out


def state(args, world=8, **kw) -> CC.JobState:
    return CC.JobState(args, world, flag_dir(args), **kw)


def flag_dir(args) -> str | None:
    return CC.argv_fields(args or []).get("--checkpoint-dir")


def test_seq_len_change_cannot_resume_and_names_the_position_table():
    c = CC.classify(state(PROD), state(with_flag(PROD, "--seq-len", "2048")))
    assert c.verdict == CC.CANNOT and c.blocking
    assert c.differ[0] == "model.pos.weight [1024, 1024] -> [2048, 1024]"
    assert "model.pos.weight [1024, 1024] -> [2048, 1024] and 2 optimizer-state" in c.detail


TINY = "--model gpt --layers 3 --d-model 32 --heads 2 --seq-len 16 --vocab-size 64 --steps 100"


@pytest.mark.parametrize(
    "change",
    ["--layers 2", "--layers 4", "--seq-len 32", "--d-model 64", "--steps 200", "--lr 3e-3"],
)
def test_the_verdict_is_what_the_runtime_does(change, tmp_path):
    """The planner's verdict against the runtime's real restore (CheckpointManager, CPU)."""
    import torch

    from trainforge.training import checkpoint as ckpt
    from trainforge.training.loop import build_optimizer, build_scheduler
    from trainforge.training.models import build_model

    old, new = TINY.split(), TINY.split()
    flag, value = change.split()
    new = with_flag(new, flag, value)

    def built(args):
        cfg = CC.parse_runtime(args)
        model = build_model(cfg)
        opt = build_optimizer(model, cfg, torch.device("cpu"))
        sched = build_scheduler(opt, cfg)
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        return model, opt, sched

    model, opt, sched = built(old)
    opt.step()
    sched.step()
    config = ckpt.CheckpointConfig(directory=str(tmp_path))
    ckpt.CheckpointManager(config, log=lambda _: None).save(1, model, opt, sched)
    try:
        ckpt.CheckpointManager(config, log=lambda _: None).restore(*built(new))
        failed = False
    except (ckpt.CheckpointError, ValueError, RuntimeError):
        failed = True
    verdict = CC.classify(state(old, 1), state(new, 1))
    assert verdict.blocking == failed, (change, verdict.line())


def test_layers_6_to_8_cannot_resume_naming_the_new_blocks():
    c = CC.classify(state(DEV), state(with_flag(DEV, "--layers", "8")))
    assert c.verdict == CC.CANNOT
    assert c.differ[0].startswith("model.blocks.6.ln1.weight [384] is not in the checkpoint")
    assert len([d for d in c.differ if d.startswith("model.")]) == 2 * 8  # 8 tensors a block


def test_steps_change_resumes_with_the_lr_schedule_recomputed():
    c = CC.classify(state(PROD), state(with_flag(PROD, "--steps", "40000")))
    assert c.verdict == CC.RESETS and not c.blocking
    assert [r.split(":")[0] for r in c.resets] == ["lr schedule"]
    assert "--steps 20000 -> 40000" in c.resets[0]


def test_steps_and_workers_change_also_resets_the_data_order():
    c = CC.classify(state(PROD, 8), state(with_flag(PROD, "--steps", "40000"), 16))
    assert [r.split(":")[0] for r in c.resets] == ["lr schedule", "data order", "RNG"]
    assert "global batch 64 -> 128" in c.resets[1]


def test_lr_change_resumes_but_says_the_new_lr_is_not_applied():
    c = CC.classify(state(PROD), state(with_flag(PROD, "--lr", "3e-4")))
    assert c.verdict == CC.RESUMES and not c.resets
    # checkpoint.py restores the optimizer's param groups and the scheduler's base_lrs
    assert c.caveats and "--lr 0.001 -> 0.0003 is NOT applied" in c.caveats[0]


def test_strategy_change_resumes_dcp_keys_do_not_depend_on_sharding():
    c = CC.classify(state(PROD), state(with_flag(PROD, "--strategy", "ddp")))
    assert c.verdict == CC.RESUMES and not c.caveats


def test_own_code_without_a_fingerprint_is_not_checked_and_one_is_compared():
    bare = CC.classify(state(None), state(None))
    assert bare.verdict == CC.NOT_CHECKED and "checkpoint.fingerprint" in bare.detail
    same = CC.classify(
        state(None, fingerprint={"fc.weight": [[10, 784], "float32"]}),
        state(None, fingerprint={"fc.weight": [[10, 784], "float32"]}, fingerprint_source="m:f"),
    )
    assert same.verdict == CC.RESUMES
    other = CC.classify(
        state(None, fingerprint={"fc.weight": [[10, 784], "float32"]}),
        state(None, fingerprint={"fc.weight": [[20, 784], "float32"]}, fingerprint_source="m:f"),
    )
    assert (
        other.verdict == CC.CANNOT
        and "fc.weight" in other.detail
        and "(fingerprint m:f)" in other.detail
    )


def test_a_declared_fingerprint_function_runs_from_the_jobs_code_dir(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "layout.py").write_text(
        "def state_layout(args):\n"
        "    width = int(args[args.index('--hidden') + 1])\n"
        "    return {'fc.weight': [[width, 784], 'float32']}\n"
    )
    from trainforge.jobs.spec import parse_job

    def spec(hidden: str):
        return parse_job(
            {
                "name": "mine",
                "team": "t",
                "pool": "p",
                "workers": 1,
                "entrypoint": {"script": "code/train.py", "args": ["--hidden", hidden]},
                "checkpoint": {"fingerprint": "layout:state_layout"},
            }
        )

    old, err = call_fingerprint(tmp_path, spec("128"))
    assert err is None and old == {"fc.weight": [[128, 784], "float32"]}
    new, _ = call_fingerprint(tmp_path, spec("256"))
    c = CC.classify(state(None, fingerprint=old), state(None, fingerprint=new))
    assert c.verdict == CC.CANNOT and "fc.weight [[128, 784], 'float32'] -> [[256, 784]" in c.detail
    broken = spec("x")
    value, err = call_fingerprint(tmp_path, broken)
    assert value is None and "layout:state_layout in code failed: ValueError" in err


def test_a_bad_fingerprint_key_is_a_one_line_config_error():
    from trainforge.core.errors import JobConfigError
    from trainforge.jobs.spec import parse_job

    with pytest.raises(
        JobConfigError, match=r"checkpoint.fingerprint: got 'layout'; expected module:function"
    ):
        parse_job({"name": "a", "team": "t", "pool": "p", "checkpoint": {"fingerprint": "layout"}})


# ---------------------------------------------------------------------------- through the CLI


def issue_change(config: dict) -> None:
    """The PR of the issue: seqLen 1024 -> 2048, workers 2 -> 4, steps 20k -> 40k; the GPU
    pool adds g6e and drops spot."""
    job = config["trainforge:jobs"][0]
    job.update(seqLen=2048, workers=4, steps=40000)
    pool = next(p for p in config["trainforge:nodePools"] if p["name"] == "gpu-workloads")
    pool["instanceTypes"] = [*pool["instanceTypes"], "g6e.12xlarge"]
    pool["capacityTypes"] = ["on-demand"]
    # and vision's GPU quota halves, so the bigger job borrows from the cohort
    team = next(t for t in config["trainforge:teams"] if t["name"] == "vision")
    team["quota"]["gpus"] = "8"
    team["quota"]["pools"] = {"gpu-workloads": {"gpus": 8}}
    # and llm is guaranteed part of the GPU pool, so it may reclaim what vision borrows there
    llm = next(t for t in config["trainforge:teams"] if t["name"] == "llm")
    llm["quota"]["pools"] = {"efa-training": {"gpus": 32}, "p4d-reserved": {"gpus": 16},
                             "gpu-workloads": {"gpus": 16}}  # fmt: skip


@pytest.fixture(scope="module")
def head(tmp_path_factory, project_copy) -> pathlib.Path:
    return project_copy(tmp_path_factory.mktemp("head"), "head", issue_change)


def test_issue_pr_against_the_base_branch_plan(
    tmp_path, head, capsys, project_copy, shipped_plan_out
):
    base = shipped_plan_out("prod")  # the base branch: prod as committed
    args = ["--stack", "prod", "--no-standins"]
    capsys.readouterr()
    md_file = tmp_path / "pr.md"
    rc = cli.main(
        [
            *args,
            "--project-dir",
            str(head),
            "--diff",
            str(base),
            "--diff-md",
            str(md_file),
            "--report",
            str(tmp_path / "r.txt"),
        ]  # fmt: skip
    )
    out = capsys.readouterr().out
    assert rc == 1, out
    first = out.splitlines()[:40]
    assert first[0].endswith("1 finding(s) need a fix or a decision")
    assert "  [TF_CKPT_CANNOT_RESUME] vision/PyTorchJob/gpt-350m-fsdp" in first
    assert any("replaced (running pods stop); cannot resume: model.pos.weight" in x for x in first)
    assert any(x.startswith("Cost: platform $") for x in first)
    md = md_file.read_text()
    assert md.startswith("## trainforge plan --stack prod: ❌ 1 finding(s)")
    assert "`--seq-len 1024 → 2048`" in md and "`--steps 20000 → 40000`" in md
    assert "`--nnodes 2 → 4`" in md
    assert "memory per GPU (estimate): 12.1 GiB (54% of 22.4 GiB A10G) → 21.7 GiB (97% of" in md
    assert "step time: 1.67 s → 3.75 s; duration: 9.4 h → 41.8 h" in md
    assert "GPUs: 8 → 16" in md
    assert (
        "cost: per run $152.84 → $1,361.19 (duration: estimate); $16.29 → $32.58/h on-demand" in md
    )
    assert (
        "queue: admitted on gpu-workloads within its nominal quota → borrows 8 GPUs in pool "
        "gpu-workloads from cohort trainforge; team llm may reclaim it (preempts it)"
    ) in md
    assert "nominal quota gpu-workloads/nvidia.com/gpu: 16 GPUs → 8 GPUs" in md
    assert "instance types: +g6e.12xlarge" in md and "capacity types: -spot (now on-demand)" in md
    # docs/pr-review.md quotes the job's lines of this markdown: each is one of them, as printed
    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "pr-review.md").read_text()
    quoted = doc.split("```\n- `vision/PyTorchJob/gpt-350m-fsdp`", 1)[1].split("```", 1)[0]
    quoted = "- `vision/PyTorchJob/gpt-350m-fsdp`" + quoted
    printed = md.splitlines()
    assert [ln for ln in quoted.splitlines() if ln not in printed] == [], md

    # the decision: a waiver with its reason (or a new name / checkpoint.dir / resume: never)
    def waived(config):
        issue_change(config)
        config["trainforge-policy:waivers"] = [
            *config.get("trainforge-policy:waivers", []),  # the stack's own (Grafana's pull)
            {
                "resource": "vision/PyTorchJob/gpt-350m-fsdp",
                "rule": "TF_CKPT_CANNOT_RESUME",
                "reason": "restart from scratch at 2048 tokens; the 1024 run is abandoned",
            },
        ]

    decided = project_copy(tmp_path, "decided", waived)
    rc = cli.main(
        [
            *args,
            "--project-dir",
            str(decided),
            "--diff",
            str(base),
            "--report",
            str(tmp_path / "w.txt"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert (
        "Waived (2): " in out and "[TF_CKPT_CANNOT_RESUME] vision/PyTorchJob/gpt-350m-fsdp" in out
    )


def test_issue_pr_against_the_deployed_stack_export(tmp_path, head, capsys):
    rc = cli.main(
        [
            "--stack",
            "prod",
            "--no-standins",
            "--project-dir",
            str(head),
            "--diff",
            str(EXPORT),
            "--diff-md",
            str(tmp_path / "pr.md"),
            "--report",
            str(tmp_path / "r.txt"),
        ]  # fmt: skip
    )
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "vs deployed state prod-stack-export.json (pulumi stack export)" in out.splitlines()[0]
    md = (tmp_path / "pr.md").read_text()
    assert "`vision/PyTorchJob/gpt-350m-fsdp`: **replaced: deleted, then created again" in md
    assert "cannot resume" in md and "model.pos.weight [1024, 1024] -> [2048, 1024]" in md
    # the deployed side has no plan sections: new figures only
    assert "memory per GPU (estimate): 21.7 GiB (97% of 22.4 GiB A10G)" in md
    # secrets in the state compare as the plan's [secret], not as changes
    base = load_side(EXPORT)
    assert (
        base.label.startswith("deployed state")
        and "vision/PyTorchJob/gpt-350m-fsdp" in base.objects
    )
    assert "ciphertext" not in json.dumps(base.objects)


def test_a_preview_json_decides_replace_versus_update(tmp_path, head, capsys):
    """`pulumi preview --json`: the engine's op wins over replaceOnChanges."""
    export = json.loads(EXPORT.read_text())
    steps = [
        {"op": "update" if "PyTorchJob" in r["type"] else "same", "urn": r["urn"], "oldState": r}
        for r in export["deployment"]["resources"]
    ]
    preview = tmp_path / "preview.json"
    preview.write_text(json.dumps({"steps": steps, "changeSummary": {"update": 1}}))
    cli.main(
        [
            "--stack",
            "prod",
            "--no-standins",
            "--project-dir",
            str(head),
            "--diff",
            str(preview),
            "--diff-md",
            str(tmp_path / "pr.md"),
            "--report",
            str(tmp_path / "r.txt"),
        ]  # fmt: skip
    )
    md = (tmp_path / "pr.md").read_text()
    assert "`vision/PyTorchJob/gpt-350m-fsdp`: **updated in place**" in md
    assert "TF_CKPT_CANNOT_RESUME" not in md


def test_a_base_that_is_neither_is_a_one_line_error(tmp_path, capsys):
    # an empty folder (a typo'd or unwritten --out) is not a plan: refused, not "all new";
    # no base at all is said explicitly with /dev/null (CI's base branch without a plan)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SideError, match=r"empty: a folder without inventory.json.*/dev/null"):
        load_side(tmp_path / "empty")
    nothing = load_side(pathlib.Path("/dev/null"))
    assert nothing.objects == {} and nothing.resources == {} and nothing.sections is None
    assert "everything is new" in nothing.label
    bad = tmp_path / "state.json"
    bad.write_text(json.dumps({"version": 2, "deployment": {"resources": []}}))
    with pytest.raises(SideError, match="stack export version 2; supported: 3"):
        load_side(bad)
    (tmp_path / "x.json").write_text("[]")
    with pytest.raises(SideError, match="neither a plan folder"):
        load_side(tmp_path / "x.json")
    # the right kind of JSON with entries that are not resources: KeyError/AttributeError
    # tracebacks before
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "inventory.json").write_text(json.dumps({"resources": [{"type": "x"}]}))
    bad.write_text(json.dumps({"version": 3, "deployment": {"resources": [1]}}))
    for odd in (tmp_path / "inv", bad):
        with pytest.raises(SideError, match=f"--diff {odd}: its resources are not of the exp"):
            load_side(odd)


def test_a_gzipped_export_reads_and_a_file_that_is_not_json_is_a_one_line_error(tmp_path):
    """`pulumi stack export | gzip` reads as the export does; a secret compares as the plan's
    [secret]; a cloud resource is named type::name; a file that is not JSON names the path."""
    import gzip

    from trainforge.plan.sides import SECRET_SIG, SECRET_VALUE

    secret = {SECRET_SIG: SECRET_VALUE, "ciphertext": "x"}
    urn = "urn:pulumi:prod::trainforge::aws:s3/bucket:Bucket::ckpt"
    states = [
        {"type": "pulumi:providers:aws", "urn": "urn:p"},
        {"type": "aws:s3/bucket:Bucket", "urn": urn, "inputs": {"tags": secret}},
    ]
    export = tmp_path / "state.json.gz"
    export.write_bytes(
        gzip.compress(json.dumps({"version": 3, "deployment": {"resources": states}}).encode())
    )
    side = load_side(export)
    assert side.resources == {"aws:s3/bucket:Bucket::ckpt": {"tags": "[secret]"}}
    assert side.label == "deployed state state.json.gz (pulumi stack export)"
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SideError, match=r"--diff .*bad.json: not JSON"):
        load_side(tmp_path / "bad.json")
    with pytest.raises(SideError, match="no such folder or file"):
        load_side(tmp_path / "missing.json")
    # a gzip cut short (an interrupted `| gzip > STATE.json.gz`) was an EOFError traceback
    (tmp_path / "cut.json.gz").write_bytes(export.read_bytes()[:30])
    with pytest.raises(SideError, match=r"--diff .*cut.json.gz: a damaged gzip file"):
        load_side(tmp_path / "cut.json.gz")


@pytest.mark.parametrize("kind", ["missing", "empty", "manifests-only", "bad-inventory", "text"])
def test_a_diff_base_that_is_no_plan_is_refused_before_the_plan_runs(tmp_path, capsys, kind):
    """A --diff BASE that holds no plan used to read as "everything is new" and a CLEAN
    verdict (a typo'd path reviewed as clean). Now: one line naming --diff, the path and
    what a valid base is, exit 2, before the plan runs (no project here to plan at all)."""
    base = tmp_path / "base"
    if kind != "missing" and kind != "text":
        base.mkdir()
    if kind == "manifests-only":  # e.g. --diff build/plan: manifests, no inventory.json
        (base / "prod").mkdir()
        (base / "prod" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    if kind == "bad-inventory":
        (base / "inventory.json").write_text("{truncated")
    if kind == "text":
        base.write_text("not a plan\n")
    nowhere = tmp_path / "no-project"
    argv = ["--stack", "prod", "--project-dir", str(nowhere), "--diff", str(base)]
    assert cli.main(argv) == cli.EXIT_CONFIG
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"trainforge plan: --diff {base}")
    assert "a plan folder written by `trainforge plan --out`" in err and "/dev/null" in err


def test_pool_and_team_changes_read_as_types_limits_and_quotas():
    from trainforge.plan.job_diff import pool_lines, quota_lines

    def pool(types, caps, gpus):
        reqs = [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": caps},
        ]
        return {
            "spec": {
                "template": {"spec": {"requirements": reqs}},
                "limits": {"nvidia.com/gpu": gpus},
            }
        }

    lines = pool_lines(
        pool(["g5.12xlarge"], ["on-demand", "spot"], 64),
        pool(["g5.12xlarge", "g6e.12xlarge"], ["on-demand"], 32),
    )
    assert lines == [
        "instance types: +g6e.12xlarge (now g5.12xlarge, g6e.12xlarge)",
        "capacity types: -spot (now on-demand)",
        "limit nvidia.com/gpu: 64 → 32",
    ]
    rq = lambda gpus: {"kind": "ResourceQuota", "spec": {"hard": {"requests.nvidia.com/gpu": gpus}}}  # noqa: E731
    assert quota_lines(rq("80"), rq("96")) == ["quota requests.nvidia.com/gpu: 80 → 96"]

    def cq(n):
        res = [{"name": "nvidia.com/gpu", "nominalQuota": n}]
        return {
            "kind": "ClusterQueue",
            "spec": {
                "resourceGroups": [{"flavors": [{"name": "gpu-workloads", "resources": res}]}]
            },
        }

    assert quota_lines(cq("21"), cq("5")) == [
        "nominal quota gpu-workloads/nvidia.com/gpu: 21 GPUs → 5 GPUs"
    ]


def test_a_jobs_memory_reads_in_the_estimates_sections_units():
    """The PR's job line says memory as the estimates section does (jobs.estimate.gib): a
    small job's 512 MiB is not "0.5 GiB"."""
    from trainforge.plan.job_diff import memory_text

    row = {"memory_total_bytes": 512 * 2**20, "memory_capacity_bytes": 24 * 2**30, "gpu": "A10G"}
    assert memory_text(row) == "512 MiB (2% of 24.0 GiB A10G)"
    assert memory_text({"memory_total_bytes": 3 * 2**30}) == "3.0 GiB"
    assert memory_text({}) is None


def test_a_jobs_step_and_duration_read_in_the_estimates_sections_units():
    """The PR's job line says step time and duration as the estimates section does: a small
    model's 0.4 ms step is not "0.00 s" (which hid that it doubled)."""
    from trainforge.plan.checks.estimates import TITLE
    from trainforge.plan.job_diff import job_change
    from trainforge.plan.job_view import JobView

    view = JobView("t/PyTorchJob/a", "PyTorchJob", "t", "a", "img", ["torchrun"], 1)

    def side(step: float, seconds: float) -> dict:
        return {TITLE: [{"job": "a", "step_seconds": step, "duration_seconds": seconds}]}

    ch = job_change(view, view, side(0.0004, 5400), side(0.0008, 4 * 86400), replaced=False)
    assert "step time: 0.4 ms → 0.8 ms; duration: 90 min → 4.0 days" in ch.lines


def test_own_code_fingerprints_are_compared_through_the_plan(tmp_path, capsys, project_copy):
    """dev's `resumable` declares checkpoint.fingerprint train:state_layout; `mnist-user`
    declares none."""

    def change(config):
        jobs = {j["name"]: j for j in config["trainforge:jobs"]}
        jobs["resumable"]["entrypoint"]["args"] = ["--epochs", "2", "--hidden", "256"]
        jobs["mnist-user"]["entrypoint"]["args"] = ["--epochs", "2"]

    def copy(name, edit=None):
        return project_copy(tmp_path, name, edit, stack="dev")

    args = ["--stack", "dev", "--no-standins", "--report", str(tmp_path / "r.txt")]
    base = tmp_path / "base-plan"
    assert cli.main([*args, "--project-dir", str(copy("base")), "--out", str(base)]) == 0
    capsys.readouterr()
    md = tmp_path / "pr.md"
    rc = cli.main(
        [
            *args,
            "--project-dir",
            str(copy("head", change)),
            "--diff",
            str(base),
            "--diff-md",
            str(md),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 1, out
    text = md.read_text()
    assert "[TF_CKPT_CANNOT_RESUME]** `research/PyTorchJob/resumable`" in text
    assert (
        "state fingerprint differs (fingerprint train:state_layout): model.1.weight [[128, 784]"
        in text
    )
    assert "`research/PyTorchJob/mnist-user`: **replaced" in text
    assert "checkpoint: **resume not checked: own code with no state fingerprint" in text


def test_job_views_of_every_backend_read_flags_world_size_and_checkpoint_dir():
    from trainforge.plan.job_view import job_view

    command = ["torchrun", "--nnodes=3", "--nproc-per-node=4", "-m", "trainforge.training", *PROD]
    labels = {"trainforge.io/job": "j", "kueue.x-k8s.io/queue-name": "training"}
    res = {"requests": {"nvidia.com/gpu": "4", "cpu": "40"}}
    trainjob = {
        "kind": "TrainJob",
        "metadata": {"namespace": "vision", "name": "j", "labels": labels},
        "spec": {
            "trainer": {
                "image": "img:1",
                "command": command,
                "numNodes": 3,
                "numProcPerNode": 4,
                "resourcesPerNode": res,
            }
        },
    }
    container = {"name": "main", "image": "img:1", "command": command, "resources": res}
    indexed = {
        "kind": "Job",
        "metadata": {"namespace": "vision", "name": "j", "labels": labels},
        "spec": {
            "parallelism": 3,
            "completions": 3,
            "template": {"spec": {"containers": [container]}},
        },
    }
    for doc in (trainjob, indexed):
        v = job_view(doc)
        assert v is not None and v.pods == 3 and v.world_size == 12 and v.gpus_per_pod == 4
        assert (
            v.runtime_args == PROD and v.checkpoint_dir == "/fsx/checkpoints/vision/gpt-350m-fsdp"
        )
        assert v.flags["--seq-len"] == "1024" and v.queue == "training"
    assert job_view({"kind": "Job", "metadata": {"name": "other"}, "spec": {}}) is None


def test_a_flag_given_twice_reads_as_the_runtime_reads_it_the_last_wins():
    """argparse keeps the last of a repeated flag; the job view's checkpoint directory and
    resume mode must name the ones the runtime will use."""
    from trainforge.plan.job_view import job_view

    args = [*PROD, "--checkpoint-dir", "/fsx/checkpoints/vision/other", "--resume", "never"]
    container = {
        "name": "main",
        "image": "img:1",
        "command": ["python", "-m", "trainforge.training", *args],
    }
    doc = {
        "kind": "Job",
        "metadata": {"namespace": "vision", "name": "j", "labels": {"trainforge.io/job": "j"}},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }
    v = job_view(doc)
    assert v is not None and v.checkpoint_dir == "/fsx/checkpoints/vision/other"
    assert v.resume == "never"
    assert CC.last_value(CC.argv_fields(["--a", "1"]), "--b", "d") == "d"


def test_growing_fsx_updates_the_file_system_and_never_patches_its_bound_claims(
    tmp_path, capsys, project_copy, shipped_plan_out
):
    """A newcomer review: growing `fsx.storageCapacityGiB` showed `~ spec.resources.requests.
    storage` on every team claim, and `pulumi up` would patch them, which the API server
    refuses for a claim bound to a static volume ("only dynamically provisioned pvc can be
    resized", kubernetes plugin/pkg/admission/storage/persistentvolume/resize/admission.go).
    The claims ignore their request (ignoreChanges), so the diff shows what Pulumi will do: the
    file system and its volumes grow, the claims stay as they are."""

    def grow(config):
        config["trainforge:fsx"]["storageCapacityGiB"] = 2400

    head = project_copy(tmp_path, "head", grow, stack="dev")
    md_file = tmp_path / "pr.md"
    capsys.readouterr()
    cli.main(["--stack", "dev", "--no-standins", "--project-dir", str(head),
              "--diff", str(shipped_plan_out("dev")), "--diff-md", str(md_file),
              "--report", str(tmp_path / "r.txt")])  # fmt: skip
    md = md_file.read_text()
    assert "PersistentVolume/fsx-" in md, md  # the volumes' capacity follows the file system
    assert "PersistentVolumeClaim/fsx-" not in md, md
    assert "`storageCapacity`: `1200` → `2400`" in md, md
