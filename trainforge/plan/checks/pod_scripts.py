"""Plan check: the pod script rehearsal. Every shell script a rendered pod runs (a TrainJob's:
in the pod the Trainer builds from its runtime) runs here under its container's
securityContext on scratch volumes, more than once; then the pods that use those volumes must
be able to write there. What is modelled and why: docs/rehearsals.md, "Pod script rehearsal";
the running: trainforge.plan.checks.pod_sandbox.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import posixpath
import shlex
import stat
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from trainforge.core.pods import argv, containers, get, literal_env, volume_file_mode
from trainforge.jobs import code_paths, shell_argv, trainjob
from trainforge.jobs import pod as job_pod
from trainforge.jobs.backends import pod_templates
from trainforge.jobs.entrypoint import default_checkpoint_dir
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks import pod_sandbox as sandbox
from trainforge.plan.checks.job_backends import runtime_docs
from trainforge.plan.ckpt_compat import all_values, argv_fields
from trainforge.platform.fsx import CSI_DRIVER as FSX_DRIVER
from trainforge.platform.fsx import DIRECTORY_ANNOTATION
from trainforge.training.contract import CHECKPOINT_DIR, OUTPUT_DIR

_T = TypeVar("_T")

TITLE = "Pod script rehearsal"
SCRIPT_FAILS = "TRAINFORGE_POD_SCRIPT_FAILS"
CANNOT_WRITE = "TRAINFORGE_POD_CANNOT_WRITE"
NOT_RUN = "TRAINFORGE_POD_SCRIPT_NOT_RUN"
UNREHEARSED = "TRAINFORGE_POD_SCRIPT_UNREHEARSED"
WAIVE = "or waive this rule for this object with the reason it is safe unchecked"
# The fix of an UNREHEARSED finding, by what stopped the rehearsal (RULES holds the general one)
CAPABILITY_FIX = (
    "drop the capabilities that could leave the sandbox (securityContext.capabilities.drop: "
    f"[ALL], add back only what the script needs), {WAIVE}"
)
RUNTIME_FIX = (
    "name a training runtime the plan or the platform declares, with a pod template the "
    f"Trainer can build from, {WAIVE}"
)


def volume_fix(kind: str) -> str:
    """An UNREHEARSED finding's fix for a volume of `kind` the rehearsal does not model."""
    return (
        f"mount the team's FSx claim (persistentVolumeClaim), an emptyDir or a read-only "
        f"ConfigMap/Secret in place of the {kind} volume, {WAIVE}"
        + (" (a hostPath is also refused by Pod Security baseline: TRAINFORGE_POD_SECURITY)"
           if kind == "hostPath" else "")
    )  # fmt: skip


RULES = {
    UNREHEARSED: (
        "remove what the rehearsal cannot model (the finding names it: a capability that "
        "could leave the sandbox, or a volume kind other than a claim, an emptyDir or a "
        f"read-only ConfigMap/Secret), {WAIVE}"
    ),
    NOT_RUN: (
        "run the plan where the rehearsal can run (Linux, root, util-linux: CI and the dev "
        "containers), or waive this rule for this machine knowing the scripts are unchecked"
    ),
    SCRIPT_FAILS: (
        "make the script succeed under its container's securityContext on a fresh volume and "
        "on every re-run (idempotent), with the fewest capabilities (docs/rehearsals.md)"
    ),
    CANNOT_WRITE: (
        "make the setup script give the directory to the UID/GID the pods run as (the team's "
        "TeamFacts.run_as_user/run_as_group), or run the pods as that user"
    ),
}
WRITE_FLAGS = ("--checkpoint-dir", "--output-dir")
WRITE_ENV = (CHECKPOINT_DIR, OUTPUT_DIR)  # the job contract's (what user code writes)
READ_ONLY_VOLUMES = ("configMap", "secret", "projected", "downwardAPI")
# The scenarios, each on fresh scratch volumes, and their steps (docs/rehearsals.md)
KUBELET_FIRST = "subPaths made by the kubelet first"
SCENARIOS = {
    "fresh volume": ("run 1", "run 2 (Job retry)", "writes", "run 3 (Job re-created)",
                     "writes again"),
    KUBELET_FIRST: ("run 1", "writes"),
}  # fmt: skip


def shell_script(container: dict[str, Any]) -> str | None:
    """SCRIPT when the container runs `sh -c SCRIPT` (command and args together)."""
    return shell_argv.shell_script(argv(container))


@dataclass(frozen=True)
class Claim:
    namespace: str
    name: str
    driver: str  # the PV's CSI driver, "" when unknown
    # The file system the PV mounts (driver + volumeHandle) when it mounts one directory of
    # it (DIRECTORY_ANNOTATION), and that directory ("" = the root); else the claim itself.
    volume: str = ""
    directory: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def fs(self) -> str:
        return self.volume or self.key

    def describe(self) -> str:
        what = "FSx for Lustre" if self.driver == FSX_DRIVER else (self.driver or "a volume")
        if self.directory:
            return f"claim {self.key} ({what}: directory /{self.directory} of the file system)"
        return f"claim {self.key} ({what}: a new file system root, root:root 0755)"


@dataclass
class Consumer:
    """A pod that uses a claim after the setup script: who it is and where it writes."""

    name: str
    identity: sandbox.Identity
    mount_path: str
    sub_path: str
    dirs: tuple[str, ...]
    fs_group: int | None = None  # the pod's fsGroup (applied to non-FSx claims)


