"""What a job's container runs, and the contract it runs with: one place for every backend.

A job runs the bundled runtime (no `entrypoint`, the default) or the user's code: a script or
a module (shipped from the repository in an immutable ConfigMap, or from the image), any
command of the user's image, or a Python function (`pyfunction`). Every emitter asks this
module, once, for the container's part of a pod (`pod_parts`): command, contract environment,
working directory, code volumes. The backends differ in the objects around the pod, not in
what runs inside it.

The contract (docs/jobs.md, "The contract for your code"), the same for all code:

* the distributed environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the Kubeflow
  operator for one process per pod (plus LOCAL_RANK=0, LOCAL_WORLD_SIZE=1 set here); torchrun
  sets all six for its workers when a pod runs several processes or the job is elastic;
* TRAINFORGE_* (trainforge.training.contract): checkpoint and output directories on the team's
  storage, checkpoint schedule, S3 mirror, grace period, metrics port; MLFLOW_TRACKING_URI;
* SIGTERM reaches the code with the job's grace period: torchrun forwards it to its workers'
  process groups and waits TORCH_ELASTIC_SHUTDOWN_TIMEOUT (= gracePeriod) before SIGKILL; a
  process that is the container's first process would be PID 1 of the pod's PID namespace,
  where the kernel drops SIGTERM unless the process installed a handler, so a plain seed-style
  script would ignore it and die only by SIGKILL at the end of terminationGracePeriodSeconds.
  User-code pods therefore share the pod's PID namespace (`shareProcessNamespace: true`): the
  pause container is PID 1, the user's process gets SIGTERM with its default action (or its
  handler), exactly as on a laptop.
"""

from __future__ import annotations

import ast
import json
import posixpath
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainforge.core import versions
from trainforge.core.contract import JobTarget, TeamFacts, fsx_claim_name
from trainforge.core.errors import JobConfigError
from trainforge.jobs import codeship, images, reach, torchrun_args
from trainforge.jobs.codeship import CODE_MOUNT, USER_CODE_MOUNT, CodeBundle
from trainforge.jobs.image_facts import (
    DECLARED_SOURCE,
    facts_for,
    missing_pieces,
    runtime_way,
    torch_release,
    upstream,
)
from trainforge.jobs.spec import EntrypointSpec, JobSpec
from trainforge.stack.jobs import FLAG_OF
from trainforge.training import contract as c
from trainforge.training import shadowing
from trainforge.training.timeouts import DEFAULT_HANG_TIMEOUT_S, Timeouts
from trainforge.training.torchrun_env import torchrun_env

RUNTIME_MODULE = "trainforge.training"
# Runs the user's script or module with the runtime's exit classification and run ledger
# (trainforge/training/usercode.py): a lost peer exits 202 (retryable), a bug 1.
USER_CODE_RUNNER = ["-m", "trainforge.training.usercode"]
# torchrun, exiting with the failed workers' reason code (trainforge/training/launch.py)
LAUNCHER = ["python", "-m", "trainforge.training.launch"]
# Set by trainforge/provider.py: components served to other Pulumi languages run in the
# provider's process, whose working directory is not the user's program directory.
SERVED_TO_OTHER_LANGUAGES = False
USER_CODE_VOLUME = "src"
RUNTIME_CODE_VOLUME = "code"


# --- where a job keeps its state -------------------------------------------------------------


def checkpoint_dir(job: JobSpec, target: JobTarget) -> str:
    """Per job on the team's storage: replacements of the job resume from it.

    Default: the team's FSx mount, `/fsx/checkpoints/<namespace>/<job>`; `checkpoint.dir`
    relative paths are on the FSx mount, absolute ones on a volume of the job (checked by
    `storage.check_storage`)."""
    custom = job.checkpoint.directory
    if custom is None:
        return default_checkpoint_dir(target.team, job.name)
    if custom.startswith("/"):
        return custom
    return f"{target.fsx_mount_path}/{custom}"


def default_checkpoint_dir(team: TeamFacts, job_name: str) -> str:
    """Where job `job_name` of `team` checkpoints when its `checkpoint.dir` is unset (the plan's
    rehearsal probes it for a team whose jobs are not declared yet)."""
    return f"{team.fsx_mount_path}/checkpoints/{team.namespace}/{job_name}"


