"""The pod script rehearsal: scripts run under their container's securityContext against
scratch volumes, more than once, and the pods using those volumes must write there after."""

from __future__ import annotations

import os

import pytest

from tests.conftest import shipped_plan
from trainforge.core.contract import Declared, PlatformContract, TeamFacts
from trainforge.jobs.backends import pod_templates
from trainforge.plan import check_types as T
from trainforge.plan import core
from trainforge.plan import registry as C
from trainforge.plan.checks import pod_sandbox as S
from trainforge.plan.checks import pod_scripts as P
from trainforge.plan.manifests import K8sObject
from trainforge.plan.runner import Inventory
from trainforge.platform.fsx import team_dir_script

needs_sandbox = pytest.mark.skipif(
    S.unavailable() is not None, reason=f"pod script rehearsal not runnable: {S.unavailable()}"
)


@pytest.mark.skipif(
    not os.environ.get("TRAINFORGE_REQUIRE_SANDBOX"),
    reason="only where the sandbox must run (.ci/run sets TRAINFORGE_REQUIRE_SANDBOX=1)",
)
def test_ci_runs_the_sandboxed_rehearsals_instead_of_skipping_them():
    """CI runs as root: a sandbox that cannot start there would turn every needs_sandbox test
    into a silent skip (and a broken setpriv argument fails the probe the same way)."""
    assert S.unavailable() is None


ROOT_CHOWN = {
    "runAsUser": 0,
    "runAsGroup": 0,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
}
FIRST_WAVE = "mkdir -p /fsx/t && chown 1000:1000 /fsx/t && chmod 0770 /fsx/t"
SWAPPED = "mkdir -p /fsx/t && chmod 0770 /fsx/t && chown 1000:1000 /fsx/t"


def _obj(kind: str, name: str, doc: dict) -> K8sObject:
    return K8sObject(urn=f"urn:{kind}:{name}", name=name, type=f"kubernetes:x:{kind}", doc=doc)


def _setup_job(script: str, sc: dict | None = None) -> K8sObject:
    pod = {
        "restartPolicy": "OnFailure",
        "containers": [
            {
                "name": "mkdir",
                "image": "busybox:1.37.0",
                "command": ["sh", "-c", script],
                "securityContext": sc or ROOT_CHOWN,
                "volumeMounts": [{"name": "fsx", "mountPath": "/fsx"}],
            }
        ],
        "volumes": [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-t"}}],
    }
    doc = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "fsx-team-dir", "namespace": "t"},
        "spec": {"template": {"spec": pod}},
    }
    return _obj("Job", "fsx-team-dir-t", doc)


def _training_pod(uid: int = 1000) -> K8sObject:
    """A PyTorchJob-like pod of team t writing its checkpoints on the claim's subPath."""
    pod = {
        "securityContext": {"runAsUser": uid, "runAsGroup": uid, "fsGroup": uid},
        "containers": [
            {
                "name": "pytorch",
                "image": "pytorch",
                "command": ["python", "-m", "x", "--checkpoint-dir", "/fsx/checkpoints/t/j"],
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": [{"name": "fsx", "mountPath": "/fsx", "subPath": "t"}],
            }
        ],
        "volumes": [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-t"}}],
    }
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "t"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"template": {"spec": pod}}}},
    }
    return _obj("PyTorchJob", "job-t-j", doc)


PV = _obj(
    "PersistentVolume",
    "pv",
    {
        "kind": "PersistentVolume",
        "metadata": {"name": "fsx-t"},
        "spec": {
            "claimRef": {"namespace": "t", "name": "fsx-t"},
            "csi": {"driver": "fsx.csi.aws.com"},
        },
    },
)


def _check(*objects: K8sObject, declared: Declared | None = None) -> T.CheckResult:
    inv = Inventory(project="p", stack="s", resources=[])
    return P.check(T.PlanContext(inventory=inv, objects=[PV, *objects], declared=declared))


def _scenarios(result: T.CheckResult) -> dict[str, list[str]]:
    (section,) = result.sections
    (entry,) = section.data["scripts"]
    return entry["scenarios"]


def test_registered_and_waivable():
    assert P.check in [c.run for c in C.CHECKS]
    assert {P.SCRIPT_FAILS, P.CANNOT_WRITE} <= core.known_rule_ids()