@dataclass(frozen=True)
class VolumeMount:
    """One of a container's volumeMounts. Per mount, not per volume: a container may mount
    the same volume twice (one subPath read-only here, another writable there)."""

    name: str
    path: str
    volume: dict[str, Any]  # the pod's volume source of that name ({} when undeclared)
    read_only: bool = False
    sub_path: str = ""

    @property
    def claim(self) -> str | None:
        """The name of the claim it mounts (None: another volume type)."""
        pvc = self.volume.get("persistentVolumeClaim")
        return None if pvc is None else pvc["claimName"]


@dataclass
class Script:
    container: str
    script: str
    identity: sandbox.Identity
    mounts: list[VolumeMount]
    env: dict[str, str]
    ident: str = ""  # namespace/Kind/name
    urn: str = ""
    obj_name: str = ""
    fs_group: int | None = None
    skip: str | None = None
    skip_fix: str | None = None  # what lifts `skip` (the UNREHEARSED finding's fix)
    shell: str = "sh"  # the container's shell: `bash -c` runs with bash
    cwd: str | None = None  # the container's workingDir
    image: bool = False  # a training image's script: IMAGE_STAND_INS on PATH
    replicas: tuple[str, ...] = ()  # the replica types that run it (PyTorchJob Master, Worker)

    @property
    def replica_note(self) -> str:
        """` (replicas Master, Worker)`; nothing for an object of one unnamed pod template."""
        if not self.replicas:
            return ""
        return f" (replica{'s' * (len(self.replicas) > 1)} {', '.join(self.replicas)})"

    @property
    def title(self) -> str:
        return f"{self.ident} container {self.container}{self.replica_note}"


# Stand-ins for a training image's programs, first on PATH of a TrainJob's script
# (docs/rehearsals.md, "Trainer v2 TrainJobs"): the image is not here and must not train here.
STAND_IN_DIR = "/opt/trainforge-image-stand-in"
# Where a stand-in pip notes each install it did not run: such a run is "ok but pip not run"
# whatever the script printed (PIP_NOTE); `plan --sdk` rehearses the install with a real pip.
STAND_IN_LOG = "/opt/trainforge-stand-in-log"
CA_DIR = "/etc/ssl"  # the host's CA bundle, for a real pip (`run_script`'s python)
PIP_NOTE = (
    "pip not run: its package install was not rehearsed (no package index here); whether the "
    "pod's namespace reaches one is its egress's (`plan --sdk` judges packages_to_install)"
)
_PY_CHECK = r"""
import ast, sys
args = sys.argv[2:]
i = 0
while i < len(args):
    a = args[i]
    if a in ("-m", "--module"):
        mod = args[i + 1] if i + 1 < len(args) else "?"
        if mod == "pip" and "install" in args[i + 2:]:
            try:
                open("/opt/trainforge-stand-in-log/pip", "a").write(" ".join(args) + "\n")
            except OSError:
                pass
            print("pip (stand-in): installs nothing here"); sys.exit(0)
        print(sys.argv[1], "module", mod); sys.exit(0)
    if a == "-c" and sys.argv[1] != "torchrun":
        ast.parse(args[i + 1] if i + 1 < len(args) else ""); sys.exit(0)
    if not a.startswith("-"):
        try:
            ast.parse(open(a).read(), a)
        except (OSError, SyntaxError) as e:
            print(sys.argv[1] + " (stand-in):", e, file=sys.stderr); sys.exit(1)
        print(sys.argv[1], "parsed", a); sys.exit(0)
    flag = a not in ("--standalone", "--no-python", "--no_python", "--run-path", "--run_path")
    if flag and "=" not in a and a.startswith("--") and sys.argv[1] == "torchrun":
        i += 1  # torchrun's option value (--nproc-per-node 2); its switches take none
    i += 1
"""
IMAGE_STAND_INS = {
    name: "#!/bin/sh\nfor py in /usr/bin/python3 /usr/local/bin/python3 /bin/python3; do\n"
    f'  [ -x "$py" ] && exec "$py" -I -c {shlex.quote(_PY_CHECK)} {name} "$@"\n'
    "done\n"
    f'echo "{name} (stand-in): no python3 on this machine to check its program" >&2\n'
    for name in ("torchrun", "python", "python3")
}
IMAGE_STAND_INS.update(
    {
        p: f'#!/bin/sh\n{{ echo "$*" >> {STAND_IN_LOG}/pip; }} 2>/dev/null\n'
        f'echo "{p} (stand-in): installs nothing here: $*"\n'
        for p in ("pip", "pip3")
    }
)


def _stand_ins(base: pathlib.Path, python: str | None = None) -> sandbox.Mount:
    """IMAGE_STAND_INS in a directory of `base`; `python`: a real interpreter for python and
    python3 instead of the syntax check (`plan --sdk` rehearses a real pip install)."""
    d = base / "image-stand-in"
    d.mkdir()
    for name, text in IMAGE_STAND_INS.items():
        if python is not None and name in ("python", "python3"):
            text = f'#!/bin/sh\nexec {python} "$@"\n'
        (d / name).write_text(text)
        (d / name).chmod(0o755)
    d.chmod(0o755)
    return sandbox.Mount(d, STAND_IN_DIR, True)


