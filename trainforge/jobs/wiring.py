"""Resolving a job against the platform contract, and the checks that need the platform.

`resolve_job` fills a JobSpec's pool-dependent defaults (GPUs, CPU, memory, /dev/shm, EFA)
and its backend, and rejects what can never run there: more GPUs than the pool's instance
types have, EFA on a pool without it, a pod bigger than what its node leaves after the kubelet
and the DaemonSets, more pods at once than the pool can hold (`capacity`), a job bigger than
the team's quota, a backend whose controller the platform does not install or that cannot run
the job (`trainforge.jobs.backends`), a model that does not fit in the pool's GPU memory
(`trainforge.jobs.estimate.check_fit`).
The platform side of a job (`JobTarget`, from `contract.PlatformContract.target`) is typed:
see `trainforge.core.contract`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction
from typing import Any

from trainforge.core import catalog
from trainforge.core.contract import (
    GPU_RESOURCE,
    JobTarget,
    PoolFacts,
    PoolLimits,
    TeamQuota,
    efa_count,
)
from trainforge.core.errors import JobConfigError
from trainforge.core.quantity import figure, format_mebibytes, parse_quantity, plain
from trainforge.jobs import backends, capacity, image_facts, images, quota, storage
from trainforge.jobs import images as images_mod
from trainforge.jobs.estimate import check_fit
from trainforge.jobs.image_facts import (
    STOCK_SOURCE,
    UNKNOWN,
    ImageFacts,
    facts_for,
    stock_facts,
)
from trainforge.jobs.spec import JobSpec

__all__ = [
    "check_quota",
    "default_size",
    "resolve_job",
    "sizing_rule",
]

# Fallback sizes when the pool does not say how big its nodes are (a hand-built contract
# without node sizes): small enough to fit every GPU instance type (g4dn.xlarge leaves
# 3.7 CPUs and 13.9 GiB to pods) and useful for tests.
_FALLBACK_CPU_PER_SHARE = 3
_FALLBACK_MEM_PER_SHARE = 12 * 2**30
_SHM_FRACTION = Fraction(1, 4)
_SHM_MAX = 64 * 2**30

# What a CPU-only worker asks for when the job does not say (docs/jobs.md, "Sizing"): a
# stated, modest default rather than a whole node, so that a first CPU job fits a team's
# quota next to others; capped at what the pool's smallest node leaves to pods.
CPU_WORKER_CPU = "2"
CPU_WORKER_MEMORY = "8Gi"


def _cpu_job_size(pool: PoolFacts) -> tuple[str, str]:
    """The CPU-only default, capped at what the smallest node type leaves to pods."""
    whole = capacity.default_size(pool, Fraction(1))
    cpu, memory = CPU_WORKER_CPU, CPU_WORKER_MEMORY
    if whole is not None:
        if parse_quantity(whole[0]) < parse_quantity(cpu):
            cpu = whole[0]
        if parse_quantity(whole[1]) < parse_quantity(memory):
            memory = whole[1]
    return cpu, memory


def default_size(pool: PoolFacts, gpus: int) -> tuple[str, str] | None:
    """The cpu and memory a pod gets when the job does not say: a GPU pod its GPUs' share of
    what the smallest node type leaves after the kubelet and the DaemonSets (the whole of it
    when it takes every GPU), a CPU pod the stated default (`CPU_WORKER_*`). None when the
    pool's nodes are unknown (GPU pods; the caller falls back to a fixed size per GPU)."""
    if not gpus:
        return _cpu_job_size(pool)
    return capacity.default_size(pool, Fraction(gpus, pool.gpus_per_node or gpus))


def below_share(
    limits: Mapping[str, Fraction], pool: PoolFacts, gpus: int
) -> dict[str, tuple[Fraction, str]]:
    """{resource: (limit, share as a quantity: "3600m", "13780Mi")} for the cpu and memory `limits` of a pod with `gpus` GPUs of
    `pool` that are below what the platform gives its own such pod (`default_size`: its GPUs'
    share of the smallest node, requests = limits): a pod sized that way is OOM-killed or
    throttled under less than its GPUs come with. {} without GPUs or known nodes."""
    size = default_size(pool, gpus) if gpus else None
    if size is None:
        return {}
    share = dict(zip(("cpu", "memory"), size, strict=True))
    return {
        r: (limits[r], share[r])
        for r in ("cpu", "memory")
        if r in limits and limits[r] < parse_quantity(share[r])
    }


