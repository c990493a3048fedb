"""What a person reads about a live job: its state, its place in the queue and what blocks it,
its pods and their last exits, progress, the last checkpoint and restarts.

Pure functions of the gathered objects and `now` (so tests and docs render the same text).
"""

from __future__ import annotations

import re
from datetime import datetime
from fractions import Fraction
from itertools import permutations

from trainforge.core import failures
from trainforge.core.contract import GPU_RESOURCE
from trainforge.core.pods import QUEUE_LABEL
from trainforge.core.quantity import parse_quantity
from trainforge.jobs import backends, trainjob
from trainforge.jobs.duration import age_text, duration_text
from trainforge.live import admission, wait
from trainforge.live.gather import REPLICATED_JOB_LABEL, Gathered, condition
from trainforge.plan import kueue as K
from trainforge.stack.fleet import MULTIKUEUE_CONTROLLER
from trainforge.training import exits
from trainforge.training.contract import ON_EXIT

BYTES = ("memory", "ephemeral-storage")


def age(since: str | None, now: datetime) -> str:
    if not since:
        return "?"
    t = datetime.fromisoformat(since.replace("Z", "+00:00"))
    return age_text((now - t).total_seconds())


def readable(resource: str, amount: str | int | float | Fraction) -> str:
    """A resource amount as people write it: 8 GPUs, 30.5 CPU, 64Gi."""
    try:
        v = amount if isinstance(amount, Fraction) else parse_quantity(amount)
    except (ValueError, TypeError):
        return str(amount)
    if resource in BYTES:
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if v >= size:
                return f"{float(v / size):.4g}{unit}"
        return f"{int(v)}"
    if resource == "cpu":
        return f"{float(v):.4g} cores"
    if resource.endswith("/gpu"):
        return f"{int(v)} GPU{'s' if v != 1 else ''}"
    return f"{float(v):.4g} {resource}"


def is_true(obj: dict | None, kind: str) -> bool:
    c = condition(obj, kind)
    return bool(c and c.get("status") == "True")


# --- the job's state ----------------------------------------------------------------------------


def job_state(g: Gathered) -> tuple[str, dict | None]:
    """(state, the condition that says so): Succeeded, Failed, Suspended, Restarting, Running,
    Created, for every backend."""
    job = g.job
    order = {
        "pytorchjob": ("Succeeded", "Failed", "Suspended", "Restarting", "Running", "Created"),
        "trainjob": ("Complete", "Failed", "Suspended", "Running", "Created"),
        "indexed-job": ("Complete", "Failed", "Suspended"),
    }[g.backend]
    for kind in order:
        c = condition(job, kind)
        if c and c.get("status") == "True":
            return {"Complete": "Succeeded"}.get(kind, kind), c
    if g.backend == "indexed-job" and job.get("status", {}).get("active"):
        return "Running", None
    if g.backend == "trainjob" and any(p["status"].get("phase") == "Running" for p in g.pods):
        return "Running", None
    if job.get("spec", {}).get("suspend") or job.get("spec", {}).get("runPolicy", {}).get(
        "suspend"
    ):
        return "Suspended", None
    return "Created", None


# Kueue's message for a pod set that does not fit (pkg/scheduler/flavorassigner at 0.19):
# "insufficient unused quota for nvidia.com/gpu in flavor gpu-workloads, 8 more needed"
_INSUFFICIENT = re.compile(
    r"insufficient (?:unused )?quota for (?P<res>[\w./-]+) in flavor (?P<flavor>[\w.-]+), "
    r"(?P<more>[\w.]+) more needed"
)


def blocked_by(g: Gathered) -> list[str]:
    """Readable lines: which quota keeps the Workload from being admitted, in the job's own
    terms (a GPU job's GPUs first) and plain units ("94.8 cores of 411.9")."""
    wl = g.workload
    if wl is None:
        return []
    c = condition(wl, "QuotaReserved")
    if c is None or c.get("status") == "True":
        return []
    msg = c.get("message", "")
    lines = []
    asks = K.workload_need(g.workload or {}, g.limit_ranges)  # as Kueue counts it
    for m in _INSUFFICIENT.finditer(msg):
        res, flavor, more = m.group("res"), m.group("flavor"), m.group("more")
        used = _usage(g.cluster_queue, flavor, res)
        line = f"{res} in flavor {flavor}: {readable(res, more)} more needed"
        if used:
            line += f" (queue {used})"
        if res != GPU and asks.get(GPU):
            # Kueue names the first resource short; for a GPU job that is the CPU or memory
            # that come with its GPUs: say so, and where its GPUs stand
            gpus = _usage(g.cluster_queue, flavor, GPU)
            line += f"; it is the {res} that comes with the job's {readable(GPU, asks[GPU])}" + (
                f" (queue {gpus})" if gpus else ""
            )
        lines.append(line)
    return lines or ([msg] if msg else [])


GPU = GPU_RESOURCE


def refused(g: Gathered) -> str:
    """What to say of a Workload Kueue never admits as things stand (trainforge.plan.kueue
    `refused`: Kueue's own condition, else its refusal of the pods' resources with the
    namespace's LimitRanges, or the stack's queue model: `never_fits`), "" when it may admit
    it."""
    return K.refused(g.workload, g.limit_ranges, bool(g.never_fits))


