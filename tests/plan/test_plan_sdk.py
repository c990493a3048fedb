"""`trainforge plan --sdk PROGRAM.py`: a user's Kubeflow SDK program judged by the plan.

Each program runs unchanged with the real SDK (kubeflow 0.4.1 in .sdk-venv, `make sdk-venv`)
against the plan's API stand-in (trainforge/plan/sdk.py); what it sends is judged by the plan
(checks/submitted.py and every object check) and printed as the plan prints.
"""

from __future__ import annotations

import copy
import pathlib
import types

import pytest
from test_plan_stacks import project_copy

from tests.conftest import ROOT
from trainforge.plan import cli, sdk
from trainforge.plan.checks import pod_sandbox
from trainforge.plan.checks import submitted as SB

PROGRAMS = ROOT / "tests" / "fixtures" / "kubeflow_sdk"
SEED = PROGRAMS / "seed_002_program.py"
TWO_GPUS = PROGRAMS / "two_gpus_per_node.py"
EFA = PROGRAMS / "efa_per_node.py"
PACKAGES = PROGRAMS / "packages_to_install.py"
GPU_POOL = "g5-4gpu"

pytestmark = pytest.mark.skipif(
    not (ROOT / ".sdk-venv" / "bin" / "python").exists(),
    reason="the Kubeflow SDK's venv .sdk-venv is absent: `make sdk-venv` creates it",
)


_SENT: dict[pathlib.Path, sdk.Submission] = {}


def sent(program: pathlib.Path) -> sdk.Submission:
    """What `program` asks for and sends with the real SDK (namespace research, the Trainer's
    runtime installed), run once per program per test process: each run is a fresh SDK
    interpreter (~2 CPU s) and several tests read the same program's run. A copy each call:
    a test may edit what it got."""
    if program not in _SENT:
        from trainforge.jobs import trainjob

        _SENT[program] = sdk.run_program(
            program, [trainjob.sdk_runtime_manifest()], "research", sdk.sdk_python(ROOT)
        )
    return copy.deepcopy(_SENT[program])


def with_trainjob(config: dict) -> None:
    config["trainforge:jobBackends"] = ["trainjob"]


def with_four_gpu_pool(config: dict) -> None:
    """dev with the Trainer and a 4-GPU pool (g5.12xlarge) holding the team's 8 GPUs, as
    tests/platform/test_kubeflow_sdk.py plans it: the seed's 4 x 2 GPUs fit there."""
    with_trainjob(config)
    config["trainforge:nodePools"].append(
        {
            "name": GPU_POOL,
            "instanceTypes": ["g5.12xlarge"],
            "capacityTypes": ["on-demand"],
            "limits": {"cpu": "192", "memory": "768Gi", "gpus": 8},
        }
    )
    config["trainforge:teams"][0]["quota"] = {
        "gpus": "8",
        "cpu": "64",
        "memory": "256Gi",
        "pods": "50",
        "pools": {GPU_POOL: {"gpus": 8}},
    }


def plan_sdk(
    tmp_path: pathlib.Path, capsys, program: pathlib.Path, change=None
) -> tuple[int, str, str]:
    root = project_copy(tmp_path, "dev", change)
    report = tmp_path / "report.txt"
    rc = cli.main(
        ["--stack", "dev", "--project-dir", str(root), "--no-standins", "--sdk", str(program),
         "--report", str(report)]
    )  # fmt: skip
    printed = capsys.readouterr().out
    return rc, printed + "\n" + report.read_text(), printed


def test_two_gpus_per_node_on_a_one_gpu_pool_is_refused(tmp_path, capsys):
    """Kueue admits the 2 x 2-GPU TrainJob on gpu-workloads (quota only); the plan refuses it,
    naming the pool and what a node there has."""
    rc, out, _ = plan_sdk(tmp_path, capsys, TWO_GPUS, with_trainjob)
    assert rc == 1
    first = out.splitlines()[0]
    assert first.startswith("trainforge plan --stack dev: ") and "CLEAN" not in first
    (line,) = [x for x in out.splitlines() if x.startswith("  [TRAINFORGE_JOB_CANNOT_SCHEDULE]")][
        :1
    ]
    assert "research/TrainJob/" in line
    # the finding's `why:` wraps at whole words on the verdict: read it across its lines
    flat = " ".join(x.strip() for x in out.splitlines())
    why = flat[flat.index("Kueue admits it on pool gpu-workloads") :]
    assert "pool 'gpu-workloads'" in why and "needs 2 GPUs, g5.xlarge has 1" in why
    assert (
        "queue: admitted through LocalQueue default of research (ClusterQueue research) on flavor gpu-workloads"
        in out
    )
    # the TrainJob the SDK sent is judged where every object is (schema and runtime), and
    # Pulumi's creation order does not apply to it
    assert "ORDER_" not in out


