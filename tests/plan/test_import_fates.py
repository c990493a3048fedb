"""`trainforge import` -> plan: a field the import changes is what the pod gets, and what the
pod would hit the plan flags (newcomer review, a Kubeflow user, wave 21)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from trainforge import import_cli
from trainforge.core.pods import containers
from trainforge.jobs.backends import pod_templates
from trainforge.jobs.local import find_job, pod_only_line, user_code_run
from trainforge.plan.core import plan_project

ROOT = Path(__file__).resolve().parents[2]
REVIEW = ROOT / "tests" / "fixtures" / "import" / "review"


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    for name in ("Pulumi.yaml", "__main__.py", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "examples", root / "examples")
    return root


def _add(root: Path, out: str) -> None:
    entries = yaml.safe_load("\n".join(ln for ln in out.splitlines() if not ln.startswith("#")))
    stack = yaml.safe_load((root / "Pulumi.dev.yaml").read_text())
    stack["config"]["trainforge:jobs"] += entries
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))


def test_a_configmap_script_run_by_its_execute_bit_keeps_it(tmp_path, capsys, monkeypatch):
    """review/runsh.yaml runs `./run.sh` from a ConfigMap mounted with defaultMode 0755. The
    import wrote run.sh 0644, the platform shipped it 0444 and the pod failed at start with
    "permission denied" while the plan was CLEAN. Now the import keeps the execute bit (said
    on a line; shipped 0555, read-only) and the plan is clean of the pod's start; a file
    shipped without one is flagged by the plan (TRAINFORGE_POD_SCRIPT_FAILS) and by the
    import's list of what the plan will flag."""
    root = _project(tmp_path)
    monkeypatch.chdir(root)
    path = REVIEW / "runsh.yaml"
    assert import_cli.main([str(path), "--stack", "dev", "--out", "imported"]) == 0
    out = capsys.readouterr().out
    assert (
        "#   - file modes of ConfigMap runsh-code: run.sh (0755), train.py (0755) -> shipped "
        "executable with mode 0555: read-only code, runnable as the original pod ran it"
    ) in out.splitlines()
    assert "TRAINFORGE_POD_SCRIPT_FAILS" not in out
    _add(root, out)
    result = plan_project(root, "dev", standins=False)
    mine = [v for v in result.failing if "runsh-job" in str(v.names)]
    assert [v.rule for v in mine] == ["TRAINFORGE_DOCKER_HUB"], [(v.rule, v.message) for v in mine]
    (job,) = [dj for dj in result.inventory.declared.jobs if dj.spec.name == "runsh-job"]
    pod = pod_templates(job.emitted.workload)[0].spec
    assert containers(pod)[0]["command"] == ["/workspace/run.sh"]
    (src,) = [v for v in pod["volumes"] if v["name"] == "src"]
    assert {i["path"]: i.get("mode") for i in src["configMap"]["items"]}["run.sh"] == 0o555

    # the shipped file without its execute bit: what the pod hits, the plan flags
    (root / "imported" / "runsh-job" / "run.sh").chmod(0o644)
    result = plan_project(root, "dev", standins=False)
    flagged = [v.message for v in result.failing if v.rule == "TRAINFORGE_POD_SCRIPT_FAILS"]
    assert flagged == [FAILS]

    # a ConfigMap without defaultMode (0644): the original pod fails too; the import says so
    no_mode = tmp_path / "no-mode.yaml"
    no_mode.write_text(path.read_text().replace(", defaultMode: 0755", ""))
    assert import_cli.main([str(no_mode), "--stack", "dev"]) == 0
    said = capsys.readouterr().out.split("# What `trainforge plan` will flag", 1)[1]
    assert f"#   - TRAINFORGE_POD_SCRIPT_FAILS: {FAILS}" in said.splitlines()


FAILS = (
    "Master pod: container 'pytorch' runs /workspace/run.sh, a file of volume 'src' mounted "
    "with mode 0444, which uid 537786 cannot execute: the pod fails at start with "
    "'permission denied'; give the file an execute bit (a file of an entry's codeDir: "
    "chmod +x it in the project, shipped 0555; a ConfigMap of your own: its item's mode or "
    "the volume's defaultMode) or run it through its interpreter (bash /workspace/run.sh)"
)