def _claim(objects: list[Any], namespace: str, name: str) -> Claim:
    """The claim and what its PV (the claim's volumeName, or the PV's claimRef) mounts."""
    pvcs = (o for o in objects if o.kind == "PersistentVolumeClaim")
    pvc = next((o.doc for o in pvcs if (o.namespace, o.obj_name) == (namespace, name)), {})
    pv_name = (pvc.get("spec") or {}).get("volumeName")
    driver, volume, directory = "", "", ""
    for pv in (o.doc for o in objects if o.kind == "PersistentVolume"):
        ref = get(pv, "spec", "claimRef") or {}
        bound = (ref.get("namespace"), ref.get("name")) == (namespace, name)
        if get(pv, "metadata", "name") == pv_name or bound:
            csi = get(pv, "spec", "csi") or {}
            driver = csi.get("driver", "")
            annotations = get(pv, "metadata", "annotations") or {}
            if DIRECTORY_ANNOTATION in annotations:
                volume = f"{driver}/{csi.get('volumeHandle', '')}"
                directory = str(annotations[DIRECTORY_ANNOTATION]).strip("/")
    return Claim(namespace, name, driver, volume, directory)


def _write_dirs(container: dict[str, Any], mount_path: str) -> tuple[str, ...]:
    """Where a pod writes on the volume mounted at `mount_path`: its command's WRITE_FLAGS
    values in argv order (the plan's one command-line reader), then its literal WRITE_ENV;
    the whole mount when none of them is inside it."""
    dirs = [v for v in all_values(argv_fields(argv(container)), *WRITE_FLAGS) if v is not None]
    dirs += [v for k, v in literal_env(container).items() if k in WRITE_ENV]
    inside = [d for d in dirs if code_paths.under(d, mount_path)]
    return tuple(dict.fromkeys(inside)) or (mount_path,)


def _mounts(pod: dict[str, Any], c: dict[str, Any]) -> list[VolumeMount]:
    volumes = {v.get("name"): v for v in pod.get("volumes") or () if isinstance(v, dict)}
    return [
        VolumeMount(m["name"], m["mountPath"], volumes.get(m["name"], {}),
                    bool(m.get("readOnly")), m.get("subPath", ""))
        for m in c.get("volumeMounts") or ()
    ]  # fmt: skip


def script_of(
    pod: dict[str, Any], c: dict[str, Any], *, image: bool = False, **where: str
) -> Script | None:
    """Container `c`'s script in pod spec `pod` as it runs (None: it runs no shell script),
    with why it is not rehearsed (`skip`) where it cannot be; `where`: its object's ident,
    urn and obj_name; `image`: a training image's (IMAGE_STAND_INS on PATH)."""
    script = shell_script(c)
    if script is None:
        return None
    identity = sandbox.Identity.of(pod.get("securityContext"), c.get("securityContext"))
    mounts = _mounts(pod, c)
    s = Script(str(c.get("name")), script, identity, mounts, literal_env(c), **where)
    s.fs_group = get(pod, "securityContext", "fsGroup")
    s.shell, s.cwd, s.image = posixpath.basename(argv(c)[0]), c.get("workingDir"), image
    if identity.unsafe:
        s.skip = (
            f"runs as root with {', '.join(sorted(identity.unsafe))}, which could leave the "
            "sandbox and change this machine; rehearse it in a throwaway VM, or drop the "
            "capability"
        )
        s.skip_fix = CAPABILITY_FIX
    kinds = [(vm.name, _volume_kind(vm.volume)) for vm in mounts]
    other = [(n, k) for n, k in kinds if k not in ("claim", "emptyDir", "readOnly")]
    if other and s.skip is None:
        s.skip = f"volume {other[0][0]!r} is a {other[0][1]}, which is not rehearsed"
        s.skip_fix = volume_fix(other[0][1])
    return s


def unexecutable(pod: dict[str, Any], c: dict[str, Any]) -> str | None:
    """Why container `c` of pod spec `pod` cannot start its program (None: it can, or this
    cannot tell): a program given by path (`./run.sh`, `/workspace/run.sh`; relative ones
    from the container's workingDir) that is a file of a ConfigMap, Secret or projected
    volume whose mode (`volume_file_mode`: the item's, the volume's defaultMode, 0644) has no
    execute bit for the container's user fails at exec with "permission denied", and the pod
    with it: the runtime execs the file itself, it runs no shell for it. Root needs any
    execute bit; another user the others' bit, or the group's where the pod sets an fsGroup
    (the kubelet gives the volume's files that group; it adds no execute bit to a file)."""
    args = argv(c)
    if not args or "/" not in args[0]:
        return None  # none, or found on the image's PATH
    workdir = c.get("workingDir") or "/"
    path = posixpath.normpath(posixpath.join(str(workdir), args[0]))
    identity = sandbox.Identity.of(pod.get("securityContext"), c.get("securityContext"))
    fs_group = get(pod, "securityContext", "fsGroup")
    for vm in _mounts(pod, c):
        top = vm.path.rstrip("/")
        if _volume_kind(vm.volume) != "readOnly" or vm.sub_path or not path.startswith(top + "/"):
            continue
        mode = volume_file_mode(vm.volume, path[len(top) + 1 :])
        bits = 0o111 if identity.uid == 0 else 0o001 | (0o010 if fs_group is not None else 0)
        if mode & bits:
            return None
        shown = args[0] if args[0] == path else f"{args[0]} ({path})"
        return (
            f"container {c.get('name')!r} runs {shown}, a file of volume {vm.name!r} mounted "
            f"with mode {mode:04o}, which uid {identity.uid} cannot execute: the pod fails at "
            "start with 'permission denied'; give the file an execute bit (a file of an "
            "entry's codeDir: chmod +x it in the project, shipped 0555; a ConfigMap of your "
            f"own: its item's mode or the volume's defaultMode) or run it through its "
            f"interpreter (bash {args[0]})"
        )
    return None