def borrowing(g: Gathered) -> str | None:
    """For an admitted job whose queue borrows in its flavor: how much, and who may take it
    back and when (Kueue's reclaimWithinCohort). None when its queue borrows nothing."""
    cq = g.cluster_queue or {}
    adm = (g.workload or {}).get("status", {}).get("admission") or {}
    flavors = {
        f for a in adm.get("podSetAssignments", []) for f in (a.get("flavors") or {}).values()
    }
    parts = []
    for f in cq.get("status", {}).get("flavorsUsage", []) or []:
        if f.get("name") not in flavors:
            continue
        for r in f.get("resources", []):
            try:
                b = parse_quantity(r.get("borrowed", "0"))
            except (ValueError, TypeError):
                continue
            if b > 0:
                parts.append((r.get("name"), f.get("name"), b))
    if not parts:
        return None
    gpu_parts = [p for p in parts if p[0] == GPU] or parts
    what = ", ".join(f"{readable(r, b)} in flavor {f}" for r, f, b in gpu_parts)
    cohort = cq.get("spec", {}).get("cohortName") or "its cohort"
    reclaim = (cq.get("spec", {}).get("preemption") or {}).get("reclaimWithinCohort")
    return (
        f"queue {cq.get('metadata', {}).get('name', '?')} borrows {what} from cohort {cohort}: "
        "any other team of the cohort may take it back at any time, by preempting the "
        "newest borrowing jobs, when a job of theirs fits their own nominal quota there "
        "(reclaimWithinCohort; the job resumes from its last checkpoint)"
        + (f"; this queue itself reclaims with policy {reclaim}" if reclaim else "")
    )


def _usage(cq: dict | None, flavor: str, res: str) -> str:
    if not cq:
        return ""
    nominal = None
    for group in cq.get("spec", {}).get("resourceGroups", []):
        for f in group.get("flavors", []):
            if f.get("name") == flavor:
                for r in f.get("resources", []):
                    if r.get("name") == res:
                        nominal = r.get("nominalQuota")
    used = None
    for f in cq.get("status", {}).get("flavorsUsage", []) or []:
        if f.get("name") == flavor:
            for r in f.get("resources", []):
                if r.get("name") == res:
                    used = r.get("total")
    if nominal is None or used is None:
        return ""
    return f"uses {_number(res, used)} of its nominal {readable(res, nominal)}"


def _number(resource: str, amount: str) -> str:
    """The figure alone, in the unit `readable` gives the total ("94.8" of "411.9 cores")."""
    text = readable(resource, amount)
    if resource == "cpu" or resource.endswith("/gpu"):
        return text.split(" ", 1)[0]
    return text


def requests(g: Gathered) -> list[str]:
    """One line per pod set: its pods, and what each asks as Kueue counts it
    (trainforge.plan.kueue.pod_requests: the namespace's LimitRange defaults, a limit stands
    for a missing request, the largest init container, the pod overhead)."""
    out = []
    for ps in (g.workload or {}).get("spec", {}).get("podSets", []):
        total = K.pod_requests(ps.get("template", {}).get("spec", {}), g.limit_ranges)
        asks = ", ".join(
            readable(r, v) + (" memory" if r == "memory" else "") for r, v in sorted(total.items())
        )
        out.append(f"{ps.get('count', 1)} x {ps.get('name', 'pod')} pod, each {asks}")
    return out


def limit_range_order(g: Gathered) -> str:
    """One line when what Kueue counts of the Workload (its pod sets' requests and refusals,
    `K.workload_podsets`) depends on the order of the namespace's LimitRanges; "" when not.

    Why: Kueue keeps the first `default`/`defaultRequest` of each resource over the
    LimitRanges it lists (kubernetes-sigs/kueue release-0.19 c90ed700c1, read 2026-11-30:
    pkg/util/limitrange/limitrange.go `Summarize`; pkg/workload/resources.go lists them from
    its informer cache, an index whose order the API does not fix), while the model takes
    them as the API listed them. Every order is tried (rotations past 5 LimitRanges)."""
    lrs, wl = g.limit_ranges, g.workload
    if wl is None or len(lrs) < 2:
        return ""
    orders = permutations(lrs) if len(lrs) <= 5 else (lrs[i:] + lrs[:i] for i in range(len(lrs)))
    shown = K.workload_podsets(wl, lrs)
    if all(K.workload_podsets(wl, list(o)) == shown for o in orders):
        return ""
    names = ", ".join(str((lr.get("metadata") or {}).get("name", "?")) for lr in lrs)
    return (
        f"which LimitRange decides is not fixed: namespace {g.namespace}'s LimitRanges "
        f"{names} default this job differently in different orders, and Kueue takes them in "
        "its informer's order, which the API does not fix; shown: in the order listed"
    )


# --- pods ---------------------------------------------------------------------------------------


# trainforge's runtime, launcher and wrapper (python -m trainforge.training[.launch|.usercode]):
# their exit codes carry a reason (training/exits.py)
TRAINFORGE_MODULE = "trainforge.training"


def foreign_command(g: Gathered) -> list[str] | None:
    """The command the job's pods run when it is not trainforge's runtime or wrapper (None
    when it is, or when the job's object does not say): the Kubeflow SDK's `bash -c ...
    torchrun` of your function, or an `entrypoint.command` run as written on your image. Read
    from the job's pod templates (jobs.backends.pod_templates: a TrainJob's built from its
    runtime, with `spec.trainer.command`)."""
    for t in backends.pod_templates(g.job):
        for c in t.spec.get("containers") or []:
            cmd = c.get("command")
            if c.get("name") != g.container or not isinstance(cmd, list) or not cmd:
                continue
            if not any(str(w).startswith(TRAINFORGE_MODULE) for w in cmd):
                return [str(w) for w in cmd]
    return None


# The runtime itself (`python -m trainforge.training`): it exits with a reason's code only
RUNTIME_WORDS = ("trainforge.training",)
# your code under the wrapper: its codes are your code's own where no record names them
USER_CODE_MODULE = "trainforge.training.usercode"


