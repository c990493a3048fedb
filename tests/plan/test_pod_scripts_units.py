"""The pod script rehearsal's parts, one at a time and with exact outcomes: how a container's
mounts, write directories and claims are read, the kubelet's subPath and fsGroup modelled on
the scratch volumes, batched writes split to name the failing pod, fileset directories only
the script made, and the section's text and timing. Small objects, no whole plans (fast: the
mutation run of pod_scripts.py runs these first)."""

from __future__ import annotations

import contextlib
import os
import pathlib
import types

import pytest

from trainforge.plan import check_types as T
from trainforge.plan.checks import pod_sandbox as S
from trainforge.plan.checks import pod_scripts as P
from trainforge.plan.manifests import K8sObject
from trainforge.plan.runner import Inventory

needs_sandbox = pytest.mark.skipif(
    S.unavailable() is not None, reason=f"pod script rehearsal not runnable: {S.unavailable()}"
)
needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="the scratch volumes are made root-owned, as a new file system's root is",
)

ROOT_CHOWN = {
    "runAsUser": 0,
    "runAsGroup": 0,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
}
USER = S.Identity.of({"runAsUser": 1000, "runAsGroup": 1000}, {"capabilities": {"drop": ["ALL"]}})


def _fresh(text: str) -> str:
    """An equal string that is another object (what a parsed YAML holds, unlike the interned
    literals of this file): `is` in place of `==` must not pass."""
    return "".join(list(text))


# equal to the module's constants but other objects, as the strings of a rendered YAML are
FSX = _fresh("fsx.csi.aws.com")
EBS = _fresh("ebs.csi.aws.com")
assert FSX == P.FSX_DRIVER and FSX is not P.FSX_DRIVER


def _obj(kind: str, name: str, doc: dict) -> K8sObject:
    doc = {**doc, "kind": _fresh(doc["kind"])}
    return K8sObject(urn=f"urn:{kind}:{name}", name=name, type=f"kubernetes:x:{kind}", doc=doc)