def _per_type(job: JobSpec, pool: PoolFacts, gpus: int) -> str:
    """What a pod takes of each instance type of the pool, by the packing model's pods per node
    (capacity.per_node_by_type): a 4-GPU pod is the whole of a g5.12xlarge, half a g5.48xlarge."""
    out = []
    for node, n in capacity.per_node_by_type(job, pool):
        held = f"{n} pod{'s' if n > 1 else ''} per node" if n else "does not fit"
        if n == 1 and gpus == node.gpus:
            held = "the whole node"
        out.append(f"{node.instance_type} {gpus} of {node.gpus} ({held})")
    return ", ".join(out)


def sizing_rule(job: JobSpec, pool: PoolFacts) -> str:
    """One line saying how a resolved job's cpu and memory were chosen (the plan prints it):
    the GPU share, the CPU default, or the job's own values."""
    gpus = job.gpus_per_worker or 0
    auto = default_size(pool, gpus)
    parts = []
    for key, value, default in (
        ("cpu", job.cpu, auto[0] if auto else None),
        ("memory", job.memory, auto[1] if auto else None),
    ):
        parts.append(f"{key} {value}" + ("" if value == default else " (set by the job)"))
    size = ", ".join(parts)
    if gpus and pool.gpus_per_node:
        share = "all that" if gpus >= pool.gpus_per_node else f"{gpus}/{pool.gpus_per_node} of what"
        rule = (
            f"{gpus} GPU{'s' if gpus > 1 else ''} per pod: {_per_type(job, pool, gpus)}; cpu and "
            f"memory: {share} the smallest node leaves after the kubelet and DaemonSets"
        )
    else:
        rule = (
            f"CPU job: the stated default (cpu {CPU_WORKER_CPU}, memory {CPU_WORKER_MEMORY}"
            " per worker, capped at what the smallest node leaves)"
        )
    return f"{rule} -> {size}"