def runs_runtime(g: Gathered, pod: dict | None = None) -> bool:
    """Whether the pod (else the job's pod templates) runs trainforge's runtime itself and not
    your code: the runtime exits only with its reasons' codes (exits.BY_CODE), so its code
    names the reason where the pod left no exit record. Your code's codes are its own: a 3
    is not `oom` without a record that says so."""
    specs = [(pod or {}).get("spec") or {}, *(t.spec for t in backends.pod_templates(g.job))]
    for spec in specs:
        c = _container(spec, g.container)
        words = [str(w) for w in [*(c.get("command") or []), *(c.get("args") or [])]]
        if words:
            return USER_CODE_MODULE not in words and any(w in RUNTIME_WORDS for w in words)
    return False


def exit_codes_are_ours(g: Gathered) -> bool:
    """Whether the job's exit codes carry trainforge's reasons: its pods run trainforge's
    runtime or wrapper, which exit with a reason's code. Another command's codes are its own:
    torchrun exits 1 when any worker fails, a bug or a lost peer alike (torch 2.13
    torch/distributed/run.py: `@record` re-raises ChildFailedError), so 1 names no cause."""
    return foreign_command(g) is None


# What `why` adds for restarted pods whose codes are not ours (exit_codes_are_ours).
NOT_OUR_CODES = (
    "exit codes of {what}, not of trainforge's runtime or wrapper: a code names no cause "
    "(torchrun exits 1 when any worker fails: a bug, a lost peer); read the log of the run "
    "before: trainforge logs {job} -n {ns} --previous"
)


def not_our_codes(g: Gathered) -> str:
    cmd = foreign_command(g) or []
    sdk = (
        g.backend == trainjob.BACKEND
        and ((g.job.get("spec") or {}).get("runtimeRef") or {}).get("name") == trainjob.SDK_RUNTIME
    )
    what = "the Kubeflow SDK's torchrun" if sdk else f"the job's own command ({' '.join(cmd[:3])})"
    return NOT_OUR_CODES.format(what=what, job=g.name, ns=g.namespace)


def _container(spec: dict, name: str) -> dict:
    """The container `name` of a pod spec (the training container), else its first."""
    cs = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    return next((c for c in cs if c.get("name") == name), cs[0] if cs else {})


def _env(container: dict, name: str) -> str | None:
    for e in container.get("env") or []:
        if isinstance(e, dict) and e.get("name") == name and e.get("value"):
            return str(e["value"])
    return None


def told_on_exit(g: Gathered, pod: dict | None = None) -> str | None:
    """What the job's controller does after its pod exits, for each class of exit code: the
    TRAINFORGE_ON_EXIT the emitter told the pod (core.failures.told of its backend's outcome)
    as the pod's training container carries it; where the pod does not say (it is gone, or
    older than the variable) the job's pod templates' (a TrainJob's built from its runtime);
    else the same model (core.failures) read from the job object's restart fields: a
    PyTorchJob's replicas' restartPolicy, a Job's pod failure policy and backoff limits, a
    TrainJob's JobSet (its pod's replicated job's Job spec, then the JobSet's failurePolicy,
    as `gather` read it). None where none of these says (`next_text` says why for a
    TrainJob)."""
    specs = [(pod or {}).get("spec") or {}, *(t.spec for t in backends.pod_templates(g.job))]
    for spec in specs:
        value = _env(_container(spec, g.container), ON_EXIT)
        if value:
            return value
    spec = g.job.get("spec") or {}
    if g.backend == "pytorchjob":
        replicas = (spec.get("pytorchReplicaSpecs") or {}).values()
        policies = {r.get("restartPolicy") for r in replicas if isinstance(r, dict)}
        if len(policies) == 1 and None not in policies:
            (policy,) = policies
            # what follows a Worker's exit once the job has succeeded: its Master's (an
            # elastic one's any Worker's) exit 0 ends it, and the operator cleans up by
            # cleanPodPolicy, which it defaults to None (v1.9.4 pytorch_defaults.go)
            rule = "any" if spec.get("elasticPolicy") else "master"
            clean = str((spec.get("runPolicy") or {}).get("cleanPodPolicy") or "None")
            return failures.told(
                lambda code: failures.pytorchjob_outcome(str(policy), code),
                failures.after_success_words(rule, clean),
            )
        return None
    if g.backend == "indexed-job":
        return failures.told(
            lambda code: failures.job_outcome(spec, failures.failed_pod(g.container, code))
        )
    if g.backend == trainjob.BACKEND and g.jobset is not None and not _jobset_unknown(g):
        rjob = ((pod or {}).get("metadata") or {}).get("labels", {}).get(REPLICATED_JOB_LABEL)
        js = g.jobset.get("spec") or {}
        name = rjob or trainjob.REPLICATED_JOB
        return failures.told(lambda code: failures.jobset_outcome(js, name, g.container, code))
    return None


def _jobset_unknown(g: Gathered) -> str:
    """Why what a TrainJob's JobSet does after an exit is not known from it ("" when it is):
    it is not there, or its failurePolicy has rules (by the Job's failure reason), which the
    model does not read (core.failures.jobset_on_failed_job)."""
    if g.jobset is None:
        return g.jobset_unread or f"no JobSet {g.name}"
    if ((g.jobset.get("spec") or {}).get("failurePolicy") or {}).get("rules"):
        return f"JobSet {g.name}'s failurePolicy has rules, which trainforge does not model"
    return ""


def torchrun_max_restarts(container: dict) -> int:
    """torchrun's `--max-restarts` in the container's command (an elastic job's; 0 without):
    the times it restarts the workers in the pod before the container exits
    (core.failures.torchrun_restarts)."""
    words = [str(w) for w in [*(container.get("command") or []), *(container.get("args") or [])]]
    for i, w in enumerate(words):
        value = w.split("=", 1)[1] if w.startswith("--max-restarts=") else None
        if w == "--max-restarts" and i + 1 < len(words):
            value = words[i + 1]
        if value is not None and value.isdigit():
            return int(value)
    env = _env(container, "PET_MAX_RESTARTS")
    return int(env) if env is not None and env.isdigit() else 0


