"""`trainforge import` ships the code the original ran (jobs/import_code.py): a ConfigMap mounted
through a TrainJob's runtimePatches or named inside an indexed Job's `bash -c`, the files a kept
argument names beside the YAML, and `/dev/shm`'s size; every other mount gets its own reason.
The newcomer review's files (tests/fixtures/import/README.md, review/)."""

from __future__ import annotations

import pytest
import yaml

from tests.jobs.helpers import CODE, target
from tests.jobs.importing import ONE_GPU, imp
from tests.jobs.test_importer import CORPUS
from trainforge.jobs.backends import emit
from trainforge.jobs.importer import ImportProblem
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job

REVIEW = CORPUS / "review"


def _configmap(path, name: str) -> dict:
    return next(d for d in yaml.safe_load_all(path.read_text()) if d["metadata"]["name"] == name)


def test_a_trainjobs_script_mounted_through_its_runtime_patch_is_shipped():
    """tj1.yaml: ConfigMap tj-code at /workspace through spec.runtimePatches; it said "not
    mounted from a ConfigMap, so it must be in the image" and shipped nothing."""
    path = REVIEW / "trainjob-patch-mount.yaml"
    r = imp(path, backends=("pytorchjob", "trainjob"))
    assert r.entry["entrypoint"] == {
        "script": "imported/tj-ft/train.py",
        "args": ["--epochs", "2"],
    }
    assert r.files == {"imported/tj-ft/train.py": _configmap(path, "tj-code")["data"]["train.py"]}
    text = "\n".join(r.changes)
    assert "is not mounted from a ConfigMap" not in text
    patch = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]"
    assert (
        "spec.trainer.command /workspace/train.py (ConfigMap tj-code) -> entrypoint.script "
        f"imported/tj-ft/train.py (the ConfigMap's mount: {patch}.template.spec.template.spec."
        "containers[0].volumeMounts[0])"
    ) in text


def test_an_indexed_jobs_bash_command_ships_the_configmap_it_runs_from_its_mount():
    """ij.yaml: `bash -c "pip install torch && python /code/train.py"` with ConfigMap idx-code at
    /code; the mount was dropped with "/tmp is a writable emptyDir; /dev/shm is sized by
    shmSize" and the code not shipped."""
    path = REVIEW / "indexed-code.yaml"
    r = imp(path, backends=("pytorchjob", "indexed-job"))
    assert r.entry["entrypoint"] == {
        "command": ["bash", "-c", "pip install torch && python /workspace/train.py"],
        "codeDir": "imported/idx-train",
    }
    code = _configmap(path, "idx-code")["data"]["train.py"]
    assert r.files == {"imported/idx-train/train.py": code}
    text = "\n".join(r.changes)
    assert "/dev/shm is sized by shmSize" not in text and "dropped; /tmp" not in text
    assert (
        "ConfigMap idx-code (mounted by spec.template.spec.containers[0].volumeMounts[0]) -> "
        "entrypoint.codeDir imported/idx-train: its 1 file(s) shipped, mounted at /workspace"
    ) in text
    assert "paths under /code in the command -> /workspace/..." in text


def test_a_file_a_kept_argument_names_beside_the_yaml_is_shipped():
    """cf/job.yaml: `--config /workspace/config.yaml`, config.yaml beside the YAML, not shipped."""
    r = imp(REVIEW / "cf" / "job.yaml")
    assert r.entry["entrypoint"]["args"] == ["--config", "/workspace/config.yaml"]
    assert r.files == {
        "imported/cf-job/train.py": (REVIEW / "cf" / "train.py").read_text(),
        "imported/cf-job/config.yaml": (REVIEW / "cf" / "config.yaml").read_text(),
    }


def test_a_named_file_no_shipped_file_holds_is_said(tmp_path):
    job = (REVIEW / "cf" / "job.yaml").read_text()
    (tmp_path / "job.yaml").write_text(job)
    (tmp_path / "train.py").write_text((REVIEW / "cf" / "train.py").read_text())
    r = imp(tmp_path / "job.yaml")
    assert list(r.files) == ["imported/cf-job/train.py"]
    assert (
        "names /workspace/config.yaml, which no shipped file holds (not in ConfigMap train-code, "
        "made from train.py beside the YAML): the pod will not find it"
    ) in "\n".join(r.changes)


