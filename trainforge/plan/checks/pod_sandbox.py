"""Run a container's shell script here as the kubelet and containerd would: private
namespaces, a new read-only root, `chroot` and `setpriv` to the container's user, groups and
capabilities, scratch directories for its volumes; every run proves whom it ran as. Why, how
and what it cannot do: docs/rehearsals.md, "Pod script rehearsal". Needs Linux, root and
util-linux (`unavailable()` says why not).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

from trainforge.core.pods import security_field

# containerd's default capabilities for a container that drops nothing (the OCI/Docker set).
DEFAULT_CAPS = frozenset({
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP",
    "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE"
})  # fmt: skip
HOST_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr")
UNSHARE = ["unshare", "--mount", "--propagation", "private", "--pid", "--ipc", "--uts", "--net",
           "--fork"]  # fmt: skip
# Capabilities with which a root process could leave the sandbox and reach this machine
# (chroot escape, raw devices, mounts, file handles, kernel modules ...): such scripts are
# not run here (`Identity.unsafe`), and the rehearsal says so.
UNSAFE_CAPS = frozenset({
    "ALL", "SYS_ADMIN", "SYS_CHROOT", "SYS_MODULE", "SYS_RAWIO", "SYS_PTRACE", "SYS_BOOT",
    "SYS_TIME", "MKNOD", "DAC_READ_SEARCH", "NET_ADMIN", "BPF", "PERFMON", "LINUX_IMMUTABLE",
    "MAC_ADMIN", "MAC_OVERRIDE"
})  # fmt: skip
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Capability names by number (linux/include/uapi/linux/capability.h), to read
# /proc/self/status.
CAP_NAMES = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
    "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
    "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
    "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
    "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
    "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE"
)  # fmt: skip
# exit status of `run` when the sandboxed process is not who it should be
WRONG_IDENTITY = 125


@dataclass(frozen=True)
class Identity:
    """Who a container's process is, as containerd starts it."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    bounding: frozenset[str]  # capability names without CAP_
    no_new_privs: bool
    read_only_root: bool

    @property
    def effective(self) -> frozenset[str]:
        """After exec: root keeps the bounding set; anyone else keeps nothing (no ambient)."""
        return self.bounding if self.uid == 0 else frozenset()

    @property
    def unsafe(self) -> frozenset[str]:
        return self.effective & UNSAFE_CAPS

    def describe(self) -> str:
        caps = ",".join(sorted(self.effective)) or "none"
        groups = ",".join(map(str, self.groups)) or "none"
        nnp = " no_new_privs" if self.no_new_privs else ""
        ro = " read-only root" if self.read_only_root else ""
        return f"uid {self.uid} gid {self.gid} groups {groups} capabilities {caps}{nnp}{ro}"

    @classmethod
    def of(cls, pod_sc: dict[str, Any] | None, container_sc: dict[str, Any] | None) -> Identity:
        """From a pod's and a container's securityContext (the container's fields win), else
        the image's user (busybox's: root)."""
        pod, ctr = pod_sc or {}, container_sc or {}
        groups = [int(g) for g in pod.get("supplementalGroups") or ()]
        if pod.get("fsGroup") is not None:
            groups.append(int(pod["fsGroup"]))
        privileged = bool(ctr.get("privileged"))
        caps = ctr.get("capabilities") or {}
        drop = {c.upper().removeprefix("CAP_") for c in caps.get("drop") or ()}
        add = {c.upper().removeprefix("CAP_") for c in caps.get("add") or ()}
        bounding = frozenset((frozenset() if "ALL" in drop else DEFAULT_CAPS - drop) | add)
        return cls(
            uid=int(security_field(pod, ctr, "runAsUser") or 0),
            gid=int(security_field(pod, ctr, "runAsGroup") or 0),
            groups=tuple(dict.fromkeys(groups)),
            bounding=frozenset({"ALL"}) if privileged or "ALL" in add else bounding,
            no_new_privs=ctr.get("allowPrivilegeEscalation") is False and not privileged,
            read_only_root=bool(ctr.get("readOnlyRootFilesystem")),
        )

    def setpriv_args(self) -> list[str]:
        caps = ["-all", *(f"+{c.lower()}" for c in sorted(self.bounding))]
        return [
            # util-linux's, by absolute path: busybox has a smaller `setpriv` applet
            shutil.which("setpriv") or "/usr/bin/setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            f"--groups={','.join(map(str, self.groups))}" if self.groups else "--clear-groups",
            f"--bounding-set={'+all' if 'ALL' in self.bounding else ','.join(caps)}",
            "--inh-caps=-all",
            "--ambient-caps=-all",
            *["--no-new-privs"] * self.no_new_privs,
        ]