def next_text(
    g: Gathered, pod: dict, code: object, ended: bool = True, reason: exits.Reason | None = None
) -> str | None:
    """What happens after the pod's exit `code`, as its controller was told to do it
    (`told_on_exit`): "then: <what>", with torchrun's restarts in the pod first where its
    launcher has any. None where it is not known. `ended`: the exit is the pod's current end
    (its container did not run again); once the job has Succeeded, what follows such an exit
    is the told `succeeded` part (a PyTorchJob's Master's exit 0 ended the job: no pod is
    re-created; jobs/success.py, the rule run-local's verdict reads), not the controller's
    words for a failure."""
    told = told_on_exit(g, pod)
    if not isinstance(code, int) or code == 0:
        return None
    if told is None:
        unknown = _jobset_unknown(g) if g.backend == trainjob.BACKEND else ""
        return f"then: not known ({unknown})" if unknown else None
    after = failures.on_exit_succeeded(told)
    if ended and after is not None and job_state(g)[0] == "Succeeded":
        return f"then: nothing; {after}"
    words = failures.on_exit_words(told, code)
    if words is None:
        return None
    container = _container(pod.get("spec") or {}, g.container)
    most = torchrun_max_restarts(container)
    first = f"torchrun's {most} restart(s) in the pod spent, " if most else ""
    if most and reason is not None and exits.restarts_nothing(reason) and _our_launcher(container):
        # trainforge's launcher restarts no group that ended so (launch.stop_restarts_on_final)
        first = f"no torchrun restart ({reason.name}: trainforge's launcher restarts nothing), "
    return f"then: {first}{words}"


def _our_launcher(container: dict) -> bool:
    """Whether the container's torchrun is trainforge's launcher (`trainforge.training.launch`),
    which stops restarting on a cause no restart gets past; a plain torchrun restarts anyway."""
    words = [str(w) for w in [*(container.get("command") or []), *(container.get("args") or [])]]
    return f"{TRAINFORGE_MODULE}.launch" in words


def pod_line(
    pod: dict, container: str, now: datetime, ours: bool = True, g: Gathered | None = None
) -> str:
    """One pod: phase, node, restarts, its last exit (`g`: the job's, with what its controller
    does after that exit: `next_text`)."""
    status = pod.get("status", {})
    name = pod["metadata"]["name"]
    phase = status.get("phase", "?")
    cs = next(
        (c for c in status.get("containerStatuses", []) or [] if c.get("name") == container),
        (status.get("containerStatuses") or [None])[0],
    )
    parts = [f"{name:<28} {phase:<9}"]
    node = pod.get("spec", {}).get("nodeName")
    if node:
        parts.append(f"node {node}")
    if cs:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting:
            parts.append(f"waiting: {waiting.get('reason')}")
        parts.append(f"restarts {cs.get('restartCount', 0)}")
        last = (cs.get("lastState") or {}).get("terminated")
        ended = (cs.get("state") or {}).get("terminated")  # a Failed pod's (restartPolicy Never)
        shown = ended if ended and ended.get("exitCode") else last
        if shown:
            what = "exit" if shown is ended else "last exit"
            text = exit_text(shown, ours, g is not None and runs_runtime(g, pod))
            parts.append(f"{what} {text} {age(shown.get('finishedAt'), now)} ago")
            then = (
                next_text(
                    g,
                    pod,
                    shown.get("exitCode"),
                    ended=shown is ended,
                    reason=exit_reason(shown, runs_runtime(g, pod)),
                )
                if g is not None
                else None
            )
            if then:
                parts.append(then)
    elif phase == "Pending":
        sched = condition(pod, "PodScheduled")
        if sched and sched.get("status") == "False":
            parts.append(f"unscheduled: {sched.get('message', sched.get('reason', ''))}")
    return "  ".join(parts)


def _last_exit(pod: dict) -> str | None:
    """When the pod's container last ended (its previous run), if it ever did."""
    for c in pod.get("status", {}).get("containerStatuses", []) or []:
        t = (c.get("lastState") or {}).get("terminated")
        if t:
            return t.get("finishedAt")
    return None


# A failed exit of ours whose pod left no exit record (an older wrapper's, a process killed
# before it wrote one): its code says what the controller does, not why
NO_RECORD = "no exit record: reason unknown"


def exit_text(terminated: dict, ours: bool = True, runtime: bool = False) -> str:
    """`CODE (reason)`: where the code is ours (exit_codes_are_ours), the reason its exit record
    left in the termination message (user_exit where your code chose the code, with the
    sys.exit it asked: never a reason the runtime did not decide), else, for the runtime's
    own pods (`runtime`: runs_runtime), the runtime's for the code; a failure without either
    says the reason is unknown (NO_RECORD) beside the container's own (Kubernetes' `Error`,
    `OOMKilled`)."""
    code = terminated.get("exitCode")
    reason = exit_reason(terminated, runtime) if ours else None
    k8s = terminated.get("reason", "")
    if reason is not None:
        return f"{code} ({reason.label})"
    if ours and isinstance(code, int) and code != 0:
        return f"{code} ({k8s}; {NO_RECORD})" if k8s else f"{code} ({NO_RECORD})"
    return f"{code} ({k8s})"


