"""Run a Pulumi program in-process under mocks, in preview mode, and record what it declares.

Why: `pulumi preview` needs the CLI, credentials and a cluster. The Python SDK can instead talk
to an in-process mock engine; every resource the program registers passes through the mock
monitor, so recording its inputs there gives the full inventory without any cloud call.
Values that only the cloud can know (ids, ARNs of resources not yet created) stay unknown,
exactly as they are in a real preview.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import pathlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trainforge.core.errors import JobConfigError
from trainforge.stack import file as stack_file
from trainforge.stack.file import StackFileError, config_value

UNKNOWN = "<unknown>"
STACK_TYPE = "pulumi:pulumi:Stack"  # the stack's own resource: the engine's, never recorded
SECRET = stack_file.SECRET


# The cyclic collector's thresholds for a plan process (Python's: 700, 10, 10): most of a
# plan's objects live to its end, so full collections freed little and took ~30% of the CPU
# (docs/performance.md, "The collector and the stack traces").
PLAN_GC_THRESHOLDS = (20_000, 50, 1_000)


def tune_gc() -> None:
    """Set the collector's thresholds for a plan process (see PLAN_GC_THRESHOLDS): called
    first thing by `trainforge plan` (and by the tests' session), before the heavy imports."""
    gc.set_threshold(*PLAN_GC_THRESHOLDS)


class ProjectError(Exception):
    """The project or stack file is missing or malformed (a configuration error: exit 2)."""


def find_config_error(exc: BaseException) -> BaseException | None:
    """The config error behind `exc` (it may be wrapped by the Pulumi runtime): the project's
    own (a missing or malformed project, stack file or key; a job's) and the platform's."""
    from trainforge.stack.base import StackError  # platform.config.ConfigError is one

    seen = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, ProjectError | StackError | StackFileError | JobConfigError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


@dataclass
class Recorded:
    """One registered resource: what the program asked the engine for."""

    urn: str
    type: str
    name: str
    parent: str | None
    custom: bool
    inputs: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    # input property -> URNs of the resources its value came from (links bucket and policy
    # even while the bucket's id is still unknown)
    dependencies: dict[str, list[str]] = field(default_factory=dict)
    # the id the mocks assigned (a stand-in run's plausible id); None in a preview
    id: str | None = None
    # input property -> its value with secret markers removed, for the properties `inputs`
    # masks (a Release's values with one secret inside, a Secret's stringData). Checks that
    # must read names inside (a chart's existingSecret) read it; never written out (to_json).
    revealed: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        keys = ("urn", "type", "name", "parent", "custom", "options", "inputs", "dependencies")
        return {k: getattr(self, k) for k in keys}


@dataclass
class Inventory:
    """Everything a program declared, in `tree_order`, plus its stack outputs."""

    project: str
    stack: str
    resources: list[Recorded]
    outputs: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    # The typed objects the program built in-process (trainforge.core.contract.Declared):
    # platform contracts and resolved jobs, for the plan's checks. Not part of the JSON.
    declared: Any = None
    # What the program warned about (`pulumi.log.warn`): the plan puts them in its verdict
    # and report, where a reviewer reads, not only on a terminal's stderr.
    warnings: list[str] = field(default_factory=list)
    # What a Kubeflow SDK program sent to the plan's API stand-in (`plan --sdk`,
    # trainforge.plan.sdk.Submission); None otherwise. Not part of the JSON.
    submitted: Any = None
    # The secret stack outputs' own values (UNKNOWN while unknown), which `outputs` masks:
    # a fleet manager's plan answers its StackReferences to a worker with them
    # (trainforge.plan.fleet). Never written out (to_json).
    secret_outputs: dict[str, Any] = field(default_factory=dict, repr=False)

    def by_urn(self) -> dict[str, Recorded]:
        return {r.urn: r for r in self.resources}

    @property
    def to_create(self) -> int:
        """What `pulumi preview` of this (new) stack counts in its "N to create": every
        resource the program registers, which `resources` holds, plus the stack's own
        `pulumi:pulumi:Stack`, which the engine creates and `resources` leaves out (the report's
        tree prints it on top). Pulumi counts each logical step but default providers
        (pulumi/pulumi pkg/engine/update.go, previewActions.OnResourceStepPost and
        isInternalStep); a read (`.get`) of a new stack is not counted (ShouldRecordReadStep),
        nor recorded here. E.g. a stack with one bucket: "+ 2 to create"."""
        return len(self.resources) + 1

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("project", "stack", "config", "outputs")}
        return {**out, "resources": [r.to_json() for r in self.resources]}