def _pod_object(kind: str, name: str, pod: dict, ns: str = "t") -> K8sObject:
    """A Job, or a PyTorchJob with one Master replica, running `pod`."""
    spec = {"template": {"spec": pod}}
    if kind == "PyTorchJob":
        spec = {"pytorchReplicaSpecs": {"Master": {"replicas": 1, **spec}}}
    doc = {"kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec}
    return _obj(kind, f"{kind.lower()}-{name}", doc)


def _job(script: str, mounts: list, volumes: list, sc: dict | None = None, **pod) -> K8sObject:
    container = {
        "name": "setup",
        "command": ["sh", "-c", script],
        "securityContext": ROOT_CHOWN if sc is None else sc,
        "volumeMounts": mounts,
    }
    return _pod_object("Job", "setup", {"containers": [container], "volumes": volumes, **pod})


def _writer(name: str, claim: str, mount: dict, uid: int = 1000, **sc) -> K8sObject:
    """A training pod of uid `uid` writing its mount path on `claim`."""
    pod = {
        "securityContext": {"runAsUser": uid, "runAsGroup": uid, **sc},
        "containers": [
            {
                "name": "train",
                "command": ["python", "train.py"],
                "securityContext": {"capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [mount],
            }
        ],
        "volumes": [{"name": "vol", "persistentVolumeClaim": {"claimName": claim}}],
    }
    return _pod_object("PyTorchJob", name, pod)


def _pv(name: str, claim: str | None, driver: str, directory: str | None = None, **spec):
    annotations = {} if directory is None else {P.DIRECTORY_ANNOTATION: directory}
    s = {"csi": {"driver": driver, "volumeHandle": "fs-1"}, **spec}
    if claim is not None:
        s["claimRef"] = {"namespace": "t", "name": claim}
    doc = {"kind": "PersistentVolume", "metadata": {"name": name, "annotations": annotations}}
    return _obj("PersistentVolume", name, {**doc, "spec": s})


def _ctx(*objects: K8sObject) -> T.PlanContext:
    return T.PlanContext(
        inventory=Inventory(project="p", stack="s", resources=[]), objects=[*objects]
    )


def claim_volume(claim: str) -> dict:
    return {"name": "vol", "persistentVolumeClaim": {"claimName": claim}}


# --- reading the rendered objects (no sandbox) -----------------------------------------------


def test_short_folds_whitespace_and_cuts_at_the_limit_with_an_ellipsis():
    assert (
        P._short("mkdir -p /fsx/t\n  && chown 1000 /fsx/t")
        == "mkdir -p /fsx/t && chown 1000 /fsx/t"
    )
    assert P._short("x" * 120) == "x" * 120
    assert P._short("x" * 121) == "x" * 117 + "..."
    assert P._short("y" * 500, 200) == "y" * 197 + "..."


def test_write_dirs_reads_both_flag_forms_and_the_contract_env_inside_the_mount():
    container = {
        "command": ["python", "-m", "x", "--checkpoint-dir=/fsx/ck=1", "--output-dir", "/fsx/out"],
        "args": ["--output-dir=/elsewhere", "--checkpoint-dir"],  # a trailing flag: no value
        "env": [
            {"name": "TRAINFORGE_OUTPUT_DIR", "value": "/fsx/runs"},
            {"name": "TRAINFORGE_CHECKPOINT_DIR", "valueFrom": {"fieldRef": {}}},
            {"name": "OTHER", "value": "/fsx/other"},
        ],
    }
    # the command line as the plan's one reader (ckpt_compat.argv_fields) reads it: the write
    # flags' values in argv order (--flag=value split at the first "=" only), then the
    # contract env
    assert P._write_dirs(container, "/fsx") == ("/fsx/ck=1", "/fsx/out", "/fsx/runs")
    assert P._write_dirs(container, "/fsx/") == ("/fsx/ck=1", "/fsx/out", "/fsx/runs")
    assert P._write_dirs({"command": ["sh"]}, "/data") == ("/data",)
    # both forms, every occurrence, in argv order (the product's: --output-dir first); a
    # repeated directory once
    both = ["--output-dir", "/fsx/b", "--checkpoint-dir=/fsx/a", "--output-dir", "/fsx/b"]
    assert P._write_dirs({"args": both}, "/fsx") == ("/fsx/b", "/fsx/a")


def test_a_claim_is_found_through_the_pvcs_volume_name_without_a_claim_ref():
    pvc = {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "fsx-t", "namespace": "t"},
        # equal to the PV's name but another object, as two parsed YAML documents give it
        "spec": {"volumeName": "".join(["team", "-pv"])},
    }
    objects = [
        _obj("PersistentVolumeClaim", "pvc", pvc),
        # another kind with the claim's namespace and name is not the claim
        _obj("Secret", "s", {"kind": "Secret", "metadata": pvc["metadata"], "data": {}}),
        _pv("team-pv", None, FSX, "/teams/t/"),
        _pv("other-pv", None, EBS),  # neither named by the claim nor bound to it
    ]
    assert P._claim(objects, "t", "fsx-t") == P.Claim("t", "fsx-t", FSX, f"{FSX}/fs-1", "teams/t")
    assert P._claim(objects, "u", "fsx-t") == P.Claim("u", "fsx-t", "")  # another namespace's


def test_a_claim_says_what_it_mounts():
    fileset = P.Claim("t", "fsx-t", FSX, f"{FSX}/fs-1", "teams/t")
    assert fileset.describe() == (
        "claim t/fsx-t (FSx for Lustre: directory /teams/t of the file system)"
    )
    assert P.Claim("t", "c", FSX).describe() == (
        "claim t/c (FSx for Lustre: a new file system root, root:root 0755)"
    )
    assert P.Claim("t", "c", EBS).describe() == (
        "claim t/c (ebs.csi.aws.com: a new file system root, root:root 0755)"
    )
    assert P.Claim("t", "c", "").describe() == (
        "claim t/c (a volume: a new file system root, root:root 0755)"
    )
    assert (fileset.key, fileset.fs, P.Claim("t", "c", EBS).fs) == ("t/fsx-t", f"{FSX}/fs-1", "t/c")


def test_each_mount_keeps_its_own_sub_path_and_read_only_flag():
    """A container may mount one volume twice: each mount is rehearsed as declared."""
    mounts = [
        {"name": "vol", "mountPath": "/ro", "subPath": "in", "readOnly": True},
        {"name": "vol", "mountPath": "/rw", "subPath": "out"},
        {"name": "cache", "mountPath": "/cache"},
    ]
    volumes = [claim_volume("c"), {"name": "cache", "emptyDir": {}}]
    (s,), consumers, claims = P._collect(_ctx(_job("true", mounts, volumes)))
    assert s.mounts == [
        P.VolumeMount("vol", "/ro", claim_volume("c"), True, "in"),
        P.VolumeMount("vol", "/rw", claim_volume("c"), False, "out"),
        P.VolumeMount("cache", "/cache", {"name": "cache", "emptyDir": {}}, False, ""),
    ]
    assert (s.skip, consumers, claims) == (None, {}, {"t/c": P.Claim("t", "c", "")})


def test_an_unrehearsed_volume_or_unsafe_capabilities_skip_the_script_with_the_first_reason():
    host = [{"name": "host", "hostPath": {"path": "/var"}}]
    mount = [{"name": "host", "mountPath": "/host"}]
    (s,), _, _ = P._collect(_ctx(_job("true", mount, host)))
    assert s.skip == "volume 'host' is a hostPath, which is not rehearsed"
    unsafe = {"runAsUser": 0, "capabilities": {"add": ["SYS_ADMIN"]}}
    (s,), _, _ = P._collect(_ctx(_job("true", mount, host, unsafe)))
    assert s.skip == (
        "runs as root with MKNOD, SYS_ADMIN, SYS_CHROOT, which could leave the sandbox and change "
        "this machine; rehearse it in a throwaway VM, or drop the capability"
    )
    (s,), _, _ = P._collect(_ctx(_job("true", [{"name": "x", "mountPath": "/x"}], [])))
    assert s.skip == "volume 'x' is a volume of unknown type, which is not rehearsed"


def test_a_pods_other_volume_types_are_not_claims_it_writes():
    """A training pod with a claim and an azureDisk (a type that sorts before "claim"): only
    the claim is a write to rehearse; the disk is neither read as a claim nor an error."""
    writer = _writer("w", "c", {"name": "vol", "mountPath": "/fsx"})
    pod = writer.doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    pod["volumes"].append({"name": "disk", "azureDisk": {"diskName": "d", "diskURI": "u"}})
    pod["containers"][0]["volumeMounts"].append({"name": "disk", "mountPath": "/disk"})
    _, consumers, claims = P._collect(_ctx(writer))
    assert list(claims) == ["t/c"]
    assert [(c.name, c.mount_path) for c in consumers["t/c"]] == [(writer.ident, "/fsx")]


def test_the_section_records_the_rehearsal_time_from_the_monotonic_clock(monkeypatch):
    """Two readings of an injected clock (no wall time): the difference, rounded to 0.01 s."""
    readings = [250.0, 253.456]
    monkeypatch.setattr(P, "time", types.SimpleNamespace(monotonic=lambda: readings.pop(0)))
    monkeypatch.setattr(S, "unavailable", lambda: None)
    monkeypatch.setattr(S, "run", lambda *a, **k: S.RunResult(0, "", ""))
    result = P.check(_ctx(_job("echo hi", [], [])))
    (section,) = result.sections
    assert readings == [] and not result.findings
    assert section.data["seconds"] == 3.46
    ok = ["run 1 ok", "run 2 (Job retry) ok", "writes ok", "run 3 (Job re-created) ok"]
    assert section.data["scripts"] == [
        {
            "object": "t/Job/setup",
            "container": "setup",
            "scenarios": {"fresh volume": [*ok, "writes again ok"]},
        }
    ]


# --- the scratch volumes, as the kubelet leaves them -----------------------------------------


def _owner_mode(d: pathlib.Path) -> tuple[int, int, str]:
    st = d.stat()
    return (st.st_uid, st.st_gid, oct(st.st_mode & 0o7777))


@contextlib.contextmanager
def _egid(gid: int):
    """Run as root with another effective group (`sudo -g`): what this process makes is that
    group's unless the rehearsal sets it (the kubelet's and a new volume's are root's)."""
    before = os.getegid()
    os.setegid(gid)
    try:
        yield
    finally:
        os.setegid(before)


@needs_root
def test_a_new_file_systems_root_is_root_owned_0755_even_in_a_setgid_directory(tmp_path):
    """The scratch directory may sit in a setgid folder of another group (TMPDIR), or the
    plan run as root with another group: a new file system's root is root:root 0755."""
    os.chown(tmp_path, 0, 4321)
    os.chmod(tmp_path, 0o2777)
    run = P._Run(tmp_path, {"t/c": P.Claim("t", "c", EBS), "t/d": P.Claim("t", "d", EBS)})
    (tmp_path / "plain").mkdir()
    os.chmod(tmp_path / "plain", 0o777)
    with _egid(4321):
        plain = P._Run(tmp_path / "plain", {"t/c": P.Claim("t", "c", EBS)})
    assert _owner_mode(plain.root("t/c")) == (0, 0, "0o755")
    assert [_owner_mode(run.root(k)) for k in ("t/c", "t/d")] == [(0, 0, "0o755")] * 2
    assert run.root("t/c") != run.root("t/d")  # two claims, two file systems


@needs_root
def test_a_missing_sub_path_is_made_as_the_kubelets_safe_make_dir_makes_it(tmp_path):
    """Each missing directory of the path: root-owned, the volume root's mode (setgid too),
    the group of a setgid parent (an fsGroup volume), nothing changed on what exists."""
    run = P._Run(tmp_path, {"t/c": P.Claim("t", "c", EBS)})
    root = run.root("t/c")
    assert run.subpath("t/c", "") == root and _owner_mode(root) == (0, 0, "0o755")
    os.chmod(root, 0o750)
    assert run.subpath("t/c", "a/b") == root / "a" / "b"
    assert [_owner_mode(d) for d in (root / "a", root / "a" / "b")] == [(0, 0, "0o750")] * 2
    # as the kubelet's fsGroup leaves a volume: group 3000, g+rwx and setgid
    os.chown(root, 0, 3000)
    os.chmod(root, 0o2775)
    run.subpath("t/c", "/g/h/")
    assert [_owner_mode(d) for d in (root / "g", root / "g" / "h")] == [(0, 3000, "0o2775")] * 2
    # an existing directory is left as it is; what is made below it takes its setgid group
    (root / "mine").mkdir(mode=0o700)
    os.chown(root / "mine", 1000, 5000)
    os.chmod(root / "mine", 0o2700)
    os.chmod(root, 0o755)
    run.subpath("t/c", "mine/x")
    assert _owner_mode(root / "mine") == (1000, 5000, "0o2700")
    assert _owner_mode(root / "mine" / "x") == (0, 5000, "0o755")
    assert run.subpath("t/c", "../mine/./x") == root / "mine" / "x"  # never above the root
    # a parent that is not setgid passes no group on, whatever group this process runs as
    (root / "plain").mkdir(mode=0o755)
    os.chown(root / "plain", 1000, 6000)
    with _egid(4321):
        run.subpath("t/c", "plain/y")
    assert _owner_mode(root / "plain" / "y") == (0, 0, "0o755")


@needs_root
def test_an_empty_dir_is_0777_and_with_an_fs_group_that_groups_setgid(tmp_path):
    """emptyDir: the kubelet makes it 0777; an fsGroup makes it that group's, setgid."""
    run = P._Run(tmp_path, {})
    assert _owner_mode(run.scratch(0o777, None)) == (0, 0, "0o777")
    assert _owner_mode(run.scratch(0o777, 3000)) == (0, 3000, "0o2777")
    assert _owner_mode(run.scratch(0o755, None)) == (0, 0, "0o755")  # configMap, secret
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vol1", "vol2", "vol3"]


def _fs_group_script(tmp: pathlib.Path, driver: str) -> tuple[P.Script, P._Run]:
    mount = [{"name": "vol", "mountPath": "/data"}]
    sc = {"runAsUser": 1000, "runAsGroup": 1000, "capabilities": {"drop": ["ALL"]}}
    job = _job("touch /data/x", mount, [claim_volume("c")], sc, securityContext={"fsGroup": 3000})
    (s,), _, _ = P._collect(_ctx(_pv("pv", "c", driver), job))
    return s, P._Run(tmp, {"t/c": P.Claim("t", "c", driver)})


@needs_sandbox
@pytest.mark.parametrize(
    ("driver", "owner", "mode", "ok"),
    [(EBS, (0, 3000), 0o2775, True), (FSX, (0, 0), 0o755, False)],
    ids=["ebs-gets-fsgroup", "fsx-does-not"],
)
def test_fs_group_is_applied_to_a_claims_root_except_on_fsx(tmp_path, driver, owner, mode, ok):
    s, run = _fs_group_script(tmp_path, driver)
    assert s.fs_group == 3000 and s.identity.groups == (3000,)
    r = P.run_script(s, run, "t")
    root = run.root("t/c")
    assert ((root.stat().st_uid, root.stat().st_gid), root.stat().st_mode & 0o7777) == (owner, mode)
    # uid 1000 writes the root through the fsGroup's group-write bit, or not at all
    assert (r.ok, (root / "x").exists()) == (ok, ok), r.tail()


@needs_sandbox
def test_a_volume_mounted_twice_is_rehearsed_read_only_and_writable_in_its_two_sub_paths():
    mounts = [
        {"name": "vol", "mountPath": "/ro", "subPath": "in", "readOnly": True},
        {"name": "vol", "mountPath": "/rw", "subPath": "out"},
    ]
    script = "touch /rw/x && test ! -e /ro/x && ! touch /ro/y 2>/dev/null"
    result = P.check(_ctx(_job(script, mounts, [claim_volume("c")])))
    assert [f.message for f in result.findings] == []
    (section,) = result.sections
    (entry,) = section.data["scripts"]
    assert entry["scenarios"]["fresh volume"][0] == "run 1 ok"
    failing = P.check(_ctx(_job("touch /ro/y", mounts, [claim_volume("c")])))
    assert [f.rule for f in failing.findings] == [P.SCRIPT_FAILS]
    assert "Read-only file system" in failing.findings[0].message


@needs_sandbox
def test_a_batch_of_writes_that_fails_is_split_to_name_the_pod_that_cannot_write(tmp_path):
    run = P._Run(tmp_path, {"t/c": P.Claim("t", "c", EBS)})
    root = run.root("t/c")
    (root / "ok").mkdir()
    os.chown(root / "ok", 1000, 1000)
    good = P.Consumer("t/PyTorchJob/good", USER, "/fsx", "", ("/fsx/ok",))
    bad = P.Consumer("t/PyTorchJob/bad", USER, "/fsx", "", ("/fsx/bad",))
    out = P._writes([("t/c", good), ("t/c", bad)], run, "w")
    assert [(k, c.name, r.ok) for k, c, r in out] == [
        ("t/c", "t/PyTorchJob/good", True),
        ("t/c", "t/PyTorchJob/bad", False),
    ]
    assert "/fsx/bad" in out[1][2].stderr and "Permission denied" in out[1][2].stderr
    assert (root / "ok" / ".rehearsal-w").read_text() == "ok\n"
    # a batch that succeeds is one result for all of its pods
    both = P._writes([("t/c", good), ("t/c", good)], run, "v")
    assert [(c.name, r.ok) for _, c, r in both] == [("t/PyTorchJob/good", True)] * 2


def test_writes_of_many_pods_go_in_batches_of_at_most_write_batch_none_left_out(
    tmp_path, monkeypatch
):
    """130 pods of one team write through one mount: three sandbox runs (64, 64, 2 pods),
    each pod's directory in exactly one (the script is one argv: ARG_MAX bounds a batch)."""
    runs: list[tuple[str, ...]] = []

    def write(consumer, claim, run, tag):  # the sandbox run, recorded
        runs.append(consumer.dirs)
        return S.RunResult(rc=0, stdout="", stderr="")

    monkeypatch.setattr(P, "_write", write)
    pods = [P.Consumer(f"t/Job/j{i}", USER, "/fsx", "", (f"/fsx/j{i}",)) for i in range(130)]
    out = P._writes([("t/c", c) for c in pods], P._Run(tmp_path, {}), "w")
    assert [len(r) for r in runs] == [P.WRITE_BATCH, P.WRITE_BATCH, 130 - 2 * P.WRITE_BATCH]
    assert [d for r in runs for d in r] == [f"/fsx/j{i}" for i in range(130)]
    assert [c.name for _, c, r in out] == [c.name for c in pods] and all(r.ok for *_, r in out)


@needs_sandbox
def test_only_the_fileset_directories_the_script_made_are_written_after_it():
    """One file system: the script mounts its root and makes /a for team a; /b is made by
    nobody. Team b's pods are not this script's failure (it did not make /b) in either
    scenario, including when the kubelet made subPaths first; nothing making /b is one
    finding of its own."""
    job = _job(
        "mkdir -p /fsx/a && chown 1000:1000 /fsx/a",
        [{"name": "vol", "mountPath": "/fsx"}],
        [claim_volume("fsx-root")],
    )
    result = P.check(
        _ctx(
            _pv("root", "fsx-root", FSX, "/"),
            _pv("a", "fsx-a", FSX, "/a"),
            _pv("b", "fsx-b", FSX, "/b"),
            job,
            _writer("a", "fsx-a", {"name": "vol", "mountPath": "/data"}),
            _writer("b", "fsx-b", {"name": "vol", "mountPath": "/data", "subPath": "x"}),
        )
    )
    assert [(f.rule, f.resource, f.message) for f in result.findings] == [
        (
            P.CANNOT_WRITE,
            "t/PyTorchJob/b",
            "t/PyTorchJob/b mounts claim t/fsx-b (FSx for Lustre: directory /b of the file "
            "system), but no setup script makes /b: the mount would fail and its pods never start",
        )
    ]
    (section,) = result.sections
    (entry,) = section.data["scripts"]
    assert entry["scenarios"] == {
        "fresh volume": [
            "run 1 ok",
            "run 2 (Job retry) ok",
            "writes ok",
            "run 3 (Job re-created) ok",
            "writes again ok",
        ],
        "subPaths made by the kubelet first": ["run 1 ok", "writes ok"],
    }


def _fileset_user(script: str) -> K8sObject:
    """A team's pod (uid 1000) whose script runs on its fileset claim fsx-a."""
    container = {
        "name": "train",
        "command": ["sh", "-c", script],
        "securityContext": {
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "vol", "mountPath": "/data"}],
    }
    return _pod_object(
        "Job", "user", {"containers": [container], "volumes": [claim_volume("fsx-a")]}
    )