def exit_reason(terminated: dict, runtime: bool = False) -> exits.Reason | None:
    """trainforge's reason for a container's exit: its termination message's (written by the
    runtime and the wrapper, exits.leave_record, and the launcher), else, where the pod runs
    the runtime itself (`runtime`), the runtime's for the code; None where neither says."""
    code = terminated.get("exitCode")
    if not isinstance(code, int):
        return None
    recorded = exits.from_termination(terminated.get("message"), code)
    # 137 without a record: the container itself was SIGKILLed (OOMKilled, the grace period's
    # end), not a code the launcher chose (it records node_lost when it exits 137)
    chosen = runtime and code != exits.NODE_LOST.code
    return recorded or (exits.for_code(code) if chosen else None)


# --- metrics ------------------------------------------------------------------------------------


def progress_lines(g: Gathered, now: datetime | None = None) -> list[str]:
    """Its metrics' progress and checkpoint; the ETA cut at its deadline where that comes
    first (wait.metrics_eta: with `now`, when the run started is known)."""
    m = g.metrics
    if not m:
        return []
    out = []
    step, total = m.get("step"), m.get("total_steps")
    if step is not None:
        line = f"step {int(step)}"
        if total:
            line += f"/{int(total)} ({m.get('progress', step / total):.0%})"
        if m.get("step_seconds"):
            line += f", {m['step_seconds']:.3g} s/step"
        if m.get("eta_seconds") is not None and m.get("progress", 0) < 1:
            eta = float(m["eta_seconds"])
            cut = wait.metrics_eta(g.job, g.workload, eta, now) if now is not None else None
            line += (
                f", ETA{cut.note}" if cut is not None and cut.cut else f", ETA {duration_text(eta)}"
            )
        out.append(("progress", line))
    if "checkpoint_step" in m:
        ck = int(m["checkpoint_step"])
        behind = (step or 0) - ck
        line = f"step {ck}"
        if m.get("step_seconds") and step is not None:
            line += f", {duration_text(behind * m['step_seconds'])} of training ago ({int(behind)} steps)"
        out.append(("checkpoint", line))
    elif step is not None:
        out.append(("checkpoint", "none yet"))
    if "restarts" in m:
        causes = sorted(
            (k.split(":", 1)[1], int(v))
            for k, v in m.items()
            if k.startswith("attempt_exits:") and v
        )
        line = f"{int(m['restarts'])}"
        if causes:
            line += " (" + ", ".join(f"{r}: {n}" for r, n in causes) + ")"
        if "goodput" in m:
            line += f"; goodput {m['goodput']:.0%}"
        out.append(("restarts", line))
    return [f"{k + ':':<12}{v}" for k, v in out]


# --- a fleet's manager (MultiKueue) --------------------------------------------------------------

# How Kueue 0.19 records where a manager's job runs (pkg/controller/admissionchecks/multikueue/
# workload.go and apis/kueue/v1beta2/workload_types.go at release-0.19 c90ed700c1, read
# 2026-11-29): while it dispatches, the manager's Workload lists the workers it offered the job
# to in `status.nominatedClusterNames` (every worker at once with the default dispatcher); once
# a worker admits its copy, `syncAdmittingRemoteState` sets the MultiKueue admission check
# Ready with the message `The workload was admitted on "<worker>"`, sets `status.clusterName`
# to that worker (immutable until an eviction resets it) and clears the nominated names.
MULTIKUEUE = MULTIKUEUE_CONTROLLER


def managed_by(job: dict) -> str | None:
    spec = job.get("spec", {})
    return spec.get("managedBy") or (spec.get("runPolicy") or {}).get("managedBy")


def fleet_worker(g: Gathered) -> str | None:
    """The worker cluster a manager's job runs on (the Workload's status.clusterName)."""
    return (g.workload or {}).get("status", {}).get("clusterName") or None


def fleet_lines(g: Gathered) -> list[str]:
    """Where a fleet manager's job runs, or to whom it was offered, and its admission checks."""
    st = (g.workload or {}).get("status", {})
    worker = fleet_worker(g)
    nominated = st.get("nominatedClusterNames") or []
    if not worker and not nominated and managed_by(g.job) != MULTIKUEUE:
        return []
    if worker:
        out = [
            f"worker:     {worker} (MultiKueue runs it on that cluster: its pods, logs and "
            "metrics are there)"
        ]
    elif nominated:
        out = [
            f"worker:     none yet; offered to {', '.join(nominated)} (the first to admit it "
            "runs it)"
        ]
    else:
        out = ["worker:     none yet (MultiKueue offers it to the workers once the manager "
               "reserves its quota)"]  # fmt: skip
    for c in st.get("admissionChecks") or []:
        text = f"check:      {c.get('name')} {c.get('state')}"
        if c.get("message"):
            text += f": {c['message']}"
        out.append(text)
    return out


def fleet_why(g: Gathered, state: str) -> list[str]:
    """`why` on a fleet manager: where the job runs, or what its dispatch waits for."""
    worker = fleet_worker(g)
    if worker and not g.pods:
        return [
            f"{state} on worker cluster {worker}: MultiKueue runs it there, and this cluster "
            "holds only its copy, with the worker's status.",
            f"Its pods, logs and metrics are on {worker}: run `trainforge why {g.name} -n "
            f"{g.namespace}` with that cluster's kubeconfig.",
            "See docs/fleet.md#which-worker-runs-a-job",
        ]
    wl = g.workload
    if wl is None or is_true(wl, "Admitted") or not is_true(wl, "QuotaReserved"):
        return []
    st = wl.get("status", {})
    waiting = [c for c in st.get("admissionChecks") or [] if c.get("state") != "Ready"]
    if not waiting:
        return []
    out = ["Kueue reserved its quota on this cluster; it waits for its admission check(s):"]
    out += [
        f"  {c.get('name')} {c.get('state')}: {c.get('message', '')}".rstrip(": ") for c in waiting
    ]
    nominated = st.get("nominatedClusterNames") or []
    if nominated:
        out.append(
            f"  MultiKueue offered it to {', '.join(nominated)}; none has admitted it yet (each "
            "worker's own queue decides: `trainforge why` there says why)"
        )
    out.append("See docs/fleet.md#which-worker-runs-a-job")
    return out


