"""Pod Security admission: what a namespace's `pod-security.kubernetes.io/enforce` level refuses.

Why: the API server's built-in PodSecurity admission plugin judges every Pod created in a
namespace against the level its labels name; a workload (Job, PyTorchJob, TrainJob) is only
warned about, but its controller's Pod create is refused, so the job never starts (the Job
controller records FailedCreate forever). The plan reads this model for every pod template of
every object in every namespace the program labels (plan/checks/pod_security.py).

Transcribed from k8s.io/pod-security-admission v0.35.6 (the newest v0.35 tag its repository
holds; `policy/` is unchanged from v0.35.0, read 2026-12-01), for the Kubernetes minor we pin
(`versions.KUBERNETES_VERSION`):
  policy/check_*.go     each check: id, level, the versions it changes at, its reason and detail
  policy/registry.go    baseline runs every baseline check; restricted adds the restricted ones
                        and drops the baseline checks they override (`OverrideCheckIDs`)
  api/helpers.go        `PolicyToEvaluate`, `ParseLevel` (a bad level enforces restricted),
                        `ParseVersion` (`latest` or `v1.N`; a bad version reads as latest)
Upstream's own test cases (the checks' `_test.go` tables) are tests/fixtures/upstream/
pod_security.yaml. Not modelled: the admission configuration's exemptions (EKS sets none) and
a Pod's update (only creation matters to a controller).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trainforge.core.versions import KUBERNETES_VERSION

ENFORCE = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION = "pod-security.kubernetes.io/enforce-version"
WARN = "pod-security.kubernetes.io/warn"  # warn and audit: read by no check, only spelled here
AUDIT = "pod-security.kubernetes.io/audit"
LEVELS = ("privileged", "baseline", "restricted")
LATEST = int(KUBERNETES_VERSION.split(".")[1])  # "latest" on the API server we pin
_VERSION = re.compile(r"^v1\.([0-9]|[1-9][0-9]*)$")  # api/helpers.go versionRegexp


@dataclass(frozen=True)
class Policy:
    """A namespace's enforce level and the Kubernetes minor its checks are taken at."""

    level: str
    minor: int
    problem: str = ""  # a label PodSecurity could not parse, as it reads it
    version: str = "latest"  # as the label says it (api.Version.String; `minor` is clamped)

    def __str__(self) -> str:
        return f"{self.level}:{self.version}"


def policy(labels: Mapping[str, Any] | None) -> Policy:
    """The enforce policy of a namespace with these labels (`PolicyToEvaluate`; EKS's default,
    a namespace without the label, is privileged)."""
    labels = labels or {}
    level, minor, problems = "privileged", LATEST, []
    if ENFORCE in labels:
        level = str(labels[ENFORCE])
        if level not in LEVELS:
            problems.append(f"{ENFORCE}={level!r} is not one of {', '.join(LEVELS)}: restricted")
            level = "restricted"  # ParseLevel fails closed
    if ENFORCE_VERSION in labels:
        raw = str(labels[ENFORCE_VERSION])
        m = _VERSION.match(raw)
        if raw != "latest" and m is None:
            problems.append(f'{ENFORCE_VERSION}={raw!r} is not "latest" or "v1.x": latest')
        elif m is not None:
            minor = min(int(m.group(1)), LATEST)  # a newer minor evaluates as the newest known
            return Policy(level, minor, "; ".join(problems), raw)
    return Policy(level, minor, "; ".join(problems))


@dataclass(frozen=True)
class Refusal:
    """One check a pod fails: upstream's check id, reason and detail, the field, the fix."""

    check: str
    reason: str
    detail: str

    @property
    def field(self) -> str:
        return FIELDS[self.check]

    @property
    def fix(self) -> str:
        return FIXES[self.check]

    def __str__(self) -> str:
        return f"{self.reason} ({self.detail})"


# --- helpers.go, visitor.go ----------------------------------------------------------------


def _plural(singular: str, plural: str, n: int) -> str:
    return singular if n == 1 else plural


def _quote(items: list[str]) -> str:
    return ", ".join(f'"{i}"' for i in items)