@needs_sandbox
def test_a_script_on_a_fileset_runs_after_the_setup_script_that_makes_its_directory():
    """A pod cannot mount a fileset before its directory exists: the scripts that mount the
    file system's root (the setup Job) run first in each scenario, then the script. (The
    plan stopped with a MissingDirectory traceback here.)"""
    setup = _job(
        "mkdir -p /fsx/a && chown 1000:1000 /fsx/a",
        [{"name": "vol", "mountPath": "/fsx"}],
        [claim_volume("fsx-root")],
    )
    pvs = (_pv("root", "fsx-root", FSX, "/"), _pv("a", "fsx-a", FSX, "/a"))
    result = P.check(_ctx(*pvs, setup, _fileset_user("echo ok > /data/x && cat /data/x")))
    assert result.findings == []
    (section,) = result.sections
    assert "  after t/Job/setup container setup (the file system's setup)" in section.lines
    user = next(e for e in section.data["scripts"] if e["object"] == "t/Job/user")
    assert user["scenarios"]["fresh volume"][0] == "run 1 ok"


@needs_sandbox
def test_a_script_on_a_fileset_no_setup_script_makes_cannot_mount_it():
    pvs = (_pv("root", "fsx-root", FSX, "/"), _pv("a", "fsx-a", FSX, "/a"))
    (f,) = P.check(_ctx(*pvs, _fileset_user("true"))).findings
    assert (f.rule, f.resource) == (P.SCRIPT_FAILS, "t/Job/user")
    assert "fails on run 1 (fresh volume)" in f.message
    assert "mount fails: /a does not exist on the file system" in f.message