def output_dir(job: JobSpec, target: JobTarget) -> str:
    return f"{target.fsx_mount_path}/runs/{target.namespace}/{job.name}"


def s3_uri(target: JobTarget, job: JobSpec) -> Any:
    """s3://bucket/<team prefix>/checkpoints/<job>; an Output when the bucket name is one."""
    prefix = target.checkpoint_prefix.strip("/")
    path = f"{prefix}/checkpoints/{job.name}" if prefix else f"checkpoints/{job.name}"
    bucket = target.checkpoint_bucket
    if hasattr(bucket, "apply"):
        return bucket.apply(lambda b: f"s3://{b}/{path}")
    return f"s3://{bucket}/{path}"


def ledger_counts_attempts(job: JobSpec, target: JobTarget) -> bool:
    """Whether the job's own pods count its attempts: the bundled runtime, and your script,
    module or function run through trainforge.training.usercode (where the library ships),
    keep a run ledger in the checkpoint directory and stop a job that keeps failing
    (trainforge/training/ledger.py NO_PROGRESS_LIMIT, exit 4) only when that directory is on
    the team's shared FSx (a pod-local one starts empty on every attempt). A `command` runs
    as written: nothing of ours counts."""
    if job.entrypoint is not None and not user_code_runner(job):
        return False
    if not target.claim_name:
        return False
    return checkpoint_dir(job, target).startswith(f"{target.fsx_mount_path}/")


def mirrors_to_s3(job: JobSpec, target: JobTarget) -> bool:
    return bool(job.checkpoint.s3_mirror) and target.checkpoint_bucket is not None


# --- the bundled runtime's flags ------------------------------------------------------------


def training_args(job: JobSpec, target: JobTarget) -> list[Any]:
    """The `python -m trainforge.training` flags for this job: its training and checkpointing
    settings as the runtime's own parser reads them (trainforge.training.config)."""
    args: list[Any] = ["--strategy", job.strategy]
    # the job's runtime flags are the runtime's own (trainforge.stack.jobs.FLAG_OF): those
    # with a value first, then the switches (the order every existing job's pods carry)
    values = [(flag, getattr(job, name)) for name, flag in FLAG_OF.items()]
    for flag, value in values:
        if flag == "--data-path":
            value = _on_volume(value, target)
        if value is not None and not isinstance(value, bool):
            args += [flag, str(value)]
    args += [flag for flag, value in values if value is True]
    ck = job.checkpoint
    args += [
        "--run-name",
        job.name,
        "--output-dir",
        output_dir(job, target),
        "--metrics-port",
        str(job.metrics_port),
        "--checkpoint-dir",
        checkpoint_dir(job, target),
        "--checkpoint-every",
        str(ck.every),
        "--keep-last",
        str(ck.keep_last),
        "--resume",
        ck.resume,
        "--grace-period",
        str(ck.grace_period),
    ]
    if ck.async_save:
        args.append("--async-checkpoint")
    if mirrors_to_s3(job, target):
        args += ["--checkpoint-s3", s3_uri(target, job)]
    if job.hang_timeout is not None:
        args += ["--hang-timeout", str(job.hang_timeout)]
    return args


def timeouts(job: JobSpec) -> Timeouts:
    """The job's waits, all derived from its hang timeout (trainforge/training/timeouts.py)."""
    hang = DEFAULT_HANG_TIMEOUT_S if job.hang_timeout is None else job.hang_timeout
    return Timeouts.from_hang_timeout(hang)


def _on_volume(path: str | None, target: JobTarget) -> str | None:
    """Relative data paths are relative to the team's FSx mount."""
    if path is None or path.startswith("/"):
        return path
    return f"{target.fsx_mount_path}/{path}"


# --- the container command -----------------------------------------------------------------