def resolve_job(job: JobSpec, target: JobTarget, where: str = "job") -> JobSpec:
    """Fill pool-dependent defaults and check the job can ever run on `target`."""
    backend = backends.resolve_backend(job, target, where)
    pool = target.pool
    gpus = job.gpus_per_worker
    if gpus is None:
        gpus = pool.gpus_per_node
    if gpus > pool.gpus_per_node:
        types = ", ".join(pool.instance_types) or "its instance types"
        if not pool.gpus_per_node:
            raise JobConfigError(
                f"{where}.gpusPerWorker",
                gpus,
                f"pool {pool.name!r} ({types}) has no GPUs per node; use 0 or a GPU pool",
            )
        # Pool facts are what every instance type of the pool guarantees (the smallest), so
        # that a pod sized here fits whichever type Karpenter launches.
        n = pool.gpus_per_node
        raise JobConfigError(
            f"{where}.gpusPerWorker",
            gpus,
            f"pool {pool.name!r} ({types}) has at most {n} GPU{'s' if n != 1 else ''} per node "
            f"on its smallest instance type; use {_one_to(n)}, or a pool "
            "whose instance types all have enough GPUs",
        )
    if gpus == 0 and pool.gpus_per_node:
        raise JobConfigError(
            f"{where}.gpusPerWorker",
            gpus,
            f"pool {pool.name!r} is a GPU pool; a CPU-only pod would hold a GPU node without "
            f"using it. Use gpusPerWorker: {_one_to(pool.gpus_per_node)}, or a CPU pool"
            + (f" ({', '.join(target.cpu_pools)})" if target.cpu_pools else ""),
        )
    procs = job.procs_per_worker
    if gpus and procs is not None and procs != gpus:
        raise JobConfigError(
            f"{where}.procsPerWorker",
            procs,
            f"a GPU job runs one process per GPU; leave it unset or set it to gpusPerWorker ({gpus})",
        )

    _check_fp8(job, pool, gpus, where)

    efa = job.efa
    if efa and not pool.efa_interfaces:
        raise JobConfigError(
            f"{where}.efa",
            efa,
            f"pool {pool.name!r} has no EFA interfaces; set efa: false or use an EFA pool",
        )
    if efa and not gpus:
        raise JobConfigError(
            f"{where}.efa", efa, "EFA carries NCCL traffic, so it needs gpusPerWorker >= 1"
        )
    if efa is None:
        efa = bool(pool.efa_interfaces and gpus)
    # The image and what it carries: the job's own, the platform's runtime image for this
    # pool (the runtime inside: no code ConfigMap), or the stock PyTorch image.
    declared_image = job.image  # as the user wrote it (choose_image may route it)
    job, facts = choose_image(job, target, efa)
    entry = job.entrypoint
    if entry is not None and entry.retry_on and job.code_source == "image" and not facts.trainforge:
        raise JobConfigError(
            f"{where}.entrypoint.retryOn",
            list(entry.retry_on),
            "nothing in the pod reads it: with codeSource: image your code runs on its image "
            "alone, without trainforge's wrapper; ship the library (codeSource: configmap, the "
            "default), or exit 205 from your own except block (retryable on every backend)",
        )

    if job.topology is not None and not pool.topology_aware:
        raise JobConfigError(
            f"{where}.topology",
            job.topology,
            f"pool {pool.name!r} has no topology-aware scheduling (Kueue places pods by network "
            "topology on EFA node groups only; Karpenter EFA pools keep their nodes in a "
            "cluster placement group); leave topology unset here",
        )
    mirror = job.checkpoint.s3_mirror
    # MLflow on an image known to lack mlflow is refused when the user declared that image's
    # facts; on the stock image the plan flags it (trainforge.plan.checks.images). Own shipped
    # code needs mlflow, and boto3 for the S3 mirror, only if its files import them (the mirror
    # is trainforge's CheckpointManager): judged once they are read
    # (entrypoint.refuse_missing_pieces), the same on every image.
    own_code = job.entrypoint is not None and job.entrypoint.ships_code
    for miss in image_facts.missing_pieces(
        facts,
        mlflow=target.mlflow_tracking_uri is not None
        and facts.source != STOCK_SOURCE
        and not own_code,
        s3_mirror=bool(mirror) and target.checkpoint_bucket is not None and not own_code,
        efa=efa,
        where=where,
        pool=pool.name,
        image=declared_image or job.image or _stock_name(pool),
        runtime=image_facts.runtime_way(job, target),
    ):
        raise JobConfigError(miss.key, miss.value, miss.message(job.image or "(stock PyTorch)"))
    if mirror is None:
        # on where the image has boto3 (or may: an undeclared image of the user's)
        mirror = facts.boto3 is not False

    # GPU pods take their GPUs' share of what the smallest node type leaves after the kubelet's
    # reservations and the DaemonSet pods (trainforge.jobs.capacity), so they always fit; CPU
    # pods the stated default (`default_size`).
    sized = default_size(pool, gpus)
    if job.cpu is not None:
        cpu = job.cpu
    elif sized is not None:
        cpu = sized[0]
    else:
        cpu = str(_FALLBACK_CPU_PER_SHARE * max(gpus, 1))
    if job.memory is not None:
        memory = job.memory
    elif sized is not None:
        memory = sized[1]
    else:
        memory = format_mebibytes(_FALLBACK_MEM_PER_SHARE * max(gpus, 1))
    mem_bytes = parse_quantity(memory)
    # Scheduling rehearsal: one pod on a node, then every pod at once against the pool's size.
    request = capacity.PodRequest.of(cpu, memory, gpus, efa_count(pool, gpus) if efa else 0)
    rehearsal = capacity.rehearse(request, job.min_workers, pool)
    values = {
        "cpu": cpu,
        "memory": memory,
        "gpusPerWorker": gpus,
        "efa": efa,
        "workers": job.workers,
        "pool": job.pool,
    }
    # A pod that fits no node first; all pods at once after the team quota (below).
    for problem in rehearsal.problems:
        if problem.key != "workers":
            raise JobConfigError(*_blamed(problem, target, where, values), problem.message)
    shm = job.shm_size
    if shm is None:
        shm = format_mebibytes(min(mem_bytes * _SHM_FRACTION, _SHM_MAX))
    elif parse_quantity(shm) >= mem_bytes:
        # /dev/shm is memory-backed and counted against the container's memory limit.
        raise JobConfigError(f"{where}.shmSize", shm, f"must be smaller than memory ({memory})")

    resolved = job.model_copy(
        update={
            "backend": backend,
            "restart_policy": default_restart_policy(job, target, backend),
            "gpus_per_worker": gpus,
            "procs_per_worker": procs if procs is not None else (gpus or 1),
            "cpu": cpu,
            "memory": memory,
            "shm_size": shm,
            "efa": efa,
            "checkpoint": job.checkpoint.model_copy(update={"s3_mirror": mirror}),
        }
    )
    check_quota(resolved, target, where, given=job)
    storage.check_storage(resolved, target, where)
    # User code needs the runtime library only if it imports it: checked with its files
    # (`entrypoint.user_code`); the driver and GPU checks apply to every image (its facts:
    # the stock tag's, the runtime image's or the declared ones).
    images.check_image(
        resolved, pool, where, needs_runtime=None if resolved.entrypoint is None else False
    )
    for problem in rehearsal.problems:
        raise JobConfigError(*_blamed(problem, target, where, values), problem.message)
    backends.check(resolved, target, where)
    # Will the model fit in the pool's GPU (or pod) memory? Refused here, before anything
    # exists, with the estimate and what would make it fit (trainforge.jobs.estimate).
    check_fit(resolved, pool, where)
    return resolved