def test_the_seed_program_passes_on_a_stack_with_trainjob(tmp_path, capsys):
    rc, out, printed = plan_sdk(tmp_path, capsys, SEED, with_four_gpu_pool)
    assert out.splitlines()[0] == "trainforge plan --stack dev: CLEAN", out[-4000:]
    assert rc == 0
    # under the verdict: what the program sent and how it fares
    assert "\nKubeflow SDK program (plan --sdk):\n  program " in printed
    assert "sent 1 TrainJob(s)" in out
    assert (
        f"queue: admitted through LocalQueue default of research (ClusterQueue research) on flavor {GPU_POOL}"
        in out
    )
    assert f"nodes: pods per node on pool {GPU_POOL}: g5.12xlarge 2" in out
    assert "cost: g5.12xlarge x2, $" in out


def test_an_sdk_gang_whose_efa_devices_do_not_fit_its_pool_is_reported(tmp_path, capsys):
    """4 nodes x (1 GPU, 1 EFA device) on g5.12xlarge (4 GPUs, 1 EFA interface where the pool
    sets `efa: true`) within the pool's 8-GPU limit: each node holds one such pod, so the gang
    needs 4 NodeClaims of 4 GPUs, 16 > 8. The SDK section packed its pods with no EFA devices
    (all 4 on one node) and called the job runnable; its gang is now Karpenter's
    (capacity.gang), EFA devices too."""

    def with_efa(config: dict) -> None:
        with_four_gpu_pool(config)
        config["trainforge:nodePools"][-1]["efa"] = True

    rc, out, _ = plan_sdk(tmp_path, capsys, EFA, with_efa)
    assert rc == 1, out[-4000:]
    flat = " ".join(x.strip() for x in out.splitlines())
    assert f"on flavor {GPU_POOL}" in flat
    assert "[TRAINFORGE_JOB_CANNOT_SCHEDULE]" in out
    why = flat[flat.index(f"Kueue admits it on pool {GPU_POOL}, but its pods stay Pending") :]
    assert "4 pod(s) must run at once" in why, why[:600]
    assert "limited to nvidia.com/gpu 8" in why
    assert "cost: g5.12xlarge x1" not in out  # no longer one node for all four


def test_a_missing_runtime_names_job_backends(tmp_path, capsys):
    """dev as shipped (pytorchjob only): the SDK stops at `Failed to get Runtime`; the plan
    says which key installs it."""
    rc, out, _ = plan_sdk(tmp_path, capsys, TWO_GPUS)
    assert rc == 1
    assert "[TRAINFORGE_SDK_RUNTIME_MISSING] ClusterTrainingRuntime/torch-distributed" in out
    assert "Failed to get Runtime: torch-distributed" in out
    assert "fix: set `trainforge:jobBackends: [trainjob]`" in out
    flat = " ".join(out.split())
    assert (  # the keys dev sets (none), not "jobBackends is ['pytorchjob']"
        "it installs the job backend(s) pytorchjob only, as trainforge:jobBackend is unset "
        "(its default: pytorchjob), trainforge:jobBackends is unset and no job sets `backend:`"
    ) in flat, flat[flat.find("TRAINFORGE_SDK_RUNTIME_MISSING") :][:800]
    assert "sent 0 TrainJob(s)" in out


def test_packages_to_install_is_refused_with_its_fix(tmp_path, capsys):
    """The SDK's own generated install script: refused at plan (team egress reaches no package
    index), with the rehearsal of that script in the pod sandbox as the evidence."""
    rc, out, _ = plan_sdk(tmp_path, capsys, PACKAGES, with_trainjob)
    assert rc == 1
    assert "  [TRAINFORGE_SDK_PACKAGES] research/TrainJob/" in out
    assert "pip-installs transformers[torch], datasets at start (packages_to_install)" in out
    assert "fix: drop packages_to_install: build an image FROM the runtime image" in out
    if pod_sandbox.unavailable() is None:
        assert "the SDK's install script exits 1: ERROR: Failed to install Python packages" in out
        # The pod-script rehearsal meets the image's stand-in pip: it never calls the install ok
        # (it said "run 1 ok" while this very finding refused the install).
        (runs,) = [ln for ln in out.splitlines() if ln.strip().startswith("fresh volume: run 1")
                   and "pip" in ln]  # fmt: skip
        assert "run 1 ok but pip not run" in runs and "run 1 ok," not in runs, runs
        assert "pip not run: its package install was not rehearsed" in out