def test_shipped_code_that_writes_under_a_dropped_mount_is_named_and_flagged(
    tmp_path, capsys, monkeypatch
):
    """review/ckpt-write.yaml: a ConfigMap script writes /checkpoints/done, /checkpoints a PVC
    mount the import drops (with advice). The plan was CLEAN and run-local failed with
    FileNotFoundError. Now the import's line for the mount names the write (file:line), the
    plan flags it (TRAINFORGE_POD_CANNOT_WRITE) with the same message as the import's list,
    and the advice it gave (declare the claim at /checkpoints) clears it. run-local of the
    advised entry then says before it runs that the code's literal /checkpoints/done has no
    stand-in here (it failed with a bare FileNotFoundError though the pod's write works)."""
    root = _project(tmp_path)
    monkeypatch.chdir(root)
    path = REVIEW / "ckpt-write.yaml"
    assert import_cli.main([str(path), "--stack", "dev", "--out", "imported"]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if "ckpt (/checkpoints): dropped" in ln]
    assert line.endswith(
        "The shipped code names paths under /checkpoints: imported/ckpt-write/train.py:7 "
        "writes /checkpoints/done; without the mount they are on the pod's read-only root "
        "file system, so a write there fails (FileNotFoundError) and a read finds only what "
        "the image holds"
    )
    said = [
        ln.removeprefix("#   - TRAINFORGE_POD_CANNOT_WRITE: ")
        for ln in out.splitlines()
        if ln.startswith("#   - TRAINFORGE_POD_CANNOT_WRITE: ")
    ]
    assert said == [WRITES]
    _add(root, out)
    result = plan_project(root, "dev", standins=False)
    flagged = [v.message for v in result.failing if v.rule == "TRAINFORGE_POD_CANNOT_WRITE"]
    assert flagged == [WRITES]

    # the import's advice: the team's claim at /checkpoints; the write then lies on it
    stack = yaml.safe_load((root / "Pulumi.dev.yaml").read_text())
    stack["config"]["trainforge:teams"][0]["claims"] = ["ckpt-pvc"]
    (job,) = [j for j in stack["config"]["trainforge:jobs"] if j["name"] == "ckpt-write"]
    job["volumes"] = [{"claim": "ckpt-pvc", "mountPath": "/checkpoints"}]
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    result = plan_project(root, "dev", standins=False)
    assert not [v for v in result.failing if v.rule == "TRAINFORGE_POD_CANNOT_WRITE"]

    # run-local gives the claim's stand-in to arguments and env values only: the code's own
    # literal /checkpoints/done is said before the run, with its stand-in (the pod's works)
    job = find_job("dev", "ckpt-write", root)
    run = user_code_run(job, root, prepare=False)
    stand_in = root / "runs" / "ckpt-write" / "volumes" / "ckpt-pvc" / "done"
    assert run.pod_only == (f"train.py:7 writes /checkpoints/done (its stand-in here: {stand_in})",)
    assert pod_only_line(run.pod_only).startswith(
        f"run-local: your code names pod paths that do not exist here: {run.pod_only[0]}; "
        "run-local gives a volume's stand-in to the command's arguments and env values only"
    )


WRITES = (
    "Master, Worker pods: the code of container 'pytorch' writes outside its writable volumes "
    "(/dev/shm, /tmp, /fsx): /workspace/train.py:7 writes /checkpoints/done; its root file "
    "system is read-only, so each write fails in the pod (FileNotFoundError, or EROFS where "
    "the image has the folder)"
)


def test_shipped_code_opening_its_own_mount_path_and_a_dropped_scratch_dir_is_named(
    tmp_path, capsys, monkeypatch
):
    """review/code-opens.yaml: train.py opens /code/cfg.yaml (its own ConfigMap's mount) and
    writes /scratch/run (an emptyDir). The import rewrote /code in the command only and said
    nothing of the code's open, which fails in the pod (the code is at /workspace); the
    emptyDir's line said only that /tmp is the scratch space. Now the code mount's line names
    the open (file:line, and its pod path), and the emptyDir's says why it is not carried,
    what it asked, and what to declare or change instead."""
    monkeypatch.chdir(_project(tmp_path))
    assert import_cli.main([str(REVIEW / "code-opens.yaml"), "--stack", "dev"]) == 0
    out = capsys.readouterr().out.splitlines()
    (moved,) = [ln for ln in out if "paths under /code in the command" in ln]
    assert moved.endswith(
        "The shipped code itself names paths under /code, which the import does not rewrite: "
        "imported/code-opens/train.py:2 uses /code/cfg.yaml (in the pod /workspace/cfg.yaml); "
        "nothing is mounted there in the pod, so each fails (FileNotFoundError): change the "
        "line to the /workspace path, or to one relative to the script's own folder"
    )
    (scratch,) = [ln for ln in out if "scratch (/scratch): dropped" in ln]
    assert (
        "dropped; a job entry mounts no emptyDir of its own (its `volumes` are the team's "
        "claims), so this scratch dir (sizeLimit 2Gi) is not carried; the pod's writable "
        "scratch is /tmp (an emptyDir, sizeLimit 20Gi, the platform mounts): point the code's "
        "/scratch paths at /tmp/scratch, or declare a claim of the team there "
        "(`volumes: [{claim: CLAIM, mountPath: /scratch}]`). The shipped code names paths "
        "under /scratch: imported/code-opens/train.py:4 writes /scratch/run;"
    ) in scratch
    assert any(ln.startswith("#   - TRAINFORGE_POD_CANNOT_WRITE: ") for ln in out)