def _map(node: Any) -> Mapping[str, Any]:
    return node if isinstance(node, Mapping) else {}


def _containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """initContainers, containers, ephemeralContainers, in upstream's order."""
    out: list[Mapping[str, Any]] = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        out.extend(c for c in spec.get(key) or [] if isinstance(c, Mapping))
    return out


def _sc(node: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(node.get("securityContext"))


def _name(c: Mapping[str, Any]) -> str:
    return str(c.get("name", ""))


def _windows(spec: Mapping[str, Any]) -> bool:
    return _map(spec.get("os")).get("name") == "windows"


def _user_namespace(spec: Mapping[str, Any]) -> bool:
    """relaxPolicyForUserNamespacePod: hostUsers: false."""
    return spec.get("hostUsers") is False


def _setters(pod: bool, containers: list[str]) -> list[str]:
    out = ["pod"] if pod else []
    if containers:
        out.append(f"{_plural('container', 'containers', len(containers))} {_quote(containers)}")
    return out


Result = tuple[str, str] | None  # (reason, detail) when refused
CheckFn = Callable[[Mapping[str, Any], Mapping[str, Any]], Result]


# --- baseline ------------------------------------------------------------------------------


def _host_namespaces(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    bad = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k) is True]
    return ("host namespaces", ", ".join(bad)) if bad else None