def _blamed(
    problem: capacity.Problem, target: JobTarget, where: str, values: dict[str, Any]
) -> tuple[str, Any]:
    """The key a rehearsal problem blames and its value: the job's own key, or the pool's
    `limits.<r>` (`trainforge:nodePools[i].limits.<r>`; the job's `pool` when the pool's key
    is unknown, e.g. a Python program's job)."""
    if not problem.key.startswith("limits."):
        return f"{where}.{problem.key}", values[problem.key]
    inputs = target.team.quota_inputs if target.team is not None else None
    if inputs is None or all(p.name != target.pool.name for p in inputs.pools):
        return f"{where}.pool", target.pool.name
    return f"{quota.pool_key(inputs.pools, target.pool.name)}.{problem.key}", problem.value


def _check_fp8(job: JobSpec, pool: PoolFacts, gpus: int, where: str) -> None:
    """`precision: fp8` needs FP8 Tensor Cores (compute capability 8.9+) on every GPU model
    the pool may launch: refused here, at preview, as the runtime would refuse it in the pod
    (training/fp8.py). A GPU the catalog does not know is left to the runtime's check."""
    if getattr(job.training, "precision", None) != "fp8":
        return
    if not gpus:
        raise JobConfigError(
            f"{where}.precision",
            "fp8",
            f"pool {pool.name!r} has no GPUs; fp8 needs GPUs with FP8 Tensor Cores (compute "
            "capability 8.9+: L4, L40S, H100, H200, B200). Use bf16 or auto, or a GPU pool",
        )
    models = list(pool.gpu_models) or ([pool.gpu_name] if pool.gpu_name else [])
    if not models:  # no GPU name from AWS (yet): the catalog's GPU of each instance family
        fams = catalog.families()
        models = [
            g for t in pool.instance_types if (g := fams.get(catalog.family_of(t), {}).get("gpu"))
        ]
    lacking = sorted({m for m in models if catalog.fp8_capable(m) is False})
    if lacking:
        raise JobConfigError(
            f"{where}.precision",
            "fp8",
            f"pool {pool.name!r} has {', '.join(lacking)} GPUs, which lack FP8 Tensor Cores "
            "(compute capability 8.9+: L4, L40S, H100, H200, B200); use bf16 or auto, or a "
            "pool of those GPUs",
        )


def _stock_name(pool: PoolFacts) -> str | None:
    """The stock image a job without one runs on this pool (None when there is none)."""
    try:
        return images_mod.default_image_for(pool)
    except ValueError:
        return None