def test_capabilities_as_containerd_leaves_them_after_exec():
    root = S.Identity.of({}, ROOT_CHOWN)
    assert root.effective == {"CHOWN"} and root.no_new_privs and root.read_only_root
    user = S.Identity.of(
        {"runAsUser": 1000, "fsGroup": 2000}, {"capabilities": {"add": ["CAP_CHOWN"]}}
    )
    # a non-root process keeps no capability after exec (Kubernetes sets no ambient ones)
    assert user.bounding >= {"CHOWN", "FOWNER"} and user.effective == frozenset()
    assert (user.uid, user.gid, user.groups, user.no_new_privs) == (1000, 0, (2000,), False)
    assert S.Identity.of({}, {}).effective == S.DEFAULT_CAPS  # root, nothing dropped
    assert S.Identity.of({}, {"privileged": True}).setpriv_args()[4] == "--bounding-set=+all"
    assert "--bounding-set=-all,+chown" in root.setpriv_args()


def test_shell_scripts_are_found_in_any_pod_template():
    assert P.shell_script({"command": ["sh", "-c", "echo hi"]}) == "echo hi"
    assert P.shell_script({"command": ["/bin/bash"], "args": ["-ec", "x"]}) == "x"
    assert P.shell_script({"command": ["python", "-c", "x"]}) is None
    assert P.shell_script({"command": ["mlflow", "server"]}) is None
    assert P.shell_script({"command": ["sh", "/scripts/setup.sh"]}) is None  # a file, no -c
    found = pod_templates(_training_pod().doc, build=False)
    assert [t.spec_path for t in found] == ["spec.pytorchReplicaSpecs.Master.template.spec"]


@needs_sandbox
def test_the_first_wave_script_fails_on_its_first_run():
    result = _check(_setup_job(FIRST_WAVE), _training_pod())
    assert _scenarios(result)["fresh volume"] == ["run 1 FAILED (exit 1)"]
    f = result.findings[0]
    assert (f.rule, f.resource) == (P.SCRIPT_FAILS, "t/Job/fsx-team-dir")
    assert (
        "fails on run 1 (fresh volume) as uid 0 gid 0 groups none capabilities CHOWN" in f.message
    )
    assert (
        "chmod: /fsx/t: Operation not permitted" in f.message
        or "Operation not permitted" in f.message
    )


@needs_sandbox
def test_the_swapped_order_fails_on_the_second_run():
    result = _check(_setup_job(SWAPPED), _training_pod())
    assert _scenarios(result)["fresh volume"] == ["run 1 ok", "run 2 (Job retry) FAILED (exit 1)"]
    assert {f.rule for f in result.findings} == {P.SCRIPT_FAILS}