def test_a_memory_backed_dev_shm_size_is_kept_as_shm_size():
    """pj1.yaml: emptyDir {medium: Memory, sizeLimit: 8Gi} at /dev/shm; the pod got 3445Mi."""
    r = imp(REVIEW / "shm.yaml", pool_name="gpu-small")
    assert r.entry["shmSize"] == "8Gi"
    text = "\n".join(r.changes)
    assert "volumeMounts[1] dshm (/dev/shm, sizeLimit 8Gi) -> shmSize 8Gi: kept" in text
    assert "volumeMounts[0] data (/data): dropped; declare `volumes: [{claim: training-data" in text
    # the pods get it: the platform's dshm volume is sized by the entry (it was 3445Mi)
    t = target(ONE_GPU, backends=("pytorchjob",))
    job = resolve_job(parse_job(r.entry, "trainforge:jobs[0]"), t, "trainforge:jobs[0]")
    volumes = emit(job, t, CODE).pod["spec"]["volumes"]
    (dshm,) = [v for v in volumes if v["name"] == "dshm"]
    assert dshm["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}


def test_a_script_missing_beside_the_yaml_is_refused_though_a_named_file_is_there(tmp_path):
    """config.yaml beside the YAML but no train.py: the script cannot be shipped (it read
    "ConfigMap train-code.data has no key", a ConfigMap the file does not hold)."""
    (tmp_path / "job.yaml").write_text((REVIEW / "cf" / "job.yaml").read_text())
    (tmp_path / "config.yaml").write_text("lr: 0.1\n")
    with pytest.raises(ImportProblem) as e:
        imp(tmp_path / "job.yaml")
    assert str(e.value) == (
        f"{tmp_path / 'job.yaml'}: spec.pytorchReplicaSpecs.Master.template.spec.volumes (code): "
        "the script /workspace/train.py comes from ConfigMap 'train-code', which is neither a "
        "document of this file nor made from train.py next to it; add the ConfigMap (kubectl "
        "create configmap train-code --from-file=train.py --dry-run=client -o yaml) or put the "
        "file beside the YAML"
    )


def test_a_config_from_a_configmap_beside_a_script_of_the_image_is_shipped(tmp_path):
    """The script is the image's, its --config a ConfigMap's file at /cfg: the command keeps
    the script and ships the config with codeDir, its path moved to /workspace."""
    (tmp_path / "job.yaml").write_text(
        """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: cfg}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: ghcr.io/acme/train:1.0
            command: [python, /app/train.py, --config=/cfg/c.yaml]
            volumeMounts: [{name: c, mountPath: /cfg}]
          volumes: [{name: c, configMap: {name: cfg}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {c.yaml: "lr: 1\\n"}
"""
    )
    r = imp(tmp_path / "job.yaml")
    assert r.entry["entrypoint"] == {
        "command": ["python", "/app/train.py", "--config=/workspace/c.yaml"],
        "codeDir": "imported/cfg",
    }
    assert r.files == {"imported/cfg/c.yaml": "lr: 1\n"}


def test_relative_paths_read_from_working_dir_ship_the_configmap_files_they_name():
    """review/workdir.yaml: workingDir /opt, `python app/train.py --config app/config.yaml`,
    ConfigMap wd-code at /opt/app. The import read `app/train.py` as the image's, kept the
    command and workingDir and dropped the ConfigMap, so the pod ran a file that is not
    there. Read from workingDir as the pod reads them, both are the ConfigMap's: shipped,
    the script as entrypoint.script and the argument relative to where shipped code runs."""
    path = REVIEW / "workdir.yaml"
    r = imp(path)
    assert r.entry["entrypoint"] == {
        "script": "imported/wd-job/train.py",
        "args": ["--config", "config.yaml"],
    }
    data = _configmap(path, "wd-code")["data"]
    assert r.files == {
        "imported/wd-job/train.py": data["train.py"],
        "imported/wd-job/config.yaml": data["config.yaml"],
    }
    at = "spec.pytorchReplicaSpecs.Master.template.spec.containers[0]"
    assert (
        f"{at}.workingDir /opt: dropped; the shipped code runs from its own mount, /workspace, "
        "which holds its files (the relative paths the command names, read from /opt as the "
        "pod reads them: app/train.py (/opt/app/train.py), app/config.yaml "
        "(/opt/app/config.yaml), are the ConfigMap's files, shipped and named from /workspace)"
    ) in r.changes


def test_a_relative_path_the_shipped_code_would_not_find_is_refused_naming_working_dir(tmp_path):
    """workingDir /app with `bash -c "python train.py --config /code/config.yaml"`: the script
    is the image's /app/train.py, the config the ConfigMap's. Shipping the ConfigMap moves the
    pod's working directory to /workspace, where `train.py` is not: one line naming the field."""
    doc = next(yaml.safe_load_all((REVIEW / "workdir.yaml").read_text()))
    c = doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    c.update(workingDir="/app", command=["bash", "-c", "python train.py --config /code/c.yaml"])
    c["volumeMounts"][0]["mountPath"] = "/code"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "wd-code"}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all([doc, {**cm, "data": {"c.yaml": "lr: 1\n"}}]))
    with pytest.raises(ImportProblem) as e:
        imp(path)
    assert str(e.value) == (
        f"{path}: spec.pytorchReplicaSpecs.Master.template.spec.containers[0].workingDir: got "
        "'/app'; the command names train.py relative to it, which no ConfigMap of the file "
        "holds, and the platform runs shipped code from /workspace, where they would not be "
        "found: write them as absolute paths (/app/train.py) or put the files in the ConfigMap"
    )


def test_a_relative_program_read_from_working_dir_keeps_its_directory(tmp_path):
    """`./run.sh config.yaml` from workingDir /opt/app, both files of the ConfigMap there: the
    shipped command names the program by its path under /workspace (a bare `run.sh` would be
    looked up on PATH), its argument relative to /workspace, where shipped code runs."""
    path = tmp_path / "job.yaml"
    path.write_text(
        (REVIEW / "workdir.yaml")
        .read_text()
        .replace('command: ["python", "app/train.py", "--config", "app/config.yaml"]',
                 'command: ["./run.sh", "config.yaml"]')
        .replace("workingDir: /opt", "workingDir: /opt/app")
        .replace("  train.py: |", "  run.sh: |\n    cat \"$1\"\n  train.py: |")
    )  # fmt: skip
    r = imp(path, docker_hub_routed=True)
    assert r.entry["entrypoint"] == {
        "command": ["/workspace/run.sh", "config.yaml"],
        "codeDir": "imported/wd-job",
    }