def choose_image(job: JobSpec, target: JobTarget, efa: bool) -> tuple[JobSpec, ImageFacts]:
    """The job with its image set (and its code source) and that image's facts.

    Without an image of its own a job runs the platform's runtime image for its pool (the
    EFA one on EFA pools), which carries the runtime: its code source becomes `image`. A
    user's image is pulled through the platform's cache when a rule covers its registry."""
    images = target.images
    if job.image is None and images is not None:
        chosen = images.for_pool(efa)
        if chosen is not None:
            job = job.model_copy(
                update={"image": chosen.ref, "code_source": "image", "image_facts": chosen.facts}
            )
            return job, chosen.facts
    if job.image is None:
        try:
            stock = images_mod.default_image_for(target.pool)
        except ValueError:
            return job, UNKNOWN  # refused with its reasons by images.check_image
        facts = stock_facts(stock) or UNKNOWN
        if images is not None and images.routes is not None:
            job = job.model_copy(update={"image": images.rewrite(stock)})
        return job, facts
    facts = facts_for(job.image, job.image_facts)
    if images is not None:
        job = job.model_copy(update={"image": images.rewrite(job.image)})
    return job, facts


def default_restart_policy(job: JobSpec, target: JobTarget, backend: str) -> str:
    """The job's restartPolicy, ExitCode unless set, with one exception. The training
    operator v1.9 re-creates an ExitCode pod that exits >= 128 without counting it against
    backoffLimit (release-1.9 pkg/core/job.go PastBackoffLimit counts restarts of Running
    pods only), so a pod OOM-killed on every attempt would be retried forever unless the
    ledger of the runtime, or of the wrapper your own code runs under, stops it
    (entrypoint.ledger_counts_attempts). Where it cannot and no
    activeDeadlineSeconds is set, a PyTorchJob defaults to OnFailure: restarts in place,
    counted against backoffLimit. An explicit ExitCode there is refused by the plan's retry
    bound rehearsal (trainforge.plan.checks.retry_bounds)."""
    from trainforge.jobs.entrypoint import ledger_counts_attempts  # noqa: PLC0415

    if job.restart_policy is not None:
        return job.restart_policy
    if (
        backend == "pytorchjob"
        and job.run_policy.active_deadline_seconds is None
        and not ledger_counts_attempts(job, target)
    ):
        return "OnFailure"
    return "ExitCode"


def check_quota(job: JobSpec, target: JobTarget, where: str, given: JobSpec | None = None) -> None:
    """Reject a job whose smallest runnable size exceeds all its team may ever hold: it would
    sit in Created forever (the operator cannot create its pods) instead of failing at
    preview. The message quotes the config's own figures: the team's guaranteed quota and
    what it may borrow on top, the stack key that caps it (`jobs.quota.quota_raise` on the
    platform's `TeamFacts.quota_inputs`), and the job key that made the total (`workers` when
    one pod fits, `gpusPerWorker` when one pod alone is too big)."""
    q = target.quota
    g = target.team.guarantee if target.team is not None else None
    pods = job.min_workers
    per_gpus = Fraction(job.gpus_per_worker or 0)
    set_gpus = given is None or given.gpus_per_worker is not None
    one_fits = q.gpus is None or per_gpus <= parse_quantity(q.gpus)
    gpu_key = "gpusPerWorker" if set_gpus and not one_fits else "workers"
    # cpu/memory the user did not set are the pool's per-pod defaults: `workers` is the key
    cpu_key = "cpu" if given is None or given.cpu is not None else "workers"
    memory_key = "memory" if given is None or given.memory is not None else "workers"
    needs = job_needs(job)
    asks = [
        ("gpus", q.gpus, needs["gpus"], gpu_key),
        ("cpu", q.cpu, needs["cpu"], cpu_key),
        ("memory", q.memory, needs["memory"], memory_key),
        ("pods", q.pods, Fraction(pods), "workers"),
    ]
    for name, limit, need, key in asks:
        if limit is None or need == 0:
            continue
        if need > parse_quantity(limit):
            both = False
            value = job.workers if key == "workers" else getattr(job, _ATTR.get(key, key))
            if name == "gpus" and not set_gpus:
                how = (
                    f"{pods} pod(s) x {job.gpus_per_worker} GPUs (gpusPerWorker unset: the "
                    f"pool's GPUs per node)"
                )
            elif both := name == "gpus" and key == "workers":
                how = f"{pods} pod(s) (workers x gpusPerWorker = {pods} x {job.gpus_per_worker})"
            elif name == "gpus":  # one pod alone is over: gpusPerWorker is the key
                how = f"{pods} pod(s) x gpusPerWorker {job.gpus_per_worker}"
            elif key == "workers" and name != "pods":
                how = f"{pods} pod(s) x {name} {job.cpu if name == 'cpu' else job.memory} "
                how += f"({name} unset: the pool's default per pod)"
            else:
                how = f"{pods} pod(s)"
            raise JobConfigError(
                f"{where}.{key}",
                value,
                _over_quota(job, target, name, key, need, limit, g, how, pods, both),
            )


