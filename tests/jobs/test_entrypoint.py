"""Bring your own code: `entrypoint` parsing, what is shipped (and refused), the container
command and contract env of every kind, each rendered PyTorchJob validated against the
upstream CRD, the operator's webhook rules and the core PodTemplate schema."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from tests.jobs.helpers import (
    CODE,
    CPU_POOL,
    DLC_IMAGE,
    GPU_POOL,
    container,
    env_of,
    target,
    validate_pod_templates,
    webhook_errors,
)
from tests.jobs.schemas import crd_errors
from trainforge.core.errors import JobConfigError
from trainforge.jobs import codeship, entrypoint
from trainforge.jobs.backends import emit
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job

W = "trainforge:jobs[0]"
TRAIN = "import os\nprint(os.environ['RANK'])\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A user repository: a script directory, a package, and things that must not ship."""
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "train.py").write_text(TRAIN)
    (tmp_path / "train" / "config.yaml").write_text("lr: 0.1\n")
    (tmp_path / "train" / "lookup.bin").write_bytes(bytes(range(256)) * 4)
    run_sh = tmp_path / "train" / "run.sh"
    run_sh.write_text("#!/bin/sh\nexec python train.py\n")
    run_sh.chmod(0o755)
    for junk in (".git/HEAD", "__pycache__/train.cpython-311.pyc", ".env", "venv/pyvenv.cfg"):
        p = tmp_path / "train" / junk
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("secret or junk\n")
    (tmp_path / "train" / "venv" / "lib.py").write_text("x = 1\n")
    pkg = tmp_path / "src" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text("print('module')\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def build(entry, pool=CPU_POOL, tgt=None, code=CODE, **kw):
    raw = {"name": "byo", "team": "research", "pool": pool.name, "entrypoint": entry, **kw}
    t = tgt or target(pool)
    job = resolve_job(parse_job(raw, W), t, W)
    user = entrypoint.user_code(job, ".", W)
    return job, user, emit(job, t, code, user)


def assert_valid(out):
    pj = out.pytorchjob
    assert crd_errors(pj) == []
    assert webhook_errors(pj) == []
    assert validate_pod_templates(pj) == len(pj["spec"]["pytorchReplicaSpecs"])


# --- parsing ------------------------------------------------------------------------------------


def test_the_issues_stack_example_parses():
    job = parse_job(
        {
            "name": "mnist-user",
            "team": "research",
            "pool": "training-workloads",
            "workers": 2,
            "entrypoint": {"script": "examples/mnist/train.py", "args": ["--epochs", "1"]},
        },
        W,
    )
    e = job.entrypoint
    assert (e.kind, e.script, e.code_dir, e.args) == (
        "script",
        "examples/mnist/train.py",
        "examples/mnist",
        ("--epochs", "1"),
    )
    assert e.entry_file == "train.py"
    assert job.metrics_port == 0  # a plain script serves no metrics: no PodMonitor by default


@pytest.mark.parametrize(
    "entry, extra, match",
    [
        (
            {"script": "t.py", "args": ["--epochs", 1]},
            {},
            r"entrypoint\.args\[1\]: got 1; expected a string",
        ),
        (
            {"script": "/home/me/t.py"},
            {},
            r"entrypoint\.script: got '/home/me/t.py'; expected a file: a path relative to the "
            r"project directory .* and inside it",
        ),
        (  # the same rule for a path that leaves the project
            {"script": "../user/x.py"},
            {},
            r"entrypoint\.script: got '../user/x.py'; expected a file: a path relative to the "
            r"project directory .* and inside it \(no leading /, no drive letter, no \.\. above",
        ),
        (
            {"script": "t.py", "codeDir": "src/../.."},
            {},
            r"entrypoint\.codeDir: got 'src/../..'; expected a directory: a path relative",
        ),
        (
            {"script": "a/t.py", "codeDir": "b"},
            {},
            r"entrypoint\.script: .*expected a script inside codeDir \(b\)",
        ),
        (
            {"script": "t.py", "module": "m"},
            {},
            r"entrypoint\.module: got 'm'; expected only one of script, module, command .*script is set too",
        ),
        ({}, {}, r"jobs\[0\]\.entrypoint: got \{\}; expected something to run: one of script"),
        ({"codeDir": "src"}, {}, r"entrypoint\.codeDir: got 'src'; expected something to run"),
        (
            {"command": ["torchrun", "train.py"]},
            {},
            r"jobs\[0\]\.image: got None; expected an image: entrypoint\.command runs",
        ),
        (
            {"module": "pkg.train"},
            {},
            r"jobs\[0\]\.image: .*module 'pkg.train' without codeDir runs from your image",
        ),
        (
            {"module": "pkg/train.py", "codeDir": "src"},
            {},
            r"entrypoint\.module: .*dotted module name",
        ),
        ({"script": "t.py", "scirpt": "x"}, {}, r"entrypoint\.scirpt: .*unknown key"),
        (
            {"script": "t.py"},
            {"model": "gpt"},
            r"jobs\[0\]\.model: got 'gpt'; expected no model: it configures the bundled runtime",
        ),
        (
            {"script": "t.py"},
            {"expectedStepSeconds": 2},
            r"expectedStepSeconds: got 2.0; expected modelSize.steps too: it is multiplied by the job's steps, which a job with .* states only in modelSize.steps",
        ),
        ({"script": "t.py"}, {"strategy": "fsdp"}, r"jobs\[0\]\.strategy: .*bundled runtime"),
        (
            {"script": "t.py"},
            {"preset": "fsdp"},
            r"jobs\[0\]\.preset: .*your code chooses its own parallelism",
        ),
        (
            {"script": "t.py"},
            {"env": {"TRAINFORGE_CHECKPOINT_DIR": "/x"}},
            "set by the operator or the platform",
        ),
        (
            {"command": []},
            {"image": DLC_IMAGE},
            r"entrypoint\.command: got \[\]; expected the argv",
        ),
        (
            {"function": "train"},
            {},
            r"entrypoint\.function: got 'train'; expected a Python function \(the Python API only",
        ),
        (
            {"command": ["x"], "args": ["y"]},
            {"image": DLC_IMAGE},
            r"entrypoint\.args: .*in command itself",
        ),
        (
            {"command": ["python", "train.py"], "workingDir": "app"},
            {"image": DLC_IMAGE},
            r"entrypoint\.workingDir: got 'app'; expected an absolute path of your image",
        ),
        (  # shipped code runs from its mount: a workingDir would be a second, ignored answer
            {"script": "t.py", "workingDir": "/app"},
            {},
            r"entrypoint\.workingDir: got '/app'; expected no workingDir with shipped code",
        ),
        (
            {"module": "pkg.train", "codeDir": "src", "workingDir": "/app"},
            {},
            r"entrypoint\.workingDir: got '/app'; expected no workingDir with shipped code",
        ),
        (
            {"module": "pkg.train"},
            {"image": DLC_IMAGE, "workingDir": "/app"},
            r"jobs\[0\]\.workingDir: .*entrypoint\.workingDir",
        ),
    ],
)
def test_bad_entrypoints_name_the_key(entry, extra, match):
    raw = {"name": "byo", "team": "research", "pool": "p", "entrypoint": entry, **extra}
    with pytest.raises(JobConfigError, match=match):
        parse_job(raw, W)


# --- what is shipped ----------------------------------------------------------------------------


def test_the_script_directory_is_shipped_without_junk(project):
    _, user, out = build({"script": "train/train.py"})
    assert user.paths == [
        "config.yaml",
        "lookup.bin",
        "run.sh",
        "train.py",
    ]  # no .git, .env, venv, caches
    cm = out.user_configmap
    assert cm["immutable"] is True and cm["metadata"]["name"] == user.configmap_name("byo", "src")
    assert cm["metadata"]["name"].startswith("byo-src-")
    assert cm["data"]["train.py"] == TRAIN
    assert base64.b64decode(cm["binaryData"]["lookup.bin"]) == bytes(range(256)) * 4
    assert "lookup.bin" not in cm["data"]
    items = {i["path"]: i for i in user.items()}
    assert items["run.sh"]["mode"] == 0o555 and "mode" not in items["train.py"]
    assert out.configmap["metadata"]["name"] == CODE.configmap_name("byo")  # the library too


def test_a_code_change_renames_the_configmap_and_changes_the_job(project):
    _, a, out_a = build({"script": "train/train.py"})
    (project / "train" / "train.py").write_text(TRAIN + "# changed\n")
    _, b, out_b = build({"script": "train/train.py"})
    assert a.configmap_name("byo", "src") != b.configmap_name("byo", "src")
    assert out_a.pytorchjob["spec"] != out_b.pytorchjob["spec"]


def test_too_large_a_directory_is_refused_with_its_size(project):
    (project / "train" / "weights.bin").write_bytes(b"\0" * (1100 * 1024))
    with pytest.raises(JobConfigError) as e:
        build({"script": "train/train.py"})
    msg = str(e.value)
    # the value set, and the directory it ships (it showed the directory as the value)
    assert msg.startswith(f"{W}.entrypoint.script: got 'train/train.py'; the directory it ")
    assert "ships, train, holds 1.08 MiB in 5 files: more than a ConfigMap can ship (960." in msg
    assert "largest: weights.bin (1.07 MiB)" in msg and "bake the code into an image" in msg
    _follow_the_fix(msg, {"script": "train/train.py"})


def _follow_the_fix(msg: str, entry: dict) -> set[str]:
    """Set the entrypoint.exclude the refusal prints: the job then builds (the fix was the
    fixed text `["data/*"]`, which excluded nothing here and gave the same refusal)."""
    import yaml

    found = re.search(r"set entrypoint\.exclude: (\[[^]]*\])", msg)
    assert found, msg
    _, user, _ = build({**entry, "exclude": yaml.safe_load(found.group(1))})
    return set(user.paths)


def test_the_printed_exclude_names_the_largest_files_and_fits(project):
    """The fix is built from the largest files (their paths in the shipped directory, kept with
    the patterns already set), and following it fits; the script itself is never excluded."""
    (project / "train" / "data").mkdir()
    (project / "train" / "data" / "a.bin").write_bytes(b"\1" * (700 * 1024))
    (project / "train" / "b.bin").write_bytes(b"\2" * (600 * 1024))
    entry = {"script": "train/train.py", "exclude": ["config.yaml"]}
    with pytest.raises(JobConfigError) as e:
        build(entry)
    msg = str(e.value)
    assert 'set entrypoint.exclude: ["config.yaml", "data/a.bin"] (' in msg, msg
    shipped = _follow_the_fix(msg, entry)
    assert "train.py" in shipped and "b.bin" in shipped and "data/a.bin" not in shipped
    # a script that is itself most of it: no exclude can fit, and none is offered
    (project / "train" / "train.py").write_text("# " + "x" * (1000 * 1024) + "\n" + TRAIN)
    with pytest.raises(JobConfigError) as e:
        build({"script": "train/train.py"})
    msg = str(e.value)
    assert "set entrypoint.exclude" not in msg
    assert "Excluding even its largest files (data/a.bin, b.bin) leaves 1001.1 KiB:" in msg, msg


@pytest.mark.parametrize(
    "entry, match",
    [
        (
            {"script": "train/missing.py"},
            r"entrypoint\.script: got 'train/missing.py'; no such file",
        ),
        (
            {"script": "train/train.py", "exclude": ["train.py"]},
            "it is excluded from what is shipped",
        ),
        ({"script": "nope/train.py"}, r"entrypoint\.script: got 'nope/train.py'; no such file"),
        ({"script": "train/train.py", "codeDir": "nope"}, "expected a script inside codeDir"),
        (
            {"module": "mypkg.train", "codeDir": "nope"},
            r"entrypoint\.codeDir: got 'nope'; no such directory",
        ),
        (
            {"module": "mypkg.evaluate", "codeDir": "src"},
            r"entrypoint\.module: got 'mypkg.evaluate'; not found in codeDir src",
        ),
    ],
)
def test_missing_code_is_refused_at_preview(project, entry, match):
    with pytest.raises(JobConfigError, match=match):
        build(entry)


def test_a_script_that_does_not_parse_is_refused(project):
    (project / "train" / "train.py").write_text("def broken(:\n")
    with pytest.raises(
        JobConfigError, match=r"entrypoint\.script: .*line 1: .*checked with Python"
    ):
        build({"script": "train/train.py"})


def test_a_file_name_that_cannot_be_a_configmap_key_is_named(project):
    (project / "train" / "my notes.txt").write_text("x")
    with pytest.raises(
        JobConfigError, match="'my notes.txt'; this file name cannot be a ConfigMap key"
    ):
        build({"script": "train/train.py"})


@pytest.mark.parametrize(
    ("files", "entry", "match"),
    [
        (
            ["train/random.py"],
            {"script": "train/train.py"},
            r"entrypoint\.script: got 'train/random\.py'; this file shadows the module "
            r"'random', which Python, torch or the launcher import before your code runs .*"
            r"rename it, e\.g\. my_random\.py",
        ),
        (
            ["src/queue.py"],
            {"module": "mypkg.train", "codeDir": "src"},
            r"entrypoint\.codeDir: got 'src/queue\.py'; this file shadows the module 'queue'",
        ),
        (  # beside a script in a folder of codeDir: that folder is sys.path[0]
            ["train/typing/__init__.py"],
            {"script": "train/train.py", "codeDir": "."},
            r"entrypoint\.codeDir: got 'train/typing/__init__\.py'; this file shadows the "
            r"module 'typing'",
        ),
        (  # a command's shipped directory is on PYTHONPATH of every python it starts
            ["train/torch.py"],
            {"command": ["./run.sh"], "codeDir": "train"},
            r"entrypoint\.codeDir: got 'train/torch\.py'; this file shadows the module 'torch'",
        ),
    ],
)
def test_a_shipped_file_that_shadows_a_start_up_module_is_refused(project, files, entry, match):
    """Before: the plan shipped it, and every pod stopped in the launcher's `import tempfile`
    (or torch's import) with a traceback, counted as a bug in the code (exit 1)."""
    for name in files:
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("def helper():\n    return 4\n")
    extra = {"image": DLC_IMAGE} if "command" in entry else {}
    with pytest.raises(JobConfigError, match=match):
        build(entry, **extra)


def test_files_that_shadow_nothing_are_shipped(project):
    """A user's utils.py, model.py, data.py, a module inside a package, or one excluded."""
    for name in ("utils.py", "model.py", "data.py", "mypkg/__init__.py", "mypkg/random.py"):
        path = project / "train" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("X = 1\n")
    (project / "train" / "queue.py").write_text("X = 1\n")
    _, user, out = build({"script": "train/train.py", "exclude": ["queue.py"]})
    assert_valid(out)
    assert {"utils.py", "model.py", "data.py", "mypkg/random.py"} <= set(user.paths)
    assert "queue.py" not in user.paths


# --- what runs ----------------------------------------------------------------------------------


def test_script_one_process_per_pod(project):
    job, _, out = build({"script": "train/train.py", "args": ["--epochs", "1"]}, workers=2)
    assert_valid(out)
    c = container(out.pytorchjob)
    # through the shipped wrapper: a lost peer exits 202 (retryable), a bug 1 (usercode.py)
    assert c["command"] == [
        "python",
        "-m",
        "trainforge.training.usercode",
        "/workspace/train.py",
        "--epochs",
        "1",
    ]
    assert c["workingDir"] == "/workspace"
    pod = out.pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["shareProcessNamespace"] is True  # SIGTERM reaches a handler-less script
    env = env_of(c)
    assert env["PYTHONPATH"] == "/workspace:/opt/trainforge/src"
    assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == ("0", "1")
    assert env["TRAINFORGE_CHECKPOINT_DIR"] == "/fsx/checkpoints/team-research/byo"
    assert env["TRAINFORGE_OUTPUT_DIR"] == "/fsx/runs/team-research/byo"
    assert env["TRAINFORGE_GRACE_PERIOD"] == "90" and env["TRAINFORGE_JOB_NAME"] == "byo"
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow.mlflow.svc:5000"
    assert "TRAINFORGE_CHECKPOINT_S3" not in env  # stock image: no boto3, no mirror
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["src"] == {"name": "src", "mountPath": "/workspace", "readOnly": True}
    assert out.podmonitor is None  # metricsPort defaults to 0 for user code


def test_script_with_gpus_runs_under_torchrun(project):
    job, _, out = build({"script": "train/train.py"}, pool=GPU_POOL, workers=2, image=DLC_IMAGE)
    assert_valid(out)
    c = container(out.pytorchjob)
    # torchrun through the shipped launcher: the pod exits with the workers' reason code
    assert c["command"] == [
        "python",
        "-m",
        "trainforge.training.launch",
        "--nnodes=2",
        "--nproc-per-node=4",
        "--node-rank=$(RANK)",
        "--master-addr=$(MASTER_ADDR)",
        "--master-port=$(MASTER_PORT)",
        "--rdzv-conf=timeout=960",
        "-m",
        "trainforge.training.usercode",
        "/workspace/train.py",
    ]
    env = env_of(c)
    assert env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == "90" and "LOCAL_RANK" not in env
    assert env["TRAINFORGE_CHECKPOINT_S3"] == "s3://tf-checkpoints-123/research/checkpoints/byo"


def test_elastic_script(project):
    _, _, out = build(
        {"script": "train/train.py"}, preset="elastic", elastic={"minWorkers": 1, "maxWorkers": 3}
    )
    assert_valid(out)
    cmd = container(out.pytorchjob, "Worker")["command"]
    assert cmd[:4] == ["python", "-m", "trainforge.training.launch", "--nnodes=1:3"]
    assert "--rdzv-conf=join_timeout=960" in cmd and cmd[-1] == "/workspace/train.py"


def test_user_code_in_its_own_image_runs_plain_torchrun(project):
    """codeSource: image ships no trainforge library, so no launcher: torchrun itself."""
    _, _, out = build(
        {"module": "team.train"},
        pool=GPU_POOL,
        workers=2,
        image=DLC_IMAGE,
        codeSource="image",
    )
    cmd = container(out.pytorchjob)["command"]
    assert cmd[:2] == ["torchrun", "--nnodes=2"] and "--rdzv-conf=timeout=960" in cmd
    assert env_of(container(out.pytorchjob))["TRAINFORGE_HANG_TIMEOUT"] == "300"


def test_module_from_a_shipped_package(project):
    _, user, out = build({"module": "mypkg.train", "codeDir": "src", "args": ["-v"]}, workers=2)
    assert_valid(out)
    c = container(out.pytorchjob)
    assert c["command"] == [
        "python",
        "-m",
        "trainforge.training.usercode",
        "-m",
        "mypkg.train",
        "-v",
    ]
    assert user.paths == ["mypkg/__init__.py", "mypkg/train.py"]
    assert env_of(c)["PYTHONPATH"] == "/workspace:/opt/trainforge/src"


def test_module_and_command_from_the_image(project):
    _, user, out = build(
        {"module": "team.train", "args": ["--x"]}, image=DLC_IMAGE, codeSource="image"
    )
    assert_valid(out)
    assert user is None and out.user_configmap is None and out.configmap is None
    c = container(out.pytorchjob)
    assert c["command"] == ["python", "-m", "team.train", "--x"] and "workingDir" not in c
    assert "PYTHONPATH" not in env_of(c)
    _, _, out = build({"command": ["bash", "-c", "echo $(RANK)"]}, image=DLC_IMAGE, workers=2)
    assert_valid(out)
    assert container(out.pytorchjob)["command"] == ["bash", "-c", "echo $(RANK)"]


def test_command_with_a_shipped_directory(project):
    _, _, out = build({"command": ["./run.sh"], "codeDir": "train"}, image=DLC_IMAGE)
    assert_valid(out)
    c = container(out.pytorchjob)
    assert c["command"] == ["./run.sh"] and c["workingDir"] == "/workspace"


def test_the_bundled_runtime_gets_the_same_contract_and_stays_unchanged():
    raw = {"name": "llm", "team": "research", "pool": GPU_POOL.name, "workers": 2}
    t = target(GPU_POOL)
    job = resolve_job(parse_job(raw, W), t, W)
    out = emit(job, t, CODE)
    c = container(out.pytorchjob)
    env = env_of(c)
    assert env["TRAINFORGE_CHECKPOINT_DIR"] == "/fsx/checkpoints/team-research/llm"
    assert env["PYTHONPATH"] == "/opt/trainforge/src" and "workingDir" not in c
    assert (
        "shareProcessNamespace"
        not in out.pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    )  # the runtime installs its own SIGTERM handler
    assert c["command"][-len(entrypoint.training_args(job, t)) - 2 :][:2] == [
        "-m",
        "trainforge.training",
    ]


def test_collect_dir_skips_any_virtualenv_and_hidden_files(tmp_path):
    (tmp_path / "a.py").write_text("a\n")
    (tmp_path / "myenv").mkdir()
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "myenv" / "site.py").write_text("x\n")
    (tmp_path / ".secrets").mkdir()
    (tmp_path / ".secrets" / "key").write_text("k\n")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "model.pt").write_bytes(b"\0")
    bundle = codeship.collect_dir(tmp_path, "x")
    assert bundle.paths == ["a.py"]
    with pytest.raises(JobConfigError, match="nothing to ship"):
        codeship.collect_dir(tmp_path, "x", exclude=("*.py",))