def unrunnable_alone(s: Script) -> str | None:
    """Why `s` may not run in the sandbox outside the plan's rehearsal (no claims given): its
    `skip` (root with a capability that could leave the sandbox, a volume kind not rehearsed),
    or a claim mount; None where it may (pod_files and the SDK install rehearsal ask)."""
    if s.skip:
        return s.skip
    if any(vm.claim is not None for vm in s.mounts):
        return "it mounts a volume claim, which a run without the plan's volumes does not model"
    return None


def _claim_keys(s: Script) -> list[str]:
    ns = s.ident.split("/", 1)[0]
    return sorted({f"{ns}/{vm.claim}" for vm in s.mounts if vm.claim is not None})


def _collect(ctx: PlanContext) -> tuple[list[Script], dict[str, list[Consumer]], dict[str, Claim]]:
    """The scripts to rehearse, the pods that write on each claim after them, the claims."""
    scripts: list[Script] = []
    consumers: dict[str, list[Consumer]] = {}
    claims: dict[str, Claim] = {}
    seen: set[tuple[Any, ...]] = set()
    for o in ctx.objects:
        ns = o.namespace or ""
        pods = _pods_of(o, ctx)
        is_trainjob = o.kind == trainjob.KIND
        where = {"ident": o.ident, "urn": o.urn, "obj_name": o.name}
        # one run and one report per distinct script of the object, whatever replica types
        # run it: the container, image, script, identity, mounts, env, shell, cwd, fsGroup
        runs: dict[tuple[Any, ...], Script] = {}
        if is_trainjob and not pods:  # the Trainer cannot build its pod: what the job writes
            pods = [(t.name, t.spec) for t in pod_templates(o.doc, build=False)]
            trainer = (o.doc.get("spec") or {}).get("trainer") or {}
            s = script_of({}, {**trainer, "name": trainjob.CONTAINER}, **where)
            if s is not None:  # its trainer's script: not rehearsed, and why
                scripts.append(replace(s, skip=_unbuilt(o, ctx), skip_fix=RUNTIME_FIX))
        for replica, pod in pods:
            fs_group = get(pod, "securityContext", "fsGroup")
            for c in containers(pod):
                s = script_of(pod, c, image=is_trainjob, **where)
                if s is not None:
                    same = (s.container, str(c.get("image")), s.script, s.identity,
                            repr(s.mounts), tuple(sorted(s.env.items())), s.shell, s.cwd,
                            s.fs_group, s.image, s.skip)  # fmt: skip
                    if same in runs:  # another replica type runs the same: named there
                        runs[same].replicas += (replica,) * bool(replica)
                        continue
                    runs[same] = s
                    s.replicas = (replica,) * bool(replica)
                    for cl in (
                        _claim(ctx.objects, ns, vm.claim) for vm in s.mounts if vm.claim is not None
                    ):
                        claims[cl.key] = cl
                    scripts.append(s)
                    continue
                identity = sandbox.Identity.of(pod.get("securityContext"), c.get("securityContext"))
                for vm in _mounts(pod, c):
                    if vm.claim is None or vm.read_only:
                        continue
                    cl = _claim(ctx.objects, ns, vm.claim)
                    dirs = _write_dirs(c, vm.path)
                    key = (cl.key, identity, vm.path, vm.sub_path, dirs, fs_group)
                    if key not in seen:
                        seen.add(key)
                        claims[cl.key] = cl
                        consumers.setdefault(cl.key, []).append(
                            Consumer(o.ident, identity, vm.path, vm.sub_path, dirs, fs_group)
                        )
    # Teams whose pods are not declared yet: a probe pod as the team's training pods run
    # (jobs.pod's security contexts for the team: its UID/GID, fsGroup, capabilities)
    for contract in getattr(ctx.declared, "contracts", None) or ():
        for team in contract.teams.values():
            key = f"{team.namespace}/{team.claim_name}"
            if not team.claim_name or key in consumers:
                continue
            claims[key] = _claim(ctx.objects, team.namespace, team.claim_name)
            pod_sc = job_pod.pod_security_context(team)
            probe = sandbox.Identity.of(pod_sc, job_pod.container_security_context(team))
            name = f"training pods of team {team.name} (none declared; UID/GID from TeamFacts)"
            dirs = (default_checkpoint_dir(team, "rehearsal-probe"),)
            consumers[key] = [
                Consumer(name, probe, team.fsx_mount_path, team.fsx_sub_path or "", dirs,
                         pod_sc.get("fsGroup"))
            ]  # fmt: skip
    return scripts, consumers, claims


class MissingDirectory(Exception):
    """A fileset PV's directory is missing: a pod mounting it would not start."""


