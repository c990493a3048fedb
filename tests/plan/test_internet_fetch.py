"""TRAINFORGE_INTERNET_FETCH: the plan reads what a job's code downloads (jobs/fetches.py)
wherever it sees the code (the function the Kubeflow SDK sends, a job's shipped script, a
container's command) and refuses it where the namespace's egress reaches no internet address
(checks/submitted.open_egress, over the platform's own team NetworkPolicies).

Before: `plan --sdk` on Kubeflow Trainer v2.2.1's own mnist notebook said CLEAN, and the job
failed in its pods at the FashionMNIST download.
"""

from __future__ import annotations

import json
import pathlib

import pytest
from test_plan_sdk import plan_sdk, with_trainjob
from test_plan_stacks import project_copy

from tests.conftest import ROOT
from trainforge.plan import cli
from trainforge.plan.checks import fetches as FC

NOTEBOOK = ROOT / "tests" / "fixtures" / "kubeflow_sdk" / "trainer_v2.2.1_mnist.ipynb"
SDK = pytest.mark.skipif(
    not (ROOT / ".sdk-venv" / "bin" / "python").exists(),
    reason="the Kubeflow SDK's venv .sdk-venv is absent: `make sdk-venv` creates it",
)


def notebook_program(tmp_path: pathlib.Path, edit=lambda s: s) -> pathlib.Path:
    """The notebook's cells as its reader runs them against a cluster, in order: its `!pip`
    lines (IPython's shell escapes) and its local-backend cell (LocalProcessBackendConfig,
    which runs the function on the laptop, not on a cluster) left out."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    code = [
        "\n".join(x for x in c.splitlines() if not x.lstrip().startswith("!"))
        for c in code
        if "LocalProcessBackendConfig" not in c
    ]
    program = tmp_path / "mnist.py"
    program.write_text(edit("\n\n".join(c for c in code if c.strip())) + "\n")
    return program


def flat(out: str) -> str:
    return " ".join(x.strip() for x in out.splitlines())


@SDK
def test_the_trainer_mnist_notebook_is_refused(tmp_path, capsys):
    """At the program's FILE:LINE (the call on line 58; the function starts at line 3), as the
    other --sdk findings; it said mnist.py:56, the line of the file the pod writes."""
    rc, out, printed = plan_sdk(tmp_path, capsys, notebook_program(tmp_path), with_trainjob)
    assert rc == 1 and "CLEAN" not in out.splitlines()[0]
    (line,) = [x for x in printed.splitlines() if x.startswith(f"  [{FC.RULE}]")]
    assert "research/TrainJob/" in line
    text = flat(out)
    assert (
        "downloads from the internet when it runs (mnist.py:58, line 56 of the file the SDK "
        "writes in the pod: "
        "torchvision.datasets.FashionMNIST(download=True) downloads from the data set's mirrors on the "
        "internet), but namespace research's NetworkPolicies let its pods reach only DNS"
    ) in text
    assert (
        "the connection is blocked, so the call fails when the job reaches it "
        "(RuntimeError: Error downloading train-images-idx3-ubyte.gz: Tried <mirror>, got: "
        "<URLError>)"
    ) in text
    # the SDK's runtime mounts no FSx: the fix says what these pods can do
    assert "fix: these pods mount no volume that outlives them (the Kubeflow SDK's runtime " \
        "has none): bake it into an image built FROM the runtime image" in text  # fmt: skip


@SDK
def test_the_notebook_with_download_false_is_not(tmp_path, capsys):
    """The same function with its data staged (download=False): no such finding."""
    program = notebook_program(tmp_path, lambda s: s.replace("download=True", "download=False"))
    _, out, _ = plan_sdk(tmp_path, capsys, program, with_trainjob)
    assert "sent 1 TrainJob(s)" in out
    assert FC.RULE not in out


def test_own_code_and_an_imported_command_are_read(tmp_path, capsys):
    """dev's `mnist-user` script (shipped in a ConfigMap) with a download added, and a job as
    `trainforge import` writes one (entrypoint.command): both refused, each at its line."""
    job = {
        "name": "hf-finetune", "team": "research", "pool": "training-workloads", "workers": 1,
        "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/research/ft:1",
        "entrypoint": {"command": ["bash", "-c", "set -e\npip install transformers\ntorchrun t.py"]},
    }  # fmt: skip
    root = project_copy(tmp_path, "dev", lambda c: c["trainforge:jobs"].append(job))
    script = root / "examples" / "mnist" / "train.py"
    text = script.read_text()
    script.write_text(
        text + "\nfrom torchvision import datasets\ndatasets.MNIST('/tmp/d', download=True)\n"
    )
    report = tmp_path / "report.txt"
    rc = cli.main(["--stack", "dev", "--project-dir", str(root), "--no-standins",
                   "--report", str(report)])  # fmt: skip
    out = flat(capsys.readouterr().out + report.read_text())
    assert rc == 1
    line = len(text.splitlines()) + 3
    assert f"research/PyTorchJob/mnist-user downloads from the internet when it runs " \
        f"(/workspace/train.py:{line}: torchvision.datasets.MNIST(download=True)" in out  # fmt: skip
    assert (
        "research/PyTorchJob/hf-finetune downloads from the internet when it runs (container "
    ) in out and "command:2: pip install downloads from a package index" in out
    assert "fix: stage it on the team's FSx volume, mounted at /fsx in these pods" in out


def test_run_local_says_a_download_fails_on_the_cluster(tmp_path, capsys, monkeypatch):
    """run-local of dev's `mnist-user` with a download added: it may work on this machine, so
    run-local says before it runs, at the project file's line, what the plan refuses."""
    from trainforge import local

    root = project_copy(tmp_path, "dev")
    script = root / "examples" / "mnist" / "train.py"
    text = script.read_text()
    script.write_text(
        text + "\nimport torchvision\ntorchvision.datasets.MNIST('/d', download=True)\n"
    )
    monkeypatch.chdir(root)
    runs = _count_program_runs(monkeypatch)
    assert local.main(["--stack", "dev", "mnist-user", "--dry-run"]) == 0
    assert runs == [root.name]  # the run that resolved the job is the one the note reads
    notes = [x for x in capsys.readouterr().err.splitlines() if " note: " in x]
    assert notes == [
        f"run-local: mnist-user: note: examples/mnist/train.py:{len(text.splitlines()) + 3}: "
        "torchvision.datasets.MNIST(download=True) downloads from the data set's mirrors on the "
        "internet; it may work here, but on the cluster namespace research's NetworkPolicies "
        f"block it, so the call fails there ({FC.RULE}; docs/teams.md, Network)"
    ]