def test_write_to_projects_the_files_read_only(tmp_path, project):
    _, user, _ = build({"script": "train/train.py"})
    user.write_to(tmp_path / "code")
    assert (tmp_path / "code" / "train.py").read_text() == TRAIN
    assert (tmp_path / "code" / "lookup.bin").stat().st_mode & 0o777 == 0o444
    assert (tmp_path / "code" / "run.sh").stat().st_mode & 0o777 == 0o555
    assert Path(tmp_path / "code").stat().st_mode & 0o222 == 0


def test_the_jobs_env_comes_after_the_contract_so_it_can_refer_to_it(project):
    _, _, out = build({"script": "train/train.py"}, env={"DATA": "$(TRAINFORGE_OUTPUT_DIR)/data"})
    names = [e["name"] for e in container(out.pytorchjob)["env"]]
    assert names.index("DATA") > names.index("TRAINFORGE_OUTPUT_DIR")
    assert names[-1] == "DATA"


OLD_TORCH = "pytorch/pytorch:2.0.1-cuda11.8-cudnn8-runtime"  # seed 003's image


def test_an_old_torch_image_is_fine_for_a_plain_script(project):
    """The runtime library is shipped, but a script that never imports it does not need it."""
    _, user, out = build({"script": "train/train.py"}, image=OLD_TORCH)
    assert container(out.pytorchjob)["image"] == OLD_TORCH and user is not None


