"""The review's rv/pj2.yaml end to end (Kubernetes' dependent environment variables): a
PyTorchJob with env RUN_ID=exp7 then OUT_DIR=/tmp/$(RUN_ID), args `--rank $(RANK)`.

Before: the stack model sorted env names, so the manifest listed OUT_DIR before RUN_ID and
the pod (and run-local) saw the literal /tmp/$(RUN_ID); run-local passed `$(RANK)` as
written; neither import nor plan said a word. Now: `trainforge import` keeps the order,
the plan's manifest has RUN_ID first, run-local's pods get /tmp/exp7 and their own rank, and
the plan names a reference the pod cannot resolve (TRAINFORGE_ENV_REFERENCE)."""

from __future__ import annotations

import json

import yaml

from trainforge.core.expansion import env_values

# rv/pj2.yaml, on dev's CPU pool (no GPU limits) with one Worker, so that it runs here
PJ2 = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: resnet-ddp
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
            command: ["python", "/code/train.py"]
            args: ["--out", "/tmp/run-$(RUN_ID)", "--rank", "$(RANK)"]
            env:
            - {name: RUN_ID, value: "exp7"}
            - {name: OUT_DIR, value: "/tmp/$(RUN_ID)"}
            volumeMounts: [{name: code, mountPath: /code}]
          volumes: [{name: code, configMap: {name: rcode}}]
    Worker:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
            command: ["python", "/code/train.py"]
            args: ["--out", "/tmp/run-$(RUN_ID)", "--rank", "$(RANK)"]
            env:
            - {name: RUN_ID, value: "exp7"}
            - {name: OUT_DIR, value: "/tmp/$(RUN_ID)"}
            volumeMounts: [{name: code, mountPath: /code}]
          volumes: [{name: code, configMap: {name: rcode}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: rcode}
data:
  train.py: |
    import argparse, json, os, pathlib
    p = argparse.ArgumentParser(); p.add_argument("--out"); p.add_argument("--rank")
    a = p.parse_args()
    out = pathlib.Path(os.environ["TRAINFORGE_OUTPUT_DIR"]) / f"seen_{os.environ['RANK']}.json"
    out.write_text(json.dumps([a.out, a.rank, os.environ["OUT_DIR"]]))
"""
# a job whose env refers to what its pods cannot see: the operator's RANK (appended after the
# template's env) and a variable defined nowhere
BAD = {
    "name": "bad-refs",
    "team": "research",
    "pool": "training-workloads",
    "preset": "ddp",
    "workers": 1,
    "model": "mlp",
    "steps": 10,
    "env": {"MYRANK": "r$(RANK)", "DATA": "$(DATA_ROOT)/x"},
}


def test_the_reviews_dependent_env_survives_import_plan_and_run_local(
    dev_project, trainforge_here, run_local
):
    project = dev_project("envx", [BAD], {})
    (project / "rv").mkdir()
    (project / "rv" / "pj2.yaml").write_text(PJ2)

    imp = trainforge_here(project, "import", "rv/pj2.yaml", "--stack", "dev", "--out", "rv/imp")
    assert imp.returncode == 0, imp.stdout + imp.stderr
    (entry,) = yaml.safe_load(imp.stdout)  # the printed entry (the rest are comments)
    assert list(entry["env"]) == ["RUN_ID", "OUT_DIR"]
    stack = yaml.safe_load((project / "Pulumi.dev.yaml").read_text())
    stack["config"]["trainforge:jobs"].append(entry)
    (project / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))

    plan = trainforge_here(project, "plan", "--stack", "dev", "--out", "out")
    words = " ".join((plan.stdout + plan.stderr).split())
    manifest = yaml.safe_load(
        (project / "out" / "research" / "pytorchjob-resnet-ddp.yaml").read_text()
    )
    for rtype in ("Master", "Worker"):
        c = manifest["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]
        names = [e["name"] for e in c["env"]]
        assert names.index("RUN_ID") < names.index("OUT_DIR"), names
        values = env_values([(e["name"], e.get("value")) for e in c["env"]])
        assert values["OUT_DIR"] == "/tmp/exp7"
    assert "PyTorchJob/resnet-ddp (job-research-resnet-ddp): container pytorch" not in words
    assert (
        "[TRAINFORGE_ENV_REFERENCE] research/PyTorchJob/bad-refs" in words
        and "MYRANK refers to $(RANK), which the controller appends after the template's env"
        in words
        and "DATA refers to $(DATA_ROOT), which is defined nowhere in the container's env" in words
    ), words[-3000:]

    run = run_local(project, "resnet-ddp")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    for rank in (0, 1):
        seen = json.loads((project / "runs" / "resnet-ddp" / f"seen_{rank}.json").read_text())
        assert seen == ["/tmp/run-exp7", str(rank), "/tmp/exp7"]


# the source lists OUT_DIR before RUN_ID (its pods saw the literal) and refers to a valueFrom
# the entry cannot carry
REVERSED = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: rev-order
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
            command: ["python", "/code/train.py"]
            env:
            - {name: OUT_DIR, value: "/tmp/$(RUN_ID)"}
            - {name: RUN_ID, value: "exp7"}
            - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
            - {name: TAG, value: "$(POD)-x"}
            volumeMounts: [{name: code, mountPath: /code}]
          volumes: [{name: code, configMap: {name: rcode}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: rcode}
data:
  train.py: "print(1)\\n"
"""


def test_import_says_what_the_source_pod_read_literally_and_prints_the_pods_order(
    dev_project, trainforge_here
):
    project = dev_project("envx_imp", [], {})
    (project / "rev.yaml").write_text(REVERSED)
    imp = trainforge_here(project, "import", "rev.yaml", "--stack", "dev", "--out", "imp")
    assert imp.returncode == 0, imp.stdout + imp.stderr
    (entry,) = yaml.safe_load(imp.stdout)
    assert list(entry["env"]) == ["RUN_ID", "TAG", "OUT_DIR"]  # the order its pods get
    words = " ".join(imp.stdout.split())
    at = "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].env"
    assert (
        f"{at} OUT_DIR: after RUN_ID, which it refers to (Kubernetes expands $(VAR) only from "
        "earlier variables: your pods saw the literal $(RUN_ID), these get its value)"
    ) in words
    assert (
        f"{at} TAG: refers to $(POD), dropped above, so the pod sees the literal $(POD): set "
        "POD in the entry's env or change TAG"
    ) in words
