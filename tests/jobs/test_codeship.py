"""Shipping the runtime in a ConfigMap: keys, items, content-hash name, size limit."""

from __future__ import annotations

from pathlib import Path

import pytest

import trainforge
from trainforge.core.errors import JobConfigError
from trainforge.jobs import codeship


def make_package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "trainforge"
    for rel, text in files.items():
        p = pkg / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return pkg


def test_collects_init_and_runtime_only(tmp_path):
    pkg = make_package(
        tmp_path,
        {
            "__init__.py": "v = 1\n",
            "training/__init__.py": "",
            "training/models/gpt.py": "GPT = 1\n",
            "training/__pycache__/x.py": "junk",
            "jobs/spec.py": "not shipped\n",
            "training/notes.txt": "not python\n",
            "core/__init__.py": "",
            "core/data/gpu_catalog.json": "{}\n",
        },
    )
    bundle = codeship.collect(pkg)
    paths = [p for p, _ in bundle.files]
    assert paths == [
        "trainforge/__init__.py",
        "trainforge/core/__init__.py",
        "trainforge/core/data/gpu_catalog.json",
        "trainforge/training/__init__.py",
        "trainforge/training/models/gpt.py",
    ]
    assert bundle.data()["trainforge--training--models--gpt.py"] == "GPT = 1\n"
    assert {
        "key": "trainforge--training--models--gpt.py",
        "path": "trainforge/training/models/gpt.py",
    } in bundle.items()
    assert all("/" not in k for k in bundle.data())


def test_name_follows_content(tmp_path):
    a = codeship.collect(make_package(tmp_path / "a", {"__init__.py": "", "training/x.py": "1"}))
    b = codeship.collect(make_package(tmp_path / "b", {"__init__.py": "", "training/x.py": "2"}))
    c = codeship.collect(make_package(tmp_path / "c", {"__init__.py": "", "training/x.py": "1"}))
    assert a.configmap_name("job") != b.configmap_name("job")
    assert a.configmap_name("job") == c.configmap_name("job")
    assert a.configmap_name("job").startswith("job-code-") and len(a.digest) == 64


def test_size_limit_is_checked_with_a_clear_error(tmp_path):
    pkg = make_package(
        tmp_path, {"__init__.py": "", "training/big.py": "#" * codeship.CONFIGMAP_BUDGET}
    )
    with pytest.raises(
        JobConfigError,
        match=r"over the \d+-byte budget of a ConfigMap.*largest file is trainforge/training/big.py.*codeSource: image",
    ):
        codeship.collect(pkg)


def test_missing_runtime_is_reported(tmp_path):
    pkg = make_package(tmp_path, {"__init__.py": ""})
    with pytest.raises(JobConfigError, match="trainforge/training\\) is missing"):
        codeship.collect(pkg)


def test_the_real_runtime_fits():
    bundle = codeship.collect()
    paths = {p for p, _ in bundle.files}
    runtime = Path(trainforge.__file__).parent / "training"
    assert "trainforge/__init__.py" in paths
    # the runtime imports core, which reads the GPU/instance catalog
    assert {"trainforge/core/catalog.py", "trainforge/core/data/gpu_catalog.json"} <= paths
    assert {
        f"trainforge/training/{p.relative_to(runtime).as_posix()}"
        for p in runtime.rglob("*.py")
        if "__pycache__" not in p.parts
    } <= paths
    assert bundle.size < codeship.CONFIGMAP_BUDGET


def test_configmap_manifest_is_immutable():
    bundle = codeship.CodeBundle(files=(("trainforge/__init__.py", ""),))
    cm = codeship.configmap_manifest(bundle, "job", "ns", {"a": "b"})
    assert cm["immutable"] is True and cm["metadata"] == {
        "name": bundle.configmap_name("job"),
        "namespace": "ns",
        "labels": {"a": "b"},
    }


def test_the_shipped_bundle_runs_on_its_own(tmp_path):
    """Materialise the ConfigMap the way the volume's `items` do and run the pod's entry point
    from it alone: the bundle is self-contained and `python -m trainforge.training` works."""
    import os
    import subprocess
    import sys

    bundle = codeship.collect()
    data = bundle.data()
    mount = tmp_path / "src"
    for item in bundle.items():
        path = mount / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data[item["key"]])
    work = tmp_path / "work"
    work.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "MASTER_", "RANK", "WORLD_", "LOCAL_"))
    }
    env.update(
        PYTHONPATH=str(mount), PYTHONDONTWRITEBYTECODE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1"
    )
    probe = "import trainforge.training, sys; print(trainforge.training.__file__)"
    where = subprocess.run(
        [sys.executable, "-c", probe], cwd=work, env=env, capture_output=True, text=True, check=True
    )
    assert where.stdout.strip().startswith(str(mount))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainforge.training",
            "--model",
            "mlp",
            "--steps",
            "2",
            "--batch-size",
            "4",
            "--dataset-size",
            "64",
            "--checkpoint-dir",
            str(work / "ckpt"),
            "--output-dir",
            str(work / "out"),
            "--metrics-port",
            "0",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert (work / "out" / "summary.json").is_file()
