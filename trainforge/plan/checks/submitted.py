"""Plan check: each TrainJob a Kubeflow SDK program sent (`trainforge plan --sdk`), as a job
(queue, node fit, cost), and what the platform cannot do for it (a runtime the stack does not
declare, `packages_to_install`); every other check judges it as the stack's own objects. What
and why: docs/jobs.md, "The Kubeflow SDK".
"""

from __future__ import annotations

import ast
import os
import pathlib
import posixpath
import re
import shlex
import tempfile
import textwrap
from fractions import Fraction
from typing import Any

from trainforge.core.contract import DEFAULT_BACKEND, GPU_RESOURCE
from trainforge.core.pods import PodTemplate, pod_limits
from trainforge.core.quantity import figure
from trainforge.jobs import capacity, pynames, trainjob, wiring
from trainforge.jobs.spec import JobSpec
from trainforge.plan import cost as C
from trainforge.plan import kueue as K
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.checks import pod_files
from trainforge.plan.checks import pod_sandbox as sandbox
from trainforge.plan.checks import pod_scripts as P
from trainforge.plan.checks import queues as Q
from trainforge.plan.checks import scheduling as S
from trainforge.plan.checks.job_backends import runtime_docs
from trainforge.plan.sdk import SENT_URN
from trainforge.stack.file import decode_value

TITLE = "Kubeflow SDK program (plan --sdk)"
RULE_RUNTIME = "TRAINFORGE_SDK_RUNTIME_MISSING"
RULE_PROGRAM = "TRAINFORGE_SDK_PROGRAM_FAILED"
RULE_PACKAGES = "TRAINFORGE_SDK_PACKAGES"
RULE_NAMES = "TRAINFORGE_SDK_UNDEFINED_NAME"
RULE_HEREDOC = "TRAINFORGE_SDK_SHELL_EXPANDS"
BACKENDS_KEY = "trainforge:jobBackends"
RULES = {
    RULE_RUNTIME: (
        f"set `{BACKENDS_KEY}: [trainjob]` (or add trainjob to the list) in the stack file: the "
        "platform then installs the Kubeflow Trainer and the SDK's runtime torch-distributed"
    ),
    RULE_PROGRAM: "fix the program: it must run to its end against the cluster's API",
    RULE_PACKAGES: (
        "drop packages_to_install: build an image FROM the runtime image with the packages "
        "(docs/images.md) and pass CustomTrainer(image=...)"
    ),
    RULE_NAMES: (
        "import or define each name inside the function (the SDK sends its source alone), or "
        "pass the value as an argument (CustomTrainer(func_args=...))"
    ),
    RULE_HEREDOC: (
        "write the function so that bash changes none of it: in its (non-raw) strings, "
        "`\\x24` for `$`, `\\x60` for a backtick and `\\x5c` for a backslash (Python reads "
        "the same characters; bash keeps a backslash before any other); or ship the code in an "
        "image and use a non-function trainer (CustomTrainerContainer)"
    ),
}
FIT_FIX = (
    "ask per node what a node of the pool Kueue assigns holds (CustomTrainer "
    "resources_per_node; more num_nodes with fewer GPUs each), or give the team quota on a "
    "pool of bigger nodes (docs/jobs.md, The Kubeflow SDK)"
)
# The SDK's generated install script (kubeflow 0.4.1, the pinned SDK, and 0.5.0:
# trainer/backends/kubernetes/utils.py get_script_for_python_packages; its utils_test.py
# cases): a bash array of the packages, then `python -m pip install`.
_PACKAGES = re.compile(r"^PACKAGES=\((?P<list>.*)\)$", re.MULTILINE)
_PIP = re.compile(r"\bpip3?\s+install\b|-m\s+pip\s+install\b")