@needs_sandbox
def test_with_fowner_the_first_wave_script_passes():
    """The rehearsal models capabilities: CAP_FOWNER is exactly what the first script lacked."""
    sc = {**ROOT_CHOWN, "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}}
    result = _check(_setup_job(FIRST_WAVE, sc), _training_pod())
    assert not result.findings, [f.message for f in result.findings]


@needs_sandbox
def test_the_platform_script_passes_every_scenario_with_chown_only():
    result = _check(_setup_job(team_dir_script("/fsx/t", 1000, 1000)), _training_pod())
    assert not result.findings, [f.message for f in result.findings]
    assert _scenarios(result) == {
        "fresh volume": [
            "run 1 ok",
            "run 2 (Job retry) ok",
            "writes ok",
            "run 3 (Job re-created) ok",
            "writes again ok",
        ],
        "subPaths made by the kubelet first": ["run 1 ok", "writes ok"],
    }


@needs_sandbox
def test_pods_of_another_uid_cannot_write():
    result = _check(_setup_job(team_dir_script("/fsx/t", 1000, 1000)), _training_pod(uid=2000))
    (f, *_) = result.findings
    assert f.rule == P.CANNOT_WRITE
    assert "t/PyTorchJob/j (uid 2000 gid 2000 groups 2000" in f.message
    assert "cannot write /fsx/checkpoints/t/j" in f.message and "Permission denied" in f.message


@needs_sandbox
def test_user_code_pods_are_rehearsed_writing_their_contract_directories():
    """A pod running the user's own code names no --checkpoint-dir: the job contract's
    TRAINFORGE_CHECKPOINT_DIR / TRAINFORGE_OUTPUT_DIR say where it writes."""
    pod = _training_pod(uid=2000)
    c = pod.doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    c["command"] = ["python", "/workspace/train.py"]
    c["env"] = [
        {"name": "TRAINFORGE_CHECKPOINT_DIR", "value": "/fsx/checkpoints/t/user"},
        {"name": "TRAINFORGE_OUTPUT_DIR", "value": "/fsx/runs/t/user"},
    ]
    result = _check(_setup_job(team_dir_script("/fsx/t", 1000, 1000)), pod)
    messages = " ".join(f.message for f in result.findings if f.rule == P.CANNOT_WRITE)
    assert "cannot write /fsx/checkpoints/t/user, /fsx/runs/t/user" in messages


@needs_sandbox
def test_a_team_without_jobs_is_probed_with_its_team_facts_uid():
    team = TeamFacts(
        name="t",
        namespace="t",
        claim_name="fsx-t",
        fsx_sub_path="t",
        run_as_user=4000,
        run_as_group=4000,
    )
    declared = Declared(contracts=[PlatformContract(pools={}, teams={"t": team})])
    result = _check(_setup_job(team_dir_script("/fsx/t", 1000, 1000)), declared=declared)
    (f, *_) = result.findings
    assert f.rule == P.CANNOT_WRITE and "UID/GID from TeamFacts" in f.message
    ok = _check(_setup_job(team_dir_script("/fsx/t", 4000, 4000)), declared=declared)
    assert not ok.findings


def test_not_runnable_is_reported_never_passed(monkeypatch):
    monkeypatch.setattr(S, "unavailable", lambda: "needs root (test)")
    result = _check(_setup_job(FIRST_WAVE), _training_pod())
    (section,) = result.sections
    assert section.lines[0] == "NOT RUN: needs root (test)"
    assert section.data == {
        "runnable": False,
        "reason": "needs root (test)",
        "scripts": ["t/Job/fsx-team-dir"],
    }
    (f,) = result.findings
    assert (f.rule, f.resource) == (P.NOT_RUN, "t/Job/fsx-team-dir")
    assert "script not rehearsed (needs root (test))" in f.message and FIRST_WAVE in f.message


def test_not_root_is_not_runnable(monkeypatch):
    monkeypatch.setattr(S.os, "geteuid", lambda: 1000)
    assert "needs root" in S.unavailable.__wrapped__()


@needs_sandbox
def test_dev_and_prod_plans_rehearse_the_fsx_jobs():
    # prod also declares the DCGM acceptance tests, whose pods run a shell script too
    for stack, teams, acceptance in (
        ("dev", {"research"}, set()),
        ("prod", {"llm", "vision"}, {"p4d-reserved", "efa-training", "gpu-workloads"}),
    ):
        result = shipped_plan(stack)
        assert not [v for v in result.failing if v.rule in (P.SCRIPT_FAILS, P.CANNOT_WRITE)]
        (section,) = [s for s in result.sections if s.title == "Pod script rehearsal"]
        objects = [e["object"] for e in section.data["scripts"]]
        # every team's directory is made from the platform's fsx-admin namespace
        team_dirs = {o for o in objects if not o.startswith("trainforge-acceptance/")}
        assert {o.rsplit("fsx-team-dir-", 1)[-1] for o in team_dirs} == teams
        assert {o.split("/")[0] for o in team_dirs} == {"fsx-admin"}
        assert set(objects) - team_dirs == {
            f"trainforge-acceptance/CronJob/{pool}-dcgm-diag" for pool in acceptance
        }
        for e in section.data["scripts"]:
            assert all(step.endswith("ok") for steps in e["scenarios"].values() for step in steps)


@needs_sandbox
def test_root_with_escape_capabilities_is_not_run_here():
    sc = {"runAsUser": 0, "capabilities": {"add": ["SYS_ADMIN"]}}  # default set + SYS_ADMIN
    result = _check(_setup_job("touch /fsx/x", sc))
    (section,) = result.sections
    (entry,) = section.data["scripts"]
    assert "MKNOD, SYS_ADMIN, SYS_CHROOT" in entry["skipped"] and not entry["scenarios"]
    # not run is never passed: the script is a finding of its own, naming why
    (finding,) = result.findings
    assert finding.rule == "TRAINFORGE_POD_SCRIPT_UNREHEARSED"
    assert finding.message.endswith(f"not rehearsed: {entry['skipped']}")


@needs_sandbox
def test_the_sandbox_sees_no_host_process(tmp_path):
    root = S.Identity.of({}, ROOT_CHOWN)
    r = S.run(f"kill -0 {os.getpid()}", root, [S.Mount(tmp_path, "/fsx")])
    assert not r.ok  # the test's own process is invisible from the sandbox's PID namespace
    r = S.run("touch /fsx/ok && touch /nope", root, [S.Mount(tmp_path, "/fsx")])
    assert (tmp_path / "ok").exists() and "Read-only file system" in r.stderr


def _processes_of(uid: int) -> list[str]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                status = S.read_status(f.read())
        except (OSError, ValueError):
            continue  # gone meanwhile
        if uid in status["uid"]:
            out.append(pid)
    return out


@needs_sandbox
def test_a_script_that_times_out_leaves_no_process_behind():
    """The run's PID namespace is killed on timeout: its init (the script's shell), a
    background child and one in a session of its own, all as the container's user."""
    uid = 48213  # no other test runs as it
    who = S.Identity(uid, uid, (), frozenset(), True, True)
    r = S.run("sleep 60 & setsid sleep 60 & sleep 60", who, [], timeout=1)
    assert r.rc == 124
    assert _processes_of(uid) == []


def _mlflow_training_job(script: str) -> K8sObject:
    """A job of team t, as the pod builder renders it, whose command is a shell script: the
    team's MLflow credentials Secret at $HOME/.mlflow, inside the /tmp emptyDir."""
    from tests.jobs.helpers import CPU_POOL, target  # noqa: PLC0415
    from trainforge.jobs.backends import emit  # noqa: PLC0415
    from trainforge.jobs.spec import parse_job  # noqa: PLC0415
    from trainforge.jobs.wiring import resolve_job  # noqa: PLC0415

    raw = {
        "name": "sh",
        "team": "t",
        "pool": CPU_POOL.name,
        "image": "busybox:1.37.0",
        "codeSource": "image",
        "entrypoint": {"command": ["sh", "-c", script]},
    }
    tgt = target(
        CPU_POOL,
        name="t",
        namespace="t",
        claim_name="fsx-t",
        mlflow_secret="mlflow-credentials",
        mlflow_experiment="t",
        run_as_user=1000,
        run_as_group=1000,
    )
    out = emit(resolve_job(parse_job(raw, "job"), tgt, "job"), tgt, None)
    return _obj("PyTorchJob", "job-t-sh", out.workload)


@needs_sandbox
def test_a_training_pod_runs_with_its_mlflow_credentials_mounted_inside_tmp():
    """containerd mounts a container's volumes shallowest first and runc makes the missing
    mount point (/tmp/.mlflow in the emptyDir): the rehearsal does too, so the pod's script
    finds the credentials' directory read-only and the rest of HOME writable."""
    script = (
        'test "$HOME" = /tmp && test -d "$HOME/.mlflow" && ! touch "$HOME/.mlflow/x" 2>/dev/null'
        ' && touch "$HOME/ok"'
    )
    job = _mlflow_training_job(script)
    pod = job.doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/tmp"] == "tmp" and mounts["/tmp/.mlflow"] == "mlflow-credentials"
    result = _check(job)
    assert not result.findings, [f.message for f in result.findings]
    assert _scenarios(result)["fresh volume"][0] == "run 1 ok"
    failing = _check(_mlflow_training_job('touch "$HOME/.mlflow/x"'))
    assert [f.rule for f in failing.findings] == [P.SCRIPT_FAILS]
    assert "Read-only file system" in failing.findings[0].message


@needs_sandbox
def test_nested_mounts_are_mounted_shallowest_first_whatever_their_order(tmp_path):
    tmp, secret = tmp_path / "tmp", tmp_path / "secret"
    tmp.mkdir()
    tmp.chmod(0o777)  # an emptyDir
    secret.mkdir()
    (secret / "credentials").write_text("[mlflow]\n")
    user = S.Identity.of({"runAsUser": 1000, "runAsGroup": 1000}, {"readOnlyRootFilesystem": True})
    script = "grep -q mlflow /tmp/.mlflow/credentials && touch /tmp/ok"
    for mounts in (
        [S.Mount(tmp, "/tmp"), S.Mount(secret, "/tmp/.mlflow", True)],
        [S.Mount(secret, "/tmp/.mlflow", True), S.Mount(tmp, "/tmp")],
    ):
        r = S.run(script, user, mounts)
        assert r.ok, r.tail()
        # the mount point was made inside the emptyDir, root-owned, as runc makes it
        st = (tmp / ".mlflow").stat()
        assert (st.st_uid, oct(st.st_mode & 0o777)) == (0, "0o755")


# --- the sandbox proves whom it runs as, from inside ---------------------------------------

STATUS = """Name:\tcat
Uid:\t1000\t1000\t1000\t1000
Gid:\t1000\t1000\t1000\t1000
Groups:\t2000 1000
CapInh:\t0000000000000000
CapPrm:\t0000000000000000
CapEff:\t0000000000000000
CapBnd:\t0000000000000000
CapAmb:\t0000000000000000
NoNewPrivs:\t1
"""
NON_ROOT = S.Identity(1000, 1000, (1000, 2000), frozenset(), True, True)


def test_identity_mismatches_reads_proc_self_status():
    assert S.identity_mismatches(NON_ROOT, STATUS) == []
    root = STATUS.replace("Uid:\t1000\t1000", "Uid:\t0\t0")
    assert S.identity_mismatches(NON_ROOT, root) == ["uid 0/0/1000/1000 (want 1000)"]
    chown = STATUS.replace("CapBnd:\t0000000000000000", "CapBnd:\t0000000000000001")
    assert S.identity_mismatches(NON_ROOT, chown) == ["bounding capabilities CHOWN (want none)"]
    assert S.identity_mismatches(NON_ROOT, STATUS.replace("2000 1000", "1000")) == [
        "groups 1000 (want 1000,2000)"
    ]
    assert S.identity_mismatches(NON_ROOT, STATUS.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0")) == [
        "no_new_privs 0 (want 1)"
    ]
    root_chown = S.Identity(0, 0, (), frozenset({"CHOWN"}), True, True)
    eff = STATUS.replace("1000", "0").replace("Groups:\t2000 0", "Groups:\t")
    eff = eff.replace("CapBnd:\t0000000000000000", "CapBnd:\t0000000000000001")
    assert S.identity_mismatches(root_chown, eff) == ["effective capabilities none (want CHOWN)"]
    with pytest.raises(ValueError, match="not a /proc/self/status"):
        S.identity_mismatches(NON_ROOT, "hello")


def test_identity_mismatches_in_every_field():
    """Each field alone, in the directions the first test does not take: a wrong gid, one
    group too many, no_new_privs set though not wanted, an ambient capability."""
    gid0 = STATUS.replace("Gid:\t1000\t1000\t1000\t1000", "Gid:\t0\t0\t0\t0")
    assert S.identity_mismatches(NON_ROOT, gid0) == ["gid 0/0/0/0 (want 1000)"]
    extra = STATUS.replace("Groups:\t2000 1000", "Groups:\t3000 2000 1000")
    assert S.identity_mismatches(NON_ROOT, extra) == ["groups 1000,2000,3000 (want 1000,2000)"]
    may_escalate = S.Identity(1000, 1000, (1000, 2000), frozenset(), False, True)
    assert S.identity_mismatches(may_escalate, STATUS) == ["no_new_privs 1 (want 0)"]
    ambient = STATUS.replace("CapAmb:\t0000000000000000", "CapAmb:\t0000000000000001")
    assert S.identity_mismatches(NON_ROOT, ambient) == ["ambient capabilities CHOWN (want none)"]
    assert S.read_status(STATUS.replace("CapBnd:\t0000000000000000", "CapBnd:\t8000000000000000"))[
        "bounding"
    ] == {"cap63"}  # every one of the 64 bits is read
    with pytest.raises(ValueError) as e:
        S.read_status("x" * 300)
    assert str(e.value).endswith(f"got {'x' * 200!r}")


def test_identity_fields_setpriv_arguments_and_description():
    """What the sandbox is told (setpriv) and what a finding says (describe), field by field;
    a wrong setpriv argument would only make the sandbox unavailable, and so its tests skip."""
    dropped = S.Identity.of({}, {"capabilities": {"drop": ["CAP_CHOWN"], "add": ["CAP_SYS_ADMIN"]}})
    assert dropped.bounding == (S.DEFAULT_CAPS - {"CHOWN"}) | {"SYS_ADMIN"}
    # dropping a capability outside the default set adds nothing
    assert S.Identity.of({}, {"capabilities": {"drop": ["SYS_ADMIN"]}}).bounding == S.DEFAULT_CAPS
    assert (dropped.no_new_privs, dropped.unsafe) == (False, {"MKNOD", "SYS_ADMIN", "SYS_CHROOT"})
    assert NON_ROOT.setpriv_args()[1:] == [
        "--reuid=1000", "--regid=1000", "--groups=1000,2000", "--bounding-set=-all",
        "--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs",
    ]  # fmt: skip
    root = S.Identity(0, 0, (), frozenset({"CHOWN"}), False, False)
    assert root.setpriv_args()[1:] == [
        "--reuid=0", "--regid=0", "--clear-groups", "--bounding-set=-all,+chown",
        "--inh-caps=-all", "--ambient-caps=-all",
    ]  # fmt: skip
    assert NON_ROOT.describe() == (
        "uid 1000 gid 1000 groups 1000,2000 capabilities none no_new_privs read-only root"
    )
    assert root.describe() == "uid 0 gid 0 groups none capabilities CHOWN"


@needs_sandbox
@pytest.mark.parametrize(
    "identity",
    [
        NON_ROOT,
        S.Identity.of(None, ROOT_CHOWN),
        S.Identity.of({"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000}, {}),
    ],
    ids=["non-root-groups", "root-chown-only", "pod-defaults"],
)
def test_the_sandboxed_process_is_exactly_its_identity(identity):
    r = S.run("true", identity, [])
    assert r.ok, r.stderr
    seen = S.read_status(r.status)
    assert seen["uid"] == (identity.uid,) * 4 and seen["gid"] == (identity.gid,) * 4
    assert seen["groups"] == tuple(sorted(set(identity.groups)))
    assert seen["effective"] == identity.effective and seen["bounding"] == identity.bounding
    assert seen["no_new_privs"] is identity.no_new_privs


@needs_sandbox
def test_a_sandbox_that_becomes_root_instead_is_caught(monkeypatch):
    """The mutation: setpriv --reuid=0 (root with dropped capabilities looks like another user
    to most scripts, yet writes where that user could not)."""
    real = S.Identity.setpriv_args

    def as_root(self):
        return [a if not a.startswith("--reuid=") else "--reuid=0" for a in real(self)]

    monkeypatch.setattr(S.Identity, "setpriv_args", as_root)
    r = S.run("echo should not matter", NON_ROOT, [])
    assert r.rc == S.WRONG_IDENTITY
    assert r.stderr.startswith("sandbox: the process is not uid 1000 gid 1000")
    assert "uid 0/0/0/0 (want 1000)" in r.stderr


# --- Trainer v2 TrainJobs: the pod the Trainer builds from the job and its runtime ----------

# The Kubeflow SDK's CustomTrainer command (kubeflow 0.5.0's TORCH_COMMAND, as
# tests/platform/test_kubeflow_sdk.py captures it from the real SDK): the function's source is
# written into the working directory, then torchrun runs it.
SDK_SCRIPT = """read -r -d '' SCRIPT << EOM

def train():
    import torch.distributed as dist
    dist.init_process_group(backend="gloo")

train()

EOM
printf "%s" "$SCRIPT" > "train-abc.py"
torchrun "train-abc.py\""""


def _trainjob(script: str = SDK_SCRIPT, runtime: str = "torch-distributed") -> K8sObject:
    from trainforge.jobs import trainjob

    doc = {
        "apiVersion": trainjob.API_VERSION,
        "kind": trainjob.KIND,
        "metadata": {"name": "sdk-job", "namespace": "t"},
        "spec": {
            "runtimeRef": {"apiGroup": trainjob.GROUP, "kind": trainjob.RUNTIME_KIND,
                           "name": runtime},
            "trainer": {"numNodes": 2, "command": ["bash", "-c", script]},
        },
    }  # fmt: skip
    return _obj("TrainJob", "sdk-job", doc)


def _sdk_runtime(edit=None) -> K8sObject:
    from trainforge.jobs import trainjob

    doc = trainjob.sdk_runtime_manifest()
    if edit:
        edit(doc["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"])
    return _obj("ClusterTrainingRuntime", doc["metadata"]["name"], doc)


def _trainjob_findings(result: T.CheckResult) -> list:
    return [f for f in result.findings if f.resource == "t/TrainJob/sdk-job"]


@needs_sandbox
def test_a_trainjob_s_script_is_rehearsed_in_the_pod_its_runtime_makes():
    """The SDK's bash script in the platform's SDK runtime: as the runtime's non-root user on a
    read-only root, in its writable /workspace; torchrun (a stand-in) parses what it wrote."""
    result = _check(_sdk_runtime(), _trainjob())
    assert _trainjob_findings(result) == []
    (section,) = result.sections
    (entry,) = [e for e in section.data["scripts"] if e["object"] == "t/TrainJob/sdk-job"]
    assert entry["container"] == "node"
    runs = entry["scenarios"]["fresh volume"]
    assert runs[0] == "run 1 ok" and all(x.endswith(" ok") for x in runs), runs


@needs_sandbox
def test_a_trainjob_whose_runtime_has_no_writable_working_directory_is_a_finding():
    """Broken on purpose: the runtime's /workspace mounted read-only. The script's printf
    cannot write the function's file there, as in the pod: the plan reports it."""

    def read_only_workspace(template):
        (c,) = template["spec"]["containers"]
        for m in c["volumeMounts"]:
            if m["mountPath"] == "/workspace":
                m["readOnly"] = True

    (f,) = _trainjob_findings(_check(_sdk_runtime(read_only_workspace), _trainjob()))
    assert f.rule == P.SCRIPT_FAILS
    assert "container node of t/TrainJob/sdk-job fails on run 1" in f.message
    assert "Read-only file system" in f.message


@needs_sandbox
def test_a_trainjob_whose_script_writes_python_that_cannot_parse_is_a_finding():
    broken = SDK_SCRIPT.replace("def train():", "def train(:")
    (f,) = _trainjob_findings(_check(_sdk_runtime(), _trainjob(broken)))
    assert f.rule == P.SCRIPT_FAILS and "torchrun (stand-in)" in f.message


@needs_sandbox
def test_the_platform_s_runtime_stands_in_when_the_plan_declares_none():
    """A TrainJob on one of the platform's runtimes is rehearsed in that runtime's pod even
    where the plan holds no runtime object (trainjob.runtime_manifests); on a runtime nobody
    declares, its script is not rehearsed, and that is a finding, never a pass."""
    assert _trainjob_findings(_check(_trainjob())) == []
    (f,) = _trainjob_findings(_check(_trainjob(runtime="somebody-elses")))
    assert f.rule == P.UNREHEARSED and "'somebody-elses'" in f.message


@needs_sandbox
def test_a_trainjob_whose_pod_cannot_be_built_from_its_runtime_is_a_finding():
    """The runtime it names is there but malformed (a template without containers): the
    Trainer builds no pod, the plan says why, and the script is unrehearsed, never passed."""

    def no_containers(template):
        del template["spec"]["containers"]

    (f,) = _trainjob_findings(_check(_sdk_runtime(no_containers), _trainjob()))
    assert f.rule == P.UNREHEARSED
    assert "its pod cannot be built from runtime 'torch-distributed' (KeyError: " in f.message


def _replicated_job(master: str, worker: str) -> K8sObject:
    """A PyTorchJob whose Master and Worker pods run shell scripts (one per replica type)."""

    def pod(script: str) -> dict:
        container = {
            "name": "pytorch",
            "image": "busybox:1.37.0",
            "command": ["sh", "-c", script],
            "securityContext": {
                "runAsUser": 1000,
                "runAsGroup": 1000,
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
            },
        }
        return {"template": {"spec": {"containers": [container]}}}

    replicas = {"Master": pod(master), "Worker": {"replicas": 3, **pod(worker)}}
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "t"},
        "spec": {"pytorchReplicaSpecs": replicas},
    }
    return _obj("PyTorchJob", "job-t-j", doc)


@needs_sandbox
def test_one_script_of_master_and_worker_is_rehearsed_and_reported_once():
    """Master and Worker running the same script are one run and one finding, naming both
    replica types (it was rehearsed and reported twice: two findings for one job)."""
    result = _check(_replicated_job("echo start; exit 3", "echo start; exit 3"))
    fails = [f for f in result.findings if f.rule == P.SCRIPT_FAILS]
    assert len(fails) == 1, [f.message for f in fails]
    assert "container pytorch of t/PyTorchJob/j (replicas Master, Worker) fails on run 1" in (
        fails[0].message
    )
    (section,) = result.sections
    assert [e.get("replicas") for e in section.data["scripts"]] == [["Master", "Worker"]]
    assert section.lines[1] == "t/PyTorchJob/j container pytorch (replicas Master, Worker): " + (
        "`echo start; exit 3`"
    )


@needs_sandbox
def test_different_scripts_of_master_and_worker_are_each_rehearsed_and_named():
    result = _check(_replicated_job("exit 0", "exit 4"))
    (fail,) = [f for f in result.findings if f.rule == P.SCRIPT_FAILS]
    assert "t/PyTorchJob/j (replica Worker) fails on run 1" in fail.message
    (section,) = result.sections
    assert [e.get("replicas") for e in section.data["scripts"]] == [["Master"], ["Worker"]]


def test_not_run_lists_a_script_of_several_replica_types_once(monkeypatch):
    monkeypatch.setattr(S, "unavailable", lambda: "needs root (test)")
    result = _check(_replicated_job("exit 0", "exit 0"))
    (f,) = result.findings
    assert f.rule == P.NOT_RUN
    assert f.message.startswith("t/PyTorchJob/j container pytorch (replicas Master, Worker): ")
    (section,) = result.sections
    assert section.data["scripts"] == ["t/PyTorchJob/j"]


@needs_sandbox
def test_scripts_are_rehearsed_two_at_a_time_with_the_same_report(monkeypatch):
    """With a second CPU (registry.may_fork) two scripts' rehearsals run at once (a barrier
    that two rehearsals must reach together); the report, its order and the findings are
    those of the rehearsals one after another, which is what runs where the plan forks no
    child (one CPU, TRAINFORGE_PLAN_FORK=0, coverage)."""
    import copy
    import threading

    swapped = copy.deepcopy(_setup_job(SWAPPED).doc)
    swapped["metadata"]["name"] = "fsx-team-dir-swapped"
    objects = (_setup_job(FIRST_WAVE), _obj("Job", "swapped", swapped), _training_pod())
    real = P._rehearse
    threads: list[str] = []
    barrier = threading.Barrier(2, timeout=120)

    def rehearse(*args, **kwargs):
        threads.append(threading.current_thread().name)
        if together:
            barrier.wait()  # raises BrokenBarrierError unless another rehearsal runs meanwhile
        return real(*args, **kwargs)

    monkeypatch.setattr(P, "_rehearse", rehearse)
    monkeypatch.setattr(C, "may_fork", lambda: False)
    together = False
    one = _check(*objects)
    assert threads == [threading.current_thread().name] * 2
    monkeypatch.setattr(C, "may_fork", lambda: True)
    together, threads[:] = True, []
    two = _check(*objects)
    assert len(set(threads)) == 2 and threading.current_thread().name not in threads
    assert two.findings == one.findings
    assert {f.rule for f in one.findings} == {P.SCRIPT_FAILS}  # both scripts fail, in order
    assert [f.message.split(" as ")[0] for f in one.findings] == [
        "container mkdir of t/Job/fsx-team-dir fails on run 1 (fresh volume)",
        "container mkdir of t/Job/fsx-team-dir fails on run 1 (subPaths made by the kubelet first)",
        "container mkdir of t/Job/fsx-team-dir-swapped fails on run 2 (Job retry) (fresh volume)",
    ]
    ((a,), (b,)) = one.sections, two.sections
    assert a.lines == b.lines
    assert {**a.data, "seconds": 0} == {**b.data, "seconds": 0}