def torchrun(job: JobSpec) -> list[str]:
    """How torchrun is started: through `trainforge.training.launch` (LAUNCHER) wherever the
    runtime library is in the pod (the bundled runtime, or user code with codeSource:
    configmap, which ships the library next to it), plain `torchrun` otherwise (user code in
    the user's own image). The launcher exits with the failed workers' reason code instead of
    torchrun's own 1, so `restartPolicy: ExitCode` sees a hang (201) or an NCCL error (200) as
    retryable and a bug (1) as permanent (docs/reliability.md)."""
    if ships_runtime(job):
        return list(LAUNCHER)
    return ["torchrun"]


def launcher(job: JobSpec) -> list[str]:
    """`python` for one process per pod; torchrun for several processes per pod or elastic.

    Node count and processes per node are literal flags (known here, and not every operator
    release sets PET_NPROC_PER_NODE on elastic jobs); master address, port and node rank come
    from the operator's variables through Kubernetes `$(VAR)` expansion. The rendezvous waits
    as long as every other wait of the job (trainforge/training/timeouts.py)."""
    if not job.uses_torchrun:
        return ["python"]
    if job.elastic is not None:
        e = job.elastic
        # Endpoint, backend and id come from PET_RDZV_* which the operator derives from
        # elasticPolicy; the node range and restarts are repeated literally for the preview.
        return [
            *torchrun(job),
            f"--nnodes={e.min_workers}:{e.max_workers}",
            f"--nproc-per-node={job.procs}",
            f"--max-restarts={e.max_restarts}",
            "--rdzv-backend=c10d",
            f"--rdzv-conf={timeouts(job).torchrun_rdzv_conf(elastic=True)}",
        ]
    if job.workers == 1:
        return [*torchrun(job), "--standalone", "--nnodes=1", f"--nproc-per-node={job.procs}"]
    return [
        *torchrun(job),
        f"--nnodes={job.workers}",
        f"--nproc-per-node={job.procs}",
        "--node-rank=$(RANK)",
        "--master-addr=$(MASTER_ADDR)",
        "--master-port=$(MASTER_PORT)",
        f"--rdzv-conf={timeouts(job).torchrun_rdzv_conf(elastic=False)}",
    ]


def ships_runtime(job: JobSpec) -> bool:
    """The runtime library is in the pod: the bundled runtime, or user code shipped from a
    ConfigMap (the library's ConfigMap goes next to it). Code in the user's own image runs
    on that image alone, unless that image is a trainforge runtime image (its facts say so)."""
    facts = job.image_facts
    return (
        job.entrypoint is None
        or job.code_source == "configmap"
        or bool(facts is not None and facts.trainforge)
    )


def user_code_runner(job: JobSpec) -> list[str]:
    """`-m trainforge.training.usercode` where the library is in the pod, else nothing: the
    same wrapper under run-local and in the pods (docs/jobs.md, "Restarts and exit codes").
    A `command` job runs as written, without it."""
    entry = job.entrypoint
    if entry is not None and entry.kind == "command":
        return []
    return list(USER_CODE_RUNNER) if ships_runtime(job) else []


# Why `trainforge run-local` cannot run a job, where it cannot (None: it runs it). One answer for
# run-local's refusal, the restart line's "run-local: ..." and `trainforge import`'s next step.
NOT_LOCAL_COMMAND = (
    "a command runs a program of your image, which run-local cannot run here; run the image "
    "(docker run ...) with the contract's variables, or declare the same code as "
    "entrypoint.script or entrypoint.module to debug it on this machine"
)


def stand_ins_env(job: JobSpec, mapping: list[tuple[str, str]], fsx_mount: str) -> str:
    """run-local's (pod path, local directory) stand-ins as your code's process reads them
    (LOCAL_STAND_INS, trainforge.training.usercode), each with the claim `--volume` would replace
    ('' for the checkpoint and output directories): a missing file's exit line names them."""
    claims = {v.mount_path: v.claim for v in job.volumes}
    claims[fsx_mount] = fsx_claim_name(job.team)
    return json.dumps([[pod, local, claims.get(pod, "")] for pod, local in mapping])


def not_local(job: JobSpec) -> str | None:
    """Why run-local cannot run `job`, or None when it can: a `command` runs a program of the
    job's image (trainforge.jobs.local.user_code_run refuses it)."""
    entry = job.entrypoint
    if entry is not None and entry.kind == "command":
        return NOT_LOCAL_COMMAND
    return None