def test_its_image_is_judged_by_the_plans_image_rules(tmp_path, capsys):
    """The SDK's `image=` lands in the TrainJob; the plan's pod rules judge the pod the Trainer
    builds from it, as they judge the stack's own pods."""
    rc, out, _ = plan_sdk(tmp_path, capsys, PROGRAMS / "docker_hub_image.py", with_trainjob)
    assert rc == 1
    (line,) = {
        x for x in out.splitlines() if x.startswith("  [TRAINFORGE_DOCKER_HUB] research/TrainJob/")
    }
    # the finding's `why:` wraps at whole words on the verdict: read it across its lines
    rest = out.splitlines()[out.splitlines().index(line) + 1 :]
    why = " ".join(x.strip() for x in rest[:4])
    assert "image 'pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime' is pulled from Docker Hub" in why
    assert ", image pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime" in out  # the SDK section


# --- the pieces, without a plan ------------------------------------------------------------------


def test_an_install_script_the_sandbox_must_not_run_is_never_run(monkeypatch):
    """A sent pod running as root with a capability that could leave the sandbox, or mounting
    a claim the rehearsal does not model, is refused with the reason, as the script rehearsal
    refuses it: rehearse_install never runs it (before: both reached run_script, the root one
    on this machine with SYS_ADMIN)."""
    from trainforge.plan.checks import pod_scripts

    def never(*a, **k):
        raise AssertionError("run_script called")

    monkeypatch.setattr(pod_sandbox, "unavailable", lambda: None)
    monkeypatch.setattr(pod_scripts, "run_script", never)
    c = {"name": "node", "image": "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"}
    c["command"] = ["bash", "-c", "pip install --user transformers && python train.py"]
    root = {**c, "securityContext": {"runAsUser": 0, "capabilities": {"add": ["SYS_ADMIN"]}}}
    why = SB.rehearse_install({"spec": {"containers": [root]}})
    assert isinstance(why, str) and "runs as root with" in why and "SYS_ADMIN" in why, why
    claimed = {**c, "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    claimed["securityContext"] = {"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True}
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "team-fsx"}}
    why = SB.rehearse_install({"spec": {"containers": [claimed], "volumes": [volume]}})
    assert why == "it mounts a volume claim, which a run without the plan's volumes does not model"


def test_the_sdk_script_fails_without_an_index_and_the_rehearsal_can_pass():
    """The SDK's install script, as the real SDK writes it, in the pod sandbox: with no index
    reachable it exits 1; asking for a package the Python already has (pip), it passes, so
    the failure is the missing index, not the sandbox."""
    if pod_sandbox.unavailable():
        pytest.skip(f"the pod sandbox cannot run here: {pod_sandbox.unavailable()}")
    from trainforge.jobs import trainjob

    runtime = trainjob.sdk_runtime_manifest()
    sub = sent(PACKAGES)
    assert sub.returncode == 0, sub.output
    (doc,) = sub.created
    pod = trainjob.effective_pod(doc, runtime)
    assert SB.packages(pod) == ["transformers[torch]", "datasets"]
    failed = SB.rehearse_install(pod)
    assert not isinstance(failed, str) and failed.rc == 1, failed
    assert "Failed to install Python packages" in failed.stderr
    # the same script asking for pip, which the stand-in Python already has
    script = doc["spec"]["trainer"]["command"][2].replace(
        "PACKAGES=('transformers[torch]' datasets)", "PACKAGES=(pip)"
    )
    assert script != doc["spec"]["trainer"]["command"][2]
    doc["spec"]["trainer"]["command"][2] = script
    passed = SB.rehearse_install(trainjob.effective_pod(doc, runtime))
    assert not isinstance(passed, str) and passed.rc == 0, passed
    # kubeflow 0.4.1 (the pinned SDK) says "packages: pip"; 0.5.0 added " (user)"
    assert "Successfully installed Python packages" in passed.stdout
    assert (
        passed.stdout.split("Successfully installed Python packages", 1)[1]
        .split("\n")[0]
        .endswith(": pip")
    )