@needs_sandbox
def test_a_script_on_a_fileset_whose_setup_script_is_not_rehearsed_is_not_rehearsed_either():
    """Its directory would be the unrehearsed setup's: not a mount failure, and never a pass."""
    mounts = [{"name": "vol", "mountPath": "/fsx"}]
    setup = _job("mkdir -p /fsx/a", mounts, [claim_volume("fsx-root")], {"privileged": True})
    pvs = (_pv("root", "fsx-root", FSX, "/"), _pv("a", "fsx-a", FSX, "/a"))
    result = P.check(_ctx(*pvs, setup, _fileset_user("true")))
    user = [f for f in result.findings if f.resource == "t/Job/user"]
    assert [(f.rule, f.message) for f in user] == [
        (
            P.UNREHEARSED,
            "t/Job/user container train: not rehearsed: its file system's setup t/Job/setup "
            "is not rehearsed",
        )
    ]


def test_a_failing_script_is_named_with_its_first_197_characters(monkeypatch):
    """The finding quotes the script on one line, cut at 200 characters; the sandbox's
    answer (exit 1 with its stderr) is given here, so this runs anywhere."""
    monkeypatch.setattr(S, "unavailable", lambda: None)
    monkeypatch.setattr(S, "run", lambda *a, **k: S.RunResult(1, "", "sh: no\n"))
    script = "echo " + "a" * 195 + "\n  && echo more"
    result = P.check(_ctx(_job(script, [], [])))
    assert [(f.rule, f.resource, f.message) for f in result.findings] == [
        (
            P.SCRIPT_FAILS,
            "t/Job/setup",
            "container setup of t/Job/setup fails on run 1 (fresh volume) as uid 0 gid 0 groups "
            "none capabilities CHOWN no_new_privs read-only root: sh: no; script: "
            f"`echo {'a' * 192}...`",
        )
    ]
    (section,) = result.sections
    assert section.lines[1] == f"t/Job/setup container setup: `echo {'a' * 112}...`"


