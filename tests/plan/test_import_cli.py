"""`trainforge import` end to end (issue #43): the seeds' PyTorchJobs and a blog-style one with a
ConfigMap script become entries of a copy of the dev stack that plans CLEAN; the blog job (3
steps, 2 CPU ranks) and the seed's inline script run under `run-local`. Heavy: one plan of
dev and two run-locals."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from trainforge import import_cli
from trainforge.plan.core import plan_project

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "import"
BLOG = ROOT / "examples" / "kubeflow" / "pytorchjob.yaml"  # the blog-style job


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    for name in ("Pulumi.yaml", "__main__.py", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "examples", root / "examples")
    return root


def _entries(out: str) -> list[dict]:
    return yaml.safe_load("\n".join(ln for ln in out.splitlines() if not ln.startswith("#")))


def test_imported_jobs_plan_clean_and_run_locally(tmp_path, capfd, monkeypatch, trainforge_here):
    root = _project(tmp_path)
    monkeypatch.chdir(root)
    entries = []
    for path in (
        BLOG,
        CORPUS / "seed" / "distributed-pytorch-job.yaml",
        CORPUS / "seed" / "simple-pytorch-job.yaml",  # python -c code, written out
        # the newcomer review's: torchrun on python:3.11; an indexed Job retrying every code
        CORPUS / "review" / "python-image.yaml",
        CORPUS / "review" / "indexed-never.yaml",
    ):
        assert import_cli.main([str(path), "--stack", "dev", "--out", "imported"]) == 0
        out = capfd.readouterr().out
        assert "# Files to ship (written):" in out
        entries += _entries(out)
    assert (root / "imported/blog-ddp/train.py").is_file()
    assert (root / "imported/pytorch-distributed-ddp/train_ddp.py").read_text() == (
        CORPUS / "seed" / "train_ddp.py"
    ).read_text()

    stack = yaml.safe_load((root / "Pulumi.dev.yaml").read_text())
    stack["config"]["trainforge:jobs"] += entries
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    result = plan_project(root, "dev", standins=False)
    # clean but for two writes the pods would fail at (plan/checks/pod_scripts.py, read by
    # jobs/code_paths.py): the seed's script saves its model into its own ConfigMap mount,
    # read-only in the original pod too; the review's saves to /ckpt, an emptyDir the import
    # drops (its line names the write)
    writes = sorted(
        (v.resource, v.message.split(": ", 2)[2].split(";", 1)[0])
        for v in result.failing
        if v.rule == "TRAINFORGE_POD_CANNOT_WRITE"
    )
    assert writes == [
        ("research/PyTorchJob/my-handjob", "/workspace/train.py:9 writes /ckpt/model.pt"),
        (
            "research/PyTorchJob/pytorch-distributed-ddp",
            "/workspace/train_ddp.py:125 writes /workspace/model.pt",
        ),
    ]
    others = [
        (v.rule, v.message) for v in result.failing if v.rule != "TRAINFORGE_POD_CANNOT_WRITE"
    ]
    assert not others, others
    names = {dj.spec.name: dj.spec for dj in result.inventory.declared.jobs}
    assert names["blog-ddp"].workers == 2 and names["pytorch-distributed-ddp"].workers == 4
    # the plan runs what the import said: the runtime image (torch) for the python:3.11 job,
    # and an indexed Job that re-creates an index on any exit code (the original's retries)
    assert "trainforge-runtime" in names["my-handjob"].image
    assert names["my-handjob"].image_facts.torch and names["my-handjob"].image_facts.trainforge
    assert names["blog-ddp"].restart_policy == "OnFailure"
    assert names["idx-hand"].restart_policy == "OnFailure"

    logs = _run_local(trainforge_here, root, "blog-ddp", "--steps", "3")
    assert "done: 3 steps on 2 ranks" in logs
    # the seed's inline script (10 tiny epochs; CUDA only where there is one) as it was
    logs = _run_local(trainforge_here, root, "pytorch-simple")
    assert "Epoch 9, Loss:" in logs and "Training completed successfully!" in logs


def _run_local(trainforge_here, root: Path, *args: str) -> str:
    """`trainforge run-local --stack dev ARGS` from the project, in this process (conftest's
    trainforge_here): the subject is what it runs, not its own process."""
    proc = trainforge_here(root, "run-local", "--stack", "dev", *args)
    logs = proc.stdout + proc.stderr
    assert proc.returncode == 0, logs[-3000:]
    return logs


def test_bad_input_and_flags_are_one_line_without_a_traceback(tmp_path, capsys):
    root = _project(tmp_path)
    missing = tmp_path / "nope.yaml"
    assert import_cli.main([str(missing), "--project-dir", str(root)]) == 2
    err = capsys.readouterr().err
    assert err == f"trainforge import: {missing}: file: no such file\n"
    blog = str(BLOG)
    assert import_cli.main([blog, "--project-dir", str(root), "--team", "vision"]) == 2
    assert capsys.readouterr().err == (
        "trainforge import: --team: got 'vision'; the stack's teams: research\n"
    )
    assert import_cli.main([blog, "--project-dir", str(root), "--stack", "qa"]) == 2
    assert "--stack: got 'qa'; stacks in" in capsys.readouterr().err
    assert import_cli.main([blog, "--project-dir", str(root), "--pool", "training-workloads"]) == 2
    assert capsys.readouterr().err == (
        f"trainforge import: {blog}: --pool: pool 'training-workloads' has no GPUs; the pod "
        "asks 1\n"
    )


def test_an_out_outside_the_project_names_the_project_s_folder(tmp_path, capsys, monkeypatch):
    """Run from the project (the default --project-dir, "."), `--out /tmp/jobs` said
    "expected a folder inside the project ." """
    root = _project(tmp_path)
    monkeypatch.chdir(root)
    elsewhere = tmp_path / "jobs"
    assert import_cli.main([str(BLOG), "--stack", "dev", "--out", str(elsewhere)]) == 2
    assert capsys.readouterr().err == (
        f"trainforge import: --out: got {str(elsewhere)!r}; expected a folder inside the "
        f"project {root.resolve()} (the entry names the files it ships relative to it)\n"
    )
    assert not elsewhere.exists()


def test_an_out_or_project_dir_that_is_not_a_folder_is_one_line(tmp_path, capsys):
    """--out naming a file and --project-dir naming nothing: a NotADirectoryError traceback
    and "--stack: required; stacks in X: none" before."""
    root = _project(tmp_path)
    (root / "notes.txt").write_text("mine\n")
    blog = str(BLOG)
    args = [blog, "--project-dir", str(root), "--out", str(root / "notes.txt")]
    assert import_cli.main(args) == 2
    assert capsys.readouterr().err == (
        "trainforge import: --out: cannot write notes.txt/blog-ddp/train.py: notes.txt is a "
        "file; choose another --out\n"
    )
    assert (root / "notes.txt").read_text() == "mine\n"
    missing = tmp_path / "elsewhere"
    assert import_cli.main([blog, "--project-dir", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"trainforge import: --project-dir: got {str(missing)!r}; no such folder\n"
    )


def test_the_entry_docs_jobs_md_quotes_is_what_the_command_prints(tmp_path, capsys, monkeypatch):
    doc = (ROOT / "docs" / "jobs.md").read_text()
    section = doc.split("## Bring what you have", 1)[1].split("\n## ", 1)[0]
    quoted = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    command = section.split("```bash\n", 1)[1].split("```", 1)[0].strip()
    assert command == (
        "python -m trainforge import examples/kubeflow/pytorchjob.yaml --stack dev --out jobs"
    )
    root = _project(tmp_path)
    monkeypatch.chdir(root)
    assert import_cli.main(command.split()[4:]) == 0
    out = capsys.readouterr().out
    assert "\n" + quoted in out
    assert "#   jobs/blog-ddp/train.py (" in out


def test_a_command_jobs_next_step_is_not_a_run_local_that_stops(tmp_path, capsys):
    """The training operator's own examples/pytorch/simple.yaml (v1.9.4: its script is in the
    image) becomes an `entrypoint.command` job, which run-local refuses; the printed next step
    named `trainforge run-local --stack dev pytorch-simple` all the same."""
    root = _project(tmp_path)
    path = CORPUS / "simple.yaml"
    assert import_cli.main([str(path), "--project-dir", str(root)]) == 0
    out = capsys.readouterr().out
    (entry,) = _entries(out)
    assert entry["entrypoint"]["command"][:2] == ["python3", "/opt/pytorch-mnist/mnist.py"]
    nxt = out.splitlines()[-1]
    # its Docker Hub image is flagged by the plan (listed above the Next line)
    assert "#   - TRAINFORGE_DOCKER_HUB: Master pod: container 'pytorch' image" in out
    assert nxt.startswith(
        "# Next: fix or waive what the plan will flag (above), then trainforge plan --stack dev "
        "(a command runs a program of your"
    )
    assert "trainforge run-local --stack" not in nxt


def _module_in(tmp_path: Path, working_dir: str) -> Path:
    """simple.yaml with its command as `python3 -m mnist` run from `working_dir`."""
    docs = list(yaml.safe_load_all((CORPUS / "simple.yaml").read_text()))
    for spec in docs[0]["spec"]["pytorchReplicaSpecs"].values():
        c = spec["template"]["spec"]["containers"][0]
        c["command"], c["workingDir"] = ["python3", "-m", "mnist", "--epochs=1"], working_dir
    path = tmp_path / "module.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_a_module_of_the_image_names_run_local_only_where_its_working_dir_is(tmp_path, capsys):
    """entrypoint.workingDir (kept for code of the image) is where run-local runs the module:
    the next step names run-local only where this machine has that directory
    (jobs.local.image_dir, run-local's own refusal)."""
    root = _project(tmp_path)
    path = _module_in(tmp_path, "/opt/pytorch-mnist-not-here")
    assert import_cli.main([str(path), "--project-dir", str(root)]) == 0
    out = capsys.readouterr().out
    (entry,) = _entries(out)
    assert entry["entrypoint"]["workingDir"] == "/opt/pytorch-mnist-not-here"
    assert out.splitlines()[-1] == (
        "# Next: fix or waive what the plan will flag (above), then trainforge plan --stack "
        "dev (run-local runs this job from its "
        "entrypoint.workingDir /opt/pytorch-mnist-not-here: no such directory on this machine: "
        "it exists only in the job's image, where the pods run from it; create it here with the "
        "files your code needs, or run the image (docker run ...) with the contract's variables)"
    )
    here = tmp_path / "app"
    here.mkdir()
    assert import_cli.main([str(_module_in(tmp_path, str(here))), "--project-dir", str(root)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "# Next: fix or waive what the plan will flag (above), then trainforge plan --stack "
        "dev; trainforge run-local --stack dev pytorch-simple"
    )


OPEN_HTTPS = """
if get_monitor() is not None:  # added by the test: a policy that opens the team's egress
    import pulumi_kubernetes as k8s

    k8s.networking.v1.NetworkPolicy(
        "allow-https",
        metadata={"name": "allow-https", "namespace": "research"},
        spec={"podSelector": {}, "policyTypes": ["Egress"],
              "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443}]}]},
    )
"""


def _pip_job(tmp_path: Path) -> Path:
    docs = list(yaml.safe_load_all((CORPUS / "simple.yaml").read_text()))
    for spec in docs[0]["spec"]["pytorchReplicaSpecs"].values():
        c = spec["template"]["spec"]["containers"][0]
        c["command"] = ["bash", "-c", "set -e\npip install transformers\npython3 /opt/m.py"]
    path = tmp_path / "pip.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


PIP_LINE = "#   - entrypoint.command:2: pip install downloads from a package index (pypi.org unless --index-url)"


def test_an_imported_command_that_downloads_is_said_with_the_stacks_egress(tmp_path, capsys):
    """The command (and shipped code) is read as `trainforge plan` reads a container
    (jobs/fetches.container_fetches), under what the stack's own NetworkPolicies do for the
    team's namespace, read as the plan reads them (submitted.open_egress over the stack's
    program run offline). Before, the line said "fails where the team's namespace denies
    internet egress" whatever the stack said: a stack whose program opens HTTPS is told so."""
    root = _project(tmp_path)
    path = _pip_job(tmp_path)
    assert import_cli.main([str(path), "--project-dir", str(root), "--stack", "dev"]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index(
        "# Downloads from the internet: in stack dev, namespace research's NetworkPolicies let "
        "its pods reach no internet address, so each call fails on the cluster and `trainforge "
        "plan` refuses it (TRAINFORGE_INTERNET_FETCH; docs/teams.md, Network):"
    )
    assert out[at + 1] == PIP_LINE
    assert import_cli.main([str(CORPUS / "simple.yaml"), "--project-dir", str(root)]) == 0
    assert "# Downloads from the internet" not in capsys.readouterr().out

    (tmp_path / "opened").mkdir()
    opened = _project(tmp_path / "opened")
    main = opened / "__main__.py"
    main.write_text(main.read_text() + OPEN_HTTPS)
    assert import_cli.main([str(path), "--project-dir", str(opened), "--stack", "dev"]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index(
        "# Downloads from the internet: in stack dev, namespace research opens HTTPS to every "
        "address (NetworkPolicy allow-https), so these calls go out and `trainforge plan` does "
        "not refuse them:"
    )
    assert out[at + 1] == PIP_LINE


def test_without_a_program_the_platforms_policies_are_said(tmp_path, capsys):
    """A project of stack files alone has no program to read policies from: the line says
    what the platform's team policies do (platform/teams.py), conditionally."""
    root = _project(tmp_path)
    (root / "__main__.py").unlink()
    assert import_cli.main([str(_pip_job(tmp_path)), "--project-dir", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index(import_cli.UNREAD_EGRESS)
    assert out[at + 1] == PIP_LINE


def test_an_entry_the_stack_refuses_is_printed_with_the_stacks_own_lines(tmp_path, capsys):
    root = _project(tmp_path)
    docs = list(yaml.safe_load_all(BLOG.read_text()))
    docs[1]["metadata"]["name"] = "a-name-far-too-long-for-the-pods-and-services-it-becomes"
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert import_cli.main([str(path), "--project-dir", str(root)]) == 1
    captured = capsys.readouterr()
    assert "- name: a-name-far-too-long" in captured.out
    # the next step is not a plan that stops on the same lines (it said "# Next: trainforge
    # plan --stack dev; trainforge run-local ..." above the refusal)
    assert captured.out.splitlines()[-1] == (
        "# Next: fix what the stack refuses (below), then run this import again with --out "
        "imported (nothing was written, so the files the entry names do not exist yet), then "
        "trainforge plan --stack dev; trainforge run-local --stack dev a-name-far-too-long-for-the-pods-and-services-it-becomes"
    )
    err = captured.err.splitlines()
    assert err[0] == "trainforge import: the stack refuses this entry as it stands:"
    assert err[1].startswith(
        "  trainforge:jobs[a-name-far-too-long-for-the-pods-and-services-it-becomes].name: "
    )


def test_a_selector_is_obeyed_or_refused_and_the_queue_label_named(tmp_path, capsys):
    """The review's v2 on prod: the pods' nodeSelector (p4d.24xlarge) took team vision to
    p4d-reserved, where the stack's Kueue split gives it no GPUs, exit 0; and v1 on dev never
    named its `kueue.x-k8s.io/queue-name` label. The team's LocalQueue is the contract's."""
    from trainforge.platform.queues import LOCAL_QUEUE  # what the contract names

    docs = list(yaml.safe_load_all(BLOG.read_text()))
    job = docs[1]
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "nonexistent-queue"}
    for role in job["spec"]["pytorchReplicaSpecs"].values():
        role["template"]["spec"]["nodeSelector"] = {
            "node.kubernetes.io/instance-type": "p4d.24xlarge"
        }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    args = [str(path), "--project-dir", str(ROOT), "--stack", "prod", "--team", "vision"]
    assert import_cli.main(args) == 2
    err = capsys.readouterr().err
    assert err == (
        f"trainforge import: {path}: spec.pytorchReplicaSpecs.Master.template.spec.nodeSelector"
        "[node.kubernetes.io/instance-type]: got 'p4d.24xlarge'; team vision has no nominal GPU "
        "quota in pool p4d-reserved: pools that hold the pod where team vision has quota: "
        "gpu-workloads; import with --pool gpu-workloads, which replaces the selector (or "
        "--pool p4d-reserved to run there on what the team borrows from the cohort)\n"
    )
    # dev has no p4d pool: the flag it names imports the job, and the label is named
    assert import_cli.main([*args[:3], "--stack", "dev", "--pool", "gpu-workloads"]) == 0
    out = capsys.readouterr().out
    assert _entries(out)[0]["pool"] == "gpu-workloads"
    assert (
        "#   - metadata.labels.kueue.x-k8s.io/queue-name nonexistent-queue: dropped; the job "
        f"uses its team's LocalQueue `{LOCAL_QUEUE}`"
    ) in out.splitlines()


def test_the_review_jobs_ship_their_code_and_plan_clean_after_the_printed_next_step(
    tmp_path, capsys, monkeypatch
):
    """The Kubeflow newcomer review (tests/fixtures/import/README.md, review/): without --out
    the import printed "not written" and a Next of `trainforge plan`, which then failed
    "entrypoint.script: ... no such file"; the TrainJob's script (mounted through its
    runtimePatches) and cf's config.yaml were not shipped, and the plan said CLEAN. Follow the
    printed Next (import again with --out), add the entries, plan: every file is there."""
    root = _project(tmp_path)
    monkeypatch.chdir(root)
    review = CORPUS / "review"
    entries = []
    for path in (
        review / "trainjob-patch-mount.yaml",
        review / "inline.yaml",
        review / "cf/job.yaml",
    ):
        before = sorted(root.rglob("*"))
        assert import_cli.main([str(path), "--stack", "dev"]) == 0
        out = capsys.readouterr().out
        assert "# Files to ship (nothing written; run again with --out DIR):" in out
        nxt = out.splitlines()[-1]
        assert nxt.startswith("# Next: run this import again with --out imported (nothing was")
        assert "the inline code, written out" not in out
        assert sorted(root.rglob("*")) == before
        assert import_cli.main([str(path), "--stack", "dev", "--out", "imported"]) == 0
        out = capsys.readouterr().out
        assert out.splitlines()[-1].startswith("# Next: trainforge plan --stack dev")
        entries += _entries(out)
    assert (root / "imported/tj-ft/train.py").read_text() == next(
        d
        for d in yaml.safe_load_all((review / "trainjob-patch-mount.yaml").read_text())
        if d["kind"] == "ConfigMap"
    )["data"]["train.py"]
    assert (root / "imported/cf-job/config.yaml").read_text() == (
        review / "cf/config.yaml"
    ).read_text()

    stack = yaml.safe_load((root / "Pulumi.dev.yaml").read_text())
    stack["config"]["trainforge:jobs"] += entries
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    result = plan_project(root, "dev", standins=False)
    assert result.clean, [(v.rule, v.message) for v in result.failing]
    names = {dj.spec.name: dj for dj in result.inventory.declared.jobs}
    # the ConfigMap the platform ships holds the original's files, mounted where they ran
    shipped = names["cf-job"].emitted.user_configmap["data"]
    assert sorted(shipped.values()) == sorted(
        [(review / "cf/config.yaml").read_text(), (review / "cf/train.py").read_text()]
    )


def test_what_the_import_says_the_plan_will_flag_is_what_the_plan_flags(tmp_path, capsys):
    """The review's tj1.yaml with its script in the image (a `command` on Docker Hub's
    pytorch/pytorch): the import named TRAINFORGE_DOCKER_HUB only, and the plan also raised
    TRAINFORGE_IMAGE_PIECE (a command is assumed to use MLflow, which that image lacks). The
    list now comes from the plan's own checks: the plan of the entry raises exactly it."""
    root = _project(tmp_path)
    doc = next(yaml.safe_load_all((CORPUS / "review" / "trainjob-patch-mount.yaml").read_text()))
    del doc["spec"]["runtimePatches"]
    doc["spec"]["trainer"]["command"] = ["torchrun", "/opt/app/train.py"]
    path = tmp_path / "tj-image.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert import_cli.main([str(path), "--project-dir", str(root)]) == 0
    out = capsys.readouterr().out
    head = "# What `trainforge plan` will flag on this entry (its own checks, run on the objects"
    said = out.split(head, 1)[1].split("\n# Next:", 1)[0].splitlines()[1:]
    said = [line.removeprefix("#   - ") for line in said]
    assert sorted({s.split(":", 1)[0] for s in said}) == [
        "TRAINFORGE_DOCKER_HUB",
        "TRAINFORGE_IMAGE_PIECE",
    ]
    assert out.splitlines()[-1].startswith("# Next: fix or waive what the plan will flag (above)")

    stack = yaml.safe_load((root / "Pulumi.dev.yaml").read_text())
    stack["config"]["trainforge:jobs"] += _entries(out)
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    result = plan_project(root, "dev", standins=False)
    flagged = sorted(f"{v.rule}: {v.message}" for v in result.failing if "tj-ft" in str(v.names))
    assert len(flagged) == len(said)
    for line in said:  # the plan's message, prefixed by the object it judged
        rule, message = line.split(": ", 1)
        assert any(f.startswith(rule) and f.endswith(message) for f in flagged), (line, flagged)


def test_the_import_lists_the_pod_script_rehearsal_the_plan_runs(tmp_path, capsys, monkeypatch):
    """A `bash -c` script that sources a file its ConfigMap lacks fails when the plan rehearses
    it (TRAINFORGE_POD_SCRIPT_FAILS, plan/checks/pod_scripts.py); the import's list of what the
    plan will flag missed it, then the plan flagged it. Now the list runs the plan's
    rehearsal on the job's objects beside the stack's: the plan of the entry flags the same
    rule with the same message, and nothing more on the job."""
    root = _project(tmp_path)
    monkeypatch.chdir(root)
    path = CORPUS / "review" / "script-fails.yaml"
    assert import_cli.main([str(path), "--stack", "dev", "--out", "imported"]) == 0
    out = capsys.readouterr().out
    head = "# What `trainforge plan` will flag on this entry (its own checks, run on the objects"
    said = out.split(head, 1)[1].split("\n# Next:", 1)[0].splitlines()[1:]
    said = [line.removeprefix("#   - ") for line in said]
    assert [s.split(":", 1)[0] for s in said] == ["TRAINFORGE_POD_SCRIPT_FAILS"], said
    assert "/workspace/env.sh: No such file or directory" in said[0]

    stack = yaml.safe_load((root / "Pulumi.dev.yaml").read_text())
    stack["config"]["trainforge:jobs"] += _entries(out)
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    result = plan_project(root, "dev", standins=False)
    flagged = [(v.rule, v.message) for v in result.failing if "prep-fails" in str(v.names)]
    assert flagged == [tuple(s.split(": ", 1)) for s in said]


def test_a_working_dir_job_runs_the_configmap_file_it_ran(
    tmp_path, capfd, monkeypatch, trainforge_here
):
    """review/workdir.yaml runs `python app/train.py --config app/config.yaml` from workingDir
    /opt with its ConfigMap at /opt/app: the import kept it as a command of the image and
    dropped the ConfigMap, so the pod would run a file the image lacks. Import, plan and
    run-local it: the entry ships both files, the plan is CLEAN, and the run reads the
    ConfigMap's config.yaml through the relative path the original used."""
    root = _project(tmp_path)
    monkeypatch.chdir(root)
    path = CORPUS / "review" / "workdir.yaml"
    assert import_cli.main([str(path), "--stack", "dev", "--out", "imported"]) == 0
    out = capfd.readouterr().out
    assert out.splitlines()[-1] == (
        "# Next: trainforge plan --stack dev; trainforge run-local --stack dev wd-job"
    )
    stack = yaml.safe_load((root / "Pulumi.dev.yaml").read_text())
    stack["config"]["trainforge:jobs"] += _entries(out)
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    result = plan_project(root, "dev", standins=False)
    assert result.clean, [(v.rule, v.message) for v in result.failing]
    (job,) = [dj for dj in result.inventory.declared.jobs if dj.spec.name == "wd-job"]
    shipped = job.emitted.user_configmap["data"]
    assert "lr: 0.1\n" in shipped.values()
    logs = _run_local(trainforge_here, root, "wd-job")
    assert "wd-job read config.yaml -> lr: 0.1" in logs


def test_a_namespace_that_names_a_team_is_the_team(tmp_path, capsys):
    """The review's prod import of a job with `metadata.namespace: llm` and no --team stopped
    with "--team: required; the stack's teams: llm, vision". The namespace names one: it is
    the team, and the line says so; a namespace of no team still needs --team, saying why."""
    docs = list(yaml.safe_load_all(BLOG.read_text()))
    docs[1]["metadata"]["namespace"] = "llm"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    args = [str(path), "--project-dir", str(ROOT), "--stack", "prod"]
    assert import_cli.main(args) == 0
    out = capsys.readouterr().out
    assert _entries(out)[0]["team"] == "llm"
    assert (
        "#   - metadata.namespace llm: team llm's namespace -> team: llm (no --team given; the "
        "job runs in its team's namespace)"
    ) in out.splitlines()
    docs[1]["metadata"]["namespace"] = "kubeflow"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    assert import_cli.main(args) == 2
    assert capsys.readouterr().err == (
        "trainforge import: --team: required; the stack's teams: llm, vision (the file's "
        "metadata.namespace kubeflow is none of their namespaces)\n"
    )