def test_an_old_torch_image_is_refused_for_code_that_imports_trainforge(project):
    (project / "train" / "helpers.py").write_text(
        "from trainforge.training import CheckpointManager\n"
    )
    # what the script runs: a helpers.py it never imports is shipped but never needs the library
    build({"script": "train/train.py"}, image=OLD_TORCH)
    train = project / "train" / "train.py"
    train.write_text(f"import helpers\n{train.read_text()}")
    with pytest.raises(
        JobConfigError,
        match=r"jobs\[0\]\.image: got 'pytorch/pytorch:2\.0\.1-cuda11\.8-cudnn8-runtime'; "
        r"helpers\.py imports trainforge, whose library needs torch >= 2\.6",
    ):
        build({"script": "train/train.py"}, image=OLD_TORCH)
    # with codeSource: image, the image brings its own trainforge
    build({"script": "train/train.py"}, image=OLD_TORCH, codeSource="image", code=None)


def test_a_declared_old_torch_is_refused_for_code_that_imports_trainforge(project):
    """The image's torch comes from the one model (image_facts.facts_for): a private image
    says nothing by its tag, but its declared imageFacts.torch is held to the same minimum."""
    (project / "train" / "helpers.py").write_text(
        "from trainforge.training import CheckpointManager\n"
    )
    train = project / "train" / "train.py"
    train.write_text(f"import helpers\n{train.read_text()}")
    own = "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:v1"
    with pytest.raises(
        JobConfigError,
        match=r"jobs\[0\]\.image: got '123456789012\.dkr.*train:v1'; helpers\.py imports "
        r"trainforge, whose library needs torch >= 2\.6 .*this image has torch 2\.1 \(its "
        r"imageFacts\.torch\)",
    ):
        build({"script": "train/train.py"}, image=own, imageFacts={"torch": "2.1"})
    build({"script": "train/train.py"}, image=own, imageFacts={"torch": "2.6.0+cu124"})