# JobSpec attribute of a job key the quota error names
_ATTR = {"gpusPerWorker": "gpus_per_worker"}


def _over_quota(
    job: JobSpec,
    target: JobTarget,
    name: str,
    key: str,
    need: Fraction,
    limit: str,
    g: TeamQuota | None,
    how: str,
    pods: int,
    both: bool,
) -> str:
    """The text of a job over what its team may hold: the figures, the cap and the fix."""
    cap = parse_quantity(limit)
    mine = getattr(g, name, None) if g is not None else None
    borrows = mine is not None and name != "pods" and parse_quantity(mine) != cap
    if borrows:
        # a team's cpu/memory guarantee is quota.cpu/memory (CPU pools) plus what
        # comes with its GPUs in GPU pools: not the figure the user typed
        whose = (
            f"quota.{name} guarantees {mine}"
            if name == "gpus"
            else f"quota guarantees {figure(name, parse_quantity(mine))} (quota.{name} in CPU "
            f"pools plus the {name} that comes with its GPUs in GPU pools)"
        )
        held = (
            f"team {job.team!r} may hold at most {figure(name, cap)}: its "
            f"{whose} and it may borrow up to "
            f"{figure(name, cap - parse_quantity(mine))} more from its cohort"
        )
    else:
        held = f"team {job.team!r} has a quota of {limit}"
    lift = quota_lift(job, target, name, need)
    if lift is not None:
        # the keys the platform's quota model says cap it
        caps = ", ".join(f"{k}: {now}" for k, now, _ in lift.changes)
        if lift.per_gpu is not None:  # cpu/memory of a GPU pool: its GPUs bring them
            caps = (
                f"the {name} of GPU pool {job.pool!r} comes with its GPUs, "
                f"{figure(name, lift.per_gpu)} per GPU: {caps} caps it"
            )
        else:
            caps += " caps it"
        if borrows:
            held += f" ({caps})"
        else:
            held = f"team {job.team!r} may hold at most {figure(name, cap)} {name} ({caps})"
    fix = quota_fix(job, target, name, key, need, cap, pods, lift, both)
    fit = pool_fit(target, name, cap)
    pool = ""
    if fit < cap:
        pool = f", at most {figure(name, fit)} in pool {job.pool!r} (Kueue counts quota per pool)"
    return (
        f"{how} need {name} {figure(name, need)} but {held} in namespace "
        f"{target.namespace!r}{pool}; the job could never start: {fix}"
    )


def quota_lift(
    job: JobSpec,
    target: JobTarget,
    name: str,
    need: Fraction,
    also: Mapping[str, Fraction] | None = None,
) -> quota.Lift | None:
    """The stack change after which the team may hold `need` of `name` (gpus/cpu/memory) in
    the job's pool and what the job needs of the rest there with it (`also`, by key; by
    default its pods' requests, `job_needs`): Kueue admits only where all fit
    (`quota.quota_raise` on the platform's `TeamFacts.quota_inputs`); None where none does or
    the team's quota is not known."""
    inputs = target.team.quota_inputs if target.team is not None else None
    if inputs is None or name == "pods":
        return None
    also = job_needs(job) if also is None else also
    return quota.quota_raise(inputs, name, need, job.pool, _launch(job, target.pool), also)