class _Obj:
    def __init__(self, doc: dict) -> None:
        self.doc = doc
        self.kind = doc["kind"]
        self.namespace = doc["metadata"].get("namespace")
        self.obj_name = doc["metadata"]["name"]


def _policy(name: str, egress: list) -> _Obj:
    return _Obj({"kind": "NetworkPolicy", "metadata": {"name": name, "namespace": "research"},
                 "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": egress}})  # fmt: skip


def test_open_egress_reads_the_namespaces_policies():
    from trainforge.platform.teams import network_policies

    class Ctx:
        objects = [
            _policy(name, spec.get("egress") or [])
            for name, spec in (
                (p["name"], p["spec"])
                for p in network_policies("research", None, None, "10.0.0.0/16", ["3.5.0.0/16"])
            )
            if "Egress" in spec.get("policyTypes", [])
        ]

    assert Ctx.objects  # the platform's own team policies
    assert SB.open_egress(Ctx, "research") is None
    Ctx.objects.append(_policy("allow-https", [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}],
                                                "ports": [{"port": 443}]}]))  # fmt: skip
    assert SB.open_egress(Ctx, "research") == "allow-https"
    Ctx.objects = []
    assert SB.open_egress(Ctx, "research") == "no egress policy"


def test_namespace_flag_is_checked_against_the_teams():
    class Team:
        def __init__(self, name: str) -> None:
            self.name, self.namespace = name, name

    class Contract:
        teams = {"research": Team("research"), "vision": Team("vision")}

    class Declared:
        contracts = [Contract()]

    class Inv:
        declared = Declared()

    assert sdk.namespace_for(Inv, "vision", "dev") == "vision"
    with pytest.raises(sdk.SdkError, match=r"^--namespace visoin: not a team namespace of stack "
                       r"dev; team namespaces: research, vision$"):  # fmt: skip
        sdk.namespace_for(Inv, "visoin", "dev")
    with pytest.raises(sdk.SdkError, match="say which one .* with --namespace"):
        sdk.namespace_for(Inv, None, "dev")


def test_bad_flags_are_one_line_errors(tmp_path, capsys, monkeypatch):
    assert cli.main(["--stack", "dev", "--sdk", str(tmp_path / "nope.py")]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"trainforge plan: --sdk {tmp_path / 'nope.py'}: no such Python file; expected PROGRAM.py\n"
    )
    assert cli.main(["--stack", "dev", "--namespace", "research"]) == 2
    assert (
        capsys.readouterr().err
        == "trainforge plan: --namespace research: only with --sdk PROGRAM\n"
    )
    # outside a project: the plan's own one line, no traceback
    program = tmp_path / "train.py"
    program.write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--stack", "dev", "--sdk", str(program)]) == 2
    assert capsys.readouterr().err.startswith(
        "trainforge plan: configuration error: no Pulumi.yaml"
    )


def test_a_failing_program_is_a_finding_with_its_last_line():
    """A program that raises for its own reasons (not a missing runtime) is one finding with
    its exception's line; a missing runtime is only the runtime finding."""

    class Inv:
        config: dict = {}
        submitted = sdk.Submission(
            "train.py", "research", returncode=1,
            output="Traceback (most recent call last):\n  ...\nValueError: num_nodes must be > 0\n",
        )  # fmt: skip

    class Ctx:
        inventory = Inv()
        objects: list = []
        declared = None

    (f,) = SB.check(Ctx).findings
    assert (f.rule, f.resource) == (SB.RULE_PROGRAM, "train.py")
    assert f.message.endswith(
        "exited 1 against the plan's API stand-in: ValueError: num_nodes must be > 0"
    )
    Inv.submitted.missing = ["torch-distributed"]
    (f,) = SB.check(Ctx).findings
    assert f.rule == SB.RULE_RUNTIME and "trainforge:jobBackends" in f.fix


