"""`trainforge.jobs.importer`: the seeds' YAML and a blog-style PyTorchJob -> a stack job entry,
with every change named; bad input is one line naming the file and the field (issue #43)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.jobs.helpers import CPU_POOL, GPU_POOL, target
from tests.jobs.importing import (
    POOLS,
    RUNTIME,
    container,
    emitted,
    imp,
    indexed_job_yaml,
    pytorchjob_yaml,
    replica,
    trainer_spec,
    trainjob_yaml,
    write,
)
from trainforge.core.contract import TeamFacts
from trainforge.core.errors import JobConfigError
from trainforge.jobs import node_facts
from trainforge.jobs.backends import pod_templates
from trainforge.jobs.importer import ImportProblem, choose_team
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.plan.checks import rules
from trainforge.plan.mocks import instance_type_result

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "import"
BLOG = ROOT / "examples" / "kubeflow" / "pytorchjob.yaml"  # the blog-style job
PREP_IMAGE = "ghcr.io/acme/prep:1.0"


def test_each_fixture_pool_is_true_to_the_types_it_names():
    """A pool's node facts are those of its own instance types: the catalog's vCPUs, memory
    and GPUs (gpu-small named g5.xlarge and carried a g5.12xlarge node)."""
    for pool in POOLS.values():
        assert [n.instance_type for n in pool.nodes] == list(pool.instance_types), pool.name
        for node in pool.nodes:
            r = instance_type_result(node.instance_type)
            gpus = sum(g["count"] for g in r["gpuses"])
            assert (node.vcpus, node.memory_mib, node.gpus) == (
                r["defaultVcpus"], r["memorySize"], gpus,
            ), pool.name  # fmt: skip
            assert pool.gpus_per_node == gpus and pool.vcpus_per_node == node.vcpus, pool.name


def test_the_blog_pytorchjob_with_its_configmap_script():
    r = imp(BLOG)
    assert r.source == "PyTorchJob blog-ddp"
    assert r.entry == {
        "name": "blog-ddp",
        "team": "research",
        "pool": "gpu-small",  # 1 GPU per pod: the smallest GPU pool that holds it
        "workers": 2,  # Master + 1 Worker
        "gpusPerWorker": 1,
        "entrypoint": {"script": "imported/blog-ddp/train.py", "args": ["--steps", "200"]},
        "env": {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0"},
        "restartPolicy": "OnFailure",  # its replicas' (tests/jobs/test_import_restarts.py)
    }
    docs = list(yaml.safe_load_all(BLOG.read_text()))
    assert r.files == {"imported/blog-ddp/train.py": docs[0]["data"]["train.py"]}
    text = "\n".join(r.changes)
    # the Docker Hub image gives way to the platform's, and the line says why and how to keep it
    assert "image pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime: dropped" in text
    assert "TRAINFORGE_DOCKER_HUB" in text and RUNTIME in text
    assert "dockerHubCredentialArn" in text
    assert "resources.limits.cpu 4: dropped" in text and "resources.limits.memory 8Gi" in text
    # a g5.xlarge leaves 3610m for pods (4 vCPU less the kubelet's and the DaemonSets'): the
    # 4 CPUs fit no node, and the pod gets its GPU's share of one (the fixture gave it a
    # g5.12xlarge: "cpu 47500m, memory 173048Mi, at least what it asks")
    assert "limits.cpu 4: dropped, a pod of that size fits no node of gpu-small" in text
    assert "4 vCPU - 80m kubelet reservation - 310m DaemonSets = 3610m" in text
    assert "gets its GPUs' share of the node: cpu 3600m, memory 13810Mi" in text
    assert "(ConfigMap training-script) -> entrypoint.script imported/blog-ddp/train.py" in text
    assert "env NCCL_DEBUG, NCCL_SOCKET_IFNAME: kept" in text
    assert "metadata.namespace kubeflow: dropped" in text
    assert "imagePullPolicy: dropped" in text
    # with a Docker Hub credential the stack pulls it through its cache: kept
    kept = imp(BLOG, docker_hub_routed=True)
    assert kept.entry["image"] == "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"


def test_the_seed_pytorchjob_whose_configmap_is_made_from_the_script_beside_it():
    r = imp(CORPUS / "seed" / "distributed-pytorch-job.yaml", out_dir="jobs")
    assert r.entry["workers"] == 4 and r.entry["gpusPerWorker"] == 1
    assert r.entry["entrypoint"] == {"script": "jobs/pytorch-distributed-ddp/train_ddp.py"}
    assert r.entry["env"] == {"NCCL_DEBUG": "INFO"}
    assert "image" not in r.entry
    (path, text) = next(iter(r.files.items()))
    assert path == "jobs/pytorch-distributed-ddp/train_ddp.py"
    assert text == (CORPUS / "seed" / "train_ddp.py").read_text()
    assert any("made from train_ddp.py beside the YAML" in c for c in r.changes)


def test_the_seed_inline_python_is_written_out_as_a_script():
    r = imp(CORPUS / "seed" / "simple-pytorch-job.yaml")
    assert r.entry["workers"] == 1 and r.entry["pool"] == "gpu-small"
    assert r.entry["entrypoint"] == {"script": "imported/pytorch-simple/main.py"}
    code = r.files["imported/pytorch-simple/main.py"]
    assert code.startswith("import torch\n") and 'print("Training completed successfully!")' in code
    compile(code, "main.py", "exec")


def test_the_seed_elastic_job_maps_its_policy_and_keeps_the_image_its_command_needs():
    r = imp(CORPUS / "seed" / "elastic-pytorch-job.yaml")
    assert r.entry["preset"] == "elastic"
    assert r.entry["elastic"] == {"minWorkers": 2, "maxWorkers": 4, "maxRestarts": 10}
    # /workspace/train_elastic.py is mounted from nothing: it must be in the image
    assert r.entry["image"] == "pytorch/pytorch:2.0.1-cuda11.8-cudnn8-runtime"
    assert r.entry["entrypoint"]["command"][0] == "torchrun"
    text = "\n".join(r.changes)
    assert "metrics (HPA) dropped" in text and "TRAINFORGE_DOCKER_HUB" in text


def test_a_job_without_a_command_is_refused_naming_the_field():
    path = CORPUS / "seed" / "pytorch-mnist.yaml"
    with pytest.raises(ImportProblem) as e:
        imp(path)
    assert str(e.value).startswith(
        f"{path}: spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command: not set"
    )
    assert "\n" not in str(e.value)


def test_a_trainjob(tmp_path):
    own = trainer_spec(
        command=["torchrun", "--nproc-per-node", "4", "/code/train.py", "--epochs", "1"],
        resourcesPerNode={"limits": {"nvidia.com/gpu": 4}},
        env=[{"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "MASTER_PORT", "value": "1234"}],
    )
    path = write(tmp_path, trainjob_yaml(trainer=own, runtimeRef={"name": "torch-distributed"}))
    r = imp(path)
    assert r.entry["pool"] == "gpu-workloads" and r.entry["workers"] == 2
    assert r.entry["gpusPerWorker"] == 4
    assert r.entry["image"] == "ghcr.io/acme/trainer:1.0"  # the script is in it
    assert r.entry["env"] == {"NCCL_DEBUG": "WARN"}
    assert any("env MASTER_PORT: dropped" in c for c in r.changes)
    assert any("spec.runtimeRef torch-distributed: dropped" in c for c in r.changes)
    assert "backend" not in r.entry  # this stack installs no Kubeflow Trainer: said so
    assert any("kind TrainJob -> the stack's backend (pytorchjob)" in c for c in r.changes)
    assert imp(path, backends=("pytorchjob", "trainjob")).entry["backend"] == "trainjob"


def test_a_trainjobs_runtime_ref_is_said_for_the_backend_it_gets(tmp_path):
    """The Trainer's own example TrainJob (kubeflow/trainer v2.2.1, docs/proposals/
    2170-kubeflow-trainer-v2/README.md, "Example of TrainJob", as v1alpha1) imported into a
    stack without the Trainer said "spec.runtimeRef torch-distributed-multi-node: dropped; on
    the trainjob backend the job runs on the platform's own ClusterTrainingRuntime", and then
    that the job goes to the pytorchjob backend: a runtime it never gets."""
    path = write(
        tmp_path,
        """
        apiVersion: trainer.kubeflow.org/v1alpha1
        kind: TrainJob
        metadata:
          name: torch-ddp
          namespace: tenant-alpha
        spec:
          runtimeRef:
            name: torch-distributed-multi-node
          trainer:
            image: ghcr.io/acme/custom-training:1.0
            command: [torchrun, train.py]  # the proposal's "torchrun train.py": refused below
            numNodes: 5
            resourcesPerNode:
              limits:  # the proposal's `requests` alone: refused (test_import_upstream.py)
                nvidia.com/gpu: 1
    """,
    )
    (line,) = [c for c in imp(path).changes if c.startswith("spec.runtimeRef ")]
    assert line == (
        "spec.runtimeRef torch-distributed-multi-node: dropped (not one of Trainer v2.2.1's "
        "runtimes: its mlPolicy and restarts are unknown here; the platform's runtime is "
        "mlPolicy torch, torchrun on every node); the job runs on the stack's backend "
        "(pytorchjob), which has no training runtime"
    )
    with_trainer = imp(path, backends=("pytorchjob", "trainjob")).changes
    (line,) = [c for c in with_trainer if c.startswith("spec.runtimeRef ")]
    assert line.endswith("on the trainjob backend the job runs on the platform's own "
                         "ClusterTrainingRuntime")  # fmt: skip


def test_a_command_whose_program_is_a_whole_command_line_is_refused(tmp_path):
    """The Trainer's example TrainJob (v2.2.1 docs/proposals/2170, "Example of TrainJob")
    writes `command: [torchrun train.py]`: Kubernetes execs "torchrun train.py" as one
    program name (the v2.2.1 torch plugin rewrites torchtune's command, not this one), so the
    pods fail to start. Import kept it "run as written on your image"."""
    own = trainer_spec(image="ghcr.io/acme/custom-training:1.0", command=["torchrun train.py"])
    path = write(tmp_path, trainjob_yaml("torch-ddp", own))
    with pytest.raises(ImportProblem) as e:
        imp(path)
    assert str(e.value) == (
        f"{path}: spec.trainer.command[0]: got 'torchrun train.py'; Kubernetes runs it as one "
        "program name, and no shell splits it: write each word as its own item: "
        "[torchrun, train.py]"
    )
    # a shell's script is one argument, as the SDK's own TrainJobs write it: kept
    shell = {**own, "command": ["bash", "-c", "torchrun train.py"]}
    path = write(tmp_path, trainjob_yaml("torch-ddp", shell))
    assert imp(path).entry["entrypoint"]["command"] == ["bash", "-c", "torchrun train.py"]


def test_an_unpinned_docker_hub_image_it_keeps_is_told_both_what_the_plan_says(tmp_path):
    """The Trainer's example TrainJob's `image: docker.io/custom-training` (no tag, Docker Hub)
    with a command: import said only "pin a tag or digest"; pinned as told, the plan then
    flagged it TRAINFORGE_DOCKER_HUB (this stack pulls Docker Hub without a credential)."""
    path = write(
        tmp_path,
        """
        apiVersion: trainer.kubeflow.org/v1alpha1
        kind: TrainJob
        metadata: {name: torch-ddp}
        spec:
          trainer:
            image: docker.io/custom-training
            command: [torchrun, train.py]
            numNodes: 2
    """,
    )
    (line,) = [c for c in imp(path).changes if c.startswith("image ")]
    assert "pin a tag or digest" in line and "(TRAINFORGE_DOCKER_HUB)" in line
    pinned = {"name": "node", "image": "docker.io/custom-training:1.0"}
    flagged = rules.pod_image_not_docker_hub("TrainJob", {}, {"containers": [pinned]})
    assert flagged == [
        "container 'node' image 'docker.io/custom-training:1.0'" + rules.DOCKER_HUB_TAIL
    ]
    # a stack that pulls Docker Hub through its cache: the pin is all
    (line,) = [c for c in imp(path, docker_hub_routed=True).changes if c.startswith("image ")]
    assert "pin a tag or digest" in line and "DOCKER_HUB" not in line


def test_a_dropped_pull_policy_is_told_the_one_the_platform_sets():
    """The training operator's elastic echo example (v1.9.4) sets `imagePullPolicy:
    IfNotPresent` on a `:latest` image. Import said "dropped; Kubernetes' default applies
    (IfNotPresent for a tagged image)": Kubernetes' default for `:latest` is Always, and the
    platform's pods set IfNotPresent themselves. The line now names what the emitted pod has."""
    r = imp(CORPUS / "echo.yaml")
    at = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].imagePullPolicy"
    (line,) = [c for c in r.changes if c.startswith(at)]
    assert line == f"{at}: dropped; the platform sets IfNotPresent on every job's container"
    pinned = r.entry["image"].replace(":latest", ":1.0")
    entry = {**r.entry, "image": pinned, "pool": CPU_POOL.name}
    worker = emitted(entry)["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert worker["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"


def test_a_trainjobs_resources_are_named_by_the_field_its_file_has(tmp_path):
    """A TrainJob's pod size is `spec.trainer.resourcesPerNode` (Trainer v2.2.1
    trainjob_types.go: `json:"resourcesPerNode"`); import named it
    `spec.trainer.resources...`, a field the file does not have, in its change lines and in
    its one-line errors (a GPU request without a limit: tests/jobs/test_import_upstream.py)."""
    text = """
        apiVersion: trainer.kubeflow.org/v1alpha1
        kind: TrainJob
        metadata: {name: cpu-tj}
        spec:
          trainer:
            image: ghcr.io/acme/trainer:1.0
            command: [torchrun, train.py]
            numNodes: 2
            resourcesPerNode: RESOURCES
    """
    ok = write(tmp_path, text.replace("RESOURCES", "{requests: {cpu: '4', memory: 8Gi}}"))
    changes = "\n".join(imp(ok).changes)
    # kept since the job model carries a pod's size (test_an_explicit_cpu_request_is_kept...)
    assert "spec.trainer.resourcesPerNode.requests.cpu 4 -> cpu 4: kept" in changes
    assert "spec.trainer.resourcesPerNode.requests.memory 8Gi -> memory 8Gi: kept" in changes
    assert "spec.trainer.resources." not in changes
    for resources, where in (
        ("{limits: '1'}", "spec.trainer.resourcesPerNode.limits: got '1'; expected a mapping"),
        ("[1]", "spec.trainer.resourcesPerNode: got [1]; expected a mapping"),
        ("{limits: {nvidia.com/gpu: 16}}", "spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]: "
         "16 GPU(s) per pod, and no pool"),
        ("{limits: {nvidia.com/gpu: two}}", "spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]: "
         "got 'two'; expected a whole number"),
        ("{requests: {nvidia.com/gpu: 1}}", "spec.trainer.resourcesPerNode.requests[nvidia.com/gpu]: "
         "got 1 and no limits[nvidia.com/gpu]"),
    ):  # fmt: skip
        bad = write(tmp_path, text.replace("RESOURCES", resources), "bad.yaml")
        with pytest.raises(ImportProblem) as e:
            imp(bad)
        assert str(e.value).startswith(f"{bad}: {where}"), str(e.value)


def prep_job(resources: Any) -> str:
    """An Indexed Job of 2 completions (parallelism unset) of one CPU pod asking `resources`."""
    prep = container("main", ["python", "/app/prep.py"], image=PREP_IMAGE, resources=resources)
    return indexed_job_yaml(prep, "prep", parallelism=None)


def test_an_explicit_cpu_request_is_kept_where_a_pod_of_that_size_fits(tmp_path):
    """import dropped every cpu/memory request for the pool's default: a CPU pod that asked
    for 4 CPUs and 16Gi got 2 CPUs and 8Gi, half its ask, although the job model carries a
    pod's size (`cpu`/`memory`, its requests and limits both). Now the request (else a limit
    alone, which Kubernetes takes as the request) is kept where a pod of that size fits a node
    of the pool; a limit that differs is named as dropped; a cpu ask no node holds, and a GPU
    pod's ask that its GPUs' share already covers, get the default, each said with why; a
    memory ask no node holds is refused (less memory than asked is an OOM kill)."""
    from tests.jobs.helpers import target
    from trainforge.core.quantity import parse_quantity
    from trainforge.jobs.spec import parse_job
    from trainforge.jobs.wiring import resolve_job

    text = prep_job("RESOURCES")
    ask = "{requests: {cpu: '4', memory: 16Gi}, limits: {cpu: '8', memory: 16Gi}}"
    r = imp(write(tmp_path, text.replace("RESOURCES", ask)))
    assert r.entry["pool"] == CPU_POOL.name
    assert (r.entry["cpu"], r.entry["memory"]) == ("4", "16Gi")
    changes = "\n".join(r.changes)
    at = "spec.template.spec.containers[0].resources"
    assert f"{at}.requests.cpu 4 -> cpu 4: kept, as the pod's request and limit (without it a " \
        f"pod on {CPU_POOL.name} gets the CPU pods' default (2 CPUs and 8Gi" in changes  # fmt: skip
    assert f"{at}.limits.cpu 8: dropped; the limit is the request (cpu 4)" in changes
    assert f"{at}.limits.memory" not in changes  # the same as the request: nothing lost
    # what the stack makes of the entry: the pod asks what the file asked
    job = resolve_job(parse_job(r.entry, "trainforge:jobs[0]"), target(CPU_POOL))
    assert (job.cpu, job.memory) == ("4", "16Gi")
    # memory no node of any CPU pool holds: refused, not the default 8Gi
    with pytest.raises(ImportProblem) as e:
        imp(write(tmp_path, text.replace("RESOURCES", "{requests: {memory: 5000Gi}}")))
    assert str(e.value).startswith(f"{tmp_path / 'job.yaml'}: {at}.requests.memory: got '5000Gi'")
    assert str(e.value).endswith(
        "no pool of the stack holds it: add a pool with bigger nodes, or lower it"
    )
    # a limit alone is the request Kubernetes would have given it
    r = imp(write(tmp_path, text.replace("RESOURCES", "{limits: {cpu: '3'}}")))
    assert r.entry["cpu"] == "3" and "memory" not in r.entry
    # a size no node of the pool holds: the default, with the rehearsal's reason
    r = imp(write(tmp_path, text.replace("RESOURCES", "{requests: {cpu: '500'}}")))
    assert "cpu" not in r.entry
    assert f"{at}.requests.cpu 500: dropped, a pod of that size fits no node of " \
        f"{CPU_POOL.name} (" in "\n".join(r.changes)  # fmt: skip
    # a GPU pod: its GPUs' share of the node where that covers the ask, else the ask
    gpu = "{limits: {nvidia.com/gpu: 1, cpu: '2'}}"
    r = imp(write(tmp_path, text.replace("RESOURCES", gpu)), pool_name=GPU_POOL.name)
    share = resolve_job(parse_job({**r.entry, "memory": None}, "j"), target(GPU_POOL))
    assert "cpu" not in r.entry and f"{at}.limits.cpu 2: dropped; a pod on {GPU_POOL.name} " \
        f"gets its GPUs' share of the node: cpu {share.cpu}" in "\n".join(r.changes)  # fmt: skip
    assert "memory" not in r.entry
    # memory no node holds: refused (it was the share, a quarter of the ask), naming the
    # field, the pool's nodes and the pool whose nodes hold it
    big = "{limits: {nvidia.com/gpu: 1, cpu: '2', memory: 400Gi}}"
    with pytest.raises(ImportProblem) as e:
        imp(write(tmp_path, text.replace("RESOURCES", big)), pool_name=GPU_POOL.name)
    assert str(e.value).startswith(f"{tmp_path / 'job.yaml'}: {at}.limits.memory: got '400Gi'; ")
    assert "g5.12xlarge: 196608Mi - " in str(e.value) and "= 173048Mi." in str(e.value)
    assert str(e.value).endswith(
        "The import does not shrink a memory request (less memory than the code asks ends in "
        "an OOM kill): import with --pool efa-p5, whose nodes hold it, or lower it"
    )
    # a cpu no node holds as well: the memory is still refused, not dropped with the cpu
    # (the rehearsal named only the cpu, and both went: 20Gi became the share, an OOM kill)
    both = "{limits: {nvidia.com/gpu: 1, cpu: '400', memory: 400Gi}}"
    with pytest.raises(ImportProblem) as e:
        imp(write(tmp_path, text.replace("RESOURCES", both)), pool_name=GPU_POOL.name)
    assert str(e.value).startswith(f"{tmp_path / 'job.yaml'}: {at}.limits.memory: got '400Gi'; ")
    # a cpu no node holds beside a memory one does: the cpu alone gives way, memory is kept
    held = "{limits: {nvidia.com/gpu: 1, cpu: '400', memory: 100Gi}}"
    r = imp(write(tmp_path, text.replace("RESOURCES", held)), pool_name=GPU_POOL.name)
    assert "cpu" not in r.entry and r.entry["memory"] == "100Gi"
    assert f"{at}.limits.memory 100Gi -> memory 100Gi: kept" in "\n".join(r.changes)
    assert f"{at}.limits.cpu 400: dropped, a pod of that size fits no node of " in "\n".join(
        r.changes
    )
    kept = resolve_job(parse_job(r.entry, "j"), target(GPU_POOL))  # the stack takes it as is
    assert (kept.cpu, kept.memory) == (share.cpu, "100Gi")
    more = "{limits: {nvidia.com/gpu: 1, cpu: '30'}}"  # more than the share, and it fits
    r = imp(write(tmp_path, text.replace("RESOURCES", more)), pool_name=GPU_POOL.name)
    assert r.entry["cpu"] == "30" and parse_quantity(share.cpu) < 30


def test_an_indexed_job(tmp_path):
    path = write(
        tmp_path,
        """
        apiVersion: batch/v1
        kind: Job
        metadata: {name: ij}
        spec:
          completionMode: Indexed
          completions: 3
          parallelism: 3
          backoffLimit: 2
          template:
            spec:
              restartPolicy: Never
              nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
              containers:
                - name: train
                  image: ghcr.io/acme/trainer:1.0
                  command: [python3, -u, /code/train.py]
                  env:
                    - {name: RANK, valueFrom: {fieldRef: {fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
                    - {name: MASTER_ADDR, value: ij-0.ij}
                  resources: {limits: {nvidia.com/gpu: 1}}
                  volumeMounts: [{name: code, mountPath: /code}]
              volumes: [{name: code, configMap: {name: code}}]
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: code}
        data: {train.py: "print('hi')\\n", util.py: "X = 1\\n"}
    """,
    )
    r = imp(path)
    assert r.entry["backend"] == "indexed-job" and r.entry["workers"] == 3
    assert r.entry["pool"] == "efa-p5"  # the nodeSelector's instance type
    assert r.entry["runPolicy"] == {"backoffLimit": 2}
    assert r.entry["entrypoint"] == {"script": "imported/ij/train.py"}
    assert sorted(r.files) == ["imported/ij/train.py", "imported/ij/util.py"]
    assert "env" not in r.entry
    text = "\n".join(r.changes)
    assert "env RANK: dropped; the platform or operator sets it" in text
    assert "env MASTER_ADDR: dropped" in text


def test_a_secret_env_is_dropped_without_advice_to_bake_it_into_code(tmp_path):
    """A `valueFrom: secretKeyRef` variable (HF_TOKEN) was dropped with "put the value in your
    code or image": advice to commit a credential. No route feeds a job from a Secret (an
    entry's env is plain text in the job's object, which the team reads), so the line says
    that, names the credential the platform does mount, and never suggests code or an image."""
    path = write(
        tmp_path,
        """
        apiVersion: batch/v1
        kind: Job
        metadata: {name: sj}
        spec:
          completions: 1
          completionMode: Indexed
          template:
            spec:
              restartPolicy: Never
              containers:
                - name: main
                  image: ghcr.io/acme/trainer:1.0
                  command: [python, /app/train.py]
                  env:
                    - {name: HF_TOKEN, valueFrom: {secretKeyRef: {name: hf, key: token}}}
                    - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
                    - {name: MODE, valueFrom: {configMapKeyRef: {name: cfg, key: mode}}}
                  envFrom: [{secretRef: {name: creds}}]
        """,
    )
    r = imp(path)
    assert "env" not in r.entry
    lines = {ln.split(": dropped", 1)[0].rsplit(".", 1)[-1]: ln for ln in r.changes}
    secret = lines["env HF_TOKEN"]
    assert "cannot take a variable from a Secret" in secret and "MLflow" in secret
    assert "containers[0].envFrom: dropped; a job entry cannot take a variable from a Secret" in (
        "\n".join(r.changes)
    )
    for line in r.changes:  # no line advises baking a value into code or an image
        assert "in your code or image" not in line and "put the value" not in line
    assert "not field or resource refs" in lines["env POD"]
    assert "set the ConfigMap's value in `env`" in lines["env MODE"]


GPU1 = {"limits": {"nvidia.com/gpu": 1}}
WORKDIR_JOB = pytorchjob_yaml(
    "wd", Worker=replica(container(command="COMMAND", workingDir="/app", resources=GPU1), 2)
)


@pytest.mark.parametrize(
    ("command", "entrypoint"),
    [
        ("[python, train.py, --steps, '5']",
         {"command": ["python", "train.py", "--steps", "5"], "workingDir": "/app"}),
        ("[python, -m, mypkg.train, --steps, '5']",
         {"module": "mypkg.train", "args": ["--steps", "5"], "workingDir": "/app"}),
    ],
)  # fmt: skip
@pytest.mark.parametrize("backend", ["pytorchjob", "indexed-job"])
def test_a_working_directory_of_code_in_the_image_is_kept_on_every_pod(
    tmp_path, command, entrypoint, backend
):
    """`workingDir: /app` with `command: [python, train.py]` imported as a command without
    it ("dropped; your code runs from its own mount"): the pod ran from the image's WORKDIR,
    where train.py is not. It is now entrypoint.workingDir, and the emitted pods have it."""
    r = imp(write(tmp_path, WORKDIR_JOB.replace("COMMAND", command)))
    assert r.entry["entrypoint"] == entrypoint
    at = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]"
    assert (
        f"{at}.workingDir /app -> entrypoint.workingDir /app: kept; your code runs from it, as in your file"
        in r.changes
    )
    entry = {**r.entry, "pool": GPU_POOL.name, "backend": backend}
    for template in pod_templates(emitted(entry, backend)):
        assert template.spec["containers"][0]["workingDir"] == "/app", template.name


def test_a_working_directory_a_trainjob_cannot_carry_is_refused_at_preview(tmp_path):
    """The pinned TrainJob CRD (v2.2.1) has no per-job working directory: neither in
    spec.trainer nor in a runtime patch's containers; so the plan refuses it, not drops it."""
    crd = yaml.safe_load_all(
        (ROOT / "trainforge/plan/data/crds/trainer.kubeflow.org_trainjobs.yaml").read_text()
    )
    (version,) = [v for d in crd if d for v in d["spec"]["versions"] if v.get("served")]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    patch = spec["runtimePatches"]["items"]["properties"]["trainingRuntimeSpec"]
    for key in ("template", "spec", "replicatedJobs", "template", "spec", "template", "spec"):
        patch = (
            patch["properties"][key] if "properties" in patch else patch["items"]["properties"][key]
        )
    assert "workingDir" not in spec["trainer"]["properties"]
    assert set(patch["properties"]["containers"]["items"]["properties"]) == {
        "env",
        "name",
        "securityContext",
        "volumeMounts",
    }
    r = imp(write(tmp_path, WORKDIR_JOB.replace("COMMAND", "[python, train.py]")))
    t = target(GPU_POOL, backends=("trainjob",))
    entry = {**r.entry, "pool": GPU_POOL.name, "backend": "trainjob"}
    with pytest.raises(JobConfigError) as e:
        resolve_job(parse_job(entry, "trainforge:jobs[0]"), t, "trainforge:jobs[0]")
    assert str(e.value).startswith(
        "trainforge:jobs[0].entrypoint.workingDir: got '/app'; a TrainJob's container takes "
        "its working directory from the ClusterTrainingRuntime"
    )


def test_a_working_directory_of_shipped_code_is_dropped_and_said(tmp_path):
    text = WORKDIR_JOB.replace("COMMAND", "[python, -c, 'print(1)']")
    r = imp(write(tmp_path, text))
    assert "workingDir" not in r.entry["entrypoint"]
    at = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]"
    assert (
        f"{at}.workingDir /app: dropped; the shipped code runs from its own mount, /workspace, which holds its files"
        in r.changes
    )
    with pytest.raises(ImportProblem, match=r"workingDir: got 'app'; expected an absolute path"):
        imp(write(tmp_path, text.replace("workingDir: /app", "workingDir: app")))


TRAIN = container("train", ["python", "-m", "acme.train"], resources=GPU1)


@pytest.mark.parametrize(
    ("retries", "planned", "said"),
    [
        (
            "{backoffLimitPerIndex: 1, maxFailedIndexes: 1}",
            (1, 0),
            [
                "spec.backoffLimitPerIndex 1 -> runPolicy.backoffLimit 1: kept; the "
                "indexed-job backend writes it as backoffLimitPerIndex 1",
                "spec.maxFailedIndexes 1: becomes 0; the Job fails, and frees every GPU, as "
                "soon as one index has used up its retries (the other ranks cannot finish "
                "without it)",
            ],
        ),
        (
            "{backoffLimitPerIndex: 2, backoffLimit: 9, maxFailedIndexes: 0}",
            (2, 0),
            [
                "spec.backoffLimitPerIndex 2 -> runPolicy.backoffLimit 2: kept",
                "spec.backoffLimit 9: dropped; the planned Job has no Job-wide limit",
                "spec.maxFailedIndexes 0: kept;",
            ],
        ),
        (
            "{backoffLimit: 3}",
            (3, 0),
            ["spec.backoffLimit 3 -> runPolicy.backoffLimit 3, which the indexed-job backend "
             "writes as backoffLimitPerIndex 3: 3 re-creation(s) of each index"],
        ),
        (
            "{}",
            (6, 0),
            ["spec.backoffLimit unset (Kubernetes' default: 6 failed pods in all) -> "
             "runPolicy.backoffLimit's default 6"],
        ),
        (
            "{podFailurePolicy: {rules: []}, podReplacementPolicy: TerminatingOrFailed}",
            (6, 0),
            ["spec.podFailurePolicy: dropped; the backend writes its own",
             "spec.podReplacementPolicy: dropped; the backend writes Failed"],
        ),
    ],
)  # fmt: skip
def test_an_indexed_jobs_retry_fields_are_mapped_or_named_with_what_the_job_gets(
    tmp_path, retries, planned, said
):
    """`backoffLimitPerIndex: 1, maxFailedIndexes: 1` imported with no line, and the planned
    Job had backoffLimitPerIndex 6, maxFailedIndexes 0. Each retry field now becomes the
    entry's runPolicy.backoffLimit or is named with the value the planned Job has, which the
    emitted Job is held to here."""
    r = imp(write(tmp_path, indexed_job_yaml(TRAIN, **yaml.safe_load(retries))))
    for line in said:
        assert any(c.startswith(line) for c in r.changes), (line, r.changes)
    spec = emitted({**r.entry, "pool": GPU_POOL.name}, "indexed-job")["spec"]
    assert (spec["backoffLimitPerIndex"], spec["maxFailedIndexes"]) == planned
    assert "backoffLimit" not in spec  # no Job-wide limit, as the lines say


@pytest.mark.parametrize("key", ["backoffLimitPerIndex", "maxFailedIndexes", "backoffLimit"])
def test_a_bad_retry_field_of_an_indexed_job_is_one_line(tmp_path, key):
    path = write(tmp_path, indexed_job_yaml(TRAIN, **{key: -1}))
    with pytest.raises(ImportProblem) as e:
        imp(path)
    assert str(e.value) == f"{path}: spec.{key}: got -1; expected a whole number"


OWN_CODE = container(image="ghcr.io/a/b:1", command=["python", "/w/t.py"])
SIXTEEN_GPUS = pytorchjob_yaml(
    "p", Worker=replica({**OWN_CODE, "resources": {"limits": {"nvidia.com/gpu": 16}}}, 2)
)
OTHER_CONFIGMAP = pytorchjob_yaml(
    "p",
    Master=replica(
        {**OWN_CODE, "volumeMounts": [{"name": "c", "mountPath": "/w"}]},
        volumes=[{"name": "c", "configMap": {"name": "scripts"}}],
    ),
)


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        ("a: [1,\n", "line 2", "not valid YAML"),
        ("kind: Job\nmetadata: {name: a}\nkind: PyTorchJob\n", "line 3", "`kind` appears twice"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "kind", "found ConfigMap"),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {completions: 2}\n",
            "spec.completionMode",
            "got None; a distributed job needs Indexed",
        ),
        (
            SIXTEEN_GPUS,
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits[nvidia.com/gpu]",
            "16 GPU(s) per pod, and no pool of the stack has that many per node",
        ),
        (
            OTHER_CONFIGMAP,
            "spec.pytorchReplicaSpecs.Master.template.spec.volumes (c)",
            "ConfigMap 'scripts', which is neither a document of this file nor made from t.py",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_file_and_the_field(tmp_path, text, where, says):
    path = write(tmp_path, text)
    with pytest.raises(ImportProblem) as e:
        imp(path)
    line = str(e.value)
    assert line.startswith(f"{path}: {where}: "), line
    assert says in line and "\n" not in line


MASTER = "spec.pytorchReplicaSpecs.Master.template.spec"


@pytest.mark.parametrize(
    ("path", "value", "where", "expected"),
    [
        (("c", 0, "command"), "python /w/t.py", f"{MASTER}.containers[0].command", "a list of strings"),
        (("c", 0, "env"), {"NCCL_DEBUG": "INFO"}, f"{MASTER}.containers[0].env", "a list"),
        (("c", 0, "resources", "limits"), "1", f"{MASTER}.containers[0].resources.limits", "a mapping"),
        (("c", 0, "volumeMounts", 0, "name"), ["code"], f"{MASTER}.containers[0].volumeMounts[0].name",
         "a string"),
        (("p", "volumes"), "code", f"{MASTER}.volumes", "a list"),
    ],
)  # fmt: skip
def test_a_malformed_field_is_one_line_not_a_python_error(tmp_path, path, value, where, expected):
    docs = list(yaml.safe_load_all(BLOG.read_text()))
    pod = docs[1]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    target: Any = {"c": pod["containers"], "p": pod}  # a container's field, or the pod's
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump_all(docs))
    with pytest.raises(ImportProblem) as e:
        imp(bad)
    assert str(e.value).startswith(f"{bad}: {where}: got {value!r}; expected {expected}")


def test_a_python_program_is_not_read(tmp_path):
    path = write(tmp_path, "from kubeflow.trainer import TrainerClient\n", "prog.py")
    with pytest.raises(
        ImportProblem, match=r"prog.py: file: a Python program; trainforge import reads YAML only"
    ):
        imp(path)


@pytest.mark.parametrize(
    ("argv", "kind", "path", "nproc"),
    [
        # torchrun options the old hand list did not know took a value: "0" read as the script
        (["torchrun", "--local-ranks-filter", "0", "--nproc_per_node", "4", "t.py"],
         "script", "t.py", 4),
        (["torchrun", "--numa-binding", "node", "-m", "pkg.train", "--x"], "module", "pkg.train",
         None),
        (["python", "-m", "torch.distributed.launch", "--use_env", "--nproc_per_node=2", "t.py"],
         "script", "t.py", 2),
    ],
)  # fmt: skip
def test_torchrun_commands_are_read_as_torchrun_reads_them(argv, kind, path, nproc):
    from trainforge.jobs.importer import _program

    p = _program(argv)
    assert (p.kind, p.path, p.nproc) == (kind, path, nproc)


def test_a_whole_command_line_with_an_unbalanced_quote_is_refused_not_a_traceback(tmp_path):
    """shlex.split raised ValueError on it: a traceback instead of the one line."""
    own = trainer_spec(image="ghcr.io/acme/custom-training:1.0", command=["python 'x"])
    path = write(tmp_path, trainjob_yaml("torch-ddp", own))
    with pytest.raises(ImportProblem) as e:
        imp(path)
    assert str(e.value).endswith("write each word as its own item: [python, 'x]")


def test_the_api_versions_import_takes_are_the_ones_the_pinned_crds_serve():
    """jobs/import_read refuses every other version of these kinds, naming this one: the
    vendored CRDs (Trainer v2.2.1's in plan/data/crds, the training operator's manifests) serve
    exactly it."""
    from trainforge.jobs import pytorchjob, trainjob
    from trainforge.plan import crds

    for mod in (trainjob, pytorchjob):
        crd = crds.crd(mod.API_VERSION, mod.KIND)
        group = crd["spec"]["group"]
        served = [f"{group}/{v['name']}" for v in crd["spec"]["versions"] if v.get("served")]
        assert served == [mod.API_VERSION]


@pytest.mark.parametrize(
    ("api", "kind", "who", "served"),
    [
        # only Trainer's design proposal writes v2alpha1 (docs/proposals/2170)
        ("trainer.kubeflow.org/v2alpha1", "TrainJob", "the pinned Trainer (v2.2.1)",
         "trainer.kubeflow.org/v1alpha1"),
        ("kubeflow.org/v1beta1", "PyTorchJob", "the pinned training operator (v1.9.4)",
         "kubeflow.org/v1"),
    ],
)  # fmt: skip
def test_a_job_of_an_api_version_the_pinned_controller_does_not_serve_is_refused(
    tmp_path, api, kind, who, served
):
    path = write(
        tmp_path,
        f"""
        apiVersion: {api}
        kind: {kind}
        metadata: {{name: torch-ddp}}
        spec: {{}}
    """,
    )
    with pytest.raises(ImportProblem) as e:
        imp(path)
    assert str(e.value) == (
        f"{path}: apiVersion: got '{api}'; {who} serves {served} only: write apiVersion: {served}"
    )


def _blog(tmp_path: Path, selector: dict | None = None, **meta: Any) -> Path:
    """The blog job with `selector` as both pods' nodeSelector and `meta` (labels, annotations)
    on the job's metadata."""
    docs = list(yaml.safe_load_all(BLOG.read_text()))
    job = docs[1]
    job["metadata"].update(meta)
    for role in job["spec"]["pytorchReplicaSpecs"].values():
        if selector is not None:
            role["template"]["spec"]["nodeSelector"] = selector
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


SELECTOR_AT = "spec.pytorchReplicaSpecs.Master.template.spec.nodeSelector"
GPU_KEY = "nvidia.com/gpu"


def test_a_node_selector_naming_a_pool_that_holds_the_pod_chooses_it(tmp_path):
    """Not the smallest GPU pool (gpu-small) but the one whose type the selector names."""
    r = imp(_blog(tmp_path, {"node.kubernetes.io/instance-type": "g5.12xlarge"}))
    assert r.entry["pool"] == "gpu-workloads"
    assert (
        "pool gpu-workloads: its nodeSelector names it (node.kubernetes.io/instance-type: "
        "g5.12xlarge)" in r.changes
    )
    assert (
        f"{SELECTOR_AT}: dropped; node.kubernetes.io/instance-type: g5.12xlarge chose pool "
        "gpu-workloads; the pool's own selector is set" in r.changes
    )
    r = imp(_blog(tmp_path, {"kubernetes.io/os": "linux"}))
    assert r.entry["pool"] == "gpu-small"
    assert (
        f"{SELECTOR_AT}: dropped; it names no pool or instance type, so it chose nothing; "
        "the pool's own selector is set" in r.changes
    )


def test_an_instance_type_selector_is_refused_where_its_pool_has_other_types(tmp_path):
    """A selector of g5.xlarge "chose pool gpu-workloads" on dev, whose types are g4dn.xlarge
    and g5.xlarge: the plan then sized and priced the job on the g4dn.xlarge (a T4, not the A10G
    asked for), overriding the selector. A pool with other types than the selector's is
    refused, naming its types and the two ways on; a pool of exactly that type is obeyed."""
    mixed = dataclasses.replace(GPU_POOL, instance_types=("g5.12xlarge", "g5.48xlarge"))
    pools = {**POOLS, mixed.name: mixed}
    path = _blog(tmp_path, {"node.kubernetes.io/instance-type": "g5.12xlarge"})
    with pytest.raises(ImportProblem) as e:
        imp(path, pools=pools)
    assert str(e.value) == (
        f"{path}: {SELECTOR_AT}[node.kubernetes.io/instance-type]: got 'g5.12xlarge'; pool "
        "gpu-workloads may launch any of its instance types (g5.12xlarge, g5.48xlarge), not "
        "only g5.12xlarge, so the pods could run on g5.48xlarge: add a pool of g5.12xlarge "
        "alone (trainforge:nodePools[].instanceTypes) and import again, or import with --pool "
        "gpu-workloads, which replaces the selector (its pods then run on any of its types)"
    )
    # the flag it names imports, and says the flag chose
    r = imp(path, pools=pools, pool_name="gpu-workloads")
    assert r.entry["pool"] == "gpu-workloads" and "pool gpu-workloads: chosen with --pool" in (
        r.changes
    )
    # a pool of exactly the selector's type (POOLS' gpu-workloads) is obeyed
    assert imp(path).entry["pool"] == "gpu-workloads"


@pytest.mark.parametrize(
    ("selector", "why"),
    [
        # the review's v2: p4d capacity a stack of g5 pools lacks was swapped for gpu-small
        ({"node.kubernetes.io/instance-type": "p4d.24xlarge"}, "no pool of the stack matches it"),
        # the review's v7: a CPU pool named for a 1-GPU pod
        ({"karpenter.sh/nodepool": "training-workloads"},
         "pool training-workloads has no GPUs and the pod asks 1"),
    ],
)  # fmt: skip
def test_a_node_selector_naming_capacity_that_cannot_hold_the_pod_is_refused(
    tmp_path, selector, why
):
    with pytest.raises(ImportProblem) as e:
        imp(_blog(tmp_path, selector))
    ((key, value),) = selector.items()
    message = str(e.value)
    assert f": {SELECTOR_AT}[{key}]: got {value!r}; {why}" in message, message
    # every pool that holds a 1-GPU pod, the smallest first (no quota known: no Kueue)
    assert message.endswith(
        "pools that hold the pod: gpu-small, gpu-workloads, efa-p5; import with --pool "
        "gpu-small (or gpu-workloads, efa-p5), which replaces the selector"
    ), message
    assert "\n" not in message
    # the flag it names is the one that picks a pool: it imports
    assert imp(_blog(tmp_path, selector), pool_name="gpu-small").entry["pool"] == "gpu-small"


def test_a_pool_the_team_has_no_quota_in_is_named_as_such(tmp_path):
    """The review's prod v2: the selector named p4d-reserved, where team vision has no quota;
    the job moved there silently. Here the selected pool gpu-workloads has no quota of the
    team, gpu-small has."""
    quota = {"gpu-small": {GPU_KEY: "4"}, "training-workloads": {"cpu": "8"}}
    path = _blog(tmp_path, {"karpenter.sh/nodepool": "gpu-workloads"})
    with pytest.raises(ImportProblem) as e:
        imp(path, quota=quota)
    assert str(e.value).endswith(
        f"{SELECTOR_AT}[karpenter.sh/nodepool]: got 'gpu-workloads'; team research has no "
        "nominal GPU quota in pool gpu-workloads: pools that hold the pod where team research "
        "has quota: gpu-small; import with --pool gpu-small, which replaces the selector (or "
        "--pool gpu-workloads to run there on what the team borrows from the cohort)"
    ), str(e.value)
    # --pool keeps it, and says it runs on borrowed quota
    r = imp(path, quota=quota, pool_name="gpu-workloads")
    assert r.entry["pool"] == "gpu-workloads"
    assert (
        "pool gpu-workloads: chosen with --pool; team research has no nominal GPU quota in it "
        "(Kueue's split of trainforge:teams[].quota), so its jobs run there only on what they "
        "borrow from the cohort"
    ) in r.changes
    # without a selector, the team's quota first, as Kueue orders its flavors
    r = imp(BLOG, quota={"gpu-workloads": {GPU_KEY: "8"}})
    assert r.entry["pool"] == "gpu-workloads"
    assert (
        "pool gpu-workloads: the smallest GPU pool whose nodes hold 1 GPU(s) (4 per node) "
        "where team research has quota"
    ) in r.changes


def test_every_label_and_annotation_of_the_job_is_named(tmp_path):
    """The review's v1: `kueue.x-k8s.io/queue-name: nonexistent-queue` was never mentioned."""
    labels = {"kueue.x-k8s.io/queue-name": "nonexistent-queue", "app": "blog",
              "kueue.x-k8s.io/priority-class": "high"}  # fmt: skip
    path = _blog(tmp_path, labels=labels, annotations={"owner": "me"})
    r = imp(path, queue="team-queue")
    lines = [c for c in r.changes if c.startswith("metadata.labels") or "annotations" in c]
    assert lines == [
        "metadata.labels.app blog: dropped; not supported (a job entry has no labels)",
        "metadata.labels.kueue.x-k8s.io/priority-class high: dropped; priority is the job's "
        "`priority` (a Kueue WorkloadPriorityClass)",
        "metadata.labels.kueue.x-k8s.io/queue-name nonexistent-queue: dropped; the job uses "
        "its team's LocalQueue `team-queue`",
        "metadata.annotations.owner me: dropped; not supported (a job entry has no annotations)",
    ]
    r = imp(path, queue=None)
    assert (
        "metadata.labels.kueue.x-k8s.io/queue-name nonexistent-queue: dropped; the stack runs "
        "no Kueue, so no queue admits the job"
    ) in r.changes


def test_a_pod_templates_labels_are_named_and_a_malformed_one_is_one_line(tmp_path):
    docs = list(yaml.safe_load_all(BLOG.read_text()))
    worker = docs[1]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    worker["metadata"] = {"labels": {"sidecar.istio.io/inject": "false"}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    assert (
        "spec.pytorchReplicaSpecs.Worker.template.metadata.labels.sidecar.istio.io/inject "
        "false: dropped; not supported (a job entry has no labels)"
    ) in imp(path).changes
    worker["metadata"] = {"labels": ["a"]}
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    with pytest.raises(ImportProblem, match=r"Worker\.template\.metadata\.labels: got \['a'\]; "
                       "expected a mapping"):  # fmt: skip
        imp(path)


def test_a_workers_other_node_selector_is_named(tmp_path):
    """Only Master's pod chooses the pool: a Worker selector naming another one is said."""
    docs = list(yaml.safe_load_all(BLOG.read_text()))
    roles = docs[1]["spec"]["pytorchReplicaSpecs"]
    roles["Worker"]["template"]["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": "efa-p5"}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    r = imp(path)
    assert r.entry["pool"] == "gpu-small"
    assert (
        "spec.pytorchReplicaSpecs.Worker.template.spec.nodeSelector (karpenter.sh/nodepool: "
        "efa-p5): dropped; it differs from Master's, and every pod of a trainforge job runs "
        "on one pool, the one Master's chose"
    ) in r.changes
    roles["Master"]["template"]["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": "efa-p5"}
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    assert not [c for c in imp(path).changes if "Worker.template.spec.nodeSelector" in c]


WORKER = "spec.pytorchReplicaSpecs.Worker.template.spec"


def _roles(tmp_path: Path, edit) -> Path:
    """The blog job with `edit(master_pod, worker_pod)` applied to its pod templates' specs."""
    docs = list(yaml.safe_load_all(BLOG.read_text()))
    roles = docs[1]["spec"]["pytorchReplicaSpecs"]
    edit(roles["Master"]["template"]["spec"], roles["Worker"]["template"]["spec"])
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def _set(where: tuple, value: Any):
    """An edit setting the Worker pod's field at `where` (a path from the pod spec)."""

    def edit(_master: dict, worker: dict) -> None:
        *parents, last = where
        node: Any = worker
        for k in parents:
            node = node[k]
        if value is None:
            del node[last]
        elif isinstance(node, list) and last == len(node):
            node.append(value)
        else:
            node[last] = value

    return edit


C = ("containers", 0)


@pytest.mark.parametrize(
    ("where", "value", "field", "says"),
    [
        # the review's v6: a Worker asking 2 GPUs imported as 1 per pod, Master's, silently
        ((*C, "resources", "limits", "nvidia.com/gpu"), 2, "resources.limits[nvidia.com/gpu]",
         "got 2; Master's is 1"),
        ((*C, "resources", "limits", "cpu"), "2", "resources.limits.cpu", "got '2'; Master's is '4'"),
        ((*C, "resources", "limits", "memory"), None, "resources.limits.memory",
         "got unset; Master's is '8Gi'"),
        ((*C, "image"), "ghcr.io/acme/other:1.0", "image",
         "got 'ghcr.io/acme/other:1.0'; Master's is 'pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime'"),
        ((*C, "command", 3), "100", "command[3]", "got '100'; Master's is '200'"),
        ((*C, "args"), ["--fast"], "args", "got [\"--fast\"]; Master's is unset"),
        ((*C, "env", 0, "value"), "WARN", "env[0] (NCCL_DEBUG)",
         "got {\"name\": \"NCCL_DEBUG\", \"value\": \"WARN\"}; Master's is "
         "{\"name\": \"NCCL_DEBUG\", \"value\": \"INFO\"}"),
        ((*C, "env", 2), {"name": "LR", "value": "0.1"}, "env[2] (LR)",
         "got {\"name\": \"LR\", \"value\": \"0.1\"}; Master's is unset"),
        ((*C, "env"), [{"name": "NCCL_DEBUG", "value": "INFO"}], "env (NCCL_SOCKET_IFNAME)",
         "got unset; Master's is {\"name\": \"NCCL_SOCKET_IFNAME\", \"value\": \"eth0\"}"),
        ((*C, "volumeMounts", 0, "mountPath"), "/code", "volumeMounts[0].mountPath",
         "got '/code'; Master's is '/workspace'"),
        ((*C, "workingDir"), "/app", "workingDir", "got '/app'; Master's is unset"),
        (("volumes", 0, "configMap", "name"), "other-script", "volumes[0].configMap.name",
         "got 'other-script'; Master's is 'training-script'"),
    ],
)  # fmt: skip
def test_a_worker_whose_pod_differs_from_masters_is_refused(tmp_path, where, value, field, says):
    """The emitters write one pod template for Master and Worker (pytorchjob.replica_specs),
    while the training operator makes each replica's pods from that replica's own template
    (kubeflow/trainer v1.9.4 pkg/controller.v1/common/pod.go createNewPod:
    `spec.Template.DeepCopy()`). Import read Master's pod alone: a Worker's other size, code or
    environment was lost without a word. Now: one line naming the Worker's field, both values
    and the fix."""
    path = _roles(tmp_path, _set(where, value))
    with pytest.raises(ImportProblem) as e:
        imp(path)
    at = f"{WORKER}.{field}" if where[0] == "volumes" else f"{WORKER}.containers[0].{field}"
    assert str(e.value) == (
        f"{path}: {at}: {says}; every pod of a trainforge job has one spec, so the Worker "
        "pods cannot differ from Master's: make them equal and import again"
    )


def test_a_worker_without_resources_gets_masters_and_is_told(tmp_path):
    path = _roles(tmp_path, _set((*C, "resources"), None))
    r = imp(path)
    assert r.entry["gpusPerWorker"] == 1 and r.entry["workers"] == 2
    assert (
        f"{WORKER}.containers[0].resources: unset; the Worker pods get Master's "
        '({"limits": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 1}}): every pod of a '
        "trainforge job has one size"
    ) in r.changes


def test_equal_quantities_spelled_apart_are_the_same_pod(tmp_path):
    path = _roles(tmp_path, _set((*C, "resources", "limits", "cpu"), "4000m"))
    assert imp(path).entry["gpusPerWorker"] == 1


def test_a_workers_own_dropped_fields_and_containers_are_named(tmp_path):
    """What import drops from Master's pod it names; a Worker's own such fields, and its own
    extra containers, were dropped without a line."""

    def edit(master: dict, worker: dict) -> None:
        worker["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        worker["containers"][0]["imagePullPolicy"] = "IfNotPresent"
        worker["containers"].append({"name": "sidecar", "image": "busybox:1.36"})
        master["containers"][0]["ports"] = [{"containerPort": 23456}]
        worker["containers"][0]["ports"] = [{"containerPort": 23456}]
        # a variable the platform sets on every pod is dropped from either: no refusal
        worker["containers"][0]["env"].insert(0, {"name": "MASTER_PORT", "value": "29500"})

    r = imp(_roles(tmp_path, edit))
    assert (
        f"{WORKER}.containers[0].env MASTER_PORT: dropped; the platform or operator sets it on "
        "every pod"
    ) in r.changes
    assert f"{WORKER}.tolerations: dropped; the platform tolerates the pool's own taints" in (
        r.changes
    )
    assert (
        f"{WORKER}.containers[0].imagePullPolicy: dropped; the platform sets IfNotPresent on "
        "every job's container"
    ) in r.changes
    assert (
        f"{WORKER}.containers[1] (sidecar): dropped; a trainforge pod runs one training container"
    ) in r.changes
    # a field equal to Master's is said once, at Master's
    assert not [c for c in r.changes if c.startswith(f"{WORKER}.containers[0].ports")]
    assert [c for c in r.changes if ".containers[0].ports" in c] == [
        f"{MASTER}.containers[0].ports: dropped; the platform opens the rendezvous port "
        "(pytorchjob-port) and the metrics port"
    ]


def test_a_malformed_worker_field_is_one_line(tmp_path):
    """The Worker's pod is read for its shape as Master's is (its nodeSelector's items were
    read as a mapping: a list raised AttributeError)."""
    for where, value, says in (
        (("nodeSelector",), ["a"], f"{WORKER}.nodeSelector: got ['a']; expected a mapping"),
        ((*C, "env"), "X=1", f"{WORKER}.containers[0].env: got 'X=1'; expected a list"),
    ):
        path = _roles(tmp_path, _set(where, value))
        with pytest.raises(ImportProblem) as e:
            imp(path)
        assert str(e.value) == f"{path}: {says}"


def test_a_trainjobs_other_spec_fields_are_named(tmp_path):
    """Trainer v2.2.1's TrainJobSpec (pkg/apis/trainer/v1alpha1/trainjob_types.go) has
    runtimeRef, initializer, trainer, runtimePatches, suspend, activeDeadlineSeconds and
    managedBy. Import named podTemplateOverrides/podSpecOverrides, fields v2.2.1 does not have,
    and dropped runtimePatches (its pod overrides) and the others without a line."""
    spec = yaml.safe_load(
        """
          activeDeadlineSeconds: 3600
          suspend: true
          managedBy: kueue.x-k8s.io/multikueue
          initializer:
            model:
              storageUri: hf://meta-llama/Llama-3.2-1B
              env: [{name: ACCESS_TOKEN, valueFrom: {secretKeyRef: {name: hf, key: token}}}]
          runtimePatches:
            - manager: acme.io/tuner
              trainingRuntimeSpec:
                template:
                  spec:
                    replicatedJobs:
                      - name: node
                        template: {spec: {template: {spec: {nodeSelector: {a: b}}}}}
    """
    )
    path = write(tmp_path, trainjob_yaml(**spec))
    r = imp(path)
    assert r.entry["runPolicy"] == {"activeDeadlineSeconds": 3600}
    lines = [c for c in r.changes if c.startswith("spec.") and not c.startswith("spec.trainer")]
    assert lines == [
        "spec.activeDeadlineSeconds 3600 -> runPolicy.activeDeadlineSeconds 3600: kept",
        "spec.initializer: dropped; not supported (a job entry has no initializer, and the "
        "platform's NetworkPolicies give pods no internet: put the data set and model on the "
        "team's FSx or its S3 prefix, which the job reads; docs/teams.md, Network)",
        "spec.managedBy: dropped; the platform sets it where MultiKueue runs the job (a "
        "fleet's manager stack)",
        "spec.runtimePatches: dropped; not supported (its pod overrides: the pod's image, "
        "command, env and size come from spec.trainer; the platform sets the rest per team "
        "and pool; code it mounts from a ConfigMap of the file is shipped, and each field of "
        "its node pods (nodeSelector, tolerations, ...) is named, on its own line)",
        "spec.suspend: dropped; Kueue admits and queues jobs",
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template."
        "spec.template.spec.nodeSelector: dropped; it names no pool or instance type, so it "
        "chose nothing; the pool's own selector is set",
    ]
    entry = imp(path, backends=("pytorchjob", "trainjob")).entry
    job = parse_job(entry, "trainforge:jobs[0]")  # the stack's job model takes it
    assert job.run_policy.active_deadline_seconds == 3600
    bad = write(tmp_path, path.read_text().replace("3600", "an hour"), "bad.yaml")
    with pytest.raises(ImportProblem) as e:
        imp(bad)
    assert str(e.value) == (
        f"{bad}: spec.activeDeadlineSeconds: got 'an hour'; expected a whole number of seconds, "
        "1 or more"
    )


@pytest.mark.parametrize("kind", ["karpenter", "node-group"])
def test_a_pool_fitting_cpu_on_one_type_and_memory_on_another_is_one_rule(tmp_path, kind):
    """The import judges a pod's size by the stack's own rule (jobs/capacity.fit, through
    capacity.rehearse): one instance type must hold its cpu, memory and GPUs together. On a
    pool where c6i.8xlarge holds the cpu (24) but not the memory (100Gi) and r6i.4xlarge the
    memory but not the cpu, no type holds the pod: what the import writes is what the stack
    accepts, and the ask as written is what the stack refuses (wave 19, imagefix item 2)."""
    from tests.jobs.helpers import target

    mixed = dataclasses.replace(
        CPU_POOL, name="mixed", kind=kind, instance_types=("c6i.8xlarge", "r6i.4xlarge"),
        nodes=(node_facts.node_shape("c6i.8xlarge", 32, 65536, eni_pods=234),
               node_facts.node_shape("r6i.4xlarge", 16, 131072, eni_pods=234)),
    )  # fmt: skip
    text = prep_job({"requests": {"cpu": "24", "memory": "100Gi"}})
    entry = {"name": "prep", "team": "research", "pool": "mixed", "cpu": "24", "memory": "100Gi",
             "image": PREP_IMAGE + "@sha256:" + "a" * 64,
             "entrypoint": {"command": ["python", "/app/prep.py"]}}  # fmt: skip
    with pytest.raises(JobConfigError, match="can hold one pod|launches any of its types"):
        resolve_job(parse_job(entry, "j"), target(mixed))  # the ask as written: refused
    at = "spec.template.spec.containers[0].resources.requests"
    if kind == "node-group":  # it may launch c6i.8xlarge, which never holds 100Gi: refused
        with pytest.raises(ImportProblem) as e:
            imp(write(tmp_path, text), pools={"mixed": mixed})
        assert f"{at}.memory: got '100Gi'; managed node group 'mixed'" in str(e.value)
        return
    r = imp(write(tmp_path, text), pools={"mixed": mixed})
    assert "cpu" not in r.entry and r.entry["memory"] == "100Gi"
    assert f"{at}.cpu 24: dropped, a pod of that size fits no node of mixed (" in "\n".join(
        r.changes
    )
    job = resolve_job(parse_job({**entry, "cpu": None}, "j"), target(mixed))  # accepted
    assert job.memory == "100Gi"


# --- the file's namespace and claims, said by whose they are -----------------------------------

TEAMS = {
    t: TeamFacts(name=t, namespace=t, claim_name=f"fsx-{t}", claims=claims)
    for t, claims in (("llm", ("llm-datasets",)), ("vision", ()))
}


def _blog_in(tmp_path: Path, namespace: str | None, claim: str | None = None) -> Path:
    """The blog job with `metadata.namespace` and (optionally) a claim mounted at /data."""
    docs = list(yaml.safe_load_all(BLOG.read_text()))
    job = docs[1]
    job["metadata"].pop("namespace", None)
    if namespace:
        job["metadata"]["namespace"] = namespace
    if claim:
        for role in job["spec"]["pytorchReplicaSpecs"].values():
            spec = role["template"]["spec"]
            spec.setdefault("volumes", []).append(
                {"name": "data", "persistentVolumeClaim": {"claimName": claim}}
            )
            spec["containers"][0].setdefault("volumeMounts", []).append(
                {"name": "data", "mountPath": "/data"}
            )
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def test_the_team_is_the_flag_else_the_namespace_the_file_names_else_the_only_team():
    """`metadata.namespace: llm` without --team stopped with "--team: required; the stack's
    teams: llm, vision" although the file named one of them."""
    assert choose_team(None, "llm", TEAMS) == ("llm", "namespace")
    assert choose_team("vision", "llm", TEAMS) == ("vision", "--team")
    assert choose_team(None, None, {"llm": TEAMS["llm"]}) == ("llm", "only")
    with pytest.raises(ValueError) as e:
        choose_team(None, "kubeflow", TEAMS)
    assert str(e.value) == (
        "required; the stack's teams: llm, vision (the file's metadata.namespace kubeflow is "
        "none of their namespaces)"
    )
    with pytest.raises(ValueError, match="^got 'nlp'; the stack's teams: llm, vision$"):
        choose_team("nlp", "llm", TEAMS)
    # a team's namespace is its own (team_of_namespace reads it, not the team's name)
    other = {"llm": dataclasses.replace(TEAMS["llm"], namespace="team-llm")}
    assert choose_team(None, "team-llm", {**other, "vision": TEAMS["vision"]})[0] == "llm"


@pytest.mark.parametrize(
    ("team", "team_by", "line"),
    [
        (
            "llm",
            "namespace",
            "metadata.namespace llm: team llm's namespace -> team: llm (no --team given; the "
            "job runs in its team's namespace)",
        ),
        (
            "vision",
            "--team",
            "metadata.namespace llm: dropped; it is team llm's namespace, but the job is "
            "imported as team vision (--team), so it runs in vision's namespace vision: import "
            "with --team llm to run it there",
        ),
        ("llm", "--team", "metadata.namespace llm: dropped; the entry's team llm runs it there"),
    ],
)
def test_the_namespace_line_says_whose_namespace_it_names(tmp_path, team, team_by, line):
    """With --team vision it said only "metadata.namespace llm: dropped; the job runs in its
    team's namespace": the file's own team went unsaid."""
    r = imp(_blog_in(tmp_path, "llm"), team=team, team_by=team_by, teams=TEAMS)
    assert r.changes[0] == line, r.changes[:2]
    assert r.entry["team"] == team


def test_a_namespace_of_no_team_is_said_so(tmp_path):
    r = imp(_blog_in(tmp_path, "kubeflow"), team="vision", teams=TEAMS)
    assert r.changes[0] == (
        "metadata.namespace kubeflow: dropped; no team of the stack has it, and the job runs in "
        "team vision's namespace vision"
    )


MOUNT = "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].volumeMounts[1] data (/data)"


@pytest.mark.parametrize(
    ("claim", "why"),
    [
        (
            "fsx-llm",
            "fsx-llm is a claim of team llm (namespace llm), and a job of team vision mounts its "
            "own team's claims only (fsx-vision (its FSx, on every pod at /fsx); no further ones)",
        ),
        (
            "llm-datasets",
            "llm-datasets is a claim of team llm (namespace llm), and a job of team vision "
            "mounts its own team's claims only (fsx-vision (its FSx, on every pod at /fsx); no "
            "further ones)",
        ),
        (
            "fsx-vision",
            "fsx-vision is team vision's FSx claim, which every pod of its jobs mounts at /fsx: "
            "point the code's /data paths there",
        ),
        (
            "imagenet",
            "team vision lists no claim imagenet (fsx-vision (its FSx, on every pod at /fsx); no "
            "further ones): a platform admin adds it under trainforge:teams[].claims, then "
            "declare `volumes: [{claim: imagenet, mountPath: /data}]`",
        ),
    ],
)
def test_a_mounted_claim_is_said_by_whose_it_is(tmp_path, claim, why):
    """A job mounting fsx-llm imported as vision was told to declare `volumes: [{claim:
    fsx-llm, ...}]` "if the claim is the team's", which the plan then refused with "its
    claims are: none" (vision's fsx-vision unsaid); its own FSx claim was told the same, which
    the plan refuses too (it is mounted on every pod already)."""
    r = imp(_blog_in(tmp_path, None, claim), team="vision", teams=TEAMS)
    assert f"{MOUNT}: dropped; {why}" in r.changes, [c for c in r.changes if "/data" in c]


def test_a_listed_claim_is_to_be_declared(tmp_path):
    r = imp(_blog_in(tmp_path, None, "llm-datasets"), team="llm", teams=TEAMS)
    assert (
        f"{MOUNT}: dropped; declare `volumes: [{{claim: llm-datasets, mountPath: /data}}]` "
        "(team llm's claims list it)"
    ) in r.changes