# --- the reports --------------------------------------------------------------------------------


def status(g: Gathered, now: datetime) -> str:
    state, cond = job_state(g)
    created = g.job.get("metadata", {}).get("creationTimestamp")
    lines = [f"job:        {g.namespace}/{g.name} ({g.kind}, created {age(created, now)} ago)"]
    wl = g.workload
    admitted = is_true(wl, "Admitted")
    if wl is not None and not admitted and state not in ("Succeeded", "Failed"):
        lines.append(f"state:      Queued: {not_admitted(wl, now)}")
    else:
        text = state
        if state == "Running" and any(_last_exit(p) for p in g.pods):
            latest = max(_last_exit(p) or "" for p in g.pods)
            text += f", restarted {age(latest, now)} ago"
        elif cond and cond.get("lastTransitionTime"):
            text += f" for {age(cond['lastTransitionTime'], now)}"
        if cond and state in ("Restarting", "Failed") and cond.get("message"):
            text += f": {cond['message']}"
        lines.append(f"state:      {text}")
    # started and short of its world (admission.may_refuse: wait's condition, no further
    # read): a Pod Security refusal of its pod creates means it never runs whole; why's
    # first line, as wait ends with it
    refused_pods = admission.first_line(g) if admission.may_refuse(g, state) else ""
    if refused_pods:
        lines.append(f"refused:    {refused_pods} (trainforge why: the checks and the fix)")
    if wl is not None:
        lines += queue_lines(g, admitted, now)
        lines += fleet_lines(g)
    elif state == "Suspended" and not g.workload_unread:
        queue = (g.job.get("metadata", {}).get("labels") or {}).get(QUEUE_LABEL)
        lines.append(f"queue:      {f'LocalQueue {queue}; ' if queue else ''}no Kueue Workload: "
                     "Kueue has not taken the job in (trainforge why)")  # fmt: skip
    lines += progress_lines(g, now)
    if fleet_worker(g) and not g.pods:
        lines.append(
            f"spend:      on worker {fleet_worker(g)}, where its pods run (ask that cluster)"
        )
    elif g.spend:
        lines.append(g.spend)
    if g.pods:
        lines.append("pods:")
        ours = exit_codes_are_ours(g)
        lines += [f"  {pod_line(p, g.container, now, ours, g)}" for p in g.pods]
    elif fleet_worker(g):
        lines.append(f"pods:       none on this cluster (they run on worker {fleet_worker(g)})")
    elif wl is not None and not admitted:
        lines.append("pods:       none yet (the job stays suspended until Kueue admits it)")
    else:
        lines.append("pods:       none")
    warnings = [e for e in g.events if e.get("type") == "Warning"]
    if warnings:
        lines.append("warnings:")
        for e in sorted(warnings, key=lambda e: e.get("lastTimestamp") or "")[-5:]:
            what = e.get("involvedObject", {}).get("name", "")
            lines.append(
                f"  {age(e.get('lastTimestamp'), now)} ago  {what}: {e.get('reason')}: {e.get('message', '').strip()}"
            )
    lines += [f"note:       {n}" for n in g.notes]
    return "\n".join(lines) + "\n"


def not_admitted(wl: dict, now: datetime) -> str:
    """How long Kueue has not admitted the Workload: since it lost its admission, else since
    it was created. At 0.19's default feature gates Kueue writes the Admitted condition only
    when admission changes (release-0.19 c90ed70 pkg/workload/admissionchecks.go:39
    SyncAdmittedCondition), so its lastTransitionTime is that loss; QuotaReserved's is the
    scheduler's first try, or the reservation of one whose quota it reserved (then said)."""
    since = (condition(wl, "Admitted") or {}).get("lastTransitionTime")
    text = f"not admitted by Kueue for {age(since or wl['metadata'].get('creationTimestamp'), now)}"
    if is_true(wl, "QuotaReserved"):
        reserved = (condition(wl, "QuotaReserved") or {}).get("lastTransitionTime")
        text += f"; its quota reserved {age(reserved, now)} ago"
    return text


def queue_lines(g: Gathered, admitted: bool, now: datetime) -> list[str]:
    wl = g.workload or {}
    lq = wl.get("spec", {}).get("queueName", "?")
    adm = wl.get("status", {}).get("admission") or {}
    cq = adm.get("clusterQueue") or (g.local_queue or {}).get("spec", {}).get("clusterQueue", "?")
    line = f"queue:      LocalQueue {lq} -> ClusterQueue {cq}; Workload {wl['metadata']['name']}"
    out = [line]
    if admitted:
        flavors = sorted(
            {f for a in adm.get("podSetAssignments", []) for f in (a.get("flavors") or {}).values()}
        )
        out.append(f"admitted:   yes, to flavor {', '.join(flavors) or '?'}")
        lent = borrowing(g)
        if lent:
            out.append(f"borrowing:  {lent}")
    elif is_true(wl, "QuotaReserved"):
        # Admitted = quota reserved and every admission check Ready (Kueue's workload
        # conditions): what it waits for is a check, not quota (on a fleet manager, MultiKueue)
        checks = [c.get("name", "?") for c in wl.get("status", {}).get("admissionChecks") or []
                  if c.get("state") != "Ready"]  # fmt: skip
        out.append(
            f"reserved:   its quota in ClusterQueue {cq}; it waits for admission check(s) "
            f"{', '.join(checks) or '?'}"
        )
    else:
        if g.position is not None:
            out.append(
                f"position:   {g.position.get('positionInLocalQueue', 0) + 1} in the team's queue, "
                f"{g.position.get('positionInClusterQueue', 0) + 1} in ClusterQueue {cq}"
            )
        out += [f"asks:       {r}" for r in requests(g)]
        order = limit_range_order(g)
        if order:
            out.append(f"note:       {order}")
        invalid, held = refused(g), K.held(wl)
        if invalid:
            out.append(f"refused:    {invalid}")
        elif held:
            out.append(f"held:       {held}")
        else:
            out += [f"blocked:    {b}" for b in blocked_by(g)]
        if g.expected is not None and not invalid and not held:
            out += [f"{k + ':':<12}{v}" for k, v in wait.lines(g.expected)]
    evicted = condition(wl, "Evicted")
    if evicted and evicted.get("status") == "True" or (wl.get("status", {}).get("requeueState")):
        rs = wl.get("status", {}).get("requeueState") or {}
        text = (
            f"evicted:    {(evicted or {}).get('reason', '')}: {(evicted or {}).get('message', '')}"
        )
        if rs:
            text += f" (requeued {rs.get('count', 0)} times"
            if rs.get("requeueAt"):
                text += f", next try at {rs['requeueAt']}"
            text += ")"
        out.append(text)
    return out