def program(job: JobSpec, target: JobTarget, code_root: str = USER_CODE_MOUNT) -> list[Any]:
    """What the launcher runs: `-m trainforge.training <flags>`, or the user's
    `<code_root>/<script> args` / `-m <module> args` through `trainforge.training.usercode`
    (where the library ships). A `command` job has no launcher: see `command_for`."""
    entry = job.entrypoint
    if entry is None:
        return ["-m", RUNTIME_MODULE, *training_args(job, target)]
    runner = user_code_runner(job)
    if entry.kind in ("script", "function"):
        return [*runner, f"{code_root}/{entry.entry_file}", *entry.args]
    if entry.kind == "module":
        return [*runner, "-m", entry.module, *entry.args]
    raise ValueError(f"entrypoint kind {entry.kind!r} has no launcher program")


def command_for(job: JobSpec, target: JobTarget) -> list[Any]:
    """The container command of every pod of the job."""
    entry = job.entrypoint
    if entry is not None and entry.kind == "command":
        return list(entry.command)
    return [*launcher(job), *program(job, target)]


# --- the contract's environment -------------------------------------------------------------


def contract_variables(job: JobSpec, target: JobTarget) -> list[tuple[str, Any]]:
    """The TRAINFORGE_* variables and MLFLOW_TRACKING_URI (values may be Pulumi Outputs)."""
    ck = job.checkpoint
    out: list[tuple[str, Any]] = [
        (c.JOB_NAME, job.name),
        (c.CHECKPOINT_DIR, checkpoint_dir(job, target)),
        (c.OUTPUT_DIR, output_dir(job, target)),
        (c.CHECKPOINT_EVERY, str(ck.every)),
        (c.KEEP_LAST, str(ck.keep_last)),
        (c.RESUME, ck.resume),
        (c.ASYNC_CHECKPOINT, "1" if ck.async_save else "0"),
        (c.GRACE_PERIOD, str(ck.grace_period)),
        (c.METRICS_PORT, str(job.metrics_port)),
        (c.HANG_TIMEOUT, f"{timeouts(job).hang_timeout:g}"),
    ]
    if job.entrypoint is not None and job.entrypoint.retry_on:
        out.append((c.RETRY_ON, ",".join(job.entrypoint.retry_on)))
    if mirrors_to_s3(job, target):
        out.append((c.CHECKPOINT_S3, s3_uri(target, job)))
    if target.mlflow_tracking_uri is not None:
        out.append((c.MLFLOW_TRACKING_URI, target.mlflow_tracking_uri))
    return out


def python_path(job: JobSpec, ships_runtime: bool) -> str | None:
    """The user's shipped directory first (its packages import as in the repository), then
    the shipped runtime library."""
    parts = []
    if job.entrypoint is not None and job.entrypoint.ships_code:
        parts.append(USER_CODE_MOUNT)
    if ships_runtime:
        parts.append(CODE_MOUNT)
    return ":".join(parts) or None


def starts_torchrun(job: JobSpec) -> bool:
    """A `command` job whose command is torchrun itself (`torchrun ...`, `python -m
    torch.distributed.run ...`): its own `--max-restarts` restart in the pod too."""
    entry = job.entrypoint
    if entry is None or entry.kind != "command":
        return False
    return torchrun_args.launcher_args([str(a) for a in (*entry.command, *entry.args)]) is not None


def contract_env(
    job: JobSpec, target: JobTarget, ships_runtime: bool = True
) -> list[dict[str, Any]]:
    """Environment the contract promises the job's code (besides what the operator sets)."""
    out: list[dict[str, Any]] = []
    path = python_path(job, ships_runtime)
    if path:
        out.append({"name": "PYTHONPATH", "value": path})
    if job.uses_torchrun or starts_torchrun(job):
        # wherever the pod runs torchrun (ours, or plain `torchrun` in your image or command):
        # the whole grace period to save on SIGTERM, and a store of its own for each restart
        # of the worker group, whatever your code calls (trainforge.training.torchrun_env)
        env = torchrun_env(job.checkpoint.grace_period)
        out += [{"name": k, "value": v} for k, v in env.items()]
    if not job.uses_torchrun:
        # The operator sets RANK and WORLD_SIZE per pod but no local rank; one process per pod.
        out += [{"name": "LOCAL_RANK", "value": "0"}, {"name": "LOCAL_WORLD_SIZE", "value": "1"}]
    out += [{"name": k, "value": v} for k, v in contract_variables(job, target)]
    return out