def _count_program_runs(monkeypatch) -> list[str]:
    """The project of each run of the stack's program (plan.runner.run_project, still run)."""
    from trainforge.plan import runner

    runs: list[str] = []
    real = runner.run_project

    def counted(root, *a, **kw):
        runs.append(pathlib.Path(root).name)
        return real(root, *a, **kw)

    monkeypatch.setattr(runner, "run_project", counted)
    return runs


def test_run_local_of_a_job_resolved_in_config_runs_no_program_for_code_without_downloads(
    tmp_path, capsys, monkeypatch
):
    """A job whose pool-dependent fields are all in config needs no program run to start;
    before, the note alone ran the stack's program (~6 CPU s) to read egress for code that
    downloads nothing. The code is read first; the program runs only for a download."""
    from trainforge import local

    def resolve(config):
        (job,) = [j for j in config["trainforge:jobs"] if j["name"] == "mnist-user"]
        job.update(
            gpusPerWorker=0, procsPerWorker=1, restartPolicy="OnFailure", backend="pytorchjob"
        )

    root = project_copy(tmp_path, "dev", resolve)
    monkeypatch.chdir(root)
    runs = _count_program_runs(monkeypatch)
    assert local.main(["--stack", "dev", "mnist-user", "--dry-run"]) == 0
    assert runs == [] and " note: " not in capsys.readouterr().err


class _Obj:
    def __init__(self, doc: dict) -> None:
        self.doc, self.kind = doc, doc["kind"]
        self.namespace, self.obj_name = doc["metadata"].get("namespace"), doc["metadata"]["name"]
        self.urn, self.ident = "", f"{self.namespace}/{self.kind}/{self.obj_name}"


