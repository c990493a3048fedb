"""Plan check: a job container's `$(NAME)` that the pod would see as written.

Why: the kubelet expands an env value only from the variables defined EARLIER in the
container's env (and command/args from the whole env, the controller's included); a
reference to a later variable, to one no one defines, or (from an env value) to one the
job's controller appends after the template's env (the training operator's RANK,
MASTER_ADDR ...) stays the literal `$(NAME)`, and the code silently reads it
(core.expansion: the one model). Read from the emitted pod templates (a TrainJob's as its
controller builds the pod), so a stack's, an imported or a submitted job are judged alike.
"""

from __future__ import annotations

import re
from typing import Any

from trainforge.core.expansion import Unresolved, references, unresolved
from trainforge.jobs import backends
from trainforge.jobs.local import CONTROLLER_ENV, POD_RENDEZVOUS
from trainforge.jobs.pytorchjob import KIND as PYTORCHJOB
from trainforge.jobs.pytorchjob import LAUNCH
from trainforge.jobs.trainjob import KIND as TRAINJOB
from trainforge.plan.check_types import CheckResult, Finding, PlanContext
from trainforge.plan.checks.job_backends import runtime_docs

RULE = "TRAINFORGE_ENV_REFERENCE"
FIX = (
    "define the variable before the one that refers to it, or at all (Kubernetes expands "
    "$(NAME) only from earlier variables); write $$(NAME) for the literal text"
)
RULES = {RULE: FIX}
# what a reference must look like to be judged: a variable's name in an env value; in command
# and args an upper-case one, since `bash -c "cd $(dirname $0)"` or `$(hostname)` is shell
# command substitution the kubelet leaves as written on purpose
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ARG_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
# elastic PyTorchJob pods get these instead of RANK/MASTER_ADDR (jobs/pod.py's docstring)
_ELASTIC = {"PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND", "PET_RDZV_ID", "PET_MAX_RESTARTS"}


def appended(doc: dict[str, Any]) -> set[str]:
    """The variables the object's controller appends after its pod template's env (the
    training operator's; the Job controller's JOB_COMPLETION_INDEX on an Indexed Job's, and
    so a TrainJob's, whose built pod already has the Trainer's PET_*)."""
    kind = doc.get("kind")
    if kind == PYTORCHJOB:
        return {*CONTROLLER_ENV["pytorchjob"], *POD_RENDEZVOUS, *LAUNCH.controller_env, *_ELASTIC}
    if kind == TRAINJOB:
        return set(CONTROLLER_ENV["trainjob"])
    if kind == "Job" and (doc.get("spec") or {}).get("completionMode") == "Indexed":
        return set(CONTROLLER_ENV["indexed-job"])
    return set()


def container_problems(container: dict[str, Any], controller: set[str]) -> list[Unresolved]:
    """What `container`'s env values and command/args refer to that the pod sees as written.
    A container with envFrom is judged on references to later variables only (its
    ConfigMap's or Secret's names are not known here)."""
    env = [(e.get("name", ""), e.get("value")) for e in container.get("env") or []]
    found = [u for u in unresolved(env, controller) if _ENV_NAME.fullmatch(u.ref)]
    if container.get("envFrom"):
        return [u for u in found if u.where == "later"]
    defined = {n for n, _ in env} | controller
    for field in ("command", "args"):
        for arg in container.get(field) or []:
            for ref in references(str(arg)):
                if ref not in defined and _ARG_NAME.fullmatch(ref):
                    found.append(Unresolved(field, ref, "nowhere"))
    return found


def check(ctx: PlanContext) -> CheckResult:
    findings: list[Finding] = []
    for o in ctx.objects:
        if not o.namespace or backends.job_shape(o.doc) is None:
            continue
        try:
            templates = backends.pod_templates(o.doc, runtimes=runtime_docs(ctx))
        except (KeyError, TypeError, ValueError, AttributeError, StopIteration):
            continue  # malformed: the schema and runtime checks say why
        controller = appended(o.doc)
        seen: set[tuple[str, str, str]] = set()
        for t in templates:
            spec = t.spec if isinstance(t.spec, dict) else {}
            for c in spec.get("containers") or []:
                for u in container_problems(c, controller):
                    if (c.get("name"), u.name, u.ref) in seen:
                        continue  # one finding per container, not per replica type
                    seen.add((c.get("name"), u.name, u.ref))
                    what = "its command/args" if u.name in ("command", "args") else u.name
                    where = {
                        "later": "is defined after it",
                        "controller": "the controller appends after the template's env",
                        "nowhere": "is defined nowhere in the container's env",
                    }[u.where]
                    msg = (
                        f"{o.label}: container {c.get('name')}: {what} refers to $({u.ref}), "
                        f"which {where}: the pod sees the literal text $({u.ref})"
                    )
                    findings.append(Finding(o.ident, RULE, msg, u.fix(), urn=o.urn, names=o.names))
    return CheckResult(findings, [])