@needs_sandbox
def test_a_pod_in_its_fs_group_writes_the_sub_path_the_kubelet_made_on_that_volume(tmp_path):
    """fsGroup first (the volume's root becomes group 3000, setgid), then the subPath: made
    by the kubelet with that group and mode, so uid 1000 in group 3000 writes there."""
    mount = [{"name": "vol", "mountPath": "/data", "subPath": "work/1"}]
    sc = {"runAsUser": 1000, "runAsGroup": 1000, "capabilities": {"drop": ["ALL"]}}
    job = _job("touch /data/x", mount, [claim_volume("c")], sc, securityContext={"fsGroup": 3000})
    (s,), _, claims = P._collect(_ctx(_pv("pv", "c", EBS), job))
    run = P._Run(tmp_path, claims)
    r = P.run_script(s, run, "t")
    assert r.ok, r.tail()
    work = run.root("t/c") / "work" / "1"
    assert _owner_mode(work) == (0, 3000, "0o2775")
    assert (work / "x").stat().st_uid == 1000


@needs_sandbox
@pytest.mark.parametrize("driver", [EBS, FSX])
def test_a_consumer_pods_fs_group_is_applied_to_its_claim_except_on_fsx(driver):
    """The kubelet gives a non-FSx volume to the pod's fsGroup when the pod mounts it, so a
    pod of uid 1000 in fsGroup 3000 writes a root-owned volume's root; on FSx it cannot."""
    result = P.check(
        _ctx(
            _pv("pv", "c", driver),
            _job("true", [{"name": "vol", "mountPath": "/data"}], [claim_volume("c")]),
            _writer("w", "c", {"name": "vol", "mountPath": "/data"}, fsGroup=3000),
        )
    )
    (section,) = result.sections
    (entry,) = section.data["scripts"]
    if driver == EBS:
        assert [f.message for f in result.findings] == []
        assert entry["scenarios"]["fresh volume"][2:] == [
            "writes ok",
            "run 3 (Job re-created) ok",
            "writes again ok",
        ]
        return
    (f,) = result.findings
    assert (f.rule, f.resource) == (P.CANNOT_WRITE, "t/Job/setup")
    # the shell's own words differ (busybox, dash): its message ends the finding
    assert f.message.startswith(
        "after t/Job/setup ran (fresh volume), t/PyTorchJob/w (uid 1000 gid 1000 groups 3000 "
        "capabilities none) cannot write /data: "
    ) and f.message.endswith("create /data/.rehearsal-writes: Permission denied")