def _volume_kind(vol: dict[str, Any]) -> str:
    if "persistentVolumeClaim" in vol:
        return "claim"
    if "emptyDir" in vol:
        return "emptyDir"
    if any(k in vol for k in READ_ONLY_VOLUMES):
        return "readOnly"
    return next((k for k in vol if k != "name"), "volume of unknown type")


class _Run:
    """One scenario's scratch state: a directory per claim, fresh emptyDirs per pod run
    (`made`, in order: run_script makes one per volume, in the container's order)."""

    def __init__(self, base: pathlib.Path, claims: dict[str, Claim]) -> None:
        self.base, self.claims = base, claims
        self.made: list[pathlib.Path] = []
        self.fs_roots: dict[str, pathlib.Path] = {}
        for i, fs in enumerate(sorted({c.fs for c in claims.values()})):
            root = self.fs_roots[fs] = base / f"fs{i}"
            root.mkdir()
            os.chown(root, 0, 0)
            os.chmod(root, 0o755)  # a new file system's root

    def root(self, claim: str) -> pathlib.Path:
        """What the claim mounts: its file system's root, or the one directory it exposes
        (MissingDirectory when that directory does not exist: the mount would fail)."""
        c = self.claims[claim]
        if not self.has(claim):
            raise MissingDirectory(f"/{c.directory} does not exist on the file system")
        return self.fs_roots[c.fs] / c.directory

    def has(self, claim: str) -> bool:
        """Whether what the claim mounts exists (a fileset's directory was made)."""
        return (self.fs_roots[self.claims[claim].fs] / self.claims[claim].directory).is_dir()

    def subpath(self, claim: str, sub: str, fs_group: int | None = None) -> pathlib.Path:
        """The claim's directory (`root`) for `sub`, made as the kubelet would if missing: its
        SafeMakeDir (pkg/volume/util/subpath/subpath_linux.go, called by makeMounts with the
        volume root's mode) makes each missing directory of the path with mkdirat, as root,
        then fchmods it to the volume root's mode, setgid included, and chowns nothing: the
        group is the parent's when the parent is setgid (an fsGroup volume), else root's.
        `fs_group`: the mounting pod's, applied to the volume's root first as the kubelet's
        ownership change does (volumes whose driver supports it: not FSx)."""
        root = d = self.root(claim)
        if fs_group is not None and self.claims[claim].driver != FSX_DRIVER:
            os.chown(root, -1, fs_group)
            os.chmod(root, (root.stat().st_mode & 0o7777) | 0o2070)
        mode = root.stat().st_mode & 0o7777
        # the API server refuses an absolute subPath or one with `..`: never leave the root
        for part in (p for p in sub.split("/") if p not in ("", ".", "..")):
            parent, d = d, d / part
            if not d.exists():
                d.mkdir()
                above = parent.stat()
                os.chown(d, 0, above.st_gid if above.st_mode & stat.S_ISGID else 0)
                os.chmod(d, mode)
        return d

    def scratch(self, mode: int, gid: int | None) -> pathlib.Path:
        d = self.base / f"vol{len(self.made) + 1}"
        d.mkdir()
        self.made.append(d)
        if gid is not None:
            os.chown(d, 0, gid)
            mode |= 0o2000
        os.chmod(d, mode)
        return d


def run_script(
    s: Script, run: _Run, ns: str, *, python: str | None = None, timeout: int = 30
) -> sandbox.RunResult:
    """Run script `s` in the sandbox, its volumes `run`'s scratch directories (its claims in
    namespace `ns`). `python`: a real interpreter for a training image's python (`_stand_ins`),
    with the CA bundle and no retries: its pip fails on the missing index, soon, not on TLS."""
    mounts: list[sandbox.Mount] = []
    for vm in s.mounts:
        kind, ro = _volume_kind(vm.volume), vm.read_only
        if kind == "claim":
            try:
                host = run.subpath(f"{ns}/{vm.claim}", vm.sub_path, s.fs_group)
            except MissingDirectory as e:  # nothing made its fileset's directory
                return sandbox.RunResult(rc=32, stdout="", stderr=f"mount fails: {e}")
        elif kind == "emptyDir":
            host = run.scratch(0o777, s.fs_group)
        else:
            host, ro = run.scratch(0o755, None), True
        mounts.append(sandbox.Mount(host, vm.path, ro))
    env = dict(s.env)
    log = None
    if s.image:  # the image's programs: stand-ins first on PATH
        mounts.append(_stand_ins(run.scratch(0o755, None), python))
        log = run.scratch(0o777, None)
        mounts.append(sandbox.Mount(log, STAND_IN_LOG, False))
        env["PATH"] = f"{STAND_IN_DIR}:{env.get('PATH') or sandbox.SYSTEM_PATH}"
    if python is not None:
        env["PIP_RETRIES"] = "0"
        if os.path.isdir(CA_DIR):
            mounts.append(sandbox.Mount(pathlib.Path(CA_DIR), CA_DIR, True))
    shell = "/bin/bash" if s.shell == "bash" else None
    r = sandbox.run(s.script, s.identity, mounts, env=env, shell=shell, cwd=s.cwd, timeout=timeout)
    if log is not None and (log / "pip").exists():
        return replace(r, pip_not_run=True)
    return r