def _job(env: dict[str, str] | None = None) -> _Obj:
    container = {"name": "c", "image": "i", "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                 "command": ["python", "-c", "from transformers import AutoModel\nAutoModel.from_pretrained('gpt2')"]}  # fmt: skip
    return _Obj({"kind": "Job", "metadata": {"name": "ft", "namespace": "research"},
                 "spec": {"template": {"spec": {"containers": [container]}}}})  # fmt: skip


def _ctx(*objects: _Obj):
    class Ctx:
        memo: dict = {}

    Ctx.objects = list(objects)
    return Ctx


def test_only_where_egress_is_closed():
    """The platform's own team policies (trainforge/platform/teams.py) close egress; a policy
    that opens HTTPS to everywhere lifts the refusal and says so."""
    from trainforge.platform.teams import network_policies

    closed = [
        _Obj({"kind": "NetworkPolicy", "metadata": {"name": p["name"], "namespace": "research"},
              "spec": p["spec"]})
        for p in network_policies("research", None, None, "10.0.0.0/16", ["3.5.0.0/16"])
    ]  # fmt: skip
    (f,) = FC.check(_ctx(_job(), *closed)).findings
    assert f.rule == FC.RULE and f.resource == "research/Job/ft"
    assert (
        "(container c command python -c:2: transformers.AutoModel.from_pretrained('gpt2') downloads from the Hugging Face Hub"
        in f.message
    )
    https = _Obj({"kind": "NetworkPolicy", "metadata": {"name": "allow-https", "namespace": "research"},
                  "spec": {"podSelector": {}, "policyTypes": ["Egress"],
                           "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443}]}]}})  # fmt: skip
    result = FC.check(_ctx(_job(), *closed, https))
    assert result.findings == []
    assert result.sections[0].lines[0].endswith("egress open over HTTPS (allow-https): not refused")
    # HF_HUB_OFFLINE=1: the Hub is not asked (a cache on /fsx answers)
    assert FC.check(_ctx(_job({"HF_HUB_OFFLINE": "1"}), *closed)).findings == []
    # HF_HOME on a claim the pod mounts: the cache there may hold it; not on one, it is asked
    job = _job({"HF_HOME": "/fsx/research/hf"})
    spec = job.doc["spec"]["template"]["spec"]
    spec["containers"][0]["volumeMounts"] = [{"name": "fsx", "mountPath": "/fsx"}]
    spec["volumes"] = [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-research"}}]
    assert FC.check(_ctx(job, *closed)).findings == []
    spec["volumes"] = [{"name": "fsx", "emptyDir": {}}]
    assert len(FC.check(_ctx(job, *closed)).findings) == 1


def test_the_sdks_own_pip_install_is_left_to_its_rule():
    """packages_to_install's generated script is TRAINFORGE_SDK_PACKAGES' (one finding per
    cause); a `pip install` the user's own function runs is this rule's."""
    from trainforge.jobs import trainjob

    if not (ROOT / ".sdk-venv" / "bin" / "python").exists():
        pytest.skip("no .sdk-venv")
    from trainforge.plan import sdk

    runtime = trainjob.sdk_runtime_manifest()
    program = ROOT / "tests" / "fixtures" / "kubeflow_sdk" / "packages_to_install.py"
    sub = sdk.run_program(program, [runtime], "research", sdk.sdk_python(ROOT))
    pod = trainjob.effective_pod(sub.created[0], runtime)
    assert FC.code_fetches(_ctx(), "research", pod["spec"]) == []
    c = pod["spec"]["containers"][0]
    c["command"] = [*c["command"][:2], c["command"][2].replace(
        "import transformers", "import subprocess; subprocess.run(['pip', 'install', 'peft'])")]  # fmt: skip
    (f,) = FC.code_fetches(_ctx(), "research", pod["spec"])
    assert (f.where, f.fetcher) == ("packages_to_install.py:2", "pip install")


def test_data_staged_on_the_pods_fsx_volume_is_read_there():
    """download=True with its root on the pod's FSx claim finds the staged files (torchvision
    downloads only what the root lacks); the same root without the claim is a download, and
    its fix names where the pods mount FSx when they do."""
    code = "from torchvision import datasets\ndatasets.MNIST('/fsx/research/mnist', download=True)"
    spec = {"containers": [{"name": "c", "image": "i", "command": ["python", "-c", code],
                            "volumeMounts": [{"name": "fsx", "mountPath": "/fsx"}]}],
            "volumes": [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-research"}}]}  # fmt: skip
    assert FC.code_fetches(_ctx(), "research", spec) == []
    spec["volumes"][0] = {"name": "fsx", "emptyDir": {}}
    (f,) = FC.code_fetches(_ctx(), "research", spec)
    assert f.fetcher == "torchvision.datasets.MNIST(download=True)"
    assert FC.fix(["/fsx"]).startswith(
        "stage it on the team's FSx volume, mounted at /fsx in these pods"
    )


def test_aws_hosts_of_the_stacks_region_are_reached():
    """S3 and the VPC's endpoints of the stack's region are what the team policies open; the
    same bucket in another region is the internet."""
    from trainforge.platform.teams import network_policies

    closed = [
        _Obj({"kind": "NetworkPolicy", "metadata": {"name": p["name"], "namespace": "research"},
              "spec": p["spec"]})
        for p in network_policies("research", None, None, "10.0.0.0/16", ["3.5.0.0/16"])
    ]  # fmt: skip

    def job(url: str) -> _Obj:
        code = f"import requests\nrequests.get('{url}')"
        container = {"name": "c", "image": "i", "command": ["python", "-c", code]}
        return _Obj({"kind": "Job", "metadata": {"name": "dl", "namespace": "research"},
                     "spec": {"template": {"spec": {"containers": [container]}}}})  # fmt: skip

    ctx = _ctx(job("https://b.s3.us-west-2.amazonaws.com/d.tar"), *closed)

    class Inventory:
        config = {"aws:region": "us-west-2"}

    ctx.inventory = Inventory
    assert FC.check(ctx).findings == []
    ctx.objects[0] = job("https://b.s3.eu-central-1.amazonaws.com/d.tar")
    (f,) = FC.check(ctx).findings
    assert "downloads from b.s3.eu-central-1.amazonaws.com" in f.message


def test_a_malformed_object_is_left_to_the_schema_checks():
    """A TrainJob a program sent with a command that is no list, or numNodes no number: the
    plan's schema and runtime checks say why; this check does not stop the plan."""
    for trainer in ({"command": 5, "numNodes": 2}, {"command": ["sh"], "numNodes": "a"}):
        doc = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
               "metadata": {"name": "x", "namespace": "research"},
               "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer}}  # fmt: skip
        assert FC.check(_ctx(_Obj(doc))).findings == []