# --- the pod's share --------------------------------------------------------------------------


@dataclass(frozen=True)
class PodParts:
    """The container's command, contract env and working directory, and the pod's code
    volumes, for every backend's pod builder to merge in."""

    command: list[Any]
    env: list[dict[str, Any]]
    working_dir: str | None = None
    mounts: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    share_process_namespace: bool = False


def pod_parts(
    job: JobSpec, target: JobTarget, code: CodeBundle | None, user_code: CodeBundle | None
) -> PodParts:
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    for bundle, name, path, role in (
        (code, RUNTIME_CODE_VOLUME, CODE_MOUNT, "code"),
        (user_code, USER_CODE_VOLUME, USER_CODE_MOUNT, "src"),
    ):
        if bundle is None:
            continue
        mounts.append({"name": name, "mountPath": path, "readOnly": True})
        volumes.append(
            {
                "name": name,
                "configMap": {
                    "name": bundle.configmap_name(job.name, role),
                    "items": bundle.items(),
                    "defaultMode": 0o444,
                },
            }
        )
    user = job.entrypoint is not None
    return PodParts(
        command=command_for(job, target),
        env=contract_env(job, target, ships_runtime=code is not None),
        # shipped code runs from its mount; code of the image from the entry's workingDir
        # (None: the image's WORKDIR)
        working_dir=USER_CODE_MOUNT
        if user_code is not None
        else (job.entrypoint.working_dir if job.entrypoint is not None else None),
        mounts=mounts,
        volumes=volumes,
        # See the module docstring: without it a handler-less script is PID 1 and ignores
        # SIGTERM. The pod has one application container; the operator's init container
        # (Worker pods) has exited before it starts, so nothing else shares the namespace.
        share_process_namespace=user,
    )


# --- the user's code: what is shipped, checked at preview -----------------------------------


def user_code(job: JobSpec, project_dir: Path | str, where: str) -> CodeBundle | None:
    """The bundle of the job's own code (None for the runtime or code in the image).

    Checks what a preview can: the directory exists and fits a ConfigMap, the script is in it
    (and parses), the module can be imported from it."""
    entry = job.entrypoint
    if entry is None or not entry.ships_code:
        return None
    at = f"{where}.entrypoint"
    if entry.kind == "function":
        bundle = CodeBundle(files=entry.files)
        _refuse_shadowing(entry, bundle, f"{at}.function")
        _check_library_torch(job, bundle, where)
        return bundle
    if SERVED_TO_OTHER_LANGUAGES:
        raise JobConfigError(
            f"{at}.{'script' if entry.kind == 'script' else 'codeDir'}",
            entry.script or entry.code_dir,
            "files of your program's directory cannot be shipped from another Pulumi language "
            "(the trainforge provider does not run there); bake the code into an image and use "
            "image with entrypoint.module or entrypoint.command",
        )
    assert entry.code_dir is not None
    if entry.kind == "script" and not (Path(project_dir) / str(entry.script)).is_file():
        raise JobConfigError(
            f"{at}.script",
            entry.script,
            "no such file (paths are relative to the project directory, where Pulumi runs)",
        )
    key = "codeDir" if entry.kind != "script" or entry.code_dir != _script_dir(entry) else "script"
    bundle = codeship.collect_dir(
        Path(project_dir) / entry.code_dir,
        f"{at}.{key}",
        entry.exclude,
        value=entry.script if key == "script" else entry.code_dir,
        keep=entry.entry_file if entry.kind == "script" else None,
    )
    shipped = set(bundle.paths)
    if entry.kind == "script":
        rel = entry.entry_file
        if rel not in shipped:
            raise JobConfigError(
                f"{at}.script", entry.script, "it is excluded from what is shipped"
            )
        _check_parses(dict(bundle.files).get(rel), f"{at}.script", entry.script)
    elif entry.kind == "module":
        rel = entry.module.replace(".", "/")
        if f"{rel}.py" not in shipped and f"{rel}/__main__.py" not in shipped:
            raise JobConfigError(
                f"{at}.module",
                entry.module,
                f"not found in codeDir {entry.code_dir} (looked for {rel}.py and "
                f"{rel}/__main__.py)",
            )
    _refuse_shadowing(entry, bundle, f"{at}.{key}")
    _check_library_torch(job, bundle, where)
    return bundle