def _write(consumer: Consumer, claim: str, run: _Run, tag: str) -> sandbox.RunResult:
    # the pod's writes, one `mkdir -p` for all its directories (a batch of pods: one process)
    script = " && ".join(
        [f"mkdir -p {' '.join(shlex.quote(d) for d in consumer.dirs)}"] * bool(consumer.dirs)
        + [f"echo ok > {shlex.quote(d + '/.rehearsal-' + tag)}" for d in consumer.dirs]
    )
    ns, name = claim.split("/", 1)
    volume = {"persistentVolumeClaim": {"claimName": name}}
    mount = VolumeMount("claim", consumer.mount_path, volume, False, consumer.sub_path)
    pod = Script(consumer.name, script, consumer.identity, [mount], {}, fs_group=consumer.fs_group)
    return run_script(pod, run, ns)


WRITE_BATCH = 64  # consumers per run at most: the script is one argv of `sh -c` (ARG_MAX)


def _writes(
    active: list[tuple[str, Consumer]], run: _Run, tag: str
) -> list[tuple[str, Consumer, sandbox.RunResult]]:
    """Every consumer's writes, one sandbox run per claim and identity (a hundred jobs of one
    team write as one user through one mount: one run). A group that fails is run again
    consumer by consumer, so a failure names its pod."""
    groups: dict[tuple[Any, ...], list[tuple[str, Consumer]]] = {}
    for k, c in active:
        groups.setdefault((k, c.identity, c.mount_path, c.sub_path, c.fs_group), []).append((k, c))
    out = []
    for g in groups.values():
        for group in (g[i : i + WRITE_BATCH] for i in range(0, len(g), WRITE_BATCH)):
            k, first = group[0]
            dirs = tuple(dict.fromkeys(d for _, c in group for d in c.dirs))
            r = _write(replace(first, dirs=dirs), k, run, tag)
            if r.ok or len(group) == 1:
                out += [(k2, c, r) for k2, c in group]
            else:
                out += [(k2, c, _write(c, k2, run, tag)) for k2, c in group]
    return out


def _short(script: str, limit: int = 120) -> str:
    one = " ".join(script.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def _finding(s: Script, rule: str, message: str, fix: str | None = None) -> Finding:
    names = frozenset({s.ident, s.obj_name})
    return Finding(s.ident, rule, message, fix or RULES[rule], urn=s.urn, names=names)


def _each(work: Callable[[Script], _T], scripts: list[Script]) -> list[_T]:
    """`work` of every script, in order: two at a time where the plan may use a second CPU
    (registry.may_fork), else one after another; the threads only wait for sandbox processes
    working in scratch directories of their own."""
    from trainforge.plan import registry  # noqa: PLC0415 - registry imports every check

    if len(scripts) < 2 or not registry.may_fork():
        return [work(s) for s in scripts]
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="pod-rehearsal") as pool:
        return list(pool.map(work, scripts))


Rehearsed = tuple[list[str], dict[str, Any], list[Finding], set[str]]


def _rehearse(
    s: Script, scripts: list[Script], consumers: dict[str, list[Consumer]], claims: dict[str, Claim]
) -> Rehearsed:
    """Script `s` in every scenario, each in its own scratch directories: (report lines, data
    entry, findings, the claims of other teams whose fileset directory it made)."""
    lines: list[str] = []
    findings: list[Finding] = []
    made: set[str] = set()
    ns = s.ident.split("/", 1)[0]
    mine = _claim_keys(s)
    # a fileset's directory is there once a setup script made it (its pod cannot start
    # before): the scripts that mount that file system's root run first
    filesets = {claims[k].fs for k in mine if claims[k].directory}
    setups = [
        p
        for p in scripts
        if p is not s
        if any(claims[k].fs in filesets and not claims[k].directory for k in _claim_keys(p))
    ]
    unrun = [f"its file system's setup {p.ident} is not rehearsed" for p in setups if p.skip]
    skip = s.skip or next(iter(unrun), None)
    skip_fix = s.skip_fix or next((p.skip_fix for p in setups if p.skip), None)
    lines += [f"{s.title}: `{_short(s.script)}`", f"  as {s.identity.describe()}"]
    entry: dict[str, Any] = {"object": s.ident, "container": s.container, "scenarios": {}}
    if s.replicas:
        entry["replicas"] = list(s.replicas)
    if skip:  # a script the rehearsal cannot run is not a script that passed: say so
        lines.append(f"  not rehearsed: {skip}")
        entry["skipped"] = skip
        findings.append(_finding(s, UNREHEARSED, f"{s.title}: not rehearsed: {skip}", skip_fix))
        return lines, entry, findings, made
    # every pod on the same file systems: the same claim, or another directory of it
    file_systems = {claims[k].fs for k in mine}
    related = [
        (k, c) for k in sorted(consumers) if claims[k].fs in file_systems for c in consumers[k]
    ]
    involved = {*mine, *(k for k, _ in related), *(k for p in setups for k in _claim_keys(p))}
    lines += [f"  volume: {claims[key].describe()}" for key in mine]
    lines += [
        f"  after {p.ident} container {p.container} (the file system's setup)" for p in setups
    ]
    for k, c in related:
        on = "" if k in mine else (
            f" through {claims[k].describe()}, if this script makes /{claims[k].directory}")  # fmt: skip
        lines.append(f"  then {c.name} writes {', '.join(c.dirs)}{on} as {c.identity.describe()}")
    for label, steps in SCENARIOS.items():
        kubelet_first = label == KUBELET_FIRST
        if kubelet_first and not any(c.sub_path for _, c in related):
            continue
        with tempfile.TemporaryDirectory(prefix="tf-pod-rehearsal-") as tmp:
            run = _Run(pathlib.Path(tmp), {k: claims[k] for k in sorted(involved)})
            for p in setups:
                run_script(p, run, p.ident.split("/", 1)[0])
            for k, c in related if kubelet_first else ():
                # a fileset that is not there yet cannot be mounted: nothing to make
                with contextlib.suppress(MissingDirectory):
                    run.subpath(k, c.sub_path)
            outcome = []
            active = list(related)
            for step in steps:
                if step.startswith("writes"):
                    results = _writes(active, run, step.replace(" ", "-"))
                    bad = next(((c, r) for _, c, r in results if not r.ok), None)
                    outcome.append(f"{step} {'FAILED' if bad else 'ok'}")
                    if bad is None:
                        continue
                    c, r = bad
                    message = (
                        f"after {s.ident} ran ({label}), {c.name} ({c.identity.describe()}) "
                        f"cannot write {', '.join(c.dirs)}: {r.tail()}"
                    )
                    findings.append(_finding(s, CANNOT_WRITE, message))
                    break
                r = run_script(s, run, ns)
                if step == "run 1" and r.ok:
                    # another directory of the file system is this script's business only
                    # if the script made it (each team's Job makes its own)
                    active = [(k, c) for k, c in related if k in mine or run.has(k)]
                    made.update(k for k, _ in active if k not in mine)
                # a run that met the stand-in pip is never plain ok (PIP_NOTE says why)
                ok = "ok but pip not run" if r.pip_not_run else "ok"
                outcome.append(f"{step} {ok if r.ok else f'FAILED (exit {r.rc})'}")
                if not r.ok:
                    message = (
                        f"container {s.container} of {s.ident}{s.replica_note} fails on "
                        f"{step} ({label}) as {s.identity.describe()}: {r.tail()}; script: "
                        f"`{_short(s.script, 200)}`"
                    )
                    findings.append(_finding(s, SCRIPT_FAILS, message))
                    break
            lines.append(f"  {label}: " + ", ".join(outcome))
            if any(o.endswith("pip not run") for o in outcome):
                lines.append(f"    {PIP_NOTE}")
            entry["scenarios"][label] = outcome
    return lines, entry, findings, made