@pytest.mark.parametrize(
    ("argv", "rc", "said"),
    [
        (["torchrun", "--standalone", "--nproc-per-node", "2", "ok.py"], 0, "parsed ok.py"),
        (["torchrun", "--nnodes=1", "bad.py", "--lr", "1"], 1, "torchrun (stand-in):"),
        (["python", "-u", "bad.py"], 1, "python (stand-in):"),
        (["python3", "-m", "pip", "install", "x"], 0, "installs nothing"),
        (["python", "-c", "print(1"], 1, "SyntaxError"),
        (["pip", "install", "--user", "x"], 0, "installs nothing"),
    ],
)
def test_the_image_stand_ins_check_the_python_they_are_given(tmp_path, argv, rc, said):
    """What a TrainJob's script finds on PATH for the training image's programs: they parse
    the Python they are given (a file, or -c code) and train nothing."""
    import subprocess
    import sys

    if not any(os.path.exists(f"{d}/python3") for d in ("/usr/bin", "/usr/local/bin", "/bin")):
        pytest.skip("no system python3 for the stand-ins")
    mount = P._stand_ins(tmp_path)
    (tmp_path / "ok.py").write_text("def train():\n    return 1\n")
    (tmp_path / "bad.py").write_text("def train(:\n")
    proc = subprocess.run(
        ["sh", str(mount.host / argv[0]), *argv[1:]], cwd=tmp_path, capture_output=True,
        text=True, timeout=60, env={"PATH": os.environ.get("PATH", ""), "PYTHON": sys.executable},
    )  # fmt: skip
    assert proc.returncode == rc, proc.stdout + proc.stderr
    assert said in proc.stdout + proc.stderr