# kubernetes-sigs/kueue release-0.19 (c90ed700c1, 2026-08-22) pkg/controller/constants
PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"


def no_workload(g: Gathered) -> list[str]:
    """Why a suspended job has no Kueue Workload, read by its label, `why`'s diagnosis.

    Kueue release-0.19 (c90ed700c1, 2026-08-22) pkg/controller/jobframework/reconciler.go
    ReconcileGenericJob makes a job's Workload only when a reconciler for its kind runs (Kueue
    up, the kind in `integrations.frameworks`), the namespace matches
    `managedJobsNamespaceSelector`, no Kueue-managed owner queues it instead
    (FindAncestorJobManagedByKueue) and it names no prebuilt Workload
    (handleJobWithNoWorkload)."""
    meta = g.job.get("metadata", {})
    queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
    asks = f" (LocalQueue {queue}, its {QUEUE_LABEL} label)" if queue else ""
    out = [f"Suspended, and Kueue has made no Workload for it{asks}: nothing admits it."]
    prebuilt = (meta.get("labels") or {}).get(PREBUILT_LABEL)
    if prebuilt:
        return out + [f"  it names the prebuilt Workload {prebuilt} ({PREBUILT_LABEL}), which "
                      "does not exist: Kueue makes none for it and waits for that one"]  # fmt: skip
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    if owner:
        out.append(f"  its owner {owner.get('kind')} {owner.get('name')} is queued instead "
                   "when Kueue manages it: ask about that")  # fmt: skip
    return out + [
        "  Kueue makes one only for a job it manages; check that:",
        "  - Kueue's controller runs",
        f"  - its managedJobsNamespaceSelector selects namespace {g.namespace}",
        f"  - its integrations.frameworks lists {backends.KUEUE_FRAMEWORKS[g.backend]}",
        "See docs/troubleshooting.md#suspended-with-no-kueue-workload",
    ]


def succeeded_why(g: Gathered, now: datetime) -> str:
    """`why` of a Succeeded job: that it finished, and where some of its pods ended failed (a
    PyTorchJob's Worker after its Master's exit 0, which alone ends it: jobs/success.py), those
    pods' lines, whose `then:` says what the rule says follows (no pod is re-created, the
    cleanPodPolicy), the words run-local's verdict prints for the same run."""
    done = f"{g.name} finished successfully.\n"
    failed = [p for p in g.pods if _failed_now(p, g.container)]
    if not failed:
        return done
    ours = exit_codes_are_ours(g)
    lines = [f"  {pod_line(p, g.container, now, ours, g)}" for p in failed]
    return (
        done
        + "Pods of it that failed (the job succeeded without them):\n"
        + "\n".join(lines)
        + "\n"
    )


def _failed_now(pod: dict, container: str) -> bool:
    """Whether the pod's training container has ended with a nonzero code and not run again."""
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if c.get("name") == container:
            ended = (c.get("state") or {}).get("terminated") or {}
            return bool(ended.get("exitCode"))
    return False