def unwritable_writes(
    pod: dict[str, Any], c: dict[str, Any], configmaps: dict[str, dict[str, Any]]
) -> list[code_paths.PathUse]:
    """The writes of container `c`'s own code (the ConfigMap volumes mounted at its
    workingDir or named in its command: `configmaps`, name -> the ConfigMap object of the
    pod's namespace) that lie on no writable volume of it, where its root file system is
    read-only (readOnlyRootFilesystem): each fails in the pod (FileNotFoundError, or EROFS).
    The one reader of the code's paths: trainforge.jobs.code_paths (the importer names the
    same uses under each mount it drops). Files are named by their path in the pod."""
    if not (c.get("securityContext") or {}).get("readOnlyRootFilesystem"):
        return []
    mounts = _mounts(pod, c)
    writable = [
        vm.path for vm in mounts if not vm.read_only and _volume_kind(vm.volume) != "readOnly"
    ]
    words = [*argv(c), str(c.get("workingDir") or "")]
    files: list[tuple[str, str]] = []
    for vm in mounts:
        cm = configmaps.get(str(get(vm.volume, "configMap", "name")))
        top = vm.path.rstrip("/")
        if (
            cm is None
            or vm.sub_path
            or not any(code_paths.under(w, top) or top in w for w in words)
        ):
            continue
        data = {str(k): str(v) for k, v in (cm.get("data") or {}).items()}
        items = get(vm.volume, "configMap", "items") or [{"key": k, "path": k} for k in data]
        for item in items:
            if isinstance(item, dict) and str(item.get("key")) in data:
                files.append((f"{top}/{item.get('path')}", data[str(item["key"])]))
    return [
        u
        for u in code_paths.path_uses(files)
        if u.writes and not any(code_paths.under(u.path, w) for w in writable)
    ]


def _unbuilt(o: Any, ctx: PlanContext) -> str:
    """Why the Trainer cannot build TrainJob `o`'s pod (`_pods_of` gives none)."""
    ref = (o.doc.get("spec") or {}).get("runtimeRef") or {}
    kind, name = ref.get("kind") or trainjob.RUNTIME_KIND, str(ref.get("name"))
    try:
        trainjob.built_pod(o.doc, runtime_docs(ctx))
    except (KeyError, TypeError, AttributeError, StopIteration) as e:
        return f"its pod cannot be built from runtime {name!r} ({type(e).__name__}: {e})"
    return f"its runtime {kind} {name!r} is neither in the plan nor the platform's"


def _pods_of(o: Any, ctx: PlanContext) -> list[tuple[str, dict[str, Any]]]:
    """(replica name, pod spec) of the pods object `o` runs, by the one walker: a TrainJob's
    pod as the Trainer builds it from its runtime, as Kueue leaves the job once it manages it
    (none where it cannot be built: `_unbuilt`, which the script rehearsal reports)."""
    return [(t.name, t.spec) for t in pod_templates(o.doc, runtimes=runtime_docs(ctx))]