def packages(pod: dict[str, Any]) -> list[str] | None:
    """The packages the SDK's install script in the pod installs with pip (None: it has no
    such script; a `pip install` in the user's own function text is not the SDK's)."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        script = P.shell_script(c) or ""
        m = _PACKAGES.search(script)
        if m is None or not _PIP.search(script[m.end() :]):
            continue
        try:
            return shlex.split(m.group("list"))
        except ValueError:
            return [m.group("list")]
    return None


# The rehearsal's `python`: the host's own Python and pip (its /usr is in the sandbox), so the
# SDK's install script meets a real pip, in a sandbox whose network namespace reaches nothing
# (as a team namespace's egress reaches no package index). torchrun stays the plan's stand-in.
HOST_PYTHON = "/usr/bin/python3"


def rehearse_install(pod: dict[str, Any]) -> sandbox.RunResult | str:
    """Run the pod's script (the SDK's pip install, then its program) in the pod sandbox as
    the pod's user on its volumes, with a real pip and no network. Returns the result, or why
    it was not run."""
    why = sandbox.unavailable()
    if why:
        return why
    if not os.path.exists(HOST_PYTHON):
        return f"no {HOST_PYTHON} here to stand for the image's Python"
    spec = pod.get("spec") or {}
    (c, *_) = spec.get("containers") or [{}]
    script = P.script_of(spec, c, image=True)
    if script is None:
        return "its container runs no shell script"
    if why := P.unrunnable_alone(script):
        return why
    with tempfile.TemporaryDirectory(prefix="trainforge-sdk-pip-") as tmp:
        run = P._Run(pathlib.Path(tmp), {})
        return P.run_script(script, run, "", python=HOST_PYTHON, timeout=120)


def open_egress(ctx: PlanContext, namespace: str) -> str | None:
    """The plan's NetworkPolicy of `namespace` that lets its pods reach any address over HTTPS
    (an egress rule with no `to`, or an ipBlock 0.0.0.0/0, on port 443 or every port), or
    "no egress policy" when none restricts egress; None when egress reaches only the
    addresses the policies name (a package index is not one of the platform's)."""
    policies = [o for o in ctx.objects if o.kind == "NetworkPolicy" and o.namespace == namespace]
    restricting = [
        o for o in policies if "Egress" in ((o.doc.get("spec") or {}).get("policyTypes") or [])
    ]
    if not restricting:
        return "no egress policy"
    for o in restricting:
        for rule in (o.doc.get("spec") or {}).get("egress") or []:
            ports = rule.get("ports") or []
            https = not ports or any(str(p.get("port")) in ("443", "https") for p in ports)
            to = rule.get("to")
            anywhere = not to or any(
                ((t.get("ipBlock") or {}).get("cidr") in ("0.0.0.0/0", "::/0")) for t in to
            )
            if https and anywhere:
                return o.obj_name
    return None


def _finding(ident: str, rule: str, message: str, fix: str, urn: str = "") -> Finding:
    return Finding(ident, rule, message, fix, urn=urn, names=frozenset({ident}))


def pod_size(req: dict[str, Fraction]) -> str:
    """One pod's requests as the plan writes quantities (`figure`): "2 GPU, cpu 0.5, memory 1Gi"."""
    gpus = int(req.get(GPU_RESOURCE, 0))
    return ", ".join(
        [f"{gpus} GPU"] * bool(gpus)
        + [f"{r} {figure(r, req[r])}" for r in ("cpu", "memory") if req.get(r)]
    )


def first_line(program: str | None, w: Any) -> int | None:
    """The line where the function the SDK sent starts in its file on this machine, or None
    (not found, never guessed). kubeflow 0.4.1 sends `textwrap.dedent(inspect.getsource(f))`
    to a file named `basename(inspect.getfile(f))` (trainer/backends/kubernetes/utils.py,
    read 2026-11-30), so the pod's line N is the file's `first + N - 1`; the file is the
    program or a module beside it (its working directory)."""
    if not program:
        return None
    name = posixpath.basename(w.file)
    prog = pathlib.Path(program)
    try:
        text = (prog if prog.name == name else prog.parent / name).read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    lines, sent = text.splitlines(), w.source.strip().splitlines()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            block = textwrap.dedent("\n".join(lines[start - 1 : node.end_lineno])).splitlines()
            if block and sent[: len(block)] == block:
                found.add(start)
    return found.pop() if len(found) == 1 else None


def pod_line_at(w: Any, line: int, program: str | None) -> str:
    """Line `line` of the file the pod writes, as the user's FILE:LINE first where found
    (`first_line`, and the function's own line: `pod_files.Written.source_line`). Every
    --sdk finding that names a line says it so (names, heredoc, downloads: checks/fetches)."""
    first, own = first_line(program, w), w.source_line(line)
    pod = f"line {line} of the file the SDK writes in the pod"
    if first is None or own is None:
        return f"{pod} ({w.file})"
    return f"{w.file}:{first + own - 1}, {pod}"


def _unbound(
    o: Any, pod: dict[str, Any], lines: list[str], program: str | None = None
) -> list[Finding]:
    """Names the function the SDK sent uses and never binds (`pynames.unbound`), read from
    the file its pod writes (`pod_files.written`: as the pod's bash writes it)."""
    spec = pod.get("spec") or {}
    found = [
        f"`{n}` ({pod_line_at(w, line, program)})"
        for c in spec.get("containers") or []
        for w in pod_files.written(spec, c)
        if w.file.endswith(".py") and w.read is not None
        for n, line in pynames.unbound(w.read, w.file)
    ]
    if not found:
        return []
    names = ", ".join(found)
    lines.append(f"  REFUSED: the function uses names it never defines: {names}")
    message = (
        f"{o.ident} (sent by the program): the function the SDK sent uses {names}, which it "
        "never defines, imports or takes as a parameter and no builtin provides; the SDK sends "
        "the function's source alone, without its module's imports and globals, so each pod "
        "raises NameError when it reaches that line and the runtime restarts it until the "
        "backoffLimit"
    )
    return [_finding(o.ident, RULE_NAMES, message, RULES[RULE_NAMES], o.urn)]


def _expanded(
    o: Any, pod: dict[str, Any], lines: list[str], program: str | None = None
) -> list[Finding]:
    """Where the file the pod writes (`pod_files.written`) differs from the function the SDK
    sent: its first differing line, both ways; a file the plan could not compute is said."""
    spec = pod.get("spec") or {}
    out = []
    for w in (w for c in spec.get("containers") or [] for w in pod_files.written(spec, c)):
        diff = w.difference()
        if w.read is None:
            what = "command substitution (`$(...)` or a backtick)" if w.substitutes else (
                "`$` or `\\`, which bash expands or drops")  # fmt: skip
            lines.append(
                f"  NOT READ: {w.file}, the file the SDK writes in the pod: its text holds "
                f"{what} and {w.why}: names and downloads in it are not checked"
            )
        if w.stopped:
            out.append(_stopped(o, w, lines))
            continue
        if diff is None:
            continue
        line, wrote, runs = diff
        at = pod_line_at(w, line, program)
        lines.append(f"  REFUSED: {at}: the pod runs `{runs.strip()}`")
        message = (
            f"{o.ident} (sent by the program): the file the SDK writes in the pod differs "
            f"from the function it sent, first at {at}: written "
            f"`{wrote.strip()}`, the pod runs `{runs.strip()}`; the SDK writes the function "
            "through an unquoted bash heredoc (`read -r -d '' SCRIPT << EOM`, kubeflow "
            "0.4.1 EXEC_FUNC_SCRIPT), so bash expands `$name`, `${...}`, `$(...)`, "
            "backticks and `$((...))` in it and drops a backslash before `$`, a backtick, "
            "a backslash or a newline (computed by running the TrainJob's own command "
            "with bash in the pod sandbox, with the container's literal env only: a "
            "variable the pod gets from its image or a fieldRef is empty here)"
        )
        out.append(_finding(o.ident, RULE_HEREDOC, message, RULES[RULE_HEREDOC], o.urn))
    return out


def _stopped(o: Any, w: Any, lines: list[str]) -> Finding:
    """bash refused the heredoc (`Written.stopped`: its error, not an expansion): the file the
    pod runs is empty or cut short, and the script goes on to run it, as the sandbox saw."""
    kept = len(w.text.strip().splitlines())
    size = "empty (0 bytes)" if not w.text else f"cut to {kept} of its lines"
    then = f" and the next command ran ({w.then.splitlines()[0]})" if w.then else ""
    lines.append(
        f"  REFUSED: bash stops the SDK's heredoc with `{w.error}`: the pod writes {w.file} "
        f"{size} and runs it; the script exits {w.rc}"
    )
    empty = (
        "torchrun runs the empty file: Python runs no code and exits 0, so every pod exits 0 "
        "and the TrainJob reports success having trained nothing"
        if not w.text
        else "the pod runs what was written before the error"
    )
    message = (
        f"{o.ident} (sent by the program): bash stops the heredoc the SDK writes the function "
        f"through (`read -r -d '' SCRIPT << EOM`, kubeflow 0.4.1 EXEC_FUNC_SCRIPT) with its "
        f"error `{w.error}`: an error, not an expansion (no text is changed: the heredoc is "
        f"not read), so the pod writes {w.file} {size} (the SDK sent "
        f"{len(w.source.strip().splitlines())} lines), the script goes on; {empty} "
        f"(computed by running the TrainJob's own command with bash in the pod sandbox: "
        f"bash printed `{w.error}`, wrote {w.file} {size}, the script exited {w.rc}{then}; "
        "the image's torchrun a stand-in)"
    )
    return _finding(o.ident, RULE_HEREDOC, message, RULES[RULE_HEREDOC], o.urn)


def _range_names(ranges: list[dict[str, Any]]) -> str:
    meta = [r.get("metadata") or {} for r in ranges]
    return ", ".join(f"{m.get('namespace')}/{m.get('name')}" for m in meta)


def _limits_words(own: dict[str, Fraction], limits: dict[str, Fraction], ranges: list) -> str:
    """A pod's cpu and memory limits as it runs (`core.pods.pod_limits`), and which of them
    the namespace's LimitRange gave it (the SDK sends resources_per_node as requests and
    limits both, and the Trainer copies them as sent: only what it names is its own)."""
    parts = [
        f"{r} {figure(r, limits[r])}" if r in limits else f"{r} none" for r in ("cpu", "memory")
    ]
    given = [r for r in ("cpu", "memory") if r in limits and r not in own]
    if given:
        return f"limits {', '.join(parts)} ({' and '.join(given)}: the default of LimitRange {_range_names(ranges)})"
    return f"limits {', '.join(parts)}"


def _below_share(
    own: dict[str, Fraction], limits: dict[str, Fraction], ranges: list, pool: Any, gpus: int
) -> list[str]:
    """A warning where the LimitRange's default limits a GPU pod below what its GPUs come with
    on the pool (`wiring.below_share`, what the platform's own pods get), with the
    resources_per_node that gives it that share. A limit the program set itself is its own."""
    short = wiring.below_share({r: v for r, v in limits.items() if r not in own}, pool, gpus)
    if not short:
        return []
    said = " and ".join(f"{r} limit {figure(r, v)}" for r, (v, _) in short.items())
    share = ", ".join(f"{r} {s}" for r, (_, s) in short.items())
    fix = ", ".join([f'"gpu": {gpus}'] + [f'"{r}": "{s}"' for r, (_, s) in short.items()])
    return [
        f"  WARNING: each pod runs under {said} (the default of LimitRange "
        f"{_range_names(ranges)}: resources_per_node names no {' or '.join(short)}), below "
        f"what {gpus} GPU(s) of pool {pool.name} come with ({share}, what the platform's own "
        f"jobs get, requests = limits): "
        + "; ".join(
            "a pod using more memory than its limit is OOM-killed" if r == "memory"
            else "its CPU use above its limit is throttled"
            for r in short
        )
        + f"; give resources_per_node {{{fix}}}"
    ]  # fmt: skip


def _fits_no_node(ctx: PlanContext, req: Any, pods: int, w: Any) -> list[str]:
    """When Kueue admits it on no flavor: each pool's problem (`capacity.rehearse`) when no
    node of any flavor's pool of its ClusterQueue holds one pod (no quota helps), else []."""
    queue = K.read([x.doc for x in ctx.objects]).queues.get(w.queue or "")
    out = []
    for flavor in queue.flavors if queue and ctx.declared else []:
        pool = ctx.declared.pool(flavor)
        r = capacity.rehearse(req, pods, pool) if pool is not None else None
        if r is None or not r.fits or any(f.per_node > 0 for f in r.fits):
            return []  # a node may hold it: quota is what keeps it out
        out += [p.message for p in r.problems]
    return out


def _judge(ctx: PlanContext, o: Any, region: str) -> tuple[list[str], list[Finding]]:
    """One sent TrainJob: its pods, queue, node fit, packages and cost."""
    ident, doc = o.ident, o.doc
    lines: list[str] = []
    findings: list[Finding] = []
    pod = trainjob.built_pod(doc, runtime_docs(ctx))
    if pod is None:  # the SDK reads its runtime first, so it sent none without one
        ref = (doc.get("spec") or {}).get("runtimeRef") or {}
        lines.append(f"{ident}: runtime {ref.get('name')!r} not in the plan: not judged")
        return lines, findings
    pods = trainjob.SHAPE.pod_count(doc, runtime_docs(ctx))  # numNodes, else the runtime's
    # a pod's requests as Kueue counts them (LimitRange defaults, limits for missing
    # requests), so node fit judges what the queue admits; as the scheduler counts them
    req = Q.submitted_requests(ctx, doc, pod)
    ranges = Q.limit_ranges(ctx, o.namespace or "")
    fit = capacity.pod_request(pod.get("spec") or {}, ranges)
    w = Q.admit_submitted(ctx, doc, pod, pods, req)
    gpus = int(req.get(GPU_RESOURCE, 0))
    cpu, memory = req.get("cpu", Fraction(0)), req.get("memory", Fraction(0))
    size = pod_size(req)
    image = next(iter((pod.get("spec") or {}).get("containers") or []), {}).get("image")
    own, limits = pod_limits(pod.get("spec") or {}), pod_limits(pod.get("spec") or {}, ranges)
    said = _limits_words(own, limits, ranges)
    lines.append(f"{ident}: {pods} pod(s) x ({size or 'no requests'}; {said}), image {image}")
    program = getattr(getattr(ctx.inventory, "submitted", None), "program", None)
    findings += _unbound(o, pod, lines, program)
    findings += _expanded(o, pod, lines, program)
    if w.state != "admitted":
        lines.append(f"  queue: never admitted: {w.reason}")
        message = f"{ident} (sent by the program): {w.reason}"
        rule = Q.RULE_OVER_LIMITS if w.invalid else Q.RULE_NEVER
        unfit = _fits_no_node(ctx, fit, pods, w) if not w.invalid else []
        # over what its queue may ever hold: the stack jobs' fix, sized from its pods
        fix = (not w.invalid and Q.submitted_fix(ctx, w, req, pod)) or Q.RULES[rule]
        if unfit:
            fix = (
                f"more quota on these pools cannot help: its pods fit no node of ClusterQueue "
                f"{w.queue}'s flavors' pools ({S.RULE}); {FIT_FIX}"
            )
            why = f"{ident} (sent by the program): no flavor admits it, and " + "; ".join(unfit)
            lines += [f"  CANNOT RUN: {p}" for p in unfit]
            findings.append(_finding(ident, S.RULE, why, FIT_FIX, o.urn))
        findings.append(_finding(ident, rule, message, fix, o.urn))
        return lines, findings
    lines.append(
        f"  queue: admitted through LocalQueue {w.queue_name} of {o.namespace} (ClusterQueue "
        f"{w.queue}) on flavor {w.flavor}"
    )
    pool = ctx.declared.pool(w.flavor) if ctx.declared else None
    if pool is None:
        lines.append(f"  nodes: flavor {w.flavor} is no pool of the stack: node fit not rehearsed")
        return lines, findings
    # its pods as Karpenter packs them, EFA devices too (`capacity.gang`, the one model of a
    # gang), on the pool's nodes and within its limits (the launch check's packing)
    gang = capacity.gang([PodTemplate("", "", pod, pods)], ranges)
    r = capacity.rehearse(fit, pods, pool)
    if not r.fits:
        message = S.unrehearsed(f"{ident} (sent by the program)", pool, pods, size)
        lines.append(f"  NOT REHEARSED: {message}")
        findings.append(_finding(ident, S.UNREHEARSED, message, S.RULES[S.UNREHEARSED], o.urn))
    for p in r.problems:
        message = f"{ident}: Kueue admits it on pool {pool.name}, but its pods stay Pending: "
        message += p.message
        lines.append(f"  CANNOT RUN: {p.message}")
        findings.append(_finding(ident, S.RULE, message, FIT_FIX, o.urn))
    if r.fits and not r.problems:
        lines.append(f"  nodes: pods per node on pool {pool.name}: {S.pods_per_node(r)}")
        lines += _below_share(own, limits, ranges, pool, gpus)
        spec = JobSpec.model_construct(
            name=o.obj_name, team=w.team, pool=pool.name, workers=pods,
            gpus_per_worker=gpus, cpu=str(float(cpu)), memory=str(int(memory)),
        )  # fmt: skip
        choice = C.choose_nodes(spec, pool, region, gang)
        if choice is not None and choice.hourly_on_demand is not None:
            lines.append(
                f"  cost: {choice.nodes_words()}, "
                f"{C.usd(choice.hourly_on_demand)}/h on demand while it runs (the SDK declares "
                "no duration: no run cost)"
            )
        elif choice is not None:
            lines.append(f"  cost: unknown ({choice.reason})")
    wanted = packages(pod)
    if wanted is not None:
        findings += _packages(ctx, o, pod, wanted, lines)
    return lines, findings


def _packages(
    ctx: PlanContext, o: Any, pod: dict[str, Any], wanted: list[str], lines: list[str]
) -> list[Finding]:
    """packages_to_install: refused where the namespace's egress reaches no package index;
    the SDK's own install script is rehearsed in the pod sandbox with no index reachable."""
    opened = open_egress(ctx, o.namespace or "")
    if opened is not None:
        lines.append(
            f"  packages_to_install {wanted}: egress open over HTTPS ({opened}): not refused; "
            "whether the image's pip installs them is not rehearsed here"
        )
        return []
    result = rehearse_install(pod)
    if isinstance(result, str):
        seen = f"the SDK's install script not rehearsed ({result})"
    else:
        out = [x for x in (result.stdout + result.stderr).splitlines() if x.strip()]
        seen = (
            f"rehearsed in the pod sandbox with no index reachable, the SDK's install script "
            f"exits {result.rc}: {out[0] if out else '(no output)'}"
        )
    lines.append(f"  REFUSED: packages_to_install {wanted}: no package index reachable; {seen}")
    message = (
        f"{o.ident} (sent by the program) pip-installs {', '.join(wanted)} at start "
        "(packages_to_install), but its namespace's egress reaches no package index (DNS, the "
        "VPC's AWS endpoints, S3, the Pod Identity agent only): every pod exits 1 before "
        f"training and is restarted until the backoffLimit; {seen}"
    )
    return [_finding(o.ident, RULE_PACKAGES, message, RULES[RULE_PACKAGES], o.urn)]


def _no_runtime(ctx: PlanContext, backends: list[str]) -> tuple[str, str]:
    """(why the stack has no runtime the program names, what to do): the backends installed
    and the keys they come from (stack/services.py ServiceKeys), as set."""
    if "trainjob" in backends:
        return "the platform's Trainer has no runtime of that name", (
            f"name a runtime the stack declares (CustomTrainer's default is "
            f"{trainjob.SDK_RUNTIME}: leave `runtime=` unset)"
        )
    cfg = {k: decode_value(v) for k, v in (ctx.inventory.config or {}).items()}
    jobs = cfg.get("trainforge:jobs") if isinstance(cfg.get("trainforge:jobs"), list) else []
    named = sorted({str(j["backend"]) for j in jobs if isinstance(j, dict) and j.get("backend")})
    backend, listed = cfg.get("trainforge:jobBackend"), cfg.get(BACKENDS_KEY)
    said = (
        f"trainforge:jobBackend is {backend}" if backend is not None
        else f"trainforge:jobBackend is unset (its default: {DEFAULT_BACKEND})",
        f"{BACKENDS_KEY} is {listed}" if listed is not None else f"{BACKENDS_KEY} is unset",
        f"jobs set `backend:` {', '.join(named)}" if named else "no job sets `backend:`",
    )  # fmt: skip
    return (
        f"it installs the job backend(s) {', '.join(backends) or 'none'} only, as "
        f"{said[0]}, {said[1]} and {said[2]}: the Kubeflow Trainer and its runtimes are not "
        "installed"
    ), RULES[RULE_RUNTIME]


def check(ctx: PlanContext) -> CheckResult:
    sub = getattr(ctx.inventory, "submitted", None)
    if sub is None:
        return CheckResult()
    region = C.plan_region(ctx.inventory)
    sent = [o for o in ctx.objects if o.urn.startswith(SENT_URN)]  # not the stack's
    lines = [
        f"program {sub.program} (kubeconfig namespace {sub.namespace}): exit {sub.returncode}, "
        f"sent {len(sent)} TrainJob(s)"
    ]
    findings: list[Finding] = []
    first = ctx.declared.contracts[:1] if ctx.declared else []
    backends = [b for c in first for b in c.backends or (c.backend,)]  # the stack's platform
    why, fix = _no_runtime(ctx, backends) if sub.missing else ("", "")
    for name in dict.fromkeys(sub.missing):
        message = (
            f"the program asks for ClusterTrainingRuntime {name!r}, which this stack does not "
            f"declare ({why}); the SDK stops with `RuntimeError: Failed to get Runtime: {name}`"
        )
        lines.append(f"REFUSED: {message}")
        findings.append(_finding(f"ClusterTrainingRuntime/{name}", RULE_RUNTIME, message, fix))
    if sub.returncode != 0 and sub.created and sub.after_sent:
        # e.g. wait_for_job_status or get_job_logs: what it sent is judged below
        lines.append(
            f"then the program asked for {sub.after_sent[0]}, which a plan cannot answer (no "
            f"job runs here), and stopped there (exit {sub.returncode}: "
            f"{sub.last_error or 'no output'})"
        )
    elif sub.returncode != 0 and not sub.missing:
        message = (
            f"the program {sub.program} exited {sub.returncode} against the plan's API "
            f"stand-in: {sub.last_error or '(no output)'}"
        )
        lines.append(f"FAILED: {message}")
        findings.append(_finding(sub.program, RULE_PROGRAM, message, RULES[RULE_PROGRAM]))
    for more, found in (_judge(ctx, o, region) for o in sent):
        lines += more
        findings += found
    data = {"program": sub.program, "namespace": sub.namespace, "sent": [o.ident for o in sent],
            "missingRuntimes": list(dict.fromkeys(sub.missing))}  # fmt: skip
    return CheckResult(findings=findings, sections=[Section(TITLE, lines, data)])