def _refuse_shadowing(entry: EntrypointSpec, bundle: CodeBundle, key: str) -> None:
    """A shipped file that shadows a module the pod imports before the code runs
    (trainforge.training.shadowing): `random.py` at the top of the shipped directory (the
    pod's working directory and first on PYTHONPATH), or beside the script (its folder is
    sys.path[0]). The runtime would stop on it with exit 2; the preview says it first."""
    roots = [""]
    if entry.kind == "script" and (folder := posixpath.dirname(entry.entry_file or "")):
        roots.append(f"{folder}/")
    for root in roots:
        beside = [p[len(root) :] for p in bundle.paths if p.startswith(root)]
        for rel, module in shadowing.shadowing(beside):
            shipped = f"{root}{rel}"
            if entry.code_dir is not None:
                shipped = posixpath.normpath(posixpath.join(entry.code_dir, shipped))
            raise JobConfigError(key, shipped, f"this file {shadowing.why(module)}")


def top_level_imports(files: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    """(path, top-level module) for each absolute import in the Python files of `files` (path,
    text), in file order. Read from the source (ast), never run; a file that does not parse
    imports nothing here (it fails where it runs)."""
    for path, text in files:
        if not path.endswith(".py"):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    yield path, a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield path, node.module.split(".")[0]


def first_importer(files: Iterable[tuple[str, str]], *packages: str) -> str | None:
    """The first of `files` (path, text) whose Python imports one of `packages` (or a module
    under it), if any."""
    return next((path for path, name in top_level_imports(files) if name in packages), None)


def torch_need(launcher: Sequence[str] | None, files: Iterable[tuple[str, str]]) -> str:
    """Why the pods need torch in the image ('' where nothing says so): `launcher` starts
    several processes per pod with torchrun (trainforge's launcher, shipped with the code, or
    the image's `torchrun`), which imports torch; else a shipped file (path, text) imports it."""
    if launcher is not None and list(launcher) == LAUNCHER:
        return (
            "they start your script with torchrun through trainforge's launcher, "
            f"`{' '.join(LAUNCHER)}` (shipped with it), which imports torch"
        )
    if launcher is not None:
        return f"they start your code with `{' '.join(launcher)}`, which torch installs"
    user = first_importer(files, "torch")
    return f"{user} imports torch" if user else ""


def job_torch_need(job: JobSpec, files: Iterable[tuple[str, str]] | None) -> str:
    """`torch_need` of a resolved job: the bundled runtime (`python -m trainforge.training`
    imports torch), torchrun where a pod runs several processes (`launcher`), or a
    shipped file (`files`: None where none ship). A `command` is the image's: not judged."""
    entry = job.entrypoint
    if entry is None:
        return f"they run the bundled runtime, `python -m {RUNTIME_MODULE}`, which imports torch"
    if entry.kind == "command":
        return ""
    return torch_need(torchrun(job) if job.uses_torchrun else None, files or ())


def imports_trainforge(entry: EntrypointSpec | None, bundle: CodeBundle) -> str | None:
    """The first file the entry runs (`reach.entry_files`: the entry and what it imports
    within the bundle) that imports trainforge (so needs the runtime library), if any."""
    return first_importer(reach.entry_files(entry, bundle.files), "trainforge")


def refuse_missing_pieces(
    job: JobSpec, target: JobTarget, bundle: CodeBundle | None, where: str
) -> None:
    """Own shipped code on an image known to lack a piece its files use, judged with the files
    (`wiring.resolve_job` judges the bundled runtime, whose code is known):

    - MLflow, on an image declared without mlflow (`imageFacts: {mlflow: false}`), on a
      platform that runs MLflow: refused when a shipped file uses MLflow (`logs_to_mlflow`);
      a script that never imports it runs fine;
    - the S3 mirror, on an image declared or known (the stock PyTorch image) without boto3:
      refused when the job mirrors (`checkpoint.s3Mirror` and a bucket) and a shipped file
      runs the mirror (`runs_s3_mirror`: it imports trainforge). Code that never imports
      trainforge mirrors nothing on any image, so the image's boto3 changes nothing in its
      pods: it is not refused on one image and passed on another (`mirror_warnings` says,
      on every image, that an explicit `s3Mirror: true` mirrors nothing there);
    - torch, on an image known to carry none (a Docker official python image), where the pods
      need it (`job_torch_need`): the bundled runtime, torchrun, or a shipped file
      that imports torch. They could not start."""
    torch = job_torch_need(job, bundle.files if bundle is not None else None)
    mlflow = (
        bundle is not None
        and job.image_facts is not None
        and target.mlflow_tracking_uri is not None
        and logs_to_mlflow(job, bundle.files)
    )
    mirror = bundle is not None and mirrors_to_s3(job, target) and runs_s3_mirror(job, bundle.files)
    if not (mlflow or mirror or torch):
        return
    image = images.image_for(job, target.pool)
    facts = job.image_facts or facts_for(image, None)
    for miss in missing_pieces(
        facts,
        mlflow=mlflow,
        s3_mirror=mirror,
        efa=False,
        where=where,
        image=job.image and upstream(job.image),
        runtime=runtime_way(job, target),
        torch=torch,
    ):
        raise JobConfigError(miss.key, miss.value, miss.message(upstream(job.image or image)))


def mirror_warnings(
    given: JobSpec, job: JobSpec, target: JobTarget, bundle: CodeBundle | None, where: str
) -> list[str]:
    """An explicit `checkpoint.s3Mirror: true` (`given`: the job as written) on own shipped
    code that never runs the mirror: the pods get TRAINFORGE_CHECKPOINT_S3 but nothing copies
    a checkpoint there, whatever the image carries. One warning, the same on every image."""
    if given.checkpoint.s3_mirror is not True or bundle is None:
        return []
    if not mirrors_to_s3(job, target) or runs_s3_mirror(job, bundle.files):
        return []
    return [
        f"{where}.checkpoint.s3Mirror: true mirrors nothing: no file your entry runs imports "
        "trainforge, whose CheckpointManager is the mirror (the pods get "
        f"{c.CHECKPOINT_S3}, which your code may upload to itself); use "
        "trainforge.training.CheckpointManager, or set checkpoint.s3Mirror: false"
    ]


def hang_warnings(given: JobSpec, bundle: CodeBundle | None, where: str) -> list[str]:
    """An explicit `hangTimeout` (`given`: the job as written; 0 = off aside) on own shipped
    code that never imports trainforge (`imports_trainforge`, the fact `runs_s3_mirror` reads
    too), so never starts its Watchdog: nothing ends a hung step, however short the timeout
    (docs/jobs.md, `hangTimeout`). One warning, as `mirror_warnings` gives."""
    if not given.hang_timeout or bundle is None or imports_trainforge(given.entrypoint, bundle):
        return []
    return [
        f"{where}.hangTimeout: {given.hang_timeout} watches nothing: no file your entry runs imports "
        "trainforge, whose Watchdog is what ends a hung step (exit 201; the wrapper your code "
        "runs under, trainforge.training.usercode, starts none), so a hung step waits as "
        "long as torch's own timeouts let it (forever outside a collective); start "
        "trainforge.training.Watchdog.from_env() in your training loop (it reads the job's "
        f"hangTimeout from {c.HANG_TIMEOUT}), or remove hangTimeout"
    ]


def logs_to_mlflow(job: JobSpec, files: Iterable[tuple[str, str]] | None) -> bool:
    """Whether the job's code talks to the platform's MLflow, so its image needs mlflow.

    The bundled runtime does (trainforge.training.metrics). Your own shipped code does only if
    a file imports mlflow, or trainforge (whose MetricsReporter logs to MLflow): a plain DDP
    script never calls MLflow, and the platform's MLFLOW_TRACKING_URI in its environment
    changes nothing. Code in the image or a `command` cannot be read here: assumed to."""
    entry = job.entrypoint
    if entry is None or not entry.ships_code or files is None:
        return True
    return first_importer(reach.entry_files(entry, files), "mlflow", "trainforge") is not None


def runs_s3_mirror(job: JobSpec, files: Iterable[tuple[str, str]] | None) -> bool:
    """Whether the job's code can mirror its checkpoints to S3 (TRAINFORGE_CHECKPOINT_S3).

    The mirror is trainforge.training's CheckpointManager (trainforge/training/checkpoint.py):
    the bundled runtime runs it; your own shipped code only if a file imports trainforge (the
    wrapper your code runs under, trainforge.training.usercode, mirrors nothing). Code in the
    image or a `command` cannot be read here: assumed to."""
    entry = job.entrypoint
    if entry is None or not entry.ships_code or files is None:
        return True
    return first_importer(reach.entry_files(entry, files), "trainforge") is not None


def shipped_files(emitted: Any) -> list[tuple[str, str]] | None:
    """(path, text) of a job's own shipped code, as its emitted objects carry it: the
    ConfigMap's flat keys (codeship.key_for) mapped back to the paths the pod mounts them at
    (its volume's items), so `reach.entry_files` resolves imports; None when it ships none."""
    cm = getattr(emitted, "user_configmap", None)
    if not cm:
        return None
    name = (cm.get("metadata") or {}).get("name")
    volumes = ((getattr(emitted, "pod", None) or {}).get("spec") or {}).get("volumes") or []
    path_of = {
        item.get("key"): item.get("path")
        for vol in volumes
        if (vol.get("configMap") or {}).get("name") == name
        for item in (vol.get("configMap") or {}).get("items") or []
    }
    data = (cm.get("data") or {}).items()
    return [(path_of.get(k) or k, v) for k, v in data if isinstance(v, str)]


def checkpoints_mirrored(job: JobSpec, target: JobTarget, emitted: Any) -> bool:
    """The one answer, for every check, to whether a job's checkpoints reach S3: the stack
    mirrors them (`mirrors_to_s3`: checkpoint.s3Mirror and a bucket) and the job's code runs
    the mirror (`runs_s3_mirror`)."""
    return mirrors_to_s3(job, target) and runs_s3_mirror(job, shipped_files(emitted))


def _check_library_torch(job: JobSpec, bundle: CodeBundle, where: str) -> None:
    """User code that imports trainforge.training runs it on the image's torch: refuse an
    image whose torch (its tag's, or its declared imageFacts.torch) is older than the library
    needs (codeSource: configmap ships the library to any image; with codeSource: image the
    image brings its own)."""
    if job.image is None or job.code_source != "configmap":
        return
    user = imports_trainforge(job.entrypoint, bundle)
    facts = facts_for(job.image, job.image_facts)
    torch = torch_release(facts)
    if user is None or torch is None or torch >= versions.MIN_RUNTIME_TORCH:
        return
    need = ".".join(str(x) for x in versions.MIN_RUNTIME_TORCH)
    said = " (its imageFacts.torch)" if facts.source == DECLARED_SOURCE else ""
    raise JobConfigError(
        f"{where}.image",
        job.image,
        f"{user} imports trainforge, whose library needs torch >= {need} (DCP checkpoints, "
        f"FSDP2); this image has torch {facts.torch}{said}. Use a newer image, "
        f"e.g. {versions.PYTORCH_IMAGE}",
    )


def _script_dir(entry: EntrypointSpec) -> str:
    return posixpath.dirname(entry.script or "") or "."


def _check_parses(text: str | None, where: str, script: str | None) -> None:
    """A script that does not parse fails at preview, not on GPUs an hour later."""
    if text is None:
        return  # a binary "script": python will say what it thinks of it
    try:
        ast.parse(text, filename=script or "<script>")
    except SyntaxError as e:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        raise JobConfigError(
            where,
            script,
            f"line {e.lineno}: {e.msg} (checked with Python {version}; the image's Python runs it)",
        ) from None