def why(g: Gathered, now: datetime, last_lines: dict[str, str], lines_unread: str = "") -> str:
    """One diagnosis: the first thing that explains why the job is not (or no longer) making
    progress, and where to read more (docs/troubleshooting.md). `last_lines`: each restarted
    pod's last exit line; `lines_unread`: the note for the logs that could not be read."""
    state, cond = job_state(g)
    wl = g.workload
    if state == "Succeeded":
        return succeeded_why(g, now)
    reasons = fleet_why(g, state)
    if reasons:
        return "\n".join(reasons) + "\n"
    if wl is None and state == "Suspended" and not g.pods:  # pods: their exits say more
        if g.workload_unread:
            return f"Suspended; whether Kueue admits it is not known: {g.workload_unread}\n"
        return "\n".join(no_workload(g)) + "\n"
    if wl is not None and not is_true(wl, "Admitted") and state != "Failed":
        blocked, invalid, held = blocked_by(g), refused(g), K.held(wl)
        if invalid and K.for_resources(invalid):
            reasons.append(invalid)
            reasons.append(
                "  a container requests more than it limits once the namespace's LimitRange "
                "filled in what it leaves out (`default` as its limit, `defaultRequest` as its "
                "request), or a container or pod is outside the LimitRange's min or max: it "
                "never waits its turn, only a change of the job or the LimitRange helps"
            )
        elif invalid and K.deactivated(wl):
            reasons.append(invalid + ".")
        elif invalid and g.quota_fix:  # `why --stack`: the plan's sized fix (stack_fix.py)
            reasons.append(invalid)
            reasons.append(f"  it never waits its turn: {g.quota_fix}")
        elif invalid:
            reasons.append(invalid)
            reasons.append(
                "  it never waits its turn: only a change of the job (its queue, its size), "
                "or of the LocalQueue, the ClusterQueue or its flavors, helps"
                # over what its queue may ever hold: `why --stack` sizes the fix (stack_fix.py)
                + (" (--stack STACK: the sized fix)" if "maximum capacity" in invalid else "")
            )
        elif held:
            reasons.append(held + ".")
        elif blocked and _INSUFFICIENT.search(
            (condition(wl, "QuotaReserved") or {}).get("message", "")
        ):
            reasons.append("Kueue has not admitted it: not enough quota.")
            reasons += [f"  {b}" for b in blocked]
        elif blocked:  # Kueue's message names no quota short (an admission check, a topology)
            reasons.append(f"Kueue has not admitted it: {blocked[0]}")
            if K.over_beside(wl) and g.never_fits is None:  # never only if no choice of
                # flavors holds its pod sets: the stack's queue model says (stack_fix.py)
                reasons.append(
                    "  its pod sets together are over a flavor's maximum capacity: whether any "
                    "other flavor ever holds them is the queue model's to say (--stack STACK: "
                    "never, and the sized fix, where none does)"
                )
            elif K.over_beside(wl):
                reasons.append(
                    "  the stack's queues hold its pod sets in another choice of flavors: it "
                    "waits for the quota they use"
                )
        elif is_true(wl, "QuotaReserved"):  # its checks all Ready (fleet_why names waiting ones)
            reasons.append(
                "Kueue reserved its quota; it is admitted once every admission check is Ready "
                "(Kueue's Admitted condition: quota reserved and all checks Ready)."
            )
        elif is_true(wl, "Evicted"):  # Kueue sets it False ("Previously: ...") once readmitted
            ev = condition(wl, "Evicted") or {}
            reasons.append(
                f"Kueue evicted it ({ev.get('reason')}: {ev.get('message')}); it is requeued."
            )
        else:
            reasons.append("Kueue has not admitted it yet (waiting for its turn in the queue).")
        if g.expected is not None and not invalid and not held:
            reasons += [f"  {k}: {v}" for k, v in wait.lines(g.expected)]
        if g.limit_ranges_unread:
            reasons.append(f"  note: {g.limit_ranges_unread}")
        order = limit_range_order(g)
        if order:
            reasons.append(f"  note: {order}")
        reasons.append(
            "See docs/troubleshooting.md#requests-over-limits-never-admitted"
            if invalid and K.for_resources(invalid)
            else "See docs/troubleshooting.md#never-admitted-its-queue-or-no-flavor"
            if invalid
            else "See docs/troubleshooting.md#waiting-in-the-queue-kueue"
        )
    if not reasons:  # a Pod create Pod Security refuses: what the plan says of the template
        reasons += admission.lines(g)
    pending = [p for p in g.pods if p.get("status", {}).get("phase") == "Pending"]
    if pending and not reasons:
        reasons.append("Admitted, but pods wait for nodes:")
        reasons += [f"  {pod_line(p, g.container, now)}" for p in pending]
        failed = [e for e in g.events if e.get("reason") == "FailedScheduling"]
        if failed:
            reasons.append(f"  scheduler: {failed[-1].get('message', '').strip()}")
        reasons.append("See docs/troubleshooting.md#pods-stuck-pending-capacity-or-quota")
    crashed = [
        p for p in g.pods
        if any((c.get("lastState") or {}).get("terminated") for c in p.get("status", {}).get("containerStatuses", []) or [])
        or p.get("status", {}).get("phase") == "Failed"
    ]  # fmt: skip
    if (state in ("Restarting", "Failed") or crashed) and not reasons:
        if cond and cond.get("message"):
            reasons.append(f"{state}: {cond['message']}")
        else:
            reasons.append(f"{state}, after its pods restarted. Their last exits:")
        ours = exit_codes_are_ours(g)
        codes = [
            exit_reason(t, runs_runtime(g, p))
            for p in crashed
            for c in p.get("status", {}).get("containerStatuses", []) or []
            for state in ("state", "lastState")  # a Failed pod's own, a restarted one's last
            for t in [(c.get(state) or {}).get("terminated") or {}]
            if ours
            and isinstance(t.get("exitCode"), int)
            and (state == "lastState" or t["exitCode"] != 0)
        ]
        for p in crashed:
            reasons.append(f"  {pod_line(p, g.container, now, ours, g)}")
            line = last_lines.get(p["metadata"]["name"])
            if line:
                reasons.append(f"    {line}")
        if lines_unread:
            reasons.append(f"  note: {lines_unread}")
        known = [r for r in codes if r is not None]
        if not ours:
            reasons.append(f"  {not_our_codes(g)}")
        if known:
            root = exits.root_cause(known)
            reasons.append(
                f"Most likely cause: {root.name} ({root.what}); the others follow from it."
            )
        elif codes:  # every failed exit of ours without a record: the cause is not known
            reasons.append(
                "Cause not known: the pods left no exit record (a wrapper older than the "
                "termination message, or a process killed before it wrote one); an exit code "
                "of your code names no reason. Read the logs: "
                f"trainforge logs {g.name} -n {g.namespace} --previous"
            )
        reasons.append(
            "See docs/troubleshooting.md and docs/reliability.md#exit-reasons-and-exitcode"
        )
    if not reasons:
        m = g.metrics or {}
        reasons.append(
            f"{state}; nothing blocks it."
            + (
                f" Step {int(m['step'])}, ETA {duration_text(m['eta_seconds'])}."
                if "eta_seconds" in m
                else ""
            )
        )
    return "\n".join(reasons) + "\n"