MOST_WRITES = 4
WRITE_FIX = (
    "mount a volume there (a job entry: `volumes: [{claim: <your team's claim>, mountPath: "
    "<the folder>}]`, docs/jobs.md), or write under one the pod has (the job contract's "
    f"{CHECKPOINT_DIR} and {OUTPUT_DIR}, /tmp)"
)


def _pod_findings(ctx: PlanContext) -> list[Finding]:
    """One walk of the pods the objects run: SCRIPT_FAILS for each container whose program the
    pod could not execute (`unexecutable`), once per object and message; then CANNOT_WRITE for
    each write of a container's own code on no writable volume of it (`unwritable_writes`),
    once per object and message, naming the replica types (Master, Worker) that do the same."""
    unexec: dict[tuple[str, str], Finding] = {}
    unwritable: list[Finding] = []
    configmaps: dict[str, dict[str, Any]] = {}
    for x in ctx.objects:
        if x.kind == "ConfigMap":
            configmaps.setdefault(x.namespace or "", {})[x.obj_name] = x.doc
    for o in ctx.objects:
        names = frozenset({o.ident, o.name})
        said: dict[str, list[str]] = {}  # message body -> replica types
        for replica, pod in _pods_of(o, ctx):
            for c in containers(pod):
                why = unexecutable(pod, c)
                if why is not None and (o.ident, why) not in unexec:
                    unexec[(o.ident, why)] = Finding(
                        o.ident, SCRIPT_FAILS, f"{replica} pod: " * bool(replica) + why,
                        RULES[SCRIPT_FAILS], urn=o.urn, names=names,
                    )  # fmt: skip
                writes = unwritable_writes(pod, c, configmaps.get(o.namespace or "", {}))
                if not writes:
                    continue
                shown = "; ".join(u.describe() for u in writes[:MOST_WRITES])
                more = len(writes) - MOST_WRITES
                mounted = ", ".join(vm.path for vm in _mounts(pod, c) if not vm.read_only)
                body = (
                    f"the code of container {c.get('name')!r} writes outside its writable "
                    f"volumes ({mounted or 'none'}): {shown}{f'; and {more} more' * (more > 0)}; "
                    "its root file system is read-only, so each write fails in the pod "
                    "(FileNotFoundError, or EROFS where the image has the folder)"
                )
                said.setdefault(body, []).extend([replica] if replica else [])
        for body, replicas in said.items():
            where = f"{', '.join(replicas)} pod{'s' * (len(replicas) > 1)}: " if replicas else ""
            unwritable.append(
                Finding(o.ident, CANNOT_WRITE, where + body, WRITE_FIX, urn=o.urn, names=names)
            )
    return [*unexec.values(), *unwritable]


def check(ctx: PlanContext) -> CheckResult:
    unexec = _pod_findings(ctx)
    result = _check_scripts(ctx)
    if unexec:
        lines = [
            f"{'NOT EXECUTABLE' if f.rule == SCRIPT_FAILS else 'CANNOT WRITE'}: {f.message}"
            for f in unexec
        ]
        if result.sections:
            result.sections[0].lines[:0] = lines
        else:
            data = {"unexecutable": [f.resource for f in unexec]}
            result.sections.append(Section(TITLE, lines, data))
        result.findings[:0] = unexec
    return result


def _check_scripts(ctx: PlanContext) -> CheckResult:
    scripts, consumers, claims = _collect(ctx)
    if not scripts:
        return CheckResult()
    why_not = sandbox.unavailable()
    if why_not is not None:  # not run is not passed: each script is a finding (waivable)
        lines = [f"NOT RUN: {why_not}"]
        lines += [f"{s.title}: `{_short(s.script)}` (not rehearsed)" for s in scripts]
        data = {"runnable": False, "reason": why_not, "scripts": [s.ident for s in scripts]}
        not_run = [
            _finding(s, NOT_RUN, f"{s.title}: script not rehearsed ({why_not}): `{_short(s.script)}`")
            for s in scripts
        ]  # fmt: skip
        return CheckResult(findings=not_run, sections=[Section(TITLE, lines, data)])

    findings: list[Finding] = []
    lines = [f"shell: {sandbox.shell_description()}"]
    data: dict[str, Any] = {"runnable": True, "shell": sandbox.shell_kind(), "scripts": []}
    started = time.monotonic()
    made: set[str] = set()  # fileset claims some script makes the directory of
    for more, entry, found, made_here in _each(
        lambda s: _rehearse(s, scripts, consumers, claims), scripts
    ):
        lines += more
        data["scripts"].append(entry)
        findings += found
        made |= made_here
    for key in sorted(consumers):
        c0 = claims.get(key)
        if c0 is None or not c0.directory or key in made:
            continue
        if any(claims[k].fs == c0.fs and not claims[k].directory for k in claims):
            for c in consumers[key]:
                lines.append(f"{c.name}: nothing makes /{c0.directory} for {c0.describe()}")
                message = (
                    f"{c.name} mounts {c0.describe()}, but no setup script makes "
                    f"/{c0.directory}: the mount would fail and its pods never start"
                )
                fix, names = RULES[CANNOT_WRITE], frozenset({c.name, key})
                findings.append(Finding(c.name, CANNOT_WRITE, message, fix, names=names))
    data["seconds"] = round(time.monotonic() - started, 2)
    return CheckResult(findings=findings, sections=[Section(TITLE, lines, data)])