def read_status(text: str) -> dict[str, Any]:
    """The credentials in a /proc/<pid>/status: uid and gid (real, effective, saved, fs),
    supplementary groups, capability sets by name, no_new_privs."""
    fields = {k.strip(): v.strip() for k, _, v in (x.partition(":") for x in text.splitlines())}
    names = [*CAP_NAMES, *(f"cap{b}" for b in range(len(CAP_NAMES), 64))]
    sets = dict(inheritable="CapInh", effective="CapEff", bounding="CapBnd", ambient="CapAmb")
    try:
        return {
            "uid": tuple(int(x) for x in fields["Uid"].split()),
            "gid": tuple(int(x) for x in fields["Gid"].split()),
            "groups": tuple(sorted(int(x) for x in fields.get("Groups", "").split())),
            **{
                key: frozenset(n for b, n in enumerate(names) if int(fields[field], 16) >> b & 1)
                for key, field in sets.items()
            },
            "no_new_privs": fields.get("NoNewPrivs", "0") == "1",
        }
    except (KeyError, ValueError) as e:
        raise ValueError(f"not a /proc/self/status: {e}; got {text[:200]!r}") from None


def identity_mismatches(identity: Identity, status: str) -> list[str]:
    """How the process that wrote `status` (its /proc/self/status) differs from `identity`."""
    seen = read_status(status)
    out = [
        f"{key} {'/'.join(map(str, seen[key]))} (want {want})"
        for key, want in (("uid", identity.uid), ("gid", identity.gid))
        if set(seen[key]) != {want}
    ]
    want_groups = tuple(sorted(set(identity.groups)))
    if seen["groups"] != want_groups:
        got = ",".join(map(str, seen["groups"])) or "none"
        out.append(f"groups {got} (want {','.join(map(str, want_groups)) or 'none'})")
    if "ALL" not in identity.bounding:
        for key, want in (("bounding", identity.bounding), ("effective", identity.effective)):
            if seen[key] != want:
                got = ",".join(sorted(seen[key])) or "none"
                out.append(f"{key} capabilities {got} (want {','.join(sorted(want)) or 'none'})")
    out += [
        f"{key} capabilities {','.join(sorted(seen[key]))} (want none)"
        for key in ("inheritable", "ambient")
        if seen[key]
    ]
    if seen["no_new_privs"] != identity.no_new_privs:
        out.append(f"no_new_privs {int(seen['no_new_privs'])} (want {int(identity.no_new_privs)})")
    return out


@dataclass(frozen=True)
class Mount:
    """A scratch directory standing for a volume, at the container's mount path."""

    host: pathlib.Path
    path: str
    read_only: bool = False


@dataclass(frozen=True)
class RunResult:
    rc: int
    stdout: str
    stderr: str
    status: str = ""  # the sandboxed process's own /proc/self/status, read before the script
    pip_not_run: bool = False  # it met a stand-in pip (pod_scripts.STAND_IN_LOG)

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def tail(self) -> str:
        text = (self.stderr or self.stdout).strip().replace("\n", " | ")
        return text[-300:] if text else "(no output)"


def shell_kind() -> str:
    """`busybox` when its binary is here (the helper image's shell), else `sh` (host)."""
    return "busybox" if shutil.which("busybox") else "sh"


def shell_description() -> str:
    if shell_kind() == "busybox":
        out = subprocess.run(["busybox"], capture_output=True, text=True, check=False).stdout
        first = out.splitlines()[0] if out else "BusyBox"
        return f"busybox sh with busybox applets ({first.split(' multi-call')[0]})"
    target = os.path.basename(os.path.realpath("/bin/sh"))
    return f"host /bin/sh ({target}) with the host's coreutils (no busybox)"


@functools.cache
def unavailable() -> str | None:
    """Why scripts cannot be rehearsed here (None: they can)."""
    if not hasattr(os, "geteuid") or os.uname().sysname != "Linux":
        return "needs Linux (mount namespaces, setpriv)"
    if os.geteuid() != 0:
        return (
            "needs root to become the container's user and capabilities (run the plan as root, "
            "e.g. in CI or a container)"
        )
    for tool in ("unshare", "setpriv", "chroot", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} not found (util-linux/coreutils)"
    probe = run("true", Identity(0, 0, (), frozenset(), True, True), [])
    return None if probe.ok else f"cannot create private namespaces here: {probe.tail()}"


@functools.cache
def _applets() -> str:
    """A directory of busybox applet links (sh, mkdir, ...) as the busybox image has on PATH,
    made once per process."""
    bb = shutil.which("busybox") or "/bin/busybox"
    names = subprocess.run([bb, "--list"], capture_output=True, text=True, check=True).stdout
    d = tempfile.mkdtemp(prefix="tf-busybox-applets-")
    atexit.register(shutil.rmtree, d, True)
    for name in names.split():
        os.symlink(bb, os.path.join(d, name))
    return d