def test_served_to_other_languages_code_must_come_in_an_image(project, monkeypatch):
    monkeypatch.setattr(entrypoint, "SERVED_TO_OTHER_LANGUAGES", True)
    with pytest.raises(JobConfigError, match=r"entrypoint\.script: .*from another Pulumi language"):
        build({"script": "train/train.py"})
    _, user, _ = build({"module": "team.train"}, image=DLC_IMAGE)
    assert user is None


# --- every backend runs the same user-code pod ------------------------------------------------


def _controller_pod(out) -> dict:
    """The pod each backend's controller creates (Trainer v2.3's build rehearsed)."""
    from trainforge.jobs import trainjob

    wl = out.workload
    if out.backend == "pytorchjob":
        return wl["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    if out.backend == "trainjob":
        return trainjob.built_pod(wl)
    return wl["spec"]["template"]


@pytest.mark.parametrize(
    "entry, extra, runtime",
    [
        ({"script": "train/train.py", "args": ["--x", "1"]}, {}, "trainforge-torch-exitcode-code"),
        ({"module": "team.train"}, {"image": DLC_IMAGE}, "trainforge-torch-exitcode-image"),
    ],
)
def test_user_code_pods_are_the_same_on_every_backend(project, entry, extra, runtime):
    import kubernetes_validate

    from tests.jobs.helpers import K8S_VERSION
    from trainforge.core.contract import BACKENDS
    from trainforge.jobs.backends import emit as emit_any
    from trainforge.plan.checks import job_backends
    from trainforge.plan.checks import validate as V

    pods = {}
    for backend in BACKENDS:
        raw = {"name": "byo", "team": "research", "pool": CPU_POOL.name, "workers": 2}
        raw.update(entrypoint=entry, backend=backend, **extra)
        t = target(CPU_POOL, backends=BACKENDS)
        job = resolve_job(parse_job(raw, W), t, W)
        out = emit_any(job, t, CODE, entrypoint.user_code(job, ".", W))
        assert (out.user_configmap is not None) == ("script" in entry)
        if backend == "trainjob":
            assert out.workload["spec"]["runtimeRef"]["name"] == runtime
            assert V.trainjob_findings(out.workload, K8S_VERSION) == []
            # the plan's check: the pod Trainer builds is the job's pod
            assert job_backends._differences(out.pod, _controller_pod(out)) == []
        pods[backend] = _controller_pod(out)
        shadow = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "p"}}
        kubernetes_validate.validate(
            {**shadow, "template": pods[backend]}, K8S_VERSION, strict=True
        )
    ref = pods["pytorchjob"]
    rc = ref["spec"]["containers"][0]
    for backend in ("trainjob", "indexed-job"):
        p, c = pods[backend], pods[backend]["spec"]["containers"][0]
        assert p["spec"]["shareProcessNamespace"] is True, backend
        assert c["command"] == rc["command"] and c.get("workingDir") == rc.get("workingDir")
        assert p["spec"]["volumes"] == ref["spec"]["volumes"], backend
        assert c["volumeMounts"] == rc["volumeMounts"], backend
        env = {e["name"]: e.get("value") for e in c["env"]}
        for name in ("TRAINFORGE_CHECKPOINT_DIR", "TRAINFORGE_OUTPUT_DIR", "PYTHONPATH"):
            assert env.get(name) == {e["name"]: e.get("value") for e in rc["env"]}.get(name)


def test_expected_step_seconds_of_user_code_uses_model_size_steps():
    from trainforge.jobs.duration import job_steps

    job = parse_job(
        {
            "name": "byo",
            "team": "research",
            "pool": "p",
            "entrypoint": {"script": "t.py"},
            "expectedStepSeconds": 2,
            "modelSize": {"layers": 2, "dModel": 64, "seqLen": 32, "vocabSize": 100, "steps": 50},
        },
        W,
    )
    assert job_steps(job) == 50