def test_a_team_without_jobs_is_probed_as_jobs_pod_runs_its_pods(monkeypatch):
    """The probe pod of a team whose jobs are not declared is who jobs.pod makes the team's
    training pods (its security contexts, fsGroup, default checkpoint directory), not a copy:
    a change there is a change of the rehearsal."""
    from trainforge.core.contract import Declared, PlatformContract, TeamFacts  # noqa: PLC0415
    from trainforge.jobs import pod as job_pod  # noqa: PLC0415

    team = TeamFacts(
        name="t", namespace="t", claim_name="fsx-t", fsx_sub_path="t", run_as_user=4000,
        run_as_group=4001,
    )  # fmt: skip
    declared = Declared(contracts=[PlatformContract(pools={}, teams={"t": team})])

    def probe() -> P.Consumer:
        ctx = _ctx()
        ctx.declared = declared
        _, consumers, _ = P._collect(ctx)
        (c,) = consumers["t/fsx-t"]
        return c

    c = probe()
    assert c.identity == S.Identity(4000, 4001, (4001,), frozenset(), True, True)
    assert (c.fs_group, c.mount_path, c.sub_path) == (4001, "/fsx", "t")
    assert c.dirs == ("/fsx/checkpoints/t/rehearsal-probe",)
    product = job_pod.container_security_context
    monkeypatch.setattr(
        job_pod,
        "container_security_context",
        lambda t: {**product(t), "runAsUser": 0, "capabilities": {"add": ["CHOWN"]}},
    )
    assert probe().identity.uid == 0 and "CHOWN" in probe().identity.effective