@pytest.mark.parametrize(
    ("config", "backends", "said"),
    [
        (  # dev as shipped: neither key, no job's backend
            {"trainforge:jobs": '[{"name": "a"}]'},
            ("pytorchjob",),
            "pytorchjob only, as trainforge:jobBackend is unset (its default: pytorchjob), "
            "trainforge:jobBackends is unset and no job sets `backend:`",
        ),
        (
            {"trainforge:jobBackend": "indexed-job", "trainforge:jobBackends": '["pytorchjob"]',
             "trainforge:jobs": '[{"name": "a", "backend": "indexed-job"}]'},
            ("pytorchjob", "indexed-job"),
            "pytorchjob, indexed-job only, as trainforge:jobBackend is indexed-job, "
            "trainforge:jobBackends is ['pytorchjob'] and jobs set `backend:` indexed-job",
        ),
    ],
)  # fmt: skip
def test_a_missing_runtime_quotes_the_keys_the_stack_sets(config, backends, said):
    """On dev the finding said "trainforge:jobBackends is ['pytorchjob']", a key dev does not
    set (pytorchjob is jobBackend's default): it quotes each key as the stack file has it."""

    class Inv:
        submitted = sdk.Submission("train.py", "research", returncode=1, missing=["x"])

    Inv.config = config

    contract = types.SimpleNamespace(backend=backends[-1], backends=backends)

    class Ctx:
        inventory = Inv()
        objects: list = []
        declared = types.SimpleNamespace(contracts=[contract])

    (f,) = SB.check(Ctx).findings
    assert f.rule == SB.RULE_RUNTIME
    assert f"(it installs the job backend(s) {said}: the Kubeflow Trainer" in f.message


def test_what_a_plan_cannot_answer_after_sending_is_no_finding():
    """A program that waits for its job (wait_for_job_status, get_job_logs) after sending it
    stops at the first thing only a running cluster has: not the user's fault; what it sent
    is judged."""
    sub = sent(PROGRAMS / "waits_for_its_job.py")
    (doc,) = sub.created
    name = doc["metadata"]["name"]
    assert sub.returncode == 1
    assert sub.after_sent == [f"{sdk.TRAINER_API}/namespaces/research/trainjobs/{name}"]

    class Inv:
        config: dict = {}
        submitted = sub

    class Ctx:
        inventory = Inv()
        objects: list = []
        declared = None

    result = SB.check(Ctx)
    assert result.findings == []
    (section,) = result.sections
    assert section.lines[1].startswith(
        f"then the program asked for {sdk.TRAINER_API}/namespaces/research/trainjobs/{name}, "
        "which a plan cannot answer (no job runs here), and stopped there (exit 1: "
    )


def test_packages_are_not_refused_where_egress_is_open():
    """The refusal rests on the namespace's egress: a policy that opens HTTPS to everywhere
    lifts it (and says the install itself is not rehearsed)."""

    class Sent:
        ident, namespace, urn = "research/TrainJob/x", "research", ""

    class Ctx:
        objects = [_policy("allow-https", [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}])]

    lines: list[str] = []
    assert SB._packages(Ctx, Sent, {}, ["datasets"], lines) == []
    assert lines == [
        "  packages_to_install ['datasets']: egress open over HTTPS (allow-https): not refused; "
        "whether the image's pip installs them is not rehearsed here"
    ]
    Ctx.objects = [_policy("allow-dns", [{"ports": [{"port": 53, "protocol": "UDP"}]}])]
    (f,) = SB._packages(Ctx, Sent, {}, ["datasets"], [])
    assert f.rule == SB.RULE_PACKAGES and "reaches no package index" in f.message


# --- what fails on the pod's first line, and the node fit when no flavor admits --------------


def _sent_pod(program: pathlib.Path) -> tuple[dict, dict]:
    """What `program` sends with the real SDK (its TrainJob) and the pod the Trainer builds."""
    from trainforge.jobs import trainjob

    (doc,) = sent(program).created
    return doc, trainjob.built_pod(doc)


class _Sent:
    ident, namespace, urn = "research/TrainJob/x", "research", ""


def test_a_name_the_function_never_defines_is_refused_at_its_line():
    """The function uses `os`, imported by its module only: the SDK sends the function alone,
    so each pod raises NameError. The name is read from the file the TrainJob's script writes
    (its line there), not from the program."""
    from trainforge.jobs.fetches import heredoc_files

    program = PROGRAMS / "undefined_name.py"
    doc, pod = _sent_pod(program)
    lines: list[str] = []
    (f,) = SB._unbound(_Sent, pod, lines, str(program))
    assert f.rule == SB.RULE_NAMES == "TRAINFORGE_SDK_UNDEFINED_NAME"
    # FILE:LINE is the program's line (it said undefined_name.py:5, the pod file's line)
    assert "os.environ" in program.read_text().splitlines()[15]
    pod_line = "line 5 of the file the SDK writes in the pod"
    assert f"uses `os` (undefined_name.py:16, {pod_line})" in f.message
    assert "raises NameError when it reaches that line" in f.message
    ((file, text),) = heredoc_files(doc["spec"]["trainer"]["command"][2], "trainer")
    assert file == "undefined_name.py" and "os.environ" in text.splitlines()[4]
    assert lines == [
        f"  REFUSED: the function uses names it never defines: `os` (undefined_name.py:16, "
        f"{pod_line})"
    ]
    # where the function is not found in the program's files, no FILE:LINE is made up
    (f,) = SB._unbound(_Sent, pod, [])
    assert f"uses `os` ({pod_line} (undefined_name.py))" in f.message