def _privileged(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    bad = [_name(c) for c in _containers(spec) if _sc(c).get("privileged") is True]
    if not bad:
        return None
    return "privileged", (
        f"{_plural('container', 'containers', len(bad))} {_quote(bad)} must not set "
        "securityContext.privileged=true"
    )


CAPABILITIES_BASELINE = frozenset(
    {
        "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
        "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
    }
)  # fmt: skip


def _capabilities_baseline(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    bad: list[str] = []
    caps: set[str] = set()
    for c in _containers(spec):
        added = [str(a) for a in _map(_sc(c).get("capabilities")).get("add") or []]
        extra = [a for a in added if a not in CAPABILITIES_BASELINE]
        if extra:
            bad.append(_name(c))
            caps.update(extra)
    if not bad:
        return None
    return "non-default capabilities", (
        f"{_plural('container', 'containers', len(bad))} {_quote(bad)} must not include "
        f"{_quote(sorted(caps))} in securityContext.capabilities.add"
    )


def _host_path_volumes(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    bad = [
        str(v.get("name", "")) for v in spec.get("volumes") or [] if _map(v).get("hostPath")
        is not None
    ]  # fmt: skip
    if not bad:
        return None
    return "hostPath volumes", f"{_plural('volume', 'volumes', len(bad))} {_quote(bad)}"


def _host_ports(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    bad: list[str] = []
    ports: set[str] = set()
    for c in _containers(spec):
        used = [str(p.get("hostPort")) for p in c.get("ports") or [] if _map(p).get("hostPort")]
        if used:
            bad.append(_name(c))
            ports.update(used)
    if not bad:
        return None
    n = len(bad)
    return "hostPort", (
        f"{_plural('container', 'containers', n)} {_quote(bad)} {_plural('uses', 'use', n)} "
        f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}"
    )


def _hosts(handler: Any) -> list[str]:
    h = _map(handler)
    return [
        str(_map(h.get(k)).get("host"))
        for k in ("httpGet", "tcpSocket")
        if _map(h.get(k)).get("host")
    ]


def _host_probes(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    bad: list[str] = []
    hosts: set[str] = set()
    for c in _containers(spec):
        life = _map(c.get("lifecycle"))
        found = [
            *_hosts(c.get("livenessProbe")),
            *_hosts(c.get("readinessProbe")),
            *_hosts(c.get("startupProbe")),
            *_hosts(life.get("postStart")),
            *_hosts(life.get("preStop")),
        ]
        if found and _name(c) not in bad:
            bad.append(_name(c))
        hosts.update(found)
    if not bad:
        return None
    bad.sort()  # sets.List
    n = len(bad)
    return "probe or lifecycle host", (
        f"{_plural('container', 'containers', n)} {_quote(bad)} {_plural('uses', 'use', n)} "
        f"{_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} "
        f"{_quote(sorted(hosts))}"
    )


APPARMOR_TYPES = ("RuntimeDefault", "Localhost")
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _app_armor(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    setters: list[str] = []
    values: set[str] = set()
    pod = _map(_sc(spec).get("appArmorProfile"))
    if pod and pod.get("type") not in APPARMOR_TYPES:
        setters.append("pod")
        values.add(str(pod.get("type", "")))
    bad = []
    for c in _containers(spec):
        prof = _map(_sc(c).get("appArmorProfile"))
        if prof and prof.get("type") not in APPARMOR_TYPES:
            bad.append(_name(c))
            values.add(str(prof.get("type", "")))
    if bad:
        setters.append(f"{_plural('container', 'containers', len(bad))} {_quote(bad)}")
    annotations = sorted(
        f'{k}="{v}"'
        for k, v in _map(meta.get("annotations")).items()
        if str(k).startswith(APPARMOR_ANNOTATION)
        and not (not v or v == "runtime/default" or str(v).startswith("localhost/"))
    )
    listed = sorted(values) + annotations
    if annotations:
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    return _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(listed)), (
        f"{' and '.join(setters)} must not set AppArmor profile type to {_quote(listed)}"
    )


SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
SELINUX_TYPES_1_31 = SELINUX_TYPES | {"container_engine_t"}


def _selinux(allowed: frozenset[str]) -> CheckFn:
    def check(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
        types: set[str] = set()
        user = role = False

        def valid(opts: Mapping[str, Any]) -> bool:
            nonlocal user, role
            ok = True
            if str(opts.get("type") or "") not in allowed:
                ok = False
                types.add(str(opts.get("type") or ""))
            if opts.get("user"):
                ok, user = False, True
            if opts.get("role"):
                ok, role = False, True
            return ok

        pod_opts = _sc(spec).get("seLinuxOptions")
        pod_bad = isinstance(pod_opts, Mapping) and not valid(pod_opts)
        bad = []
        for c in _containers(spec):
            opts = _sc(c).get("seLinuxOptions")
            if isinstance(opts, Mapping) and not valid(opts):
                bad.append(_name(c))
        setters = _setters(pod_bad, bad)
        if not setters:
            return None
        data = [f"{_plural('type', 'types', len(types))} {_quote(sorted(types))}"] if types else []
        data += ["user may not be set"] if user else []
        data += ["role may not be set"] if role else []
        return "seLinuxOptions", (
            f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: "
            f"{'; '.join(data)}"
        )

    return check


def _proc_mount(relax: bool) -> CheckFn:
    def check(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
        if relax and _user_namespace(spec):
            return None
        bad: list[str] = []
        kinds: set[str] = set()
        for c in _containers(spec):
            pm = _sc(c).get("procMount")
            if pm is not None and pm != "Default":
                bad.append(_name(c))
                kinds.add(str(pm))
        if not bad:
            return None
        return "procMount", (
            f"{_plural('container', 'containers', len(bad))} {_quote(bad)} must not set "
            f"securityContext.procMount to {_quote(sorted(kinds))}"
        )

    return check


SECCOMP_TYPES = ("RuntimeDefault", "Localhost")


def seccomp_type(spec: Mapping[str, Any], c: Mapping[str, Any]) -> Any:
    """The seccomp profile type container `c` of pod `spec` runs with (None: none set, the
    runtime's Unconfined): its own `securityContext.seccompProfile` when it sets one (even
    one without a type), else the pod's, as the kubelet picks it and as the restricted check
    reads an unset one (a container without its own profile passes only on a valid pod one).
    The one reader of the field pair: `_seccomp_restricted` and the plan's CKV_K8S_31 rule
    (plan/checks/rules.py) both call it."""
    own = _sc(c).get("seccompProfile")
    profile = own if isinstance(own, Mapping) else _sc(spec).get("seccompProfile")
    return _map(profile).get("type")


SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_ANNOTATION = "container.seccomp.security.alpha.kubernetes.io/"


def _seccomp_annotations(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    """Versions before 1.19 read the alpha annotations (seccompProfileBaseline_1_0)."""
    notes = _map(meta.get("annotations"))

    def valid(v: Any) -> bool:
        return v in ("runtime/default", "docker/default") or str(v).startswith("localhost/")

    keys = [SECCOMP_POD_ANNOTATION]
    keys += [SECCOMP_CONTAINER_ANNOTATION + _name(c) for c in _containers(spec)]
    bad = sorted({f'{k}="{notes[k]}"' for k in keys if k in notes and not valid(notes[k])})
    if not bad:
        return None
    return "seccompProfile", f"forbidden {_plural('annotation', 'annotations', len(bad))} " + (
        ", ".join(bad)
    )


def _seccomp_baseline(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    values: set[str] = set()
    pod = _map(_sc(spec).get("seccompProfile"))
    pod_bad = bool(pod) and pod.get("type") not in SECCOMP_TYPES
    if pod_bad:
        values.add(str(pod.get("type", "")))
    bad = []
    for c in _containers(spec):
        prof = _map(_sc(c).get("seccompProfile"))
        if prof and prof.get("type") not in SECCOMP_TYPES:
            bad.append(_name(c))
            values.add(str(prof.get("type", "")))
    setters = _setters(pod_bad, bad)
    if not setters:
        return None
    return "seccompProfile", (
        f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
        f"{_quote(sorted(values))}"
    )


SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start",
    }
)  # fmt: skip
SYSCTLS_1_27 = SYSCTLS | {"net.ipv4.ip_local_reserved_ports"}
SYSCTLS_1_29 = SYSCTLS_1_27 | {
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip
SYSCTLS_1_32 = SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}


def _sysctls(allowed: frozenset[str]) -> CheckFn:
    def check(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
        names = [str(_map(s).get("name")) for s in _sc(spec).get("sysctls") or []]
        bad = [n for n in names if n not in allowed]
        return ("forbidden sysctls", ", ".join(bad)) if bad else None

    return check


def _windows_host_process(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    def on(sc: Mapping[str, Any]) -> bool:
        return _map(sc.get("windowsOptions")).get("hostProcess") is True

    bad = [_name(c) for c in _containers(spec) if on(_sc(c))]
    setters = _setters(on(_sc(spec)), bad)
    if not setters:
        return None
    return "hostProcess", (
        f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true"
    )


# --- restricted ----------------------------------------------------------------------------


def _not_windows(fn: CheckFn) -> CheckFn:
    """The 1.25 versions: a pod with spec.os.name windows passes."""

    def check(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
        return None if _windows(spec) else fn(meta, spec)

    return check


def _not_user_namespace(fn: CheckFn) -> CheckFn:
    """The 1.35 versions: a pod with hostUsers: false passes."""

    def check(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
        return None if _user_namespace(spec) else fn(meta, spec)

    return check


def escalation_allowed(c: Mapping[str, Any]) -> bool:
    """Whether container `c` may gain privileges (its process runs without no_new_privs):
    anything but an explicit `allowPrivilegeEscalation: false`, as check_allowPrivilegeEscalation
    reads it. The one reader of the field: the restricted check here and the plan's
    CKV_K8S_20 rule (plan/checks/rules.py) both call it."""
    return _sc(c).get("allowPrivilegeEscalation") is not False


def _privilege_escalation(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    bad = [_name(c) for c in _containers(spec) if escalation_allowed(c)]
    if not bad:
        return None
    return "allowPrivilegeEscalation != false", (
        f"{_plural('container', 'containers', len(bad))} {_quote(bad)} must set "
        "securityContext.allowPrivilegeEscalation=false"
    )


def _capabilities_restricted(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    no_drop: list[str] = []
    adding: list[str] = []
    caps: set[str] = set()
    for c in _containers(spec):
        cap = _sc(c).get("capabilities")
        if not isinstance(cap, Mapping):
            no_drop.append(_name(c))
            continue
        if "ALL" not in (cap.get("drop") or []):
            no_drop.append(_name(c))
        extra = [str(a) for a in cap.get("add") or [] if a != "NET_BIND_SERVICE"]
        if extra:
            adding.append(_name(c))
            caps.update(extra)
    details = []
    if no_drop:
        details.append(
            f"{_plural('container', 'containers', len(no_drop))} {_quote(no_drop)} must set "
            'securityContext.capabilities.drop=["ALL"]'
        )
    if adding:
        details.append(
            f"{_plural('container', 'containers', len(adding))} {_quote(adding)} must not "
            f"include {_quote(sorted(caps))} in securityContext.capabilities.add"
        )
    return ("unrestricted capabilities", "; ".join(details)) if details else None


ALLOWED_VOLUMES = (
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
    "persistentVolumeClaim", "projected", "secret",
)  # fmt: skip
RESTRICTED_VOLUMES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
)  # fmt: skip  (upstream's switch order: the first source set names the type)


def _restricted_volumes(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    bad: list[str] = []
    kinds: set[str] = set()
    for v in spec.get("volumes") or []:
        v = _map(v)
        if any(v.get(k) is not None for k in ALLOWED_VOLUMES):
            continue
        bad.append(str(v.get("name", "")))
        kinds.add(next((k for k in RESTRICTED_VOLUMES if v.get(k) is not None), "unknown"))
    if not bad:
        return None
    n = len(bad)
    return "restricted volume types", (
        f"{_plural('volume', 'volumes', n)} {_quote(bad)} {_plural('uses', 'use', n)} "
        f"{_plural('restricted volume type', 'restricted volume types', len(kinds))} "
        f"{_quote(sorted(kinds))}"
    )


def _run_as_non_root(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    pod = _sc(spec).get("runAsNonRoot")
    pod_bad, pod_ok = pod is False, pod is True
    explicit, implicit = [], []
    for c in _containers(spec):
        v = _sc(c).get("runAsNonRoot")
        if v is not None:
            if v is False:
                explicit.append(_name(c))
        elif not pod_ok:
            implicit.append(_name(c))
    setters = _setters(pod_bad, explicit)
    if setters:
        detail = f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false"
        return "runAsNonRoot != true", detail
    if implicit:
        return "runAsNonRoot != true", (
            f"pod or {_plural('container', 'containers', len(implicit))} {_quote(implicit)} "
            "must set securityContext.runAsNonRoot=true"
        )
    return None


def _run_as_user(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    bad = [_name(c) for c in _containers(spec) if _sc(c).get("runAsUser") == 0]
    setters = _setters(_sc(spec).get("runAsUser") == 0, bad)
    if not setters:
        return None
    return "runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0"


def _seccomp_restricted(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Result:
    values: set[str] = set()
    pod = _sc(spec).get("seccompProfile")
    pod_bad = isinstance(pod, Mapping) and pod.get("type") not in SECCOMP_TYPES
    if pod_bad:
        values.add(str(_map(pod).get("type", "")))
    explicit, implicit = [], []
    for c in _containers(spec):
        prof = _sc(c).get("seccompProfile")
        if isinstance(prof, Mapping):
            if prof.get("type") not in SECCOMP_TYPES:
                explicit.append(_name(c))
                values.add(str(prof.get("type", "")))
        elif seccomp_type(spec, c) not in SECCOMP_TYPES:
            implicit.append(_name(c))
    setters = _setters(pod_bad, explicit)
    if setters:
        return "seccompProfile", (
            f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
            f"{_quote(sorted(values))}"
        )
    if implicit:
        return "seccompProfile", (
            f"pod or {_plural('container', 'containers', len(implicit))} {_quote(implicit)} "
            'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"'
        )
    return None


# --- the registry --------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """A check: id, level, and (minimum minor, function, the baseline ids it overrides)."""

    id: str
    level: str
    versions: tuple[tuple[int, CheckFn, tuple[str, ...]], ...]

    def at(self, minor: int) -> tuple[CheckFn, tuple[str, ...]] | None:
        """The version in force at `minor` (the newest not newer), None before the first."""
        found = None
        for since, fn, overrides in self.versions:
            if since <= minor:
                found = (fn, overrides)
        return found


CHECKS = (
    Check("appArmorProfile", "baseline", ((0, _app_armor, ()),)),
    Check("capabilities_baseline", "baseline", ((0, _capabilities_baseline, ()),)),
    Check("hostNamespaces", "baseline", ((0, _host_namespaces, ()),)),
    Check("hostPathVolumes", "baseline", ((0, _host_path_volumes, ()),)),
    Check("hostPorts", "baseline", ((0, _host_ports, ()),)),
    Check("hostProbesAndHostLifecycle", "baseline", ((34, _host_probes, ()),)),
    Check("privileged", "baseline", ((0, _privileged, ()),)),
    Check("procMount", "baseline", ((0, _proc_mount(False), ()), (35, _proc_mount(True), ()))),
    Check(
        "seLinuxOptions",
        "baseline",
        ((0, _selinux(SELINUX_TYPES), ()), (31, _selinux(SELINUX_TYPES_1_31), ())),
    ),
    Check(
        "seccompProfile_baseline",
        "baseline",
        ((0, _seccomp_annotations, ()), (19, _seccomp_baseline, ())),
    ),
    Check(
        "sysctls",
        "baseline",
        (
            (0, _sysctls(SYSCTLS), ()),
            (27, _sysctls(SYSCTLS_1_27), ()),
            (29, _sysctls(SYSCTLS_1_29), ()),
            (32, _sysctls(SYSCTLS_1_32), ()),
        ),
    ),
    Check("windowsHostProcess", "baseline", ((0, _windows_host_process, ()),)),
    Check(
        "allowPrivilegeEscalation",
        "restricted",
        ((8, _privilege_escalation, ()), (25, _not_windows(_privilege_escalation), ())),
    ),
    Check(
        "capabilities_restricted",
        "restricted",
        (
            (22, _capabilities_restricted, ("capabilities_baseline",)),
            (25, _not_windows(_capabilities_restricted), ("capabilities_baseline",)),
        ),
    ),
    Check("procMount_restricted", "restricted", ((35, _proc_mount(False), ("procMount",)),)),
    Check("restrictedVolumes", "restricted", ((0, _restricted_volumes, ("hostPathVolumes",)),)),
    Check(
        "runAsNonRoot",
        "restricted",
        ((0, _run_as_non_root, ()), (35, _not_user_namespace(_run_as_non_root), ())),
    ),
    Check(
        "runAsUser",
        "restricted",
        ((23, _run_as_user, ()), (35, _not_user_namespace(_run_as_user), ())),
    ),
    Check(
        "seccompProfile_restricted",
        "restricted",
        (
            (19, _seccomp_restricted, ("seccompProfile_baseline",)),
            (25, _not_windows(_seccomp_restricted), ("seccompProfile_baseline",)),
        ),
    ),
)
BY_ID = {c.id: c for c in CHECKS}

# The field each check reads, as a finding names it (the checks' **Restricted Fields**)
FIELDS = {
    "appArmorProfile": "securityContext.appArmorProfile.type",
    "capabilities_baseline": "containers[*].securityContext.capabilities.add",
    "hostNamespaces": "spec.hostNetwork / hostPID / hostIPC",
    "hostPathVolumes": "spec.volumes[*].hostPath",
    "hostPorts": "containers[*].ports[*].hostPort",
    "hostProbesAndHostLifecycle": "containers[*] probe / lifecycle httpGet.host, tcpSocket.host",
    "privileged": "containers[*].securityContext.privileged",
    "procMount": "containers[*].securityContext.procMount",
    "seLinuxOptions": "securityContext.seLinuxOptions",
    "seccompProfile_baseline": "securityContext.seccompProfile.type",
    "sysctls": "spec.securityContext.sysctls[*].name",
    "windowsHostProcess": "securityContext.windowsOptions.hostProcess",
    "allowPrivilegeEscalation": "containers[*].securityContext.allowPrivilegeEscalation",
    "capabilities_restricted": "containers[*].securityContext.capabilities",
    "procMount_restricted": "containers[*].securityContext.procMount",
    "restrictedVolumes": "spec.volumes[*]",
    "runAsNonRoot": "securityContext.runAsNonRoot",
    "runAsUser": "securityContext.runAsUser",
    "seccompProfile_restricted": "securityContext.seccompProfile.type",
}

# What to do instead, per check (the team's FSx claim is the platform's shared storage)
FIXES = {
    "appArmorProfile": "set appArmorProfile.type RuntimeDefault or Localhost, or remove it",
    "capabilities_baseline": "add no capability beyond the container runtime's default set",
    "hostNamespaces": "remove hostNetwork/hostPID/hostIPC: pods reach each other over the pod "
    "network (EFA needs no host network: the device plugin exposes it)",
    "hostPathVolumes": "remove the hostPath volume: mount the team's FSx claim "
    "(persistentVolumeClaim) or an emptyDir for scratch",
    "hostPorts": "remove hostPort: reach the pod through a Service or its pod IP",
    "hostProbesAndHostLifecycle": "remove the probe's host (it defaults to the pod's IP)",
    "privileged": "remove securityContext.privileged",
    "procMount": "remove securityContext.procMount (or run the pod with hostUsers: false)",
    "seLinuxOptions": "remove the SELinux user/role and use an allowed type",
    "seccompProfile_baseline": "set seccompProfile.type RuntimeDefault or Localhost",
    "sysctls": "set only the namespaced, safe sysctls Pod Security allows",
    "windowsHostProcess": "remove windowsOptions.hostProcess",
    "allowPrivilegeEscalation": "set securityContext.allowPrivilegeEscalation: false on each "
    "container",
    "capabilities_restricted": 'set securityContext.capabilities.drop: ["ALL"] on each '
    "container and add at most NET_BIND_SERVICE",
    "procMount_restricted": "remove securityContext.procMount",
    "restrictedVolumes": "use only configMap, csi, downwardAPI, emptyDir, ephemeral, image, "
    "persistentVolumeClaim, projected or secret volumes (the team's FSx claim is a "
    "persistentVolumeClaim)",
    "runAsNonRoot": "set securityContext.runAsNonRoot: true (the pod's, or each container's)",
    "runAsUser": "run as a non-zero UID (the team's own: runAsUser from its namespace)",
    "seccompProfile_restricted": "set securityContext.seccompProfile.type: RuntimeDefault",
}


def checks_at(level: str, minor: int) -> list[tuple[str, CheckFn]]:
    """(id, function) of every check `level` runs at `minor`, baseline ids sorted then
    restricted ids sorted (registry.go `populate`: restricted is baseline less what its
    checks override, plus its own)."""
    if level not in ("baseline", "restricted"):
        return []
    chosen: dict[str, CheckFn] = {}
    overridden: set[str] = set()
    for check in CHECKS:
        found = check.at(minor)
        if found is None or (check.level == "restricted" and level == "baseline"):
            continue
        chosen[check.id] = found[0]
        if check.level == "restricted":
            overridden.update(found[1])
    level_of = {c.id: c.level for c in CHECKS}
    order = sorted(chosen, key=lambda i: (level_of[i] == "restricted", i))  # baseline first
    return [(i, chosen[i]) for i in order if i not in overridden]


def evaluate(pol: Policy, template: Mapping[str, Any]) -> list[Refusal]:
    """Every check of `pol` a pod of `template` ({metadata, spec}) fails; [] when admitted."""
    meta, spec = _map(template.get("metadata")), _map(template.get("spec"))
    out = []
    for check_id, fn in checks_at(pol.level, pol.minor):
        result = fn(meta, spec)
        if result is not None:
            out.append(Refusal(check_id, *result))
    return out


def message(pol: Policy, refusals: list[Refusal]) -> str:
    """The API server's refusal, as the Job controller's FailedCreate event carries it
    (admission.go: `violates PodSecurity "<level>:<version>": <reason> (<detail>), ...`)."""
    return f'violates PodSecurity "{pol}": ' + ", ".join(map(str, refusals))