def _skeleton(root: str, mounts: list[Mount], busybox: bool) -> list[str]:
    """Make the new root's directories and links here (cheap); return the mount commands the
    private namespace runs (`--bind -o ro` also remounts read-only)."""
    q = shlex.quote
    binds = [f"mount --bind {q(root)} {q(root)}"]  # the root itself, remounted ro later
    for d in ("dev", "tmp", "proc"):  # /proc: for the identity proof, unmounted after it
        os.makedirs(os.path.join(root, d))
    pathlib.Path(root, "dev", "null").touch()
    for d in HOST_DIRS:
        src, dst = f"/{d}", os.path.join(root, d)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        elif os.path.isdir(src):
            os.mkdir(dst)
            binds.append(f"mount --bind -o ro {q(src)} {q(dst)}")
    binds.append(f"mount --bind /dev/null {q(os.path.join(root, 'dev', 'null'))}")
    if busybox:
        os.mkdir(os.path.join(root, ".busybox"))
        binds.append(f"mount --bind -o ro {q(_applets())} {q(os.path.join(root, '.busybox'))}")
    # As a node does it: containerd's CRI plugin orders a container's volume mounts by path
    # depth, shallowest first (withMounts, `orderedMounts`: "so that high level mounts don't
    # shadow other mounts"); runc then makes each missing mount point as root (0755 under
    # umask 022) inside whatever is mounted above it (a Secret at /tmp/.mlflow lands in /tmp's
    # emptyDir).
    for m in sorted(mounts, key=lambda m: len(pathlib.PurePosixPath(m.path).parts)):
        target = q(os.path.join(root, m.path.lstrip("/")))
        binds.append(f"mkdir -p {target}")
        binds.append(f"mount --bind {'-o ro ' * m.read_only}{q(str(m.host))} {target}")
    return binds


def _kill(p: subprocess.Popen[str]) -> None:
    """End a sandbox run and everything it started, and reap it: kill the PID namespace's
    init (`unshare`'s child; its change of user clears a parent-death signal, so `unshare
    --kill-child` cannot), and the kernel kills every process in the namespace; with no init
    yet, kill `unshare`'s process group."""
    children = pathlib.Path(f"/proc/{p.pid}/task/{p.pid}/children")
    inits = children.read_text().split() if children.exists() else []
    with contextlib.suppress(ProcessLookupError):
        for pid in inits:
            os.kill(int(pid), signal.SIGKILL)
        if not inits:
            os.killpg(p.pid, signal.SIGKILL)
    p.communicate()  # `unshare` reaps its init, which exits once its namespace is empty


def run(
    script: str,
    identity: Identity,
    mounts: list[Mount],
    *,
    env: dict[str, str] | None = None,
    timeout: int = 30,
    shell: str | None = None,
    cwd: str | None = None,
) -> RunResult:
    """Run `script` with `sh -c` (or `shell`, of the host's system directories: `/bin/bash`
    for a container's `bash -c`) as `identity`, seeing only `mounts` and the host's read-only
    system directories, in `cwd` (the container's workingDir; default "/", as containerd's)."""
    busybox = shell_kind() == "busybox" and shell is None
    q = shlex.quote
    with tempfile.TemporaryDirectory(prefix="tf-sandbox-") as tmp:
        root = os.path.join(tmp, "root")
        os.mkdir(root, 0o755)
        # umask: containerd's default, for the mount points made here and for the script
        setup = ["set -e", "umask 022", *_skeleton(root, mounts, busybox)]
        if identity.read_only_root:
            setup.append(f"mount -o remount,bind,ro {q(root)}")
        shell = shell or ("/.busybox/sh" if busybox else "/bin/sh")
        path = "/.busybox:" + SYSTEM_PATH if busybox else SYSTEM_PATH
        environment = ["env", "-i", f"PATH={path}", "HOME=/"]
        environment += [f"{k}={v}" for k, v in (env or {}).items()]
        become = ["chroot", root, *environment, *identity.setpriv_args(), "--"]
        status_file = os.path.join(tmp, "status")
        proc = q(os.path.join(root, "proc"))
        # The identity proof: a process made exactly as the script's reads its own
        # /proc/self/status into a file outside the new root; the script runs with /proc
        # unmounted (no /proc/sysrq-trigger for root).
        proof = [
            f"mount -t proc proc {proc}",
            " ".join(q(a) for a in [*become, "cat", "/proc/self/status"]) + f" > {q(status_file)}",
            f"umount {proc}",
        ]
        cd = ["/bin/sh", "-c", 'cd "$0" && exec "$@"', cwd] if cwd else []  # chroot starts in /
        inner = [*become, *cd, shell, "-c", script]
        command = "\n".join([*setup, *proof]) + "\nexec " + " ".join(q(a) for a in inner)
        p = subprocess.Popen(
            [*UNSHARE, "/bin/sh", "-c", command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(p)
            return RunResult(124, "", f"timed out after {timeout}s")
        except BaseException:
            _kill(p)
            raise
        status = pathlib.Path(status_file).read_text() if os.path.exists(status_file) else ""
        if not status:
            return RunResult(p.returncode or WRONG_IDENTITY, stdout, stderr)
        wrong = identity_mismatches(identity, status)
        if wrong:
            why = f"sandbox: the process is not {identity.describe()}: {'; '.join(wrong)}"
            return RunResult(WRONG_IDENTITY, stdout, why, status)
        return RunResult(p.returncode, stdout, stderr, status)