def test_the_plan_refuses_a_function_that_would_raise_nameerror(tmp_path, capsys):
    """Before: exit 0, CLEAN, "admitted ... on flavor gpu-workloads", and each GPU pod raised
    NameError and was restarted."""
    rc, out, printed = plan_sdk(tmp_path, capsys, PROGRAMS / "undefined_name.py", with_trainjob)
    assert rc == 1 and "CLEAN" not in out.splitlines()[0]
    (line,) = [x for x in printed.splitlines() if x.startswith(f"  [{SB.RULE_NAMES}]")]
    assert "research/TrainJob/" in line
    assert "REFUSED: the function uses names it never defines: `os` (undefined_name.py:16" in out


def test_no_name_finding_for_the_programs_that_define_what_they_use(tmp_path):
    """The fixtures' functions and Kubeflow Trainer's own mnist notebook import what they use
    inside the function, and hold nothing bash's heredoc changes: no finding."""
    from test_internet_fetch import notebook_program

    programs = [p for p in sorted(PROGRAMS.glob("*.py")) if p.name != "undefined_name.py"]
    for program in [*programs, notebook_program(tmp_path)]:
        _, pod = _sent_pod(program)
        assert SB._unbound(_Sent, pod, []) == [], program
        # and the file each pod writes is the function as written (bash changes none of it)
        lines: list[str] = []
        assert SB._expanded(_Sent, pod, lines) == [] and lines == [], program


def test_a_syntax_error_keeps_its_file_and_line(tmp_path):
    """Python's SyntaxError says where on the line before it; the finding keeps that."""
    program = tmp_path / "train.py"
    program.write_text('def train():\n    import torch\n    print("hi"\nx = 1\n')
    sub = sdk.run_program(program, [], "research", sdk.sdk_python(ROOT))
    assert sub.returncode == 1
    assert sub.last_error == f"File \"{program}\", line 3: SyntaxError: '(' was never closed"

    class Inv:
        config: dict = {}
        submitted = sub

    class Ctx:
        inventory = Inv()
        objects: list = []
        declared = None

    (f,) = SB.check(Ctx).findings
    assert f.rule == SB.RULE_PROGRAM
    assert f.message.endswith(
        f"stand-in: File \"{program}\", line 3: SyntaxError: '(' was never closed"
    )


def test_a_pod_no_node_holds_is_not_told_to_get_more_quota(tmp_path, capsys):
    """2 x (1 GPU, 8 CPUs, 64Gi) on dev: no flavor admits it (quota), and no node of either
    pool of the team's ClusterQueue holds one pod, so the node fit says so and the queue
    finding's fix no longer asks for more quota."""
    rc, _, printed = plan_sdk(tmp_path, capsys, PROGRAMS / "too_big_for_a_node.py", with_trainjob)
    assert rc == 1
    out = " ".join(x.strip() for x in printed.splitlines())
    assert "[TRAINFORGE_JOB_CANNOT_SCHEDULE] research/TrainJob/" in out
    assert "no flavor admits it, and no instance type of pool 'training-workloads'" in out
    assert (
        "no instance type of pool 'gpu-workloads' (g4dn.xlarge, g5.xlarge) can hold one pod" in out
    )
    never = out[out.index("[TRAINFORGE_QUEUE_NEVER_ADMITTED]") :]
    never = never[: never.index("Warnings (")]
    assert "no flavor of ClusterQueue research fits" in never
    assert "fix: more quota on these pools cannot help: its pods fit no node of ClusterQueue " \
        "research's flavors' pools (TRAINFORGE_JOB_CANNOT_SCHEDULE)" in never  # fmt: skip
    assert "give the team more nominal quota" not in never
    assert "CANNOT RUN: no instance type of pool 'gpu-workloads'" in printed


def _set_key(config: dict, key: str, value: str) -> None:
    """`trainforge:teams[0].quota.pools.gpu-workloads.gpus` (a fix's key) set in `config`."""
    import re

    head, _, rest = key.partition(".")
    name, index = re.fullmatch(r"(trainforge:\w+)(?:\[(\d+)\])?", head).groups()
    here = config[name][int(index)] if index is not None else config[name]
    *path, last = rest.split(".")
    for part in path:
        here = here.setdefault(part, {})
    here[last] = value