def job_needs(job: JobSpec) -> dict[str, Fraction]:
    """By key (gpus, cpu, memory): what the job's fewest pods request in all, as the quota
    check counts it (`check_quota`)."""
    pods = job.min_workers
    return {
        "gpus": Fraction(job.gpus_per_worker or 0) * pods,
        "cpu": parse_quantity(job.cpu or "0") * pods,
        "memory": parse_quantity(job.memory or "0") * pods,
    }


def pool_fit(target: JobTarget, name: str, cap: Fraction) -> Fraction:
    """The most of `name` a job in the target's pool may get: `cap` (the namespace's), and
    with Kueue no more than its team's queue may hold in the pool (`QuotaInputs.room`)."""
    inputs = target.team.quota_inputs if target.team is not None else None
    most = (inputs.room(target.pool.name) or {}).get(name) if inputs is not None else None
    return min(cap, most) if most is not None else cap


def quota_fix(
    job: JobSpec,
    target: JobTarget,
    name: str,
    key: str,
    need: Fraction,
    cap: Fraction,
    pods: int,
    lift: quota.Lift | None,
    both: bool = False,
    said: Mapping[str, str] | None = None,
    beside: Fraction = Fraction(0),
) -> str:
    """The fix of a job over what its team may hold of `name` (`lift`: `quota_lift`'s): the
    largest `key` that fits, or the stack keys that lift it, or that none does. One text for
    the preview refusal and the plan's never-admitted finding (plan/checks/queues.py, an SDK
    job's too). `said`: key -> how its smaller value is written (an SDK program's words).
    `beside`: what the job's other pod sets (a TrainJob's initializers) hold of `name` in its
    pool with `need` (the pods'), which Kueue admits together: the smaller job fits beside it,
    and `lift` lifts both."""
    inputs = target.team.quota_inputs if target.team is not None else None
    if lift is not None:
        # the keys the platform's quota model says cap it, and the values that lift it
        changes = lift.changes
        if any(".limits." in k for k, _, _ in changes):
            # the pool's other limits its nodes would pass: raising one alone meets the next
            lim, at = target.pool.limits, quota.pool_key(inputs.pools, job.pool)
            named = {k for k, _, _ in changes}
            changes += tuple(
                (f"{at}.limits.{r}", now, _setting(r, v, up=True))
                for r, v in _launch(job, target.pool).items()
                if f"{at}.limits.{r}" not in named
                and (now := getattr(lim, r)) is not None
                and v > parse_quantity(str(now))
            )
        bigger = "set " + " and ".join(f"{k} to {to}" for k, _, to in changes)
        if any(".limits." in k for k, _, _ in changes):
            bigger += " (Karpenter counts each of the job's nodes at its largest type)"
    elif inputs is not None and name != "pods":
        # the model found no raise that lifts it: say so, and what holds it
        at, team = quota.pool_key(inputs.pools, job.pool), quota.team_key(inputs.teams, job.team)
        cap_key = f"{at}.maxSize" if target.pool.kind == "node-group" else f"{at}.limits.{name}"
        # `quota_raise` tries the borrowing limit alone and with the others, where one is set
        mine = next(t for t in inputs.teams if t.name == job.team)
        limited = getattr(mine.quota.borrowing_limit, name, None) is not None
        borrow = (
            f", with or without a raise of {team}.quota.borrowingLimit.{name}," if limited else ""
        )
        bigger = (
            f"no raise of {team}.quota.{name}, {team}.quota.pools.{job.pool}.{name} or "
            f"{cap_key}, alone or together{borrow} lifts it without taking from another team's "
            "guarantee: the other teams' guarantees in the pool (scaled with the team's to what "
            "it holds) or the team's quota.borrowingLimit hold it (docs/teams.md, Quotas)"
        )
    else:
        at_least = _setting(name, need + beside, up=True)
        bigger = f"give team {job.team!r} a quota.{name} of at least {at_least} (trainforge:teams)"
    room = _pool_room(job, target.pool, pods) if key == "workers" else None
    fit = pool_fit(target, name, cap) - beside
    smaller = _smaller(key, name, need, fit, pods, room, said) if need > 0 and fit > 0 else ""
    if both:  # workers and gpusPerWorker both set: a smaller one of either fits
        other = _smaller("gpusPerWorker", name, need, fit, pods, said=said)
        smaller = " or ".join(x for x in (smaller, other) if x)
    return f"use {smaller}, or {bigger}" if smaller else bigger


