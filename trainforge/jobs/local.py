"""`trainforge run-local --stack dev JOB`: a job in stack config, run on this machine.

Reads `Pulumi.<stack>.yaml` with PyYAML only (no Pulumi import, no cloud access). For the
bundled runtime, the job's declaration becomes the same training flags its pods get, adapted
to this machine: every process of every pod becomes a local worker (CPU, gloo), checkpoints
and outputs go under ./runs/<job>, a data path on a volume is read from that volume's
stand-in (below), and the S3 mirror and metrics endpoint are off.

For a job with its own code (`entrypoint`), `user_code_run` prepares exactly what its pods run,
with the same contract (docs/jobs.md):

* the code: the very bundle the ConfigMap ships (same exclusions), written read-only to
  ./runs/<job>/code, which is the working directory and on PYTHONPATH as /workspace is in
  the pod; a function job's generated file likewise;
* the launcher: torchrun with one local worker per process of every pod (it sets RANK,
  WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), each worker with what
  its pod's controller sets in that pod (JOB_COMPLETION_INDEX, PET_*: `CONTROLLER_ENV`), the
  job's restarts as its controller re-creates pods (`launch`);
* the TRAINFORGE_* variables, with local directories standing for the volumes: outputs in
  ./runs/<job>, checkpoints in ./runs/<job>/checkpoints, other paths on the team's FSx mount
  under ./runs/<job>/fsx, each further claim under ./runs/<job>/volumes/<claim> (or a
  directory given with `--volume CLAIM=DIR`); the job's args get Kubernetes' `$(VAR)`
  expansion and pod paths on those volumes are rewritten to their local stand-ins;
* no S3 mirror, metrics port 0 (as the runtime's local runs).

A `command` job runs a program of its image, which this machine does not have: refused with
what to do instead. A `module` of the image runs from `entrypoint.workingDir` when it has one, as
its pods do: run here in that directory when this machine has it, else refused (`image_dir`).
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import os
import posixpath
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from trainforge.core import failures
from trainforge.core.contract import fsx_claim_name
from trainforge.core.errors import JobConfigError
from trainforge.core.expansion import expand
from trainforge.jobs import code_paths
from trainforge.stack import file as stack_file
from trainforge.training.torchrun_env import torchrun_env

# The job model (trainforge.jobs.spec: pydantic, ~0.4 CPU s to import) is imported where a
# job is parsed, so `trainforge run-local` without a stack (its launcher, `--dry-run`) never
# pays for it.
if TYPE_CHECKING:
    from trainforge.jobs.spec import JobSpec

CONFIG_KEY = "trainforge:jobs"


def load_stack_jobs(stack: str, project_dir: Path | str = ".") -> list[Any]:
    """The raw `trainforge:jobs` list of Pulumi.<stack>.yaml (the one stack reader)."""
    try:
        found = stack_file.read_stack(project_dir, stack)
    except stack_file.StackFileError as e:
        raise JobConfigError("--stack", stack, str(e)) from e
    path = found.path
    jobs = found.namespace("trainforge").get("jobs")
    if isinstance(jobs, dict) and "value" in jobs:  # `pulumi config set --path` object form
        jobs = jobs["value"]
    if jobs is None:
        raise JobConfigError(f"{path}: {CONFIG_KEY}", None, "this stack declares no jobs")
    if not isinstance(jobs, list):
        raise JobConfigError(f"{path}: {CONFIG_KEY}", jobs, "expected a list of jobs")
    return jobs


def find_job(
    stack: str,
    job_name: str,
    project_dir: Path | str = ".",
    program: str | None = None,
    declared: Callable[[str, Path | str, str | None], list[JobSpec]] | None = None,
) -> JobSpec:
    """JOB of STACK: from `trainforge:jobs` in Pulumi.<stack>.yaml, else from the jobs the
    stack's Pulumi program declares in Python (`TrainingJob(...)`, `.ddp`, `.function`; the
    project's __main__.py, or `program`): `declared(stack, project_dir, program)`, which
    run-local passes as `trainforge.local.program_jobs` (it runs the program under the plan's
    mocks; jobs sits below plan, docs/architecture.md "Layers"). Without it, config only."""
    from trainforge.jobs.spec import parse_job  # noqa: PLC0415 - see JobSpec's import

    try:
        raw = load_stack_jobs(stack, project_dir)
    except JobConfigError as e:
        if "declares no jobs" not in str(e):
            raise
        raw = []
    names = []
    for i, item in enumerate(raw):
        name = item.get("name") if isinstance(item, dict) else None
        names.append(str(name))
        if name == job_name:
            return parse_job(item, f"{CONFIG_KEY}[{i}]")
    found = declared(stack, project_dir, program) if declared is not None else []
    for spec in found:
        if spec.name == job_name:
            return spec
    from_program = [f"{j.name} ({program or '__main__.py'})" for j in found if j.name not in names]
    declares = ", ".join(names + from_program) or "(none)"
    near = difflib.get_close_matches(job_name, names + [j.name for j in found], n=1)
    hint = (
        f"did you mean {near[0]!r}?"
        if near  # a typo: the import's hint would not apply
        else f"an entry `trainforge import` printed runs once it is pasted under {CONFIG_KEY} "
        f"in Pulumi.{stack}.yaml"
    )
    raise JobConfigError("JOB", job_name, f"stack {stack!r} declares: {declares} ({hint})")


def local_processes(job: JobSpec) -> int:
    """Pods x processes per pod of a job. Resolved against its pool (`trainforge run-local`
    does, through the stack's program: trainforge.local.resolved_job) this is the rendered
    job's world size; a job not resolved (no program to do it) counts an unset
    gpusPerWorker as 1 process per pod."""
    return job.workers * job.procs


def local_training_flags(job: JobSpec, run_dir: str) -> list[str]:
    """The pod's training flags with local paths; the S3 mirror and metrics are off."""
    from trainforge.jobs.entrypoint import training_args

    args = [str(a) for a in training_args(job, _local_target(job))]
    replace = {
        "--output-dir": run_dir,
        "--checkpoint-dir": f"{run_dir}/checkpoints",
        "--metrics-port": "0",
    }
    out: list[str] = []
    i = 0
    while i < len(args):
        flag = args[i]
        if flag in replace:
            out += [flag, replace[flag]]
            i += 2
            continue
        if flag == "--data-path":  # the pods' path, on a volume: that volume's stand-in here
            out += [flag, _rewrite(args[i + 1], stand_ins(job, run_dir))]
            i += 2
            continue
        if flag == "--compile":  # GPU throughput only; on CPU it just costs compile time
            i += 1
            continue
        out.append(flag)
        i += 1
    return out


def local_argv_for_job(
    stack: str, job_name: str, project_dir: Path | str = ".", job: JobSpec | None = None
) -> list[str]:
    """run-local arguments for JOB of STACK: `--workers N [--max-restarts R] <training flags>`.

    Arguments the user adds after these on the command line win (argparse keeps the last).
    """
    from trainforge.jobs.restarts import budget

    job = job or find_job(stack, job_name, project_dir)
    b = budget(job)
    argv = ["--workers", str(local_processes(job)), "--max-restarts", str(b.in_pod)]
    argv += ["--pod-restarts", str(b.local_recreations)]
    return argv + local_training_flags(job, f"./runs/{job.name}")


def split_stack_argv(argv: list[str]) -> tuple[str, str, list[str]] | None:
    """(stack, job, the other arguments) of `--stack STACK JOB` (or `--stack=STACK JOB`) in
    run-local's argv; None when there is no `--stack`."""
    for i, arg in enumerate(argv):
        if arg == "--stack" or arg.startswith("--stack="):
            if arg == "--stack":
                if len(argv) < i + 3:
                    raise JobConfigError(
                        "--stack", None, "usage: run-local --stack STACK JOB [flags]"
                    )
                stack, job, rest = argv[i + 1], argv[i + 2], argv[:i] + argv[i + 3 :]
            else:
                if len(argv) < i + 2:
                    raise JobConfigError(
                        "--stack", None, "usage: run-local --stack STACK JOB [flags]"
                    )
                stack, job, rest = arg.split("=", 1)[1], argv[i + 1], argv[:i] + argv[i + 2 :]
            if job.startswith("-"):
                raise JobConfigError("JOB", job, "usage: run-local --stack STACK JOB [flags]")
            return stack, job, rest
    return None


def expand_stack_argv(argv: list[str], project_dir: Path | str = ".") -> list[str]:
    """Replace `--stack STACK JOB` (or `--stack=STACK JOB`) in run-local's argv with the
    job's arguments; the other arguments stay after them so they override. An argv without
    `--stack` is returned unchanged.

    run-local's `main(argv)` calls `argv = expand_stack_argv(argv)` before parsing.
    """
    found = split_stack_argv(argv)
    if found is None:
        return list(argv)
    stack, job, rest = found
    return local_argv_for_job(stack, job, project_dir) + rest


# --- a job with its own code ------------------------------------------------------------------


def _local_target(job: JobSpec) -> Any:
    """A stand-in target: pod paths are rewritten to local ones, no bucket, no MLflow."""
    from trainforge.core.contract import JobTarget, PoolFacts, TeamFacts

    return JobTarget(team=TeamFacts(name=job.team, namespace="local"), pool=PoolFacts(job.pool))


@dataclass(frozen=True)
class LocalRun:
    """A job's processes on this machine: run `command` in `cwd` with `env`."""

    command: list[str]
    env: dict[str, str]
    cwd: Path
    run_dir: Path
    code_dir: Path | None
    workers: int
    # third-party modules the shipped code imports that this environment provides, where the
    # pods get them from the job's image instead (`imported_from_here`)
    from_here: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the shipped code's own uses of pod paths with no stand-in here (`pod_only_paths`)
    pod_only: tuple[str, ...] = ()


def stand_ins(
    job: JobSpec, run_dir: str, volumes: dict[str, str] | None = None
) -> list[tuple[str, str]]:
    """(pod mount path, local directory standing for it), longest mount first: each claim of
    the job (RUN_DIR/volumes/CLAIM) and the team's FSx (RUN_DIR/fsx), or the `--volume CLAIM=DIR`
    given. One rule for own code's paths and the bundled runtime's --data-path."""
    volumes = volumes or {}
    out = [
        (v.mount_path, volumes.get(v.claim) or posixpath.join(run_dir, "volumes", v.claim))
        for v in job.volumes
    ]
    fsx = volumes.get(fsx_claim_name(job.team)) or posixpath.join(run_dir, "fsx")
    out.append((_local_target(job).fsx_mount_path, fsx))
    return sorted(out, key=lambda m: -len(m[0]))


def _rewrite(arg: str, mapping: list[tuple[str, str]]) -> str:
    """A pod path (or `--flag=<pod path>`) on a volume -> its local stand-in."""
    head, sep, value = arg.partition("=") if arg.startswith("-") and "=" in arg else ("", "", arg)
    for pod, local in mapping:
        if value == pod or value.startswith(pod + "/"):
            return head + sep + local + value[len(pod) :]
    return arg


def pod_only_paths(
    files: Iterable[tuple[str, str]], mapping: list[tuple[str, str]]
) -> tuple[str, ...]:
    """The uses (file:line) of a pod path by the shipped code's own text (`files`,
    code_paths: the plan's one reader) on a volume run-local stands in for (`mapping`, pod
    path -> local directory) whose pod path does not exist here. Why: `_rewrite` gives the
    stand-in to the command's arguments and env values only; a literal `/checkpoints/done` in
    the code is opened as written, so this run fails where the pod's (on its declared claim,
    a plan without findings) would not. Each is said before the run with its stand-in."""
    out: list[str] = []
    for u in code_paths.path_uses(files):
        hit = next(((p, lo) for p, lo in mapping if code_paths.under(u.path, p)), None)
        if hit is not None and not os.path.exists(hit[0]):
            out.append(f"{u.describe()} (its stand-in here: {_rewrite(u.path, [hit])})")
    return tuple(out)


def pod_only_line(uses: tuple[str, ...]) -> str:
    """run-local's line before the run for `pod_only_paths`' uses."""
    shown = "; ".join(uses[:4]) + (f"; and {len(uses) - 4} more" if len(uses) > 4 else "")
    return (
        f"run-local: your code names pod paths that do not exist here: {shown}; run-local "
        "gives a volume's stand-in to the command's arguments and env values only, not to "
        "paths written in the code, so this run fails there where the pod's would not: pass "
        "the path as an argument or an env value (run-local rewrites it), or run it where the "
        "path exists"
    )


def _fresh_dir(path: Path) -> None:
    """Remove a previous (read-only) code copy."""

    def writable(func: Any, p: str, _exc: Any) -> None:
        os.chmod(os.path.dirname(p), stat.S_IRWXU)
        os.chmod(p, stat.S_IRWXU)
        func(p)

    if path.exists():
        for d in [path, *(p for p in path.rglob("*") if p.is_dir())]:
            d.chmod(stat.S_IRWXU)
        shutil.rmtree(path, onerror=writable)


def code_snapshot(code_dir: Path) -> dict[str, bytes]:
    """The files of a local code copy and their content, to tell afterwards what the run
    wrote there. Python's own bytecode cache is left out: in a pod its writes fail silently."""
    out: dict[str, bytes] = {}
    for p in sorted(code_dir.rglob("*")):
        rel = p.relative_to(code_dir)
        if p.is_file() and "__pycache__" not in rel.parts and p.suffix != ".pyc":
            out[rel.as_posix()] = p.read_bytes()
    return out


def code_writes(code_dir: Path, before: dict[str, bytes]) -> list[str]:
    """What a run changed in its code copy (`code_snapshot` before it): 'name (new)',
    'name (changed)', 'name (removed)'. In the pods that directory is /workspace, a read-only
    ConfigMap mount, so each of these fails there; here the copy is only chmod read-only, which
    does not stop root (or code that chmods it back)."""
    after = code_snapshot(code_dir)
    out = [f"{k} (new)" for k in after if k not in before]
    out += [f"{k} (changed)" for k in after if k in before and after[k] != before[k]]
    out += [f"{k} (removed)" for k in before if k not in after]
    return out


def read_only_line(writes: list[str], code: int) -> str:
    """run-local's verdict on a run that wrote in its working directory (`code_writes`)."""
    shown = ", ".join(writes[:5]) + (f" and {len(writes) - 5} more" if len(writes) > 5 else "")
    ended = "exited 0 here" if code == 0 else f"exited {code} here"
    return (
        f"run-local: your code wrote in its working directory, the shipped copy ({shown}); in "
        "the pods that is /workspace, a read-only ConfigMap mount, where the write fails "
        "(OSError: [Errno 30] Read-only file system) and the job stops (exit 1, user_error): "
        f"it {ended} only because this machine let it write. Write under "
        "$TRAINFORGE_OUTPUT_DIR or $TRAINFORGE_CHECKPOINT_DIR (scratch: /tmp)"
    )


def record_read_only(env: dict[str, str], since: float, writes: list[str]) -> bool:
    """`read_only_line`'s verdict in the run ledger, where `trainforge report` reads how the
    run ended: the attempt begun since `since` ends user_error (exit 1), not finished, as in
    the pods (ledger.job_ended)."""
    from trainforge.training import contract as c  # noqa: PLC0415
    from trainforge.training import exits  # noqa: PLC0415
    from trainforge.training.ledger import job_ended  # noqa: PLC0415

    detail = (
        f"run-local: the code wrote in its working directory ({', '.join(writes[:5])}), a "
        "read-only ConfigMap mount in the pods (OSError: [Errno 30] Read-only file system)"
    )
    cause = exits.USER_ERROR
    return job_ended(env.get(c.CHECKPOINT_DIR), since=since, finished=False, cause=cause,
                     detail=detail)  # fmt: skip


def no_gpu_failure(env: dict[str, str], since: float = 0.0) -> str | None:
    """A failure recorded at or after `since` (the run ledger's exit records, in the local
    checkpoint directory, which keeps earlier runs' too) that says the process had no GPU,
    CUDA or NCCL (trainforge.training.exits.NO_GPU_TEXT); else None."""
    from trainforge.training.exits import NO_GPU_TEXT, without_fix  # noqa: PLC0415

    for rec in _exit_records(env, since):
        detail = str(rec.get("detail", ""))
        if NO_GPU_TEXT.search(detail):
            return without_fix(detail)  # the fix for a CPU pool's pod is not run-local's
    return None


def _exit_records(env: dict[str, str], since: float) -> list[dict]:
    """The run ledger's exit records written at or after `since` (the local checkpoint
    directory keeps earlier runs' too)."""
    import json  # noqa: PLC0415

    from trainforge.training import contract as c  # noqa: PLC0415
    from trainforge.training.ledger import EXITS_DIR, LEDGER_DIR  # noqa: PLC0415

    if not env.get(c.CHECKPOINT_DIR):
        return []
    out = []
    for path in sorted(
        (Path(env[c.CHECKPOINT_DIR]) / LEDGER_DIR / EXITS_DIR).glob("attempt_*/rank_*.json")
    ):
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
            if float(rec.get("time") or 0) >= since:
                out.append(rec)
        except (OSError, ValueError, TypeError, AttributeError):
            continue
    return out


def exit_name(code: int, env: dict[str, str], since: float) -> str:
    """ " (reason)" for exit `code`: the reason its exit record says (user_exit where your code
    chose the code itself), else the runtime's reason for the code; "" for neither."""
    from trainforge.training import exits  # noqa: PLC0415

    recorded = [r for r in map(exits.from_record, _exit_records(env, since)) if r is not None]
    same = [r for r in recorded if r.code == code]
    reason = exits.root_cause(same) if same else exits.for_code(code)
    return f" ({reason.label})" if reason is not None else ""


def stand_in_line(code: int, detail: str, gpus: int) -> str:
    """Why a GPU job's failure on run-local's CPU stand-in says nothing of the cluster."""
    from trainforge.training.exits import for_code  # noqa: PLC0415

    reason = for_code(code)
    name = f" ({reason.name})" if reason is not None else ""
    each = f"{gpus} GPU{'s' if gpus != 1 else ''} each"
    return (
        f"run-local: exit {code}{name}: your code needs a GPU ({detail}), and run-local runs the "
        f"job's pods ({each}) on this machine's CPU; the pods have their GPUs, so this is not "
        "how the cluster would end the job, and no pod is re-created for it here. To rehearse "
        "it on CPU, choose the device and backend from what the process has, as "
        "trainforge.training.init_distributed() does (cuda and nccl when "
        "torch.cuda.is_available(), else cpu and gloo)"
    )


def cpu_pool_no_gpu(job: JobSpec) -> str | None:
    """What the exit line of a pod of `job`, a job without GPUs (a CPU pool's), says of a
    failure for want of a GPU, CUDA or NCCL, where this machine's says otherwise: its fix
    (exits.without_gpu) follows the torch of the job's image, which run-local runs without:
    a CPU build here says "this process's torch is a CPU build" where a pod with a CUDA build
    says "this pod has no GPU". None where they agree (the image's torch is a CPU build, or
    this machine's is a CUDA build, as the pod's), or for a job with GPUs (`stand_in_line`)."""
    from trainforge.jobs import images  # noqa: PLC0415
    from trainforge.jobs.image_facts import facts_for  # noqa: PLC0415
    from trainforge.training import exits  # noqa: PLC0415

    if job.gpus_per_worker or _local_cuda_build():
        return None
    image = job.image or images.image_for(job, _local_target(job).pool)
    facts = facts_for(image, job.image_facts)
    if facts.torch is not None and facts.cuda is None:  # a CPU build, as this machine's
        return None
    _, fix = exits.without_gpu(False, 0)
    if facts.cuda is not None:
        return (
            f"the job's pods fail the same way (pool {job.pool} gives them no GPU), but their "
            f"image ({image}) has torch with CUDA {facts.cuda}, not this machine's CPU build, "
            f"so their exit line says instead: {fix}"
        )
    return (
        f"the job's pods fail the same way (pool {job.pool} gives them no GPU); their image "
        f"({image}) has a torch build not known here: with a CUDA build their exit line says "
        f"{fix!r}, with a CPU build what this machine's says"
    )


def _local_cuda_build() -> bool:
    """Whether this machine's torch is a CUDA build (torch.version.cuda), read without
    importing torch here: the workers import it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    version = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        text = version.read_text(encoding="utf-8")
    except OSError:
        return False
    found = re.search(r"^cuda(?::\s*[^=]+)?\s*=\s*(.+)$", text, re.M)
    return found is not None and found.group(1).strip() not in ("None", "''", '""')


def imported_from_here(
    files: tuple[tuple[str, str], ...],
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(module, the shipped files that import it) for each top-level module shipped code
    imports (absolute imports, read with `ast`, nothing run) that is neither the standard
    library, nor shipped with it, nor torch or trainforge (the image's torch; the shipped
    library), and that this machine's environment provides: run-local imports them from here,
    the pods from the job's image, which must carry them. The files are named because the
    code shipped is a whole directory: the script run may import none of them itself."""
    from trainforge.jobs.entrypoint import top_level_imports  # noqa: PLC0415

    shipped = {PurePosixPath(p).parts[0].removesuffix(".py") for p, _ in files}
    by_module: dict[str, list[str]] = {}
    for path, name in top_level_imports(files):
        if path not in by_module.setdefault(name, []):
            by_module[name].append(path)
    own = shipped | set(sys.stdlib_module_names)
    own |= {"torch", "trainforge", "__future__", "__main__"}

    def here(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a module whose __spec__ is None
            return False

    return tuple((m, tuple(by_module[m])) for m in sorted(set(by_module) - own) if here(m))


def from_here_line(modules: tuple[tuple[str, tuple[str, ...]], ...], image: str | None) -> str:
    """run-local's note on `imported_from_here`: they pass here whatever the image holds."""
    where = f"the job's image ({image})" if image else "the job's image"
    named = ", ".join(f"{m} (imported by {', '.join(paths)})" for m, paths in modules)
    return (
        f"run-local: your code imports {named} from this machine's Python "
        f"environment; in the pods they come from {where}, which must carry them: one it lacks "
        "stops the pod (ModuleNotFoundError, exit 1, user_error), though it runs here"
    )


def image_dir(working_dir: str | None) -> str | None:
    """Why run-local cannot run code of the image from `working_dir` (entrypoint.workingDir,
    the pods' working directory) on this machine, or None when it can: unset, or a directory
    here. One answer for run-local's refusal and `trainforge import`'s next step."""
    if working_dir is None or Path(working_dir).is_dir():
        return None
    return (
        "no such directory on this machine: it exists only in the job's image, where the pods "
        "run from it; create it here with the files your code needs, or run the image "
        "(docker run ...) with the contract's variables"
    )


# What each backend's controller adds to every container of its pods, beyond the pod the
# emitter writes (whose variables run-local's environment already has): NAME -> its value in
# local pod {pod} of {pods} (`local_pod`). RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are
# left out: torchrun sets them for each process, here as in a pod that runs it.
# - the Kubernetes Job controller, in every container of an Indexed Job's pods (the
#   indexed-job backend; a TrainJob's JobSet makes its child Job Indexed, trainjob.py):
#   JOB_COMPLETION_INDEX, the pod's index (kubernetes/kubernetes pkg/controller/job/
#   indexed_job_utils.go addCompletionIndexEnvVariable, commit 03709128, read 2026-11-30).
_JOB_CONTROLLER = {"JOB_COMPLETION_INDEX": "{pod}"}
# - torchrun's flags as PET_* (rank 0's pod's address for PET_MASTER_ADDR, here the local
#   torchrun's): the training operator v1.9.4 on a PyTorchJob's Master and Worker pods
#   (kubeflow/trainer tag v1.9.4, 4445c12a, 2026-08-18: pkg/controller.v1/pytorch/envvar.go
#   setPodEnv: PET_NODE_RANK = the pod's rank, PET_NPROC_PER_NODE from nprocPerNode, which
#   pytorchjob.py writes, PET_NNODES = its replicas; master.go: PET_MASTER_ADDR/PORT), and
#   Trainer v2.2.1's torch plugin on a TrainJob's (tag v2.2.1, c505fc7c, 2026-06-17:
#   pkg/runtime/framework/plugins/torch/torch.go; rehearsed by trainjob.effective_pod).
_TORCHRUN_PET = {
    "PET_NNODES": "{pods}",
    "PET_NPROC_PER_NODE": "{procs}",
    "PET_NODE_RANK": "{pod}",
    "PET_MASTER_ADDR": "{master_addr}",
    "PET_MASTER_PORT": "{master_port}",
}
CONTROLLER_ENV: dict[str, dict[str, str]] = {
    "pytorchjob": _TORCHRUN_PET,
    "trainjob": {**_TORCHRUN_PET, **_JOB_CONTROLLER},
    "indexed-job": _JOB_CONTROLLER,
}
# The rendezvous variables of a pod's container env, which its command and args' `$(RANK)`,
# `$(WORLD_SIZE)` ... expand to (the kubelet expands them against the container's whole env,
# core.expansion), though torchrun then gives each process its own RANK: per pod, the same
# for every backend that has them. The training operator v1.9.4 appends them to a PyTorchJob's
# pods (RANK the pod's index, Master 0 and Workers from 1; WORLD_SIZE pods x processes per
# pod; MASTER_ADDR rank 0's pod: jobs/pod.py's docstring, envvar.go setPodEnv); the TrainJob
# and indexed Job emitters write the same into the template (pod.static_rendezvous_env, whose
# names tests/jobs/test_run_local_pods.py holds equal to these). An elastic PyTorchJob's pods
# get none (controller_env). Only the args are expanded with them: the process's own
# variables stay torchrun's.
POD_RENDEZVOUS: dict[str, str] = {
    "MASTER_ADDR": "{master_addr}",
    "MASTER_PORT": "{master_port}",
    "RANK": "{pod}",
    "WORLD_SIZE": "{world}",
}


def success_ranks(job: JobSpec | None, workers: int) -> int:
    """The local ranks whose exit 0 alone ends the job Succeeded by its backend's rule
    (success.success_rule): a PyTorchJob's Master pod's (ranks 0 .. procs-1, as `pod_wrapper`
    splits them), an elastic one's first pod's (any Worker); 0 where every pod must succeed.
    No job (a run without a stack): rank 0's process, by the default backend's rule."""
    from trainforge.jobs.success import success_rule  # noqa: PLC0415

    if success_rule(job) == "all":
        return 0
    if job is None:
        return 1
    return job.procs if workers % job.procs == 0 else 1


def controller_env(job: JobSpec) -> dict[str, str]:
    """CONTROLLER_ENV of the job's backend (the platform's default, a PyTorchJob, where the
    job names none, as restarts.outcome reads it). An elastic PyTorchJob gets none: the
    operator gives its pods PET_RDZV_* for a rendezvous among pods (elastic.go), which the
    local standalone torchrun replaces, and no node rank."""
    if job.elastic is not None:
        return {}
    return CONTROLLER_ENV[job.backend or "pytorchjob"]


def pod_wrapper(job: JobSpec, workers: int) -> list[str]:
    """`local_pod`'s arguments that give each of `workers` local processes its own pod's
    CONTROLLER_ENV and expand the job's env values and its args as the kubelet does in that
    pod (POD_RENDEZVOUS before the job's env where the emitter writes them, a TrainJob's or
    an indexed Job's; appended, for the args only, on a PyTorchJob): `job.procs` processes
    per pod where they divide `workers` (run-local's --workers may change the count), else one
    each. [] where the controller sets nothing per pod (an elastic job): the expansion is
    made once, in `user_code_run`."""
    procs = job.procs if workers % job.procs == 0 else 1
    items = [f"{name}={value}" for name, value in controller_env(job).items()]
    if not items:
        return []
    mark = "$" if (job.backend or "pytorchjob") == "pytorchjob" else "+"
    items += [f"{mark}{name}={value}" for name, value in POD_RENDEZVOUS.items()]
    items += [f"%{name}" for name, _ in job.env]
    head = ["-m", "trainforge.jobs.local_pod", str(procs), str(workers // procs)]
    return [*head, str(len(items)), *items]


def launcher(workers: int, max_restarts: int) -> list[str]:
    """torchrun through trainforge.training.launch, as the pods run it: the exit code is the
    failed workers' reason (a bug: 1, a hang: 201, ...) rather than torchrun's 1
    (docs/reliability.md)."""
    flags = f"--standalone --nnodes 1 --nproc-per-node {workers} --max-restarts {max_restarts}"
    return [sys.executable, "-m", "trainforge.training.launch", *flags.split()]


def user_code_run(
    job: JobSpec,
    project_dir: Path | str = ".",
    *,
    workers: int | None = None,
    max_restarts: int | None = None,
    volumes: dict[str, str] | None = None,
    extra_args: list[str] | tuple[str, ...] = (),
    where: str | None = None,
    prepare: bool = True,
    controller: bool = True,
) -> LocalRun:
    """A local run of `job`'s own code (see the module docstring). With `prepare` (the
    default) the code copy and the volumes' stand-in directories are written; without, only
    the command is computed (`--dry-run`). `controller`: the job is one a backend's controller
    runs (a stack's), so its processes are told what that controller does after their exit,
    as its pods are (TRAINFORGE_ON_EXIT: `restarts.on_exit`); an ad-hoc run (no stack) has
    none and is told nothing."""
    from trainforge.jobs import entrypoint
    from trainforge.training import contract as c

    entry = job.entrypoint
    where = where or job.name
    if entry is None:
        raise ValueError(f"job {job.name!r} runs the bundled runtime; use local_argv_for_job")
    if (why := entrypoint.not_local(job)) is not None:
        raise JobConfigError(f"{where}.entrypoint.command", list(entry.command), why)
    if (why := image_dir(entry.working_dir)) is not None:
        raise JobConfigError(f"{where}.entrypoint.workingDir", entry.working_dir, why)
    project = Path(project_dir).resolve()
    volumes = dict(volumes or {})
    target = _local_target(job)
    pod_fsx = target.fsx_mount_path
    fsx_claim = fsx_claim_name(job.team)  # the team's FSx, mounted at pod_fsx in every pod
    unknown = sorted(set(volumes) - {v.claim for v in job.volumes} - {fsx_claim})
    if unknown:
        claims = ", ".join(v.claim for v in job.volumes) or "none"
        raise JobConfigError(
            "--volume",
            unknown[0],
            f"not a claim of this job (its claims: {claims}; the team's FSx: {fsx_claim}, "
            f"mounted at {pod_fsx})",
        )
    run_dir = project / "runs" / job.name
    if prepare:
        run_dir.mkdir(parents=True, exist_ok=True)
    # pod path -> the local directory standing for it (a claim's mount shows its subPath);
    # the FSx stand-in is made only where --volume names it (a claim's always)
    mapping: list[tuple[str, str]] = []
    for pod, stand_in in stand_ins(job, str(run_dir), volumes):
        local = Path(stand_in).expanduser().resolve()
        if prepare and (pod != pod_fsx or fsx_claim in volumes):
            local.mkdir(parents=True, exist_ok=True)
        mapping.append((pod, str(local)))
    pod_ckpt = entrypoint.checkpoint_dir(job, target)
    if job.checkpoint.directory is None:
        mapping.append((pod_ckpt, str(run_dir / "checkpoints")))
    mapping.append((entrypoint.output_dir(job, target), str(run_dir)))
    mapping.sort(key=lambda m: -len(m[0]))

    bundle = entrypoint.user_code(job, project, where)
    code_dir = None
    if bundle is not None:
        code_dir = run_dir / "code"
        if prepare:
            _fresh_dir(code_dir)
            bundle.write_to(code_dir)

    env = dict(os.environ)
    for name in (*c.CONTRACT_VARIABLES, "TORCHELASTIC_RESTART_COUNT"):
        env.pop(name, None)
    local_job = job.model_copy(
        update={"checkpoint": job.checkpoint.model_copy(update={"s3_mirror": False})}
    )
    for name, value in entrypoint.contract_variables(local_job, target):
        env[name] = str(value)
    env[c.CHECKPOINT_DIR] = _rewrite(pod_ckpt, mapping)
    env[c.OUTPUT_DIR] = str(run_dir)
    env[c.METRICS_PORT] = "0"
    env[c.RUN_LOCAL] = "1"  # the pods' stand-in: init_distributed takes the CPU here
    env[c.LOCAL_STAND_INS] = entrypoint.stand_ins_env(job, mapping, pod_fsx)  # missing files
    if controller:  # what the backend's controller does after an exit, as the pod is told
        from trainforge.jobs.restarts import on_exit  # noqa: PLC0415

        env[c.ON_EXIT] = on_exit(job)
    n = workers if workers is not None else local_processes(job)
    if n < 1:
        raise JobConfigError("--workers", n, "expected an integer >= 1")
    # the job's own variables, after the contract's, as in the pod; expanded here, or per pod
    # by the wrapper where its controller sets per-pod variables (pod_wrapper)
    wrapper = pod_wrapper(job, n) if controller else []
    for name, value in job.env:
        env[name] = _rewrite(value if wrapper else expand(value, env), mapping)
    paths = [str(code_dir)] if code_dir is not None else []
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(torchrun_env(job.checkpoint.grace_period))  # as the job's pods run torchrun
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // max(n, 1))))

    # Kubernetes' expansion of the args, once: per pod by the wrapper (`$(RANK)` is each pod's
    # own), else here
    args = [_rewrite(a if wrapper else expand(a, env), mapping) for a in [*entry.args, *extra_args]]
    from trainforge.jobs.restarts import budget

    restarts = max_restarts if max_restarts is not None else budget(job).in_pod
    launch = launcher(n, restarts)
    # through trainforge.training.usercode, as the pods run it: a lost peer exits 202
    # (retryable), a bug 1, and the run ledger records the attempt
    runner = list(entrypoint.USER_CODE_RUNNER)
    if controller:  # each process with its own pod's variables, as its controller sets them
        runner = [*wrapper, *runner]
    if entry.kind in ("script", "function"):
        assert code_dir is not None
        prog = [*runner, str(code_dir / str(entry.entry_file)), *args]
    else:  # module, from the shipped directory or (without codeDir) this environment
        prog = [*runner, "-m", str(entry.module), *args]
    return LocalRun(
        # `$` doubled: torchrun passes a worker's arguments through string.Template's
        # safe_substitute (torch 2.13 torch/distributed/elastic/utils/api.py macros.substitute,
        # for `${local_rank}`), which would turn the `$$` of `$$(VAR)` into `$` before the
        # pod wrapper's Kubernetes expansion sees it; doubled, torchrun hands them over as given
        command=[*launch, *(a.replace("$", "$$") for a in prog)],
        env=env,
        # shipped code runs from its copy, code of the image from its workingDir, as in the pods
        cwd=code_dir or (Path(entry.working_dir) if entry.working_dir else project),
        run_dir=run_dir,
        code_dir=code_dir,
        workers=n,
        from_here=imported_from_here(bundle.files) if bundle is not None else (),
        pod_only=pod_only_paths(bundle.files, mapping) if bundle is not None else (),
    )


def job_fetches(
    job: JobSpec, project_dir: Path | str = ".", where: str | None = None, staged: bool = True
) -> list[Any]:
    """What `job`'s own code downloads from the internet, read before anything runs from what
    its pods get (its shipped files, named by their project path; a `command`; its env) with
    the plan's reader of a container (`fetches.container_fetches`). `staged`: count the pods'
    FSx and claim mounts as holding data (False: every download, as a pod without FSx).
    [] for the bundled runtime, whose shipped files download nothing (tests/jobs/test_local.py).
    """
    from trainforge.jobs import entrypoint, fetches

    entry = job.entrypoint
    if entry is None:
        return []
    bundle = entrypoint.user_code(job, Path(project_dir), where or job.name)
    base = entry.code_dir if entry.code_dir not in (None, ".") else None
    files = [
        (posixpath.join(base, path) if base else path, text)
        for path, text in (bundle.files if bundle is not None else ())
        if path.endswith(".py")
    ]
    argv = [*entry.command, *entry.args] if entry.kind == "command" else []
    mounts = (_local_target(job).fsx_mount_path, *(v.mount_path for v in job.volumes))
    return fetches.container_fetches(
        argv, "entrypoint.command", files, dict(job.env), mounts if staged else ()
    )


def launch(
    cmd: list[str],
    env: dict[str, str],
    cwd: str | os.PathLike[str] | None = None,
    *,
    recreations: int = 0,
    on: str = "retryable",
    gpus: int = 0,
    outcome: Callable[[int], failures.Outcome] | None = None,
    capped: bool = False,
    cpu_pool: str | None = None,
    success_ranks: int = 0,
    job: JobSpec | None = None,
) -> int:
    """Run the job's launcher as the job's one local "pod", relaying SIGTERM/SIGINT/SIGHUP to it
    (torchrun relays them to the workers and waits their grace period), and re-create it as
    the cluster would (trainforge/jobs/restarts.py) up to `recreations` times: after an exit
    its controller re-creates the pod for (`outcome(code)`, the backend's answer:
    restarts.outcome; without a job's: `on`, a retryable exit by the operator's rule,
    core.failures.operator_retries; `on="any"`: any failure). A stop asked of run-local itself is
    never followed by a re-creation. The exit status is the job's. `gpus`: the GPUs of each of
    the job's pods, which run here on CPU: a failure for want of one (`no_gpu_failure`) is
    the stand-in's, said so and not retried. `capped`: `recreations` is run-local's own safety
    cap (restarts.LOCAL_CAP), where the cluster counts none. `cpu_pool`: what the pods of a job
    without GPUs say instead of this machine's fix for want of a GPU (`cpu_pool_no_gpu`).
    `success_ranks`: the ranks whose exit 0 alone ends the job Succeeded (`success_ranks`);
    the run ledger's attempt is then finished only where the job is (ledger.job_ended).
    `job`: the stack's job whose backend's rule that is, for the line that says so (None: a
    run without a stack, ended by rank 0's process: `succeeded_line`)."""
    from trainforge.training.ledger import job_ended  # noqa: PLC0415

    if importlib.util.find_spec("torch") is None:  # the launcher and the workers import it
        print(
            f"trainforge run-local: error: torch is not installed for {sys.executable}: run "
            "`make venv` and use .venv/bin/python (or pip install 'trainforge[train]')",
            file=sys.stderr,
        )
        return 2
    stopped: list[int] = []
    proc: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: object) -> None:  # torchrun relays it to the workers
        # once per signal: a second SIGINT while torchrun stops its workers makes it stop
        # them again with SIGTERM, which they record as a preemption (a terminal's Ctrl-C
        # reached run-local and the launcher both; `timeout -s INT` signals run-local twice)
        if proc is not None and signum not in stopped:
            proc.send_signal(signum)
        stopped.append(signum)

    # SIGHUP too: in a group of its own, the launcher no longer gets a closed terminal's
    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    ledger_dir = _ledger_dir(cmd, env)
    # the ranks' exit records, read where they write them: under the bundled runtime's
    # --checkpoint-dir too, which its environment does not name (its verdict was blind to them)
    from trainforge.training.contract import CHECKPOINT_DIR  # noqa: PLC0415

    seen = {**env, CHECKPOINT_DIR: ledger_dir} if ledger_dir else env
    try:
        done = 0
        while not stopped:
            started = time.time()
            # its own process group: a signal to run-local's group (a terminal's Ctrl-C)
            # reaches the launcher once, through `forward`, as one sent to run-local's PID
            proc = subprocess.Popen(cmd, env=env, cwd=cwd, process_group=0)
            rc = proc.wait()
            code = 128 - rc if rc < 0 else rc
            if code and not stopped and _succeeded(ledger_dir, started, success_ranks):
                line = succeeded_line(code, exit_name(code, seen, started), job)
                print(line, file=sys.stderr, flush=True)
                job_ended(ledger_dir, since=started, finished=True)
                return 0
            if code and not stopped:  # rank 0's exit 0 did not end the job
                job_ended(ledger_dir, since=started, finished=False)
            retry = _restarts(code, on, outcome)
            no_gpu = no_gpu_failure(seen, started) if gpus and code != 0 and not stopped else None
            if no_gpu is not None:
                print(stand_in_line(code, no_gpu, gpus), file=sys.stderr, flush=True)
                return code
            if cpu_pool and code != 0 and not stopped and no_gpu_failure(seen, started):
                name = exit_name(code, seen, started)
                print(f"run-local: exit {code}{name}: {cpu_pool}", file=sys.stderr, flush=True)
            if code == 0 or stopped or not retry or done >= recreations:
                if code != 0 and not stopped:
                    name = exit_name(code, seen, started)
                    line = _stop_line(code, on, retry, recreations, outcome, name, capped)
                    print(line, file=sys.stderr, flush=True)
                return code
            done += 1
            why = "retryable" if on == "retryable" else "OnFailure restarts any failure"
            print(
                f"run-local: the job's pod exited {code} ({why}); re-creating it "
                f"({done}/{recreations}{', run-local' + chr(39) + 's safety cap' if capped else ''})"
                ", as the cluster would",
                file=sys.stderr,
                flush=True,
            )
        return 128 + stopped[0]  # stopped before a re-created pod started
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _ledger_dir(cmd: list[str], env: dict[str, str]) -> str | None:
    """The run ledger's directory of a local run: the runtime's --checkpoint-dir in `cmd`,
    else the contract's TRAINFORGE_CHECKPOINT_DIR in `env` (own code)."""
    from trainforge.training import contract as c  # noqa: PLC0415
    from trainforge.training.ledger import checkpoint_dir  # noqa: PLC0415

    flagged = any(a.startswith("--checkpoint-dir") for a in cmd)  # else run-local's environ
    return (checkpoint_dir(cmd) if flagged else None) or env.get(c.CHECKPOINT_DIR) or None


def _succeeded(where: str | None, since: float, ranks: int) -> bool:
    """Whether the job's backend ends it Succeeded (success.SUCCESS_RULE) though the local
    launcher failed: its first `ranks` ranks (a PyTorchJob's Master pod) exited 0 in the
    attempt begun since `since` (ledger.master_finished, the test a Worker's exit line reads
    too). 0 `ranks`: every pod must succeed, and one did not."""
    from trainforge.training.ledger import master_finished  # noqa: PLC0415

    return master_finished(where, ranks, since)


def succeeded_line(code: int, name: str, job: JobSpec | None) -> str:
    """run-local's word where the job succeeded though a rank outside the ones that end it
    (`success_ranks`) failed: who ended it and by which rule, what the cluster then does with
    the other pods (failures.clean_pod_words: its cleanPodPolicy), in the terms of the backend
    in use; with no stack (`job` None) there are no pods, only rank 0's process."""
    from trainforge.core.failures import clean_pod_words  # noqa: PLC0415
    from trainforge.jobs.success import success_rule  # noqa: PLC0415

    fix = "Make every rank end the same way (the same collectives on each)"
    if job is None:
        return (
            f"run-local: exit {code}{name} of a rank other than 0; rank 0's process exited 0, "
            "and with no stack run-local ends the run by the platform's default backend's rule "
            "(a PyTorchJob has succeeded once its Master has, whatever its Workers do): the "
            f"run ends with exit 0 and is not re-run. {fix}"
        )
    if success_rule(job) == "any":
        who = (
            "pod 0 (a Worker: an elastic PyTorchJob has no Master) exited 0, and the training "
            "operator marks an elastic PyTorchJob Succeeded once any Worker succeeds"
        )
    else:
        who = (
            "pod 0 (the Master) exited 0, and the training operator marks a PyTorchJob "
            "Succeeded once its Master succeeds (whatever its Workers do)"
        )
    return (
        f"run-local: exit {code}{name} of a rank outside pod 0; {who}: the job ends Succeeded, "
        f"no pod is re-created, and {clean_pod_words(job.run_policy.clean_pod_policy)}, as the "
        f"cluster would. {fix}"
    )


def _restarts(code: int, on: str, outcome: Callable[[int], failures.Outcome] | None) -> bool:
    """Whether the controller re-creates (or restarts) the pod after exit `code`: the job's
    backend's answer (`outcome`), else `on`'s (no job: the operator's ExitCode rule)."""
    if code == 0:
        return False
    if outcome is not None:
        return outcome(code).restarts
    if on == "retryable":
        return failures.operator_retries(code)
    return on == "any"


def _stop_line(
    code: int,
    on: str,
    retry: bool,
    recreations: int,
    outcome: Callable[[int], failures.Outcome] | None = None,
    name: str | None = None,
    capped: bool = False,
) -> str:
    """Why run-local re-creates no pod after exit `code`, in the cluster's terms (`name`: the
    reason's " (name)", exit_name; without it, the runtime's reason for the code; `capped`:
    the bound spent is run-local's own safety cap, not the cluster's)."""
    if name is None:
        from trainforge.training.exits import for_code  # noqa: PLC0415

        reason = for_code(code)
        name = f" ({reason.name})" if reason is not None else ""
    if (
        outcome is not None
        and not retry
        and not (on == "retryable" and failures.exit_class(code) == failures.PERMANENT)
    ):
        # the controller's answer is not the class of the code (OnFailure or a retryable exit
        # with no failure left to count): say its answer, as the pod's exit line does
        return (
            f"run-local: exit {code}{name}: {outcome(code).words}, as the cluster's controller "
            "would do: no pod is re-created, the job stops"
        )
    if retry and not recreations:
        return (
            f"run-local: exit {code}; the restart budget allows no re-creation (--pod-restarts 0)"
        )
    if retry and capped:
        return (
            f"run-local: exit {code}{name}; run-local's own safety cap ({recreations} "
            "re-creations) is spent: the cluster counts none and would re-create the pod again"
        )
    if retry:
        return f"run-local: exit {code}; the restart budget ({recreations} re-creation(s)) is spent"
    if on == "none":
        return f"run-local: exit {code}; restartPolicy Never: the job stops, as the cluster would"
    return (
        f"run-local: exit {code}{name} is permanent (1-127): no pod is re-created, the job "
        "stops, as the cluster would stop it"
    )


def run_local(
    job: JobSpec,
    project_dir: Path | str = ".",
    *,
    workers: int | None = None,
    max_restarts: int | None = None,
    volumes: dict[str, str] | None = None,
    extra_args: list[str] | tuple[str, ...] = (),
) -> int:
    """Run a job with its own code here (e.g. one from `spec.function_job`); the exit status.

    The Python twin of `trainforge run-local --stack STACK JOB` for jobs declared in code: it
    says first (stderr) each download its code makes, which its pods cannot (`job_fetches`)."""
    from trainforge.jobs.fetches import cluster_note, without_stack
    from trainforge.jobs.restarts import budget

    run = user_code_run(
        job,
        project_dir,
        workers=workers,
        max_restarts=max_restarts,
        volumes=volumes,
        extra_args=extra_args,
    )
    for f in without_stack(job_fetches(job, project_dir)):  # as `run-local SCRIPT` says it
        print(cluster_note(job.name, f), file=sys.stderr, flush=True)
    if run.pod_only:
        print(pod_only_line(run.pod_only), file=sys.stderr, flush=True)
    from trainforge.jobs.restarts import outcome

    b = budget(job)
    return launch(
        run.command,
        run.env,
        run.cwd,
        recreations=b.local_recreations,
        on=b.on,
        outcome=lambda code: outcome(job, code),
        capped=b.capped,
        gpus=job.gpus_per_worker or 0,
        cpu_pool=cpu_pool_no_gpu(job),
        success_ranks=success_ranks(job, run.workers),
        job=job,
    )


# --- your own code without a stack file ----------------------------------------------------

ADHOC_TEAM = ADHOC_POOL = "local"


def _adhoc_name(stem: str) -> str:
    """A job name (a DNS label) from a script's path in the project, a module's or a
    function's dotted name: the run folder `runs/<name>`. A name cut to 50 characters ends in
    a hash of the whole, so two long paths that share their first characters stay apart."""
    name = re.sub(r"[^a-z0-9-]+", "-", stem.lower()).strip("-")
    if len(name) > 50:
        digest = hashlib.sha256(stem.encode()).hexdigest()[:8]
        name = f"{name[:41].strip('-')}-{digest}"
    return name or "run"


# In an ad-hoc run's folder: which script, module or function it belongs to (`claim_run_dir`)
ADHOC_OWNER = ".trainforge-target"


def adhoc_target(target: str, module: bool = False, project_dir: Path | str = ".") -> str:
    """What an ad-hoc run is of, as its folder records it: a script's path in the project,
    `-m MODULE`, or `pkg.mod:func` (the same string for the same code, run after run)."""
    if module:
        return f"-m {target}"
    path = Path(target).expanduser()
    if not path.is_file():
        return target
    path, project = path.resolve(), Path(project_dir).resolve()
    return (path.relative_to(project) if path.is_relative_to(project) else path).as_posix()


def check_run_dir(run_dir: Path, target: str) -> None:
    """Refuse, in one line, an ad-hoc run of `target` (adhoc_target) whose folder `run_dir`
    (`runs/<name>`) holds the run of another script, module or function: both would share its
    checkpoints and run ledger, and the second would load the first's checkpoint (a state_dict
    error in your code, reported as your bug). The same target resumes there, as before; a
    folder that records no owner (an older run-local's) is taken as it is."""
    try:
        had = (run_dir / ADHOC_OWNER).read_text(encoding="utf-8").strip()
    except OSError:
        return
    if had and had != target:
        raise JobConfigError(
            "SCRIPT",
            target,
            f"its run folder {run_dir} holds the run of {had} (its checkpoints and run "
            "ledger); run it from another directory, or move or delete that folder",
        )


def claim_run_dir(run_dir: Path, target: str) -> None:
    """Record in `run_dir` that it is `target`'s run (read by `check_run_dir`)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / ADHOC_OWNER).write_text(target + "\n", encoding="utf-8")


def adhoc_job(
    target: str, *, module: bool = False, workers: int = 1, project_dir: Path | str = "."
) -> tuple[JobSpec, Path]:
    """(the job, its project directory) for `trainforge run-local SCRIPT | -m MODULE |
    pkg.mod:func` with no stack file: a job with that entrypoint and `workers` local workers
    of one process each, as `entrypoint.script` / `.module` / a function job would run in a
    pod (the same code copy, contract variables, launcher and run ledger: `user_code_run`).

    A script's project is this directory when the script is inside it, else the script's own
    directory (the code shipped is the script's directory either way). The job's name, and so
    its run folder `runs/<name>`, is the script's path in the project (`examples/plain/
    train.py`: examples-plain-train), or the module's or function's dotted name: two scripts
    named train.py keep their checkpoints and run ledgers apart (`check_run_dir` refuses the
    rare two whose names still meet)."""
    from trainforge.jobs.spec import parse_job  # noqa: PLC0415 - see JobSpec's import

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise JobConfigError("--workers", workers, "expected an integer >= 1")
    project = Path(project_dir).resolve()
    raw: dict[str, Any] = {"team": ADHOC_TEAM, "pool": ADHOC_POOL, "workers": workers}
    if module:
        raw["entrypoint"] = {"module": target, "codeDir": "."}  # this directory, shipped
        name = target
    elif re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", target) and not Path(target).exists():
        raw["entrypoint"] = {"function": _import_function(target, project)}
        name = target.replace(":", "-")
    else:
        path = Path(target).expanduser()
        if not path.is_file():
            raise JobConfigError(
                "SCRIPT",
                target,
                "no such file; expected a Python file, -m MODULE, or pkg.module:function",
            )
        path = path.resolve()
        if not path.is_relative_to(project):
            project = path.parent
        raw["entrypoint"] = {"script": path.relative_to(project).as_posix()}
        name = "-".join(path.relative_to(project).with_suffix("").parts)
    raw["name"] = _adhoc_name(name)
    return parse_job(raw, "run-local"), project


def _import_function(target: str, project: Path) -> Callable[..., Any]:
    """`pkg.mod:func` imported from the project directory (as `python -c` would)."""
    import importlib

    mod_name, _, func_name = target.partition(":")
    sys.path.insert(0, str(project))
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise JobConfigError("FUNCTION", target, f"cannot import {mod_name!r}: {e}") from None
    finally:
        if sys.path and sys.path[0] == str(project):
            sys.path.pop(0)
    fn = getattr(mod, func_name, None)
    if not callable(fn):
        raise JobConfigError(
            "FUNCTION", target, f"module {mod_name!r} has no function {func_name!r}"
        )
    return fn