def test_an_sdk_job_over_its_quota_gets_the_stack_jobs_fix_and_the_fix_admits_it(tmp_path, capsys):
    """8 x 1 GPU on dev: a gpu-workloads node holds one pod, the team's GPU quota is what keeps
    it out, and no node-fit finding is made. Its fix was the generic "make the job smaller, or
    give the team more nominal quota": now the stack jobs' (`wiring.quota_fix`, sized from the
    TrainJob's pods), in the program's words and the stack's keys; the stack changed so and
    planned again, Kueue admits it."""
    program = tmp_path / "over_quota.py"
    program.write_text(
        (PROGRAMS / "too_big_for_a_node.py")
        .read_text()
        .replace('{"gpu": 1, "memory": "64Gi", "cpu": 8}', '{"gpu": 1}')
        .replace("num_nodes=2", "num_nodes=8")
    )
    (tmp_path / "before").mkdir()
    rc, _, printed = plan_sdk(tmp_path / "before", capsys, program, with_trainjob)
    assert rc == 1
    out = " ".join(x.strip() for x in printed.splitlines())
    assert "insufficient quota for nvidia.com/gpu in flavor gpu-workloads" in out
    assert "TRAINFORGE_JOB_CANNOT_SCHEDULE" not in out and "CANNOT RUN" not in out
    assert "give the team more nominal quota" not in out
    never = out[out.index("[TRAINFORGE_QUEUE_NEVER_ADMITTED]") :]
    fix = never[never.index("fix: use CustomTrainer num_nodes=") :].split(" Warnings (")[0]
    changes = fix[fix.index(", or set ") + len(", or set ") :]
    assert changes.startswith("trainforge:"), fix  # the stack's keys, the quota model's values

    def raised(config: dict) -> None:
        with_trainjob(config)
        for change in changes.rstrip(".").split(" and "):
            key, value = change.split(" to ")
            _set_key(config, key, value.split(" (")[0])

    fewer = tmp_path / "fewer.py"
    nodes = fix.removeprefix("fix: use CustomTrainer num_nodes=").split(",")[0]
    fewer.write_text(program.read_text().replace("num_nodes=8", f"num_nodes={nodes}"))
    for where, sent, change in (("raised", program, raised), ("fewer", fewer, with_trainjob)):
        (tmp_path / where).mkdir()
        _, _, printed = plan_sdk(tmp_path / where, capsys, sent, change)
        assert "queue: admitted through LocalQueue" in printed, (fix, printed)
        assert "[TRAINFORGE_QUEUE_NEVER_ADMITTED]" not in printed


def test_an_sdk_job_selecting_a_later_flavors_pool_gets_the_fix_for_that_pool(tmp_path, capsys):
    """8 x 1 GPU whose pods select gpu-workloads (a RuntimePatch nodeSelector) on dev with the
    4-GPU pool g5-4gpu, a GPU flavor before gpu-workloads in research's ClusterQueue. Kueue's
    flavor assigner skips flavors whose node labels the pods' selector does not match
    (release-0.19 flavorassigner.go checkFlavorForPodSets: `K.flavor_fits_podset`, what the
    admission reads), so only gpu-workloads may admit it, and the quota there keeps it out.
    The fix picked the first GPU flavor, g5-4gpu, where 8 GPUs fit, and said only 'make the
    job smaller, or give the team more nominal quota'; it is the one for gpu-workloads now,
    and the stack changed so and planned again, Kueue admits it."""
    program = PROGRAMS / "second_pool_selector.py"
    (tmp_path / "before").mkdir()
    rc, _, printed = plan_sdk(tmp_path / "before", capsys, program, with_four_gpu_pool)
    assert rc == 1
    out = " ".join(x.strip() for x in printed.splitlines())
    assert "flavor g5-4gpu doesn't match node affinity" in out
    assert "insufficient quota for nvidia.com/gpu in flavor gpu-workloads" in out
    never = out[out.index("[TRAINFORGE_QUEUE_NEVER_ADMITTED]") :]
    fix = never[never.index("fix: ") :].split(" Warnings (")[0]
    assert fix.startswith("fix: use CustomTrainer num_nodes=4, or set "), fix
    changes = fix[fix.index(", or set ") + len(", or set ") :]
    pools = [p["name"] for p in _dev_pools()]
    assert f"trainforge:nodePools[{pools.index('gpu-workloads')}].limits.gpus to 8" in changes

    def raised(config: dict) -> None:
        with_four_gpu_pool(config)
        for change in changes.rstrip(".").split(" and "):
            key, value = change.split(" to ")
            _set_key(config, key, value.split(" (")[0])

    (tmp_path / "raised").mkdir()
    _, _, printed = plan_sdk(tmp_path / "raised", capsys, program, raised)
    assert "queue: admitted through LocalQueue" in printed, (fix, printed)
    assert "[TRAINFORGE_QUEUE_NEVER_ADMITTED]" not in printed


