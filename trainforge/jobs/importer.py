"""`trainforge import FILE`: the YAML a newcomer already has -> a stack job entry, and why.

Why: a new user arrives with a PyTorchJob from a blog (Master + Workers, a script mounted from
a ConfigMap, `pytorch/pytorch` from Docker Hub, GPU limits, NCCL variables), a Kubeflow
Trainer v2 TrainJob or an indexed `batch/v1` Job. Nothing mapped it onto `trainforge:jobs`, so
they translated it by hand and met each platform rule one plan at a time. `import_workload`
does the translation once and says, for every field it changed or dropped, what became of it
and why (the image rules the plan applies, the pool a pod's GPUs fit, the variables the
platform owns).

YAML only: a Kubeflow SDK *program* (Python) is not read here. The pools, teams and image
routes come from the caller (`trainforge.import_cli` reads them from a stack), so this
module needs no Pulumi.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn

from trainforge.core import image_routes, labels, versions
from trainforge.core.contract import EFA_RESOURCE, GPU_RESOURCE, PoolFacts, TeamFacts, efa_count
from trainforge.core.expansion import dependency_order, references, unresolved
from trainforge.core.pods import QUEUE_LABEL
from trainforge.core.quantity import parse_quantity
from trainforge.jobs import code_paths, import_code, torchrun_args
from trainforge.jobs.codeship import USER_CODE_MOUNT
from trainforge.jobs.image_facts import stock_facts
from trainforge.jobs.import_image import dropped_torchless, torch_need, torchless, unknown_facts
from trainforge.jobs.import_limits import check_limits
from trainforge.jobs.import_read import (
    ImportProblem,
    Workload,
    check_shapes,
    get,
    job_namespace,
    owned_env,
    read_documents,
    same_quantity,
    workload,
)
from trainforge.jobs.import_workers import same_pods
from trainforge.jobs.pod import IMAGE_PULL_POLICY
from trainforge.jobs.tenancy import PRIORITY_LABEL
from trainforge.stack.jobs import IMAGE_RE

GPU = GPU_RESOURCE
_PYTHON = re.compile(r"^(?:/[\w./-]*/)?python(?:3(?:\.\d+)?)?$")
# pod and container fields that are translated (or knowingly dropped with their own reason)
_CONTAINER_KNOWN = {
    "name", "image", "command", "args", "env", "resources", "volumeMounts", "workingDir",
}  # fmt: skip
_DROPPED_WHY = {
    "ports": "the platform opens the rendezvous port (pytorchjob-port) and the metrics port",
    "securityContext": "the platform runs every pod non-root as the team's UID/GID",
    "serviceAccountName": "pods run as the team's ServiceAccount",
    "serviceAccount": "pods run as the team's ServiceAccount",
    "tolerations": "the platform tolerates the pool's own taints",
    "affinity": "placement is the pool's (and Kueue's topology, `topology`)",
    "nodeSelector": "read to choose the pool; the pool's own selector is set",
    "imagePullSecrets": "images come through the stack's pull-through cache or a public registry",
    "restartPolicy": "set by the backend; restarts follow the job's restartPolicy (docs/jobs.md)",
    "priorityClassName": "priority is the job's `priority` (a Kueue WorkloadPriorityClass)",
    "schedulerName": "Kueue admits the job; the default scheduler places its pods",
    "terminationGracePeriodSeconds": "derived from checkpoint.gracePeriod (+30 s)",
    "dnsPolicy": "the platform's default",
    "imagePullPolicy": f"the platform sets {IMAGE_PULL_POLICY} on every job's container",
}


@dataclass
class Imported:
    """The stack job entry, the files it ships (project-relative path -> text) and what
    changed on the way (one line each)."""

    source: str  # "PyTorchJob pytorch-distributed-ddp"
    entry: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)
    changes: list[str] = field(default_factory=list)
    # the files the original pod ran as programs (an execute bit in their ConfigMap volume's
    # mode): written executable, so that codeship ships them 0555 (read-only, runnable)
    executable: frozenset[str] = frozenset()

    def write_to(self, root: Path) -> None:
        """Write the files below `root` as the import names them, the executable ones with
        their execute bits (codeship.collect reads them from the file's mode): the one writer
        of `--out` and of the plan-flag rehearsal's scratch copy."""
        for rel, text in self.files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            path.chmod(0o755 if rel in self.executable else 0o644)


# --- translating -------------------------------------------------------------------------------


def _argv(c: Mapping[str, Any], file: str, at: str) -> list[str]:
    command, args = c.get("command"), c.get("args")
    if not command:
        raise ImportProblem(
            file,
            f"{at}.command",
            "not set, so the image's own ENTRYPOINT/CMD would run, which cannot be read from "
            "YAML; set command (e.g. [python, /workspace/train.py])",
        )
    argv = [*(command or []), *(args or [])]
    if not all(isinstance(a, str | int | float) and not isinstance(a, bool) for a in argv):
        raise ImportProblem(file, f"{at}.command", "expected a list of strings")
    return [str(a) for a in argv]


@dataclass
class _Program:
    kind: str  # "script" | "inline" | "module" | "command"
    path: str = ""  # the script's path in the container; the module
    args: list[str] = field(default_factory=list)
    code: str = ""  # python -c
    nproc: int | None = None


def _program(argv: list[str]) -> _Program:
    """What a container's argv runs: python SCRIPT, python -c CODE, python -m MOD, torchrun
    (its options read by torchrun's own reading, jobs/torchrun_args)."""
    run = torchrun_args.read(argv)
    if run is not None:
        nproc_text = run.value("nproc_per_node")
        nproc = int(nproc_text) if nproc_text and nproc_text.isdigit() else None
        if run.script and run.options.get("module"):
            return _Program("module", path=run.script[0], args=run.script[1:], nproc=nproc)
        if run.script:
            return _Program("script", path=run.script[0], args=run.script[1:], nproc=nproc)
        return _Program("command", args=argv)
    if argv and _PYTHON.match(argv[0]):
        i = 1
        while i < len(argv) and argv[i] in ("-u", "-B", "-O", "-OO", "-E", "-s"):
            i += 1
        if i + 1 < len(argv) and argv[i] == "-c":
            return _Program("inline", code=argv[i + 1], args=argv[i + 2 :])
        if i + 1 < len(argv) and argv[i] == "-m":
            return _Program("module", path=argv[i + 1], args=argv[i + 2 :])
        if i < len(argv):
            return _Program("script", path=argv[i], args=argv[i + 1 :])
    return _Program("command", args=argv)


def _gpus(resources: Any, file: str, gpu_at: str) -> int:
    """The pod's GPUs: its limit, which a request equals (`check_limits` refused any other, as
    the API server does); `gpu_at`: the limit's field path as the file spells it."""
    value = (get(resources, "limits") or {}).get(GPU, 0)
    try:
        gpus = int(str(value))
    except ValueError:
        raise ImportProblem(file, gpu_at, f"got {value!r}; expected a whole number") from None
    if gpus < 0:
        raise ImportProblem(file, gpu_at, f"got {gpus}; expected 0 or more")
    return gpus


def _size(
    entry: dict[str, Any],
    resources: Any,
    res_at: str,
    pool: PoolFacts,
    gpus: int,
    file: str,
    changes: list[str],
    pools: Mapping[str, PoolFacts] | None = None,
) -> None:
    """The pod's cpu and memory, kept as the entry's `cpu`/`memory` (the job model's size of
    a pod, its requests and limits both) when a pod of that size fits a node of the pool:
    the request, else the limit alone, which Kubernetes takes as the request. A limit that
    differs from the request is dropped and named (the platform's pods have requests ==
    limits, Guaranteed QoS: trainforge.jobs.pod.resources). A GPU pod's ask that its GPUs'
    share of the node covers gets the share (more, never less). A size no node of the pool
    holds (the rehearsal's reason: trainforge.jobs.capacity, as the stack's own check would
    refuse it): a cpu ask is dropped for the pool's default, said in its line (cpu is
    compressible: fewer CPUs slow the code, as a blog's `cpu: 4` on a 4-vCPU GPU node meant
    "the whole node"); a memory ask is refused (`_refuse_memory`: memory is not, and less
    than the code asks ends in an OOM kill). Other resources are dropped as unsupported."""
    from trainforge.jobs import capacity  # noqa: PLC0415
    from trainforge.jobs.wiring import default_size  # noqa: PLC0415 - pydantic

    limits, requests = get(resources, "limits") or {}, get(resources, "requests") or {}
    asked: dict[str, tuple[str, str]] = {}  # resource -> (the field it came from, value)
    for res in ("cpu", "memory"):
        kind = "requests" if res in requests else "limits" if res in limits else None
        if kind is None:
            continue
        value = str((requests if kind == "requests" else limits)[res])
        try:
            ok = parse_quantity(value) > 0
        except ValueError:
            ok = False
        if not ok:
            raise ImportProblem(
                file, f"{res_at}.{kind}.{res}", f"got {value!r}; expected a positive quantity "
                "(4, 500m, 8Gi)"
            )  # fmt: skip
        asked[res] = (f"{res_at}.{kind}.{res}", value)
    default = default_size(pool, gpus)
    share = (
        "its GPUs' share of the node"
        if gpus
        else "the CPU pods' default (2 CPUs and 8Gi, capped at what the node leaves)"
    )
    named = share if default is None else f"{share}: cpu {default[0]}, memory {default[1]}"
    if gpus and default is not None:  # the share, where it is at least the ask, is kept
        for res, i in (("cpu", 0), ("memory", 1)):
            if res in asked and parse_quantity(default[i]) >= parse_quantity(asked[res][1]):
                at, value = asked.pop(res)
                changes.append(
                    f"{at} {value}: dropped; a pod on {pool.name} gets {named}, at least "
                    f"what it asks; set `{res}` on the entry to ask for exactly {value}"
                )
    # memory judged alone (a millicore of cpu): a memory no node holds is refused, never
    # dropped with a cpu no node holds (dropping both shrank the memory)
    if "memory" in asked and default is not None and _memory_short(asked["memory"][1], gpus, pool):
        _refuse_memory(asked["memory"], pool, pools or {pool.name: pool}, gpus, file)
    if "cpu" in asked and default is not None:
        memory = asked.get("memory", ("", default[1]))[1]
        trial = capacity.rehearse(capacity.PodRequest.of(asked["cpu"][1], memory, gpus), 1, pool)
        short = [p.message for p in trial.problems if p.key in ("cpu", "memory")]
        if short:
            kept_memory = f"{share}: cpu {default[0]}"  # and the memory it asks, kept
            at, value = asked.pop("cpu")
            changes.append(
                f"{at} {value}: dropped, a pod of that size fits no node of {pool.name} "
                f"({short[0]}); a pod there gets {kept_memory if 'memory' in asked else named}"
            )
    for res, (at, value) in asked.items():
        entry[res] = value
        changes.append(
            f"{at} {value} -> {res} {value}: kept, as the pod's request and limit (without "
            f"it a pod on {pool.name} gets {named})"
        )
        limit = limits.get(res)
        if at.endswith(f"requests.{res}") and limit is not None and not same_quantity(limit, value):
            changes.append(
                f"{res_at}.limits.{res} {limit}: dropped; the limit is the request ({res} "
                f"{value}): the platform's pods have requests == limits (Guaranteed QoS)"
            )
    for kind, given in (("requests", requests), ("limits", limits)):
        for res, value in sorted(given.items()):
            if res == EFA_RESOURCE:
                changes.append(_efa_fate(f"{res_at}.{kind}.{res}", value, pool, gpus))
            elif res not in (GPU, "cpu", "memory"):
                changes.append(f"{res_at}.{kind}.{res} {value}: dropped (not supported)")


def _uses_under(m: import_code.Mount, uses: list[code_paths.PathUse]) -> str:
    """What the shipped code does under a mount the import drops (file:line), said on the
    mount's line: in the pod that path is on the read-only root file system, so a write there
    fails (the plan flags it, TRAINFORGE_POD_CANNOT_WRITE) and a read finds only what the
    image holds."""
    mine = [u for u in uses if code_paths.under(u.path, m.path)]
    if not mine:
        return ""
    shown = "; ".join(u.describe() for u in mine[:4])
    more = f"; and {len(mine) - 4} more" if len(mine) > 4 else ""
    return (
        f". The shipped code names paths under {m.path}: {shown}{more}; without the mount "
        "they are on the pod's read-only root file system, so a write there fails "
        "(FileNotFoundError) and a read finds only what the image holds"
    )


def _code_opens(moved: list[str], uses: list[code_paths.PathUse]) -> str:
    """What the shipped code itself names under the code mount paths it leaves (`moved`):
    the import rewrites the command's words only, never the code, and an entry's code is
    mounted at USER_CODE_MOUNT alone (entrypoint.codeDir), so in the pod `open("/code/cfg.yaml")`
    finds nothing there (FileNotFoundError) though the file is shipped. Each use is named
    (file:line) with the path the file has in the pod, so the user can change the line."""
    mine = [(u, m) for u in uses for m in moved if code_paths.under(u.path, m)]
    if not mine:
        return ""
    shown = "; ".join(
        f"{u.describe()} (in the pod {USER_CODE_MOUNT}{u.path[len(m.rstrip('/')) :]})"
        for u, m in mine[:4]
    )
    more = f"; and {len(mine) - 4} more" if len(mine) > 4 else ""
    return (
        f". The shipped code itself names paths under {', '.join(moved)}, which the import "
        f"does not rewrite: {shown}{more}; nothing is mounted there in the pod, so each fails "
        f"(FileNotFoundError): change the line to the {USER_CODE_MOUNT} path, or to one "
        "relative to the script's own folder"
    )


def _efa_fate(at: str, value: Any, pool: PoolFacts, gpus: int) -> str:
    """What the pod gets for an asked EFA count: the entry leaves `efa` unset, so the job
    model turns EFA on for a GPU pod on an EFA pool (trainforge.jobs.wiring) and the pod
    requests the pool's own count (`efa_count`: the node's all for a full-node pod, else its
    GPUs' share) with FI_PROVIDER=efa (trainforge.jobs.pod); elsewhere it gets none. Said as
    such, never "not supported" (the pod still gets EFA), with the rehearsal's reason where
    the asked count fits no node of the pool (32 is a p5.48xlarge's, a p4d.24xlarge has 4)."""
    from trainforge.jobs import capacity  # noqa: PLC0415

    if not pool.efa_interfaces or not gpus:
        why = (
            f"pool {pool.name} has no EFA interfaces"
            if not pool.efa_interfaces
            else "EFA carries NCCL traffic, and the pod has no GPUs"
        )
        return f"{at} {value}: dropped; {why}, so the pod gets none (NCCL goes over TCP)"
    n = efa_count(pool, gpus)
    line = (
        f"{at} {value} -> {EFA_RESOURCE} {n}: the pool's own EFA count (efa, on by default "
        f"for a GPU pod on an EFA pool): a pod on {pool.name} "
        f"({', '.join(pool.instance_types) or 'its nodes'}) requests {n} with FI_PROVIDER=efa"
    )
    try:
        asked = int(str(value))
    except ValueError:
        return line
    if asked == n:
        return line
    req = capacity.PodRequest.with_cpu(Fraction(0), Fraction(0), gpus, asked)
    shorts = [
        why for r in capacity.rooms(pool) for k, why in capacity.fit(r, req).short if k == "efa"
    ]
    if shorts:
        return f"{line}; {asked} would not have fit ({'; '.join(shorts)})"
    return line


def _memory_short(memory: str, gpus: int, pool: PoolFacts) -> str:
    """The rehearsal's reason no node of `pool` holds a pod asking `memory` (and a
    millicore, so that memory alone is judged); '' where one does."""
    from trainforge.jobs import capacity  # noqa: PLC0415

    trial = capacity.rehearse(capacity.PodRequest.of("1m", memory, gpus), 1, pool)
    return next((p.message for p in trial.problems if p.key == "memory"), "")


def _refuse_memory(
    asked: tuple[str, str], pool: PoolFacts, pools: Mapping[str, PoolFacts], gpus: int, file: str
) -> NoReturn:
    """A memory ask no node of `pool` holds: one line naming the field, the value, the
    pool's nodes (the rehearsal's numbers) and the pools whose nodes hold it (`--pool`),
    instead of the pool's default, which would give the code less memory than it asked."""
    from trainforge.jobs import capacity  # noqa: PLC0415
    from trainforge.jobs.wiring import default_size  # noqa: PLC0415 - pydantic

    at, value = asked
    nodes = _memory_short(value, gpus, pool) or ""
    nodes = nodes.split(". Ask for less", 1)[0]
    holds = []
    for other in pools.values():
        if other.name == pool.name or (gpus > other.gpus_per_node if gpus else other.gpus_per_node):
            continue
        size = default_size(other, gpus)
        cpu = size[0] if size is not None else "1"
        fit = capacity.rehearse(capacity.PodRequest.of(cpu, value, gpus), 1, other)
        if fit.fits and not any(p.key == "memory" for p in fit.problems):
            holds.append(other.name)
    if holds:
        more = f" (or {', '.join(holds[1:])})" if holds[1:] else ""
        instead = f"import with --pool {holds[0]}{more}, whose nodes hold it, or lower it"
    else:
        instead = "no pool of the stack holds it: add a pool with bigger nodes, or lower it"
    raise ImportProblem(
        file,
        at,
        f"got {value!r}; {nodes}. The import does not shrink a memory request (less memory "
        f"than the code asks ends in an OOM kill): {instead}",
    )


_TYPE_KEYS = (labels.INSTANCE_TYPE, "beta.kubernetes.io/instance-type")
_POOL_KEYS = (labels.KARPENTER_NODEPOOL, labels.POOL_LABEL, "eks.amazonaws.com/nodegroup")


def _holds(pool: PoolFacts, gpus: int) -> bool:
    """Whether a node of `pool` holds a pod with `gpus` GPUs (a CPU pod: a CPU pool)."""
    return gpus <= pool.gpus_per_node if gpus else not pool.gpus_per_node


def _has_quota(pool: PoolFacts, gpus: int, quota: Mapping[str, Mapping[str, Any]] | None) -> bool:
    """Whether the team has a nominal quota (its Kueue guarantee) in `pool` for the pod's
    resource (GPUs, else CPU); `quota` None: no Kueue, so no pool is refused for it."""
    if quota is None:
        return True
    return bool((quota.get(pool.name) or {}).get(GPU if gpus else "cpu"))


def choose_pool(
    pools: Mapping[str, PoolFacts],
    gpus: int,
    selector: Mapping[str, Any],
    wanted: str | None,
    file: str,
    gpu_at: str,
    selector_at: str = "nodeSelector",
    team: str = "",
    quota: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[PoolFacts, str]:
    """The pool a pod with `gpus` GPUs (and this nodeSelector) runs on, and why. A selector
    naming a pool or an instance type is obeyed or refused, never overridden: the pool it
    names must exist, hold the pod, carry a quota of `team` and (an instance type) have no
    other type its pods could land on (`quota`: pool -> resource ->
    the team's nominal quota, None without Kueue). `gpu_at`: the field path of the pod's GPU
    count, named when no pool holds that many."""
    if wanted is not None:
        if wanted not in pools:
            raise ImportProblem(
                file, "--pool", f"got {wanted!r}; the stack's pools: {', '.join(pools)}"
            )
        pool = pools[wanted]
        if not _holds(pool, gpus):
            have = f"{pool.gpus_per_node} GPU(s) per node" if pool.gpus_per_node else "no GPUs"
            raise ImportProblem(file, "--pool", f"pool {wanted!r} has {have}; the pod asks {gpus}")
        return pool, "chosen with --pool" + _borrowed(pool, gpus, team, quota)
    fits = [p for p in pools.values() if _holds(p, gpus)]
    if not fits:
        sizes = ", ".join(f"{p.name} ({p.gpus_per_node} GPU/node)" for p in pools.values())
        raise ImportProblem(
            file,
            gpu_at,
            f"{gpus} GPU(s) per pod, and no pool of the stack has that many per node: {sizes}",
        )
    named = [(str(k), str(v)) for k, v in selector.items() if k in _TYPE_KEYS + _POOL_KEYS]
    if named:
        return _selected(pools, gpus, named, file, selector_at, team, quota)
    # Kueue's own order for a job naming no pool: the team's quota first (queues.flavor_order)
    usable = [p for p in fits if _has_quota(p, gpus, quota)]
    best = min(usable or fits, key=lambda p: p.gpus_per_node)
    note = f" where team {team} has quota" if usable and usable != fits else ""
    note += _borrowed(best, gpus, team, quota)
    if gpus:
        return best, (
            f"the smallest GPU pool whose nodes hold {gpus} GPU(s) ({best.gpus_per_node} per "
            f"node){note}"
        )
    return best, f"a CPU pool (the pod asks no GPUs){note}"


def _selected(
    pools: Mapping[str, PoolFacts],
    gpus: int,
    named: list[tuple[str, str]],
    file: str,
    selector_at: str,
    team: str,
    quota: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[PoolFacts, str]:
    """The pool the selector's pool and instance-type keys name (all of them), or a one-line
    refusal naming the key, its value, why it cannot be used and the pools that can."""

    def matches(p: PoolFacts, key: str, value: str) -> bool:
        return value in p.instance_types if key in _TYPE_KEYS else p.name == value

    said = ", ".join(f"{k}: {v}" for k, v in named)
    where = f"{selector_at}[{named[0][0]}]" if len(named) == 1 else selector_at
    cands = [p for p in pools.values() if all(matches(p, k, v) for k, v in named)]
    asked = {v for k, v in named if k in _TYPE_KEYS}
    for p in cands:
        if _holds(p, gpus) and _has_quota(p, gpus, quota) and not _other_types(p, asked):
            return p, f"its nodeSelector names it ({said})"
    if not cands:
        types = ", ".join(f"{p.name} ({', '.join(p.instance_types)})" for p in pools.values())
        why = f"no pool of the stack matches it (pools: {types})"
    else:
        why = "; ".join(_why_not(p, gpus, team, quota, asked) for p in cands)
    mixed = [p for p in cands if _holds(p, gpus) and _has_quota(p, gpus, quota)]
    if mixed:  # only its other types stand in the way: one pool of the type, or --pool
        p = mixed[0]
        key = "nodeGroups" if p.kind == "node-group" else "nodePools"
        raise ImportProblem(
            file,
            where,
            f"got {repr(named[0][1]) if len(named) == 1 else said}; {why}: add a pool of "
            f"{', '.join(sorted(asked))} alone (trainforge:{key}[].instanceTypes) and import "
            f"again, or import with --pool {p.name}, which replaces the selector (its pods then "
            "run on any of its types)",
        )
    usable = [p for p in pools.values() if _holds(p, gpus) and _has_quota(p, gpus, quota)]
    where_quota = f" where team {team} has quota" if quota is not None else ""
    if usable:
        more = f" (or {', '.join(p.name for p in usable[1:])})" if usable[1:] else ""
        fix = (
            f"pools that hold the pod{where_quota}: {', '.join(p.name for p in usable)}; "
            f"import with --pool {usable[0].name}{more}, which replaces the selector"
        )
    else:
        fix = f"no pool of the stack holds the pod{where_quota}"
    borrow = [p.name for p in cands if _holds(p, gpus)]
    if borrow:  # the pool it names holds the pod: --pool keeps it, on borrowed quota
        fix += f" (or --pool {borrow[0]} to run there on what the team borrows from the cohort)"
    got = repr(named[0][1]) if len(named) == 1 else said
    raise ImportProblem(file, where, f"got {got}; {why}: {fix}")


def _other_types(p: PoolFacts, asked: Collection[str]) -> list[str]:
    """The pool's instance types a selector naming `asked` (none: any) does not: nodes of
    those may run the pod, so obeying the selector means a pool of its types alone."""
    return [t for t in p.instance_types if asked and t not in asked]


def _why_not(
    p: PoolFacts,
    gpus: int,
    team: str,
    quota: Mapping[str, Mapping[str, Any]] | None,
    asked: Collection[str] = (),
) -> str:
    """Why the pool `p` a selector names cannot take the pod."""
    if not _holds(p, gpus):
        have = f"{p.gpus_per_node} GPU(s) per node" if p.gpus_per_node else "no GPUs"
        return f"pool {p.name} has {have} and the pod asks {gpus}"
    if not _has_quota(p, gpus, quota):
        return f"team {team} has no nominal {'GPU' if gpus else 'CPU'} quota in pool {p.name}"
    return (
        f"pool {p.name} may launch any of its instance types ({', '.join(p.instance_types)}), "
        f"not only {', '.join(sorted(asked))}, so the pods could run on "
        f"{', '.join(_other_types(p, asked))}"
    )


def _borrowed(
    pool: PoolFacts, gpus: int, team: str, quota: Mapping[str, Mapping[str, Any]] | None
) -> str:
    """'' where the team has quota in `pool`; else what that means for its jobs there (its
    ClusterQueue lists every pool, with nominal quota 0 there: platform.queues.cluster_queue)."""
    if _has_quota(pool, gpus, quota):
        return ""
    return (
        f"; team {team} has no nominal {'GPU' if gpus else 'CPU'} quota in it (Kueue's split "
        "of trainforge:teams[].quota), so its jobs run there only on what they borrow from "
        "the cohort"
    )


def team_of_namespace(namespace: str | None, teams: Mapping[str, TeamFacts]) -> str | None:
    """The stack's team whose namespace `namespace` is (None: none is)."""
    return next((t.name for t in teams.values() if t.namespace == namespace), None)


def choose_team(
    given: str | None, namespace: str | None, teams: Mapping[str, TeamFacts]
) -> tuple[str, str]:
    """(the team a job is imported as, how it was chosen: `team_by` of `import_workload`):
    `--team`; else the team whose namespace the file's `metadata.namespace` is (a Kubeflow
    YAML names where it runs); else the stack's only team. Raises ValueError (the words after
    `--team: `) when none of these names one."""
    names = ", ".join(sorted(teams)) or "none"
    if given is not None:
        if given not in teams:
            raise ValueError(f"got {given!r}; the stack's teams: {names}")
        return given, "--team"
    if (by_ns := team_of_namespace(namespace, teams)) is not None:
        return by_ns, "namespace"
    if len(teams) == 1:
        return next(iter(teams)), "only"
    said = (
        f" (the file's metadata.namespace {namespace} is none of their namespaces)"
        if namespace
        else " (the file names no metadata.namespace)"
    )
    raise ValueError(f"required; the stack's teams: {names}{said}")


def namespace_line(ns: str, team: str, team_by: str, teams: Mapping[str, TeamFacts]) -> str:
    """What became of the file's `metadata.namespace`: the entry has none (a job runs in its
    team's namespace), so it is dropped, saying whose namespace it names. It said only
    "dropped" when it named another team's, and the job went to the `--team` given."""
    mine = teams[team].namespace if team in teams else team
    if team_by == "namespace":
        return (
            f"metadata.namespace {ns}: team {team}'s namespace -> team: {team} (no --team given; "
            "the job runs in its team's namespace)"
        )
    owner = team_of_namespace(ns, teams)
    if owner is not None and owner != team:
        return (
            f"metadata.namespace {ns}: dropped; it is team {owner}'s namespace, but the job is "
            f"imported as team {team} (--team), "
            f"so it runs in {team}'s namespace {mine}: import with --team {owner} to run it there"
        )
    if owner == team:
        return f"metadata.namespace {ns}: dropped; the entry's team {team} runs it there"
    return (
        f"metadata.namespace {ns}: dropped; no team of the stack has it, and the job runs in "
        f"team {team}'s namespace {mine}"
    )


def import_workload(
    path: Path,
    *,
    pools: Mapping[str, PoolFacts],
    team: str,
    out_dir: str,
    docker_hub_routed: bool,
    runtime_image: str | None,
    pool_name: str | None = None,
    backends: tuple[str, ...] = (),
    queue: str | None = None,
    quota: Mapping[str, Mapping[str, str]] | None = None,
    teams: Mapping[str, TeamFacts] | None = None,
    team_by: str = "--team",
) -> Imported:
    """Translate the job in the YAML file `path` into a `trainforge:jobs` entry.

    `out_dir`: the project-relative folder the job's code goes to (`<out_dir>/<job>/`);
    `docker_hub_routed`: the stack pulls Docker Hub through its cache with a credential;
    `runtime_image`: what a job without `image` runs (a sentence for the change lines);
    `backends`: the job backends the stack installs (a TrainJob stays one where it has
    Kubeflow Trainer); `queue`: the team's LocalQueue (None: no Kueue); `quota`: pool ->
    resource -> the team's nominal quota there, zero left out (None: no Kueue); `teams`: the
    stack's teams (their namespaces and claims, for what the file's namespace and claims
    are: None, unknown); `team_by`: how `team` was chosen (`choose_team`)."""
    file = str(path)
    docs = read_documents(path)
    changes: list[str] = []
    w = workload(docs, file, changes)
    ns = job_namespace(docs, file)
    if ns:
        changes.insert(0, namespace_line(ns, team, team_by, teams or {}))
    check_shapes(w, docs, file)
    check_limits(w, file)
    same_pods(w, file, changes)
    c, at = w.container, w.at
    entry: dict[str, Any] = {"name": w.name, "team": team}

    # where: resources and nodeSelector -> a pool and gpusPerWorker
    gpu_at = f"{w.resources_at}.limits[{GPU}]"
    gpus = _gpus(c.get("resources"), file, gpu_at)
    selector = w.pod.get("nodeSelector") or {}
    pool, why = choose_pool(pools, gpus, selector, pool_name, file, gpu_at,
                            f"{w.pod_at}.nodeSelector", team, quota)  # fmt: skip
    entry["pool"] = pool.name
    changes.append(f"pool {pool.name}: {why}")
    _metadata(w, queue, changes)
    if "preset" in w.extra:
        entry["preset"] = w.extra.pop("preset")
    entry["workers"] = w.workers
    if gpus:
        entry["gpusPerWorker"] = gpus
    changes.append(
        f"workers {w.workers}: the pods of the {w.kind}"
        + (f" ({w.pods})" if w.pods else "")
        + (f", {gpus} GPU(s) each -> gpusPerWorker {gpus}" if gpus else "")
    )
    _size(entry, c.get("resources"), w.resources_at, pool, gpus, file, changes, pools)

    # what: the program and its files
    argv = _argv(c, file, at)
    found = import_code.mounts(w, docs)
    working_dir = _working_dir_of(c.get("workingDir"), at, file)
    resolved = import_code.Resolved(argv)
    if working_dir is not None:  # relative paths, read from it as the pod reads them
        first = _program(argv)
        script = first.path if first.kind == "script" else ""
        resolved = import_code.resolve(argv, working_dir, found, docs, path.parent, script)
        argv = resolved.words
    program = _program(argv)
    code_dir = posixpath.join(out_dir, w.name)
    keep_image = False
    # a module of the image imports from it: nothing it names is shipped (said per mount)
    words = argv if program.kind != "module" else []
    shipped = import_code.ship(
        found, words, docs, path.parent, file, program.path if program.kind == "script" else ""
    )
    files = dict(shipped.files)
    via = ", ".join(shipped.sources)
    others = f", shipped with {len(files) - 1} other file(s) of it" if len(files) > 1 else ""
    mount = next((m for m in shipped.mounts if program.path.startswith(m.path + "/")), None)
    if program.kind == "inline":
        files["main.py"] = program.code if program.code.endswith("\n") else program.code + "\n"
        entry["entrypoint"] = {"script": posixpath.join(code_dir, "main.py")}
        changes.append(
            f"{at}.command python -c '...' -> entrypoint.script {code_dir}/main.py (the inline "
            "code, as a file)"
        )
    elif program.kind == "script" and mount is not None:
        script = program.path[len(mount.path) + 1 :]
        entry["entrypoint"] = {"script": posixpath.join(code_dir, script)}
        changes.append(
            f"{at}.command {program.path} ({via}) -> entrypoint.script {code_dir}/{script}"
            f"{others} (the ConfigMap's mount: {mount.at})"
        )
    elif program.kind == "script":
        keep_image = True
        entry["entrypoint"] = {"command": _moved_command(argv, resolved, shipped)}
        changes.append(
            f"{at}.command: {program.path} is not mounted from a ConfigMap, so it must be in "
            "the image: entrypoint.command, run as written on your image"
        )
        program.args = []
    elif program.kind == "module":
        keep_image = True
        entry["entrypoint"] = {"module": program.path}
        changes.append(
            f"{at}.command -m {program.path} -> entrypoint.module, imported from your image"
        )
    else:
        keep_image = True
        entry["entrypoint"] = {"command": _moved_command(argv, resolved, shipped)}
        changes.append(
            f"{at}.command {shlex.join(argv)[:60]}: entrypoint.command, run as written on your image"
        )
    if "command" in entry["entrypoint"] and files:
        entry["entrypoint"]["codeDir"] = code_dir
        changes.append(
            f"{via} (mounted by {', '.join(m.at for m in shipped.mounts)}) -> "
            f"entrypoint.codeDir {code_dir}: its {len(files)} file(s) shipped, mounted at "
            f"{USER_CODE_MOUNT}"
        )
    if shipped.executable:
        modes = ", ".join(f"{p} ({m:04o})" for p, m in sorted(shipped.executable.items()))
        rest = " (the others 0444)" if len(shipped.executable) < len(files) else ""
        changes.append(
            f"file modes of {via}: {modes} -> shipped executable with mode 0555{rest}: "
            "read-only code, runnable as the original pod ran it"
        )
    program.args = [_moved(a, resolved, shipped) for a in program.args]
    # the shipped code's paths (code_paths: the plan's one reader)
    uses = code_paths.path_uses((posixpath.join(code_dir, p), t) for p, t in files.items())
    moved = [m.path for m in shipped.mounts if m.path != USER_CODE_MOUNT]
    if moved:
        changes.append(
            f"paths under {', '.join(moved)} in the command -> {USER_CODE_MOUNT}/...: the "
            f"shipped code is mounted at {USER_CODE_MOUNT}{_code_opens(moved, uses)}"
        )
    for gone in shipped.missing:
        changes.append(
            f"{at}.command names {gone}, which no shipped file holds (not in {via}): the pod "
            f"will not find it; put it beside the YAML (or in the ConfigMap) and import again"
        )
    if program.args and program.kind != "command":
        entry["entrypoint"]["args"] = program.args
    _working_dir(
        working_dir, entry, keep_image, at, file, changes, resolved, bool(files),
        inline=program.kind == "inline",
    )  # fmt: skip
    if program.nproc is not None:
        w.extra.setdefault("procsPerWorker", program.nproc)
    if "procsPerWorker" in w.extra and gpus and w.extra["procsPerWorker"] != gpus:
        changes.append(
            f"procsPerWorker {w.extra.pop('procsPerWorker')}: dropped; on GPU pods it is one "
            f"process per GPU ({gpus})"
        )

    # the image
    image = c.get("image")
    torchrun = (entry.get("procsPerWorker") or w.extra.get("procsPerWorker") or gpus or 1) > 1
    need = "" if keep_image else torch_need(torchrun or "elastic" in w.extra, files.items())
    entry_image = _image(
        image, keep_image, docker_hub_routed, runtime_image, at, file, changes, need
    )
    if entry_image:
        entry["image"] = entry_image

    # env: NCCL_* and the user's own kept; what the platform owns dropped
    env: dict[str, str] = {}
    for i, e in enumerate(c.get("env") or []):
        name = get(e, "name")
        if not isinstance(name, str):
            raise ImportProblem(file, f"{at}.env[{i}].name", "missing")
        if owned_env(name):
            changes.append(
                f"{at}.env {name}: dropped; the platform or operator sets it on every pod"
            )
        elif "valueFrom" in e:
            changes.append(f"{at}.env {name}: dropped; {_value_from_why(e['valueFrom'])}")
        else:
            env[name] = str(e.get("value", ""))
    if env:
        # in the order the stack gives them (core.expansion.dependency_order), so what is
        # printed is the order the pods get
        entry["env"] = dict(dependency_order(env.items()))
        changes += _env_order_changes(c.get("env") or [], env, at)
        nccl = sorted(n for n in env if n.startswith("NCCL_"))
        if nccl:
            changes.append(
                f"env {', '.join(nccl)}: kept (your value replaces the platform's default)"
            )

    # the pod's other fields
    for m in found:
        if m in shipped.mounts:
            continue
        if m.path == "/dev/shm" and (shm := import_code.shm_size(m.volume)) is not None:
            entry["shmSize"] = shm
            changes.append(f"{m.at} {m.name} (/dev/shm, sizeLimit {shm}) -> shmSize {shm}: kept")
            continue
        why = import_code.dropped_why(m, (teams or {}).get(team), teams or {})
        if program.kind == "module" and get(m.volume, "configMap", "name"):
            why = "entrypoint.module imports from your image, so no ConfigMap file is shipped"
        changes.append(f"{m.at} {m.name} ({m.path}): dropped; {why}{_uses_under(m, uses)}")
    for k in sorted(set(c) - _CONTAINER_KNOWN - {"resourcesPerNode", "numNodes", "numProcPerNode"}):
        if k == "envFrom":
            for src in c[k] if isinstance(c[k], list) else []:
                changes.append(f"{at}.envFrom: dropped; {_value_from_why(src)}")
            continue
        changes.append(f"{at}.{k}: dropped; {_DROPPED_WHY.get(k, 'not supported')}")
    # an indexed Job's pod restartPolicy: said with its retries (jobs/import_restarts.py)
    said = {"restartPolicy"} if w.kind == "Job" else set()
    for k in sorted(set(w.pod) - {"containers", "volumes"} - said):
        reason = _DROPPED_WHY.get(k, "not supported")
        if k == "nodeSelector":
            reason = _selector_fate(selector, pool_name, pool.name)
        changes.append(f"{w.pod_at}.{k}: dropped; {reason}")
    for o in w.others:  # a Worker's own such fields (one equal to Master's is said above)
        for k in sorted(set(o.container) - _CONTAINER_KNOWN):
            if o.container[k] != c.get(k):
                changes.append(f"{o.at}.{k}: dropped; {_DROPPED_WHY.get(k, 'not supported')}")
        for k in sorted(set(o.pod) - {"containers", "volumes", "nodeSelector"}):
            if o.pod[k] != w.pod.get(k):
                changes.append(f"{o.pod_at}.{k}: dropped; {_DROPPED_WHY.get(k, 'not supported')}")
    if w.kind == "TrainJob":
        # the runtime's fate is the backend's: said once the backend is known, so that it
        # never speaks of a ClusterTrainingRuntime for a job that becomes a PyTorchJob
        # what the runtime is (its mlPolicy: jobs/import_read.py `_runtime`) said with it
        what = f" ({w.runtime_said})" if w.runtime_said else ""
        ref = f"spec.runtimeRef {w.runtime_ref}: dropped{what}; " if w.runtime_ref else ""
        if "trainjob" in backends:
            entry["backend"] = "trainjob"
            if ref:
                changes.append(
                    f"{ref}on the trainjob backend the job runs on the platform's own "
                    "ClusterTrainingRuntime"
                )
            changes.append(
                "kind TrainJob -> backend: trainjob (the stack installs Kubeflow Trainer)"
            )
        else:
            installed = ", ".join(backends) or "its default"
            if ref:
                changes.append(
                    f"{ref}the job runs on the stack's backend ({installed}), which has no "
                    "training runtime"
                )
            changes.append(
                f"kind TrainJob -> the stack's backend ({installed}): it installs no Kubeflow "
                "Trainer; add trainjob to trainforge:jobBackends and `backend: trainjob` to keep one"
            )
    entry.update(w.extra)
    return Imported(
        f"{w.kind} {w.name}",
        entry,
        {posixpath.join(code_dir, p): t for p, t in files.items()},
        changes,
        frozenset(posixpath.join(code_dir, p) for p in shipped.executable),
    )


# no route feeds a job's variable from a Secret: an entry's `env` is written as literal text
# into the job's object and its pods, which the team's members read (docs/teams.md, Team access)
_NO_SECRET = (
    "a job entry cannot take a variable from a Secret: its env values are written as plain "
    "text into the job and its pods, which every member of the team can read, so keep the "
    "credential out of the entry, your code and your image. The one credential the platform "
    "mounts is the team's MLflow login (docs/teams.md, MLflow), and the platform's "
    "NetworkPolicies give the pods no internet (docs/teams.md, Network): put what the token "
    "fetches on the team's FSx or its S3 prefix"
)


def _value_from_why(value_from: Any) -> str:
    """Why an `env[].valueFrom` (or an `envFrom`) is dropped, by what it reads: never advice to
    put a credential in code or an image."""
    refs = set(value_from) if isinstance(value_from, Mapping) else set()
    if refs & {"secretKeyRef", "secretRef"}:
        return _NO_SECRET
    if refs & {"configMapKeyRef", "configMapRef"}:
        return "a job entry's env holds literal values only: set the ConfigMap's value in `env`"
    return (
        "a job entry's env holds literal values only, not field or resource refs (the "
        "contract's variables give each pod its rank and sizes: docs/jobs.md)"
    )


def _selector_fate(selector: Mapping[str, Any], wanted: str | None, pool: str) -> str:
    """What became of the pod's nodeSelector, as `choose_pool` read it."""
    own = "the pool's own selector is set"
    if wanted is not None:
        return f"--pool chose the pool; {own}"
    named = [f"{k}: {v}" for k, v in selector.items() if k in _TYPE_KEYS + _POOL_KEYS]
    if named:
        return f"{', '.join(named)} chose pool {pool}; {own}"
    return f"it names no pool or instance type, so it chose nothing; {own}"


# what becomes of a job's metadata labels the platform sets itself (else: not supported)
_LABEL_WHY = {
    PRIORITY_LABEL: "priority is the job's `priority` (a Kueue WorkloadPriorityClass)",
}


def _metadata(w: Workload, queue: str | None, changes: list[str]) -> None:
    """One line per label and annotation of the job's and its pods' metadata: the entry has
    neither, so each is dropped; the queue label is replaced by the team's LocalQueue."""
    for at, meta in w.metadata:
        for kind in ("labels", "annotations"):
            for k, v in sorted((meta.get(kind) or {}).items()):
                line = f"{at}.{kind}.{k} {v}: dropped; "
                if kind == "labels" and k == QUEUE_LABEL:
                    line += (
                        f"the job uses its team's LocalQueue `{queue}`"
                        if queue is not None
                        else "the stack runs no Kueue, so no queue admits the job"
                    )
                else:
                    line += _LABEL_WHY.get(k, f"not supported (a job entry has no {kind})")
                changes.append(line)


def _working_dir_of(value: Any, at: str, file: str) -> str | None:
    """The container's workingDir (None: unset, the image's WORKDIR), an absolute path as the
    kubelet needs it to start the container there."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith("/"):
        raise ImportProblem(
            file, f"{at}.workingDir", f"got {value!r}; expected an absolute path, such as /app"
        )
    return value


def _moved(word: str, resolved: import_code.Resolved, shipped: import_code.Shipped) -> str:
    """`word` as the platform's pod must spell it: under USER_CODE_MOUNT where it named a
    shipped mount (`Shipped.rewrite`); a plain word the container's workingDir made absolute
    (`import_code.resolve`) relative again, from USER_CODE_MOUNT, where the shipped code runs
    (the pods' and run-local's working directory), so it stays the file the original read."""
    flag, eq, value = word.partition("=") if word.startswith("--") else ("", "", word)
    if value in resolved.made_absolute:
        for m in shipped.mounts:
            if value.startswith(m.path + "/"):
                return f"{flag}{eq}{value[len(m.path) + 1 :]}"
    return shipped.rewrite(word)


def _moved_command(
    argv: list[str], resolved: import_code.Resolved, shipped: import_code.Shipped
) -> list[str]:
    """The command's words as the platform's pod must spell them (`_moved`); its program
    keeps a directory (`/workspace/run.sh`, not `run.sh`, which the kubelet's exec would look
    up on PATH)."""
    return [shipped.rewrite(argv[0]), *(_moved(a, resolved, shipped) for a in argv[1:])]


def _working_dir(
    value: str | None,
    entry: dict[str, Any],
    keep: bool,
    at: str,
    file: str,
    changes: list[str],
    resolved: import_code.Resolved,
    ships: bool,
    inline: bool = False,
) -> None:
    """The container's workingDir: kept as entrypoint.workingDir for code of the image that
    ships nothing (its relative paths, `python train.py` or `-m pkg`, resolve there; without
    it the pod runs from the image's WORKDIR); dropped and said where code is shipped, which
    runs from its mount (USER_CODE_MOUNT): the relative paths it gave that named files of a
    ConfigMap are shipped (`import_code.resolve`); any other the command still names would be
    read from the mount instead, which is said in one line naming the field."""
    if value is None:
        return
    if keep and not ships:
        entry["entrypoint"]["workingDir"] = value
        changes.append(
            f"{at}.workingDir {value} -> entrypoint.workingDir {value}: kept; your code runs "
            "from it, as in your file"
        )
        return
    # what the command still names relative to workingDir (those it named in a ConfigMap
    # are absolute in `resolved.words`); a `python -c` program's text is code, not paths
    left = [] if inline else import_code.relative_left(resolved.words)
    if value == USER_CODE_MOUNT or not left:
        read = ", ".join(f"{rel} ({full})" for full, rel in resolved.made_absolute.items())
        changes.append(
            f"{at}.workingDir {value}: dropped; the shipped code runs from its own mount, "
            f"{USER_CODE_MOUNT}, which holds its files"
            + (
                f" (the relative paths the command names, read from {value} as the pod "
                f"reads them: {read}, are the ConfigMap's files, shipped and named from "
                f"{USER_CODE_MOUNT})"
                if read
                else ""
            )
        )
        return
    raise ImportProblem(
        file,
        f"{at}.workingDir",
        f"got {value!r}; the command names {', '.join(left)} relative to it, which no "
        f"ConfigMap of the file holds, and the platform runs shipped code from "
        f"{USER_CODE_MOUNT}, where they would not be found: write them as absolute paths "
        f"({posixpath.join(value, left[0])}) or put the files in the ConfigMap",
    )


def _image(
    image: Any,
    keep: bool,
    routed: bool,
    runtime_image: str | None,
    at: str,
    file: str,
    changes: list[str],
    need: str = "",
) -> str | None:
    """The entry's image (None: the platform's), judged as the plan judges it; `need`: why the
    pods of shipped code need torch ('' where nothing says so), which an image known to lack
    it cannot give (the runtime image runs instead) and one of unknown facts may not."""
    if image is None:
        if keep:
            raise ImportProblem(file, f"{at}.image", "missing; the command runs on your image")
        return None
    if not isinstance(image, str) or not IMAGE_RE.match(image):
        raise ImportProblem(file, f"{at}.image", f"got {image!r}; expected an image reference")
    host, repo, tag, digest = image_routes.parts(image)
    pinned = bool(digest) or (bool(tag) and tag != "latest")
    hub = image_routes.is_docker_hub(image)
    reachable = not hub or (routed and not image_routes.digest_pinned(image))
    runs = runtime_image or f"the stock image {versions.PYTORCH_IMAGE}"
    base = torchless(image)
    if not keep and base and need:
        changes.append(dropped_torchless(image, base, need, runs))
        return None
    known = stock_facts(image) is not None
    checked = "; the plan checks it against the pool (CUDA build, driver)"
    if keep:
        hub_line = (
            "the plan flags it (TRAINFORGE_DOCKER_HUB): nodes would pull it from Docker Hub "
            "anonymously; copy it to ECR or set trainforge:images.dockerHubCredentialArn"
        )
        if not pinned:
            # both, when both apply: pinned alone, the plan then flags it for Docker Hub
            changes.append(
                f"image {image}: kept (your command needs it); pin a tag or digest, the plan refuses :latest"
                + (f"; pinned, {hub_line}" if not reachable else "")
            )
        elif not reachable:  # the plan's verdicts: `trainforge import` lists them from its checks
            changes.append(
                f"image {image}: kept (your command needs it); nodes would pull it from Docker Hub "
                "anonymously (TRAINFORGE_DOCKER_HUB): copy it to ECR or set "
                "trainforge:images.dockerHubCredentialArn"
            )
        elif base:
            changes.append(
                f"image {image}: kept (your command needs it); the Docker official {base} image "
                "carries no torch, so your command must not need it"
            )
        else:
            changes.append(
                f"image {image}: kept{checked}" if known else unknown_facts(image, "", runs)
            )
        return image
    if not reachable:
        changes.append(
            f"image {image}: dropped; it comes from Docker Hub and this stack pulls Docker Hub "
            "without a credential (10 anonymous pulls per hour per NAT address: "
            f"TRAINFORGE_DOCKER_HUB). The job runs {runs}, which has torch and the pieces the "
            "platform's features need; to keep yours, set trainforge:images.dockerHubCredentialArn "
            "and add image back"
        )
        return None
    if not pinned:
        changes.append(
            f"image {image}: dropped; unpinned (:latest), which the plan refuses. The job runs {runs}"
        )
        return None
    cache = " (pulled through the stack's cache)" if hub else ""
    if known:
        changes.append(f"image {image}: kept{cache}{checked}")
    else:
        changes.append(unknown_facts(image, need, runs).replace(": kept;", f": kept{cache};", 1))
    return image


def _env_order_changes(source: list[Any], kept: dict[str, str], at: str) -> list[str]:
    """What Kubernetes' `$(VAR)` expansion (core.expansion) makes of the kept variables, where
    the entry differs from the source: a value that referred to a later variable (the source
    pod saw the literal; the entry's dependency order puts it after, so it now expands) or to
    one that was dropped (the pod sees the literal; the plan names it too)."""

    order = [(get(e, "name"), e.get("value") if "valueFrom" not in e else None) for e in source]
    out = []
    for u in unresolved([(str(n), v) for n, v in order]):
        if u.where == "later" and u.name in kept and u.ref in kept:
            out.append(
                f"{at}.env {u.name}: after {u.ref}, which it refers to (Kubernetes expands "
                f"$(VAR) only from earlier variables: your pods saw the literal $({u.ref}), "
                "these get its value)"
            )
    # a valueFrom the entry cannot carry (not a name the platform or operator owns: those
    # the plan judges, by the backend that runs the entry)
    dropped = {str(n) for n, _ in order} - set(kept) - {n for n, _ in order if owned_env(str(n))}
    for name, value in dependency_order(kept.items()):
        for ref in references(value):
            if ref in dropped:
                out.append(
                    f"{at}.env {name}: refers to $({ref}), dropped above, so the pod sees the "
                    f"literal $({ref}): set {ref} in the entry's env or change {name}"
                )
    return out