def plain(value: Any) -> Any:
    """Turn deserialized engine values into JSON-able data: unknowns and secrets as markers,
    integral floats (the wire has only doubles) back to ints, resources as their URN."""
    from pulumi.output import Unknown
    from pulumi.runtime.rpc import is_rpc_secret

    def conv(v: Any) -> Any:
        if isinstance(v, str | bool | int) or v is None:
            return v
        if isinstance(v, float):
            return int(v) if v.is_integer() else v
        if isinstance(v, dict):
            if is_rpc_secret(v):
                # A secret mapping (a Secret's data/stringData is wrapped whole) keeps its
                # keys, so that the object still has its shape; every value is masked.
                inner = v.get("value")
                if isinstance(inner, dict) and not is_rpc_secret(inner):
                    return {str(k): SECRET for k in inner}
                return SECRET
            return {str(k): conv(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [conv(x) for x in v]
        if isinstance(v, Unknown):
            return UNKNOWN
        if getattr(v, "_urn", None) is not None or getattr(v, "urn", None) is not None:
            return f"<resource {type(v).__name__}>"
        return f"<{type(v).__name__}>"

    return conv(value)


def revealed(inputs: dict[str, Any]) -> dict[str, Any]:
    """The properties that `plain` masks as secrets, with every secret marker unwrapped (for
    `Recorded.revealed`); unknowns stay UNKNOWN."""
    from pulumi.runtime.rpc import is_rpc_secret

    def unwrap(v: Any) -> Any:
        if isinstance(v, dict):
            if is_rpc_secret(v):
                return unwrap(v.get("value"))
            return {k: unwrap(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [unwrap(x) for x in v]
        return v

    def has_secret(v: Any) -> bool:
        if isinstance(v, dict):
            return is_rpc_secret(v) or any(has_secret(x) for x in v.values())
        if isinstance(v, list | tuple):
            return any(has_secret(x) for x in v)
        return False

    return {str(k): plain(unwrap(v)) for k, v in inputs.items() if has_secret(v)}


def _make_monitor(mocks: Any, sink: list[Recorded], echo: bool = False):
    from pulumi.runtime import rpc
    from pulumi.runtime.mocks import MockMonitor

    from trainforge.plan.mocks import resource_options

    class RecordingMonitor(MockMonitor):
        """A MockMonitor that keeps the raw inputs (unknowns included) of every resource."""

        def RegisterResource(self, request):  # noqa: N802 - gRPC method name
            """MockMonitor.RegisterResource, deserializing the inputs once for both uses."""
            if request.type == STACK_TYPE:
                return super().RegisterResource(request)
            from pulumi.runtime.mocks import MockResourceArgs, _resolve_callbacks
            from pulumi.runtime.proto import resource_pb2
            from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

            _ensure_event_loop()
            urn = self.make_urn(request.parent, request.type, request.name)
            inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
            if echo:
                # Preview semantics: no id, outputs = inputs. Hand the request's
                # own serialized inputs back instead of re-serializing them (a fifth of the
                # program's time with large ConfigMaps).
                id_, state, obj_proto = None, inputs, request.object
            else:
                id_, state = self.mocks.new_resource(
                    MockResourceArgs(
                        typ=request.type,
                        name=request.name,
                        inputs=inputs,
                        provider=request.provider,
                        resource_id=request.importId,
                        custom=request.custom or False,
                        transforms=_resolve_callbacks(request.transforms),
                    )
                )
                obj_proto = _sync_await(rpc.serialize_properties(state, {}))
            self.resources[urn] = MockMonitor.ResourceRegistration(urn, id_, state)
            resp = resource_pb2.RegisterResourceResponse(urn=urn, id=id_, object=obj_proto)
            sink.append(
                Recorded(
                    urn=resp.urn,
                    type=request.type,
                    name=request.name,
                    parent=request.parent or None,
                    custom=bool(request.custom),
                    inputs=plain(inputs),
                    options=resource_options(request),
                    dependencies={
                        k: sorted(v.urns)
                        for k, v in request.propertyDependencies.items()
                        if list(v.urns)
                    },
                    id=id_ or None,
                    revealed=revealed(inputs),
                )
            )
            return resp

    return RecordingMonitor(mocks)


def tree_order(resources: list[Recorded]) -> list[Recorded]:
    """Each resource after its parent, siblings by type then name (their URN order): the one
    order of every listing of the plan, not the order the mocked engine happened to register
    them in, which varies between runs (docs/pr-review.md, "The offline plan", 1)."""
    urns = {r.urn for r in resources}
    children: dict[str | None, list[Recorded]] = {}
    for r in sorted(resources, key=lambda r: (r.type, r.name, r.urn)):
        children.setdefault(r.parent if r.parent in urns else None, []).append(r)
    out: list[Recorded] = []

    def walk(parent: str | None) -> None:
        for r in children.pop(parent, []):  # popped: a parent's children are listed once
            out.append(r)
            walk(r.urn)

    walk(None)
    return out


async def _output(value: Any, reveal: bool = False) -> Any:
    """A stack output as the preview shows it: its value, [secret] or <unknown>; `reveal`: a
    secret one's own value (for `Inventory.secret_outputs`)."""
    from pulumi import Output

    out = Output.from_input(value)
    if not reveal and await out.is_secret():
        return SECRET
    if not await out.is_known():
        return UNKNOWN
    return plain(await out.future())


def standin_mocks() -> Any:
    """The platform's mocks in apply mode: plausible ids and ARNs (the stand-in run)."""
    from trainforge.plan.mocks import TrainforgeMocks

    return TrainforgeMocks(preview=False)


# ---------------------------------------------------------------------------------------------
# Project and stack files


def find_project(start: pathlib.Path) -> pathlib.Path:
    """The nearest directory at or above `start` that holds Pulumi.yaml."""
    start = start.resolve()
    for d in [start, *start.parents]:
        if (d / "Pulumi.yaml").is_file():
            return d
    raise ProjectError(f"no Pulumi.yaml in {start} or any parent directory")


def project_name(root: pathlib.Path) -> str:
    try:
        return stack_file.project_name(root, default=None)
    except stack_file.StackFileError as e:
        raise ProjectError(str(e)) from e


def read_stack_config(
    root: pathlib.Path, stack: str, project: str
) -> tuple[dict[str, str], list[str], dict[str, Any]]:
    """Read Pulumi.<stack>.yaml into (engine config strings, secret keys, display config)
    with the one stack reader (trainforge/stack/file.py).

    Secure values cannot be decrypted offline; they reach the program as "[secret]".
    Keys without a namespace belong to the project, as with the Pulumi CLI.
    """
    try:
        found = stack_file.read_stack(root, stack, project)
    except stack_file.StackFileError as e:
        raise ProjectError(str(e)) from e
    return found.engine(), found.secret_keys, found.config


# ---------------------------------------------------------------------------------------------
# Running


_SILENT = logging.getLogger("trainforge.plan.standin")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


class _ProgramLog(logging.Handler):
    """Keeps the program's warnings (and errors) for the plan; echoes them to stderr as
    Pulumi's own engine would when `echo` (run-local, which shows no verdict)."""

    def __init__(self, echo: bool) -> None:
        super().__init__(logging.WARNING)
        self.echo = echo
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        if self.echo:
            print(record.getMessage(), file=sys.stderr, flush=True)


@contextlib.contextmanager
def _in_process_callbacks() -> Iterator[None]:
    """Pulumi's callback servicer (resource transforms) without its gRPC server, for the run
    inside: the SDK starts a gRPC server (and its poller thread) for the engine to call
    transforms back, but the plan's mock monitor looks them up in-process
    (`pulumi.runtime.mocks._resolve_callbacks`), so nothing ever calls it. Without that
    thread the plan process may fork (registry.in_child). Restored after the run."""
    import asyncio  # noqa: PLC0415

    from pulumi.runtime import settings  # noqa: PLC0415
    from pulumi.runtime._callbacks import _CallbackServicer  # noqa: PLC0415

    class InProcess(_CallbackServicer):
        def __init__(self, monitor: Any) -> None:
            _CallbackServicer._servicers.append(self)
            self._callbacks, self._transforms, self._state_migrations = {}, {}, {}
            self._monitor = monitor
            self._loop = asyncio.get_running_loop()
            self._server = self  # `shutdown` stops it: stop() below
            self._target = "in-process"

        async def serve(self) -> None:
            pass

        async def stop(self, grace: Any = None) -> None:
            pass

    settings._CallbackServicer = InProcess
    try:
        yield
    finally:
        settings._CallbackServicer = _CallbackServicer


def run_program(
    program: Callable[[], Any],
    *,
    project: str = "trainforge",
    stack: str = "dev",
    config: dict[str, str] | None = None,
    secret_keys: list[str] | None = None,
    mocks: Any = None,
    preview: bool = True,
    echo_warnings: bool = True,
    references: dict[str, dict] | None = None,
) -> Inventory:
    """Run `program` (a callable that declares resources) under mocks in preview mode: the
    platform's mocks answer provider functions, resources echo their inputs with no id.

    `preview=False` (with mocks that invent ids and ARNs) runs every apply, so values built
    from cloud-assigned ones (policy documents) exist with stand-ins; see plan.core.
    `references`: StackReference target -> its state (name, outputs, secretOutputNames), a
    fleet manager's workers as the plan planned them (trainforge.plan.fleet).
    """
    from pulumi.runtime.sync_await import _sync_await

    from trainforge.plan.mocks import TrainforgeMocks, run_in_process

    echo = preview and mocks is None
    mocks = TrainforgeMocks(preview=True) if mocks is None else mocks
    mocks.references = dict(references or {})
    sink: list[Recorded] = []
    # The stand-in run (not a preview) is the same program again, for the plan's IAM check:
    # its warnings were shown by the preview run already, so they are neither kept nor shown.
    log = _ProgramLog(echo_warnings)
    logger = logging.getLogger("trainforge.plan.program") if preview else _SILENT
    if preview:
        logger.propagate = False
        logger.setLevel(logging.WARNING)
        logger.handlers = [log]
    with _in_process_callbacks():
        declared, raw = run_in_process(
            program,
            mocks,
            _make_monitor(mocks, sink, echo),
            project=project,
            stack=stack,
            preview=preview,
            config=config or {},
            secret_keys=secret_keys or [],
            logger=logger,
        )
    outputs = {name: _sync_await(_output(value)) for name, value in raw.items()}
    secret_outputs = {
        name: _sync_await(_output(value, reveal=True))
        for name, value in raw.items()
        if outputs[name] == SECRET
    }
    return Inventory(
        project=project,
        stack=stack,
        resources=tree_order(sink),
        outputs=outputs,
        declared=declared,
        warnings=log.messages if preview else [],
        secret_outputs=secret_outputs,
    )


def program_path(root: pathlib.Path, program: str | None) -> pathlib.Path:
    """The Pulumi program to run: __main__.py, or `--program FILE` under the project's one
    path rule (relative to the project directory, inside it)."""
    if program is None:
        main = root / "__main__.py"
        if not main.is_file():
            raise ProjectError(f"{root}: no __main__.py (the Pulumi program)")
        return main
    from trainforge.jobs.spec import project_relative

    try:
        rel = project_relative(program, "--program", "a Python file")
    except ValueError as e:
        raise ProjectError(str(e)) from None
    main = root / rel
    if not main.is_file():
        raise ProjectError(f"--program: got {program!r}; no such file in the project {root}")
    return main


def run_project(
    root: pathlib.Path,
    stack: str,
    *,
    mocks: Any = None,
    config_overrides: dict | None = None,
    preview: bool = True,
    program: str | None = None,
    echo_warnings: bool = True,
    references: dict[str, dict] | None = None,
) -> Inventory:
    """Run the project's __main__.py (or `program`, a Python file of the project that
    declares the platform and jobs, e.g. with `TrainingJob.function`) with
    Pulumi.<stack>.yaml as its config."""
    project = project_name(root)
    config, secret_keys, shown = read_stack_config(root, stack, project)
    for key, value in (config_overrides or {}).items():
        config[key] = config_value(value)
        shown[key] = value
    main = program_path(root, program)
    from trainforge.plan.mocks import program_file

    inv = run_program(
        program_file(main, root),
        project=project,
        stack=stack,
        config=config,
        secret_keys=secret_keys,
        mocks=mocks,
        preview=preview,
        echo_warnings=echo_warnings,
        references=references,
    )
    inv.config = shown
    return inv