def _dev_pools() -> list[dict]:
    import yaml

    config = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    with_four_gpu_pool(config)
    return config["trainforge:nodePools"]


def test_the_functions_first_line_is_found_in_its_own_file(tmp_path):
    """`first_line`: where the SDK's `inspect.getsource` text starts in the file on this
    machine (a decorator's line, a nested function dedented, a module beside the program);
    None where the text is in no function there (never a guessed line)."""
    from trainforge.plan.checks.pod_files import Written

    program = tmp_path / "prog.py"
    program.write_text(
        "import functools\n\n\n@functools.cache\ndef train():\n    return 1\n\n\n"
        "def outer():\n    def inner(x):\n        return x\n\n    return inner\n"
    )
    (tmp_path / "lib.py").write_text("X = 1\n\n\ndef train():\n    return 2\n")
    call = "\ntrain()\n"
    assert SB.first_line(str(program), Written("prog.py", "@functools.cache\ndef train():\n    return 1\n" + call, None)) == 4  # fmt: skip
    assert SB.first_line(str(program), Written("prog.py", "def inner(x):\n    return x\n" + call, None)) == 10  # fmt: skip
    assert SB.first_line(str(program), Written("lib.py", "def train():\n    return 2\n" + call, None)) == 4  # fmt: skip
    assert SB.first_line(str(program), Written("prog.py", "def train():\n    return 3\n", None)) is None  # fmt: skip
    assert SB.first_line(None, Written("prog.py", "def train():\n    return 1\n", None)) is None


def test_a_gpu_only_pod_is_shown_at_its_limits_and_warned_below_its_gpus_share(tmp_path, capsys):
    """Before: `2 pod(s) x (1 GPU, cpu 0.5, memory 1Gi)`, admitted, nothing more: the pods run
    under the team LimitRange's default limits (cpu 2, memory 4Gi) on nodes where the
    platform's own 1-GPU pods get 3600m and 13780Mi. Now the line shows the limits and a
    warning names the share; the resources_per_node it gives silences it and is admitted."""
    rc, out, printed = plan_sdk(tmp_path, capsys, PROGRAMS / "gpu_only.py", with_trainjob)
    assert rc == 0 and out.splitlines()[0] == "trainforge plan --stack dev: CLEAN", out[-3000:]
    assert (
        ": 2 pod(s) x (1 GPU, cpu 0.5, memory 1Gi; limits cpu 2, memory 4Gi (cpu and memory: "
        "the default of LimitRange research/container-defaults)), image " in printed
    )
    fix = '{"gpu": 1, "cpu": "3600m", "memory": "13780Mi"}'
    (warning,) = [x for x in printed.splitlines() if x.startswith("    WARNING: ")]
    assert warning == (
        "    WARNING: each pod runs under cpu limit 2 and memory limit 4Gi (the default of "
        "LimitRange research/container-defaults: resources_per_node names no cpu or memory), "
        "below what 1 GPU(s) of pool gpu-workloads come with (cpu 3600m, memory 13780Mi, what "
        "the platform's own jobs get, requests = limits): its CPU use above its limit is "
        "throttled; a pod using more memory than its limit is OOM-killed; give "
        f"resources_per_node {fix}"
    )
    fixed = tmp_path / "fixed.py"
    fixed.write_text((PROGRAMS / "gpu_only.py").read_text().replace('{"gpu": 1}', fix))
    (tmp_path / "again").mkdir()
    rc, out, printed = plan_sdk(tmp_path / "again", capsys, fixed, with_trainjob)
    assert rc == 0 and "WARNING" not in printed
    assert "2 pod(s) x (1 GPU, cpu 3.6, memory 13.46Gi; limits cpu 3.6, memory 13.46Gi)" in printed
    assert "queue: admitted through LocalQueue default of research" in printed