def _launch(job: JobSpec, pool: PoolFacts) -> dict[str, Fraction]:
    """What the job's pods count against its pool's cap, by key (gpus, cpu, memory), so that a
    raised cap also lets them all run: on a Karpenter pool capacity's packing without the
    limits, each NodeClaim at its largest type; on a node group the nodes the scheduling
    rehearsal needs, each of its largest type (what `maxSize` is counted in)."""
    req = capacity.job_request(job, pool)
    if pool.kind == "node-group":
        nodes = capacity.rehearse(req, job.min_workers, replace(pool, max_nodes=None)).nodes_needed
        return (
            {quota.CONFIG_KEY[r]: nodes * quota.node_most(pool, r) for r in quota.COVERED}
            if nodes
            else {}
        )
    counted = capacity.pack(replace(pool, limits=PoolLimits()), [req] * job.min_workers).counted
    return {"gpus" if r == GPU_RESOURCE else r: v for r, v in counted.items()}


def _pool_room(job: JobSpec, pool: PoolFacts, pods: int) -> int:
    """The most of the job's pods (up to `pods`) its pool holds at once: the scheduling
    rehearsal's count (a node group's maxSize nodes, a Karpenter pool's limits), so that a
    smaller `workers` the quota refusal offers is not refused by the rehearsal next."""
    req = capacity.job_request(job, pool)
    low, high = 0, pods
    while low < high:  # the largest count without an all-at-once problem
        mid = (low + high + 1) // 2
        if any(p.key == "workers" for p in capacity.rehearse(req, mid, pool).problems):
            high = mid - 1
        else:
            low = mid
    return low


def _smaller(
    key: str,
    name: str,
    need: Fraction,
    cap: Fraction,
    pods: int,
    room: int | None = None,
    said: Mapping[str, str] | None = None,
) -> str:
    """The job-side fix of a job over its team's quota: the largest value of the key that
    fits (empty: none does); `workers` no more than the pool holds at once (`room`)."""
    words = {"workers": "workers: {}", "gpusPerWorker": "gpusPerWorker: {}", **(said or {})}
    if key == "workers":
        fit = int(cap // (need / pods))
        fit = min(fit, room) if room is not None else fit
        return words[key].format(fit) if fit >= 1 else ""
    if key == "gpusPerWorker":
        fit = int(cap // pods)
        return words[key].format(fit) if fit >= 1 else ""
    return f"{key} of at most {_setting(name, cap / pods, up=False)} per pod"


def _one_to(n: int) -> str:
    """`1` or `1 to 4`: the GPUs per pod a pool with `n` per node allows."""
    return "1" if n == 1 else f"1 to {n}"


def _setting(name: str, value: Fraction, *, up: bool) -> str:
    """A value of quota or pod size `name` for the user to write into the stack: the plan's
    writer (`figure`) where that reads back as `value`, else `value` rounded the way that still
    holds (`up`: at least it, else at most) to the unit Kueue counts (`counted`: millicores for
    CPU, whole GPUs and pods) or whole Mi for memory. Why not always `figure`: its 4 significant
    Gi and `:g` cores round either way (8 cores over 3 pods read "2.66667", which 3 pods exceed),
    and 1000Gi and more print with a thousands comma, which is no quantity."""
    text = figure(name, value)
    try:
        if parse_quantity(text) == value:
            return text
    except ValueError:
        pass
    step = Fraction(2**20) if name == "memory" else Fraction(1, 1000) if name == "cpu" else 1
    units = math.ceil(value / step) if up else math.floor(value / step)
    if name == "memory":
        return f"{units}Mi"
    return f"{units}m" if name == "cpu" and units % 1000 else plain(units * step)
