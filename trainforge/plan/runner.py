"""Run a Pulumi program in-process under mocks, in preview mode, and record what it declares:
every resource passes the mock monitor, so its inputs there are the inventory with no CLI,
credentials or cloud call; what only the cloud knows stays unknown, as in a real preview.
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
# The collector's thresholds for a plan (Python's: 700, 10, 10): most objects live to its end,
# so full collections took ~30% of the CPU (docs/performance.md, "The collector and the stack
# traces").
PLAN_GC_THRESHOLDS = (20_000, 50, 1_000)


def tune_gc() -> None:
    """Called first by `trainforge plan` (and the tests' session), before the heavy imports."""
    gc.set_threshold(*PLAN_GC_THRESHOLDS)


class ProjectError(Exception):
    """The project or stack file is missing or malformed (a configuration error: exit 2)."""


def find_config_error(exc: BaseException) -> BaseException | None:
    """The config error behind `exc` (maybe wrapped by the Pulumi runtime): the project's, a
    stack file's or key's, a job's, the platform's."""
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
    # input property -> URNs its value came from (links bucket and policy while ids are unknown)
    dependencies: dict[str, list[str]] = field(default_factory=dict)
    id: str | None = None  # the id the mocks assigned (the stand-in run); None in a preview
    # the properties `inputs` masks as secrets, unmasked, for checks that read names inside (a
    # chart's existingSecret); never written out (to_json)
    revealed: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        keys = ("urn", "type", "name", "parent", "custom", "options", "inputs", "dependencies")
        return {k: getattr(self, k) for k in keys}


@dataclass
class Inventory:
    """Everything a program declared, in `tree_order`, plus its stack outputs. Not in the JSON:
    `declared` (core/contract.py Declared: contracts, resolved jobs), `submitted` (`plan --sdk`,
    plan/sdk.py Submission) and `secret_outputs` (the values `outputs` masks, UNKNOWN while
    unknown, with which a fleet manager's plan answers StackReferences: plan/fleet.py)."""

    project: str
    stack: str
    resources: list[Recorded]
    outputs: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    declared: Any = None
    warnings: list[str] = field(default_factory=list)  # `pulumi.log.warn`s, for the verdict
    submitted: Any = None
    secret_outputs: dict[str, Any] = field(default_factory=dict, repr=False)

    def by_urn(self) -> dict[str, Recorded]:
        return {r.urn: r for r in self.resources}

    @property
    def to_create(self) -> int:
        """`pulumi preview`'s "N to create" for a new stack: every registered resource plus the
        stack's `pulumi:pulumi:Stack`; not default providers, nor reads (pulumi/pulumi
        pkg/engine/update.go, previewActions.OnResourceStepPost, isInternalStep,
        ShouldRecordReadStep). E.g. a stack with one bucket: "+ 2 to create"."""
        return len(self.resources) + 1

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("project", "stack", "config", "outputs")}
        return {**out, "resources": [r.to_json() for r in self.resources]}


def plain(value: Any) -> Any:
    """Engine values as JSON-able data: unknowns and secrets as markers, integral floats (the
    wire has only doubles) as ints, resources by type."""
    from pulumi.output import Unknown
    from pulumi.runtime.rpc import is_rpc_secret

    def conv(v: Any) -> Any:
        if isinstance(v, str | bool | int) or v is None:
            return v
        if isinstance(v, float):
            return int(v) if v.is_integer() else v
        if isinstance(v, dict):
            if is_rpc_secret(v):
                # a secret mapping (a Secret's data) keeps its keys, every value masked
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
    """The properties `plain` masks as secrets, unwrapped (`Recorded.revealed`)."""
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
    """A MockMonitor that records every resource's raw inputs (unknowns included) in `sink`."""
    from pulumi.runtime import rpc
    from pulumi.runtime.mocks import MockMonitor, MockResourceArgs, _resolve_callbacks
    from pulumi.runtime.proto import resource_pb2
    from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

    from trainforge.plan.mocks import resource_options

    class RecordingMonitor(MockMonitor):
        def RegisterResource(self, request):  # noqa: N802 - gRPC method name
            """MockMonitor.RegisterResource, deserializing the inputs once for both uses."""
            if request.type == STACK_TYPE:
                return super().RegisterResource(request)
            _ensure_event_loop()
            urn = self.make_urn(request.parent, request.type, request.name)
            inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
            if echo:
                # preview: no id, outputs = inputs, handed back as the request serialized them
                # (re-serializing took a fifth of the program's time with large ConfigMaps)
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
            deps = request.propertyDependencies.items()
            sink.append(
                Recorded(
                    urn=resp.urn,
                    type=request.type,
                    name=request.name,
                    parent=request.parent or None,
                    custom=bool(request.custom),
                    inputs=plain(inputs),
                    options=resource_options(request),
                    dependencies={k: sorted(v.urns) for k, v in deps if list(v.urns)},
                    id=id_ or None,
                    revealed=revealed(inputs),
                )
            )
            return resp

    return RecordingMonitor(mocks)


def tree_order(resources: list[Recorded]) -> list[Recorded]:
    """Each resource after its parent, siblings by type then name: the one order of every
    listing, not the mocked engine's, which varies (docs/pr-review.md, "The offline plan", 1)."""
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
    secret one's own value."""
    from pulumi import Output

    out = Output.from_input(value)
    if not reveal and await out.is_secret():
        return SECRET
    if not await out.is_known():
        return UNKNOWN
    return plain(await out.future())


def project_name(root: pathlib.Path) -> str:
    try:
        return stack_file.project_name(root, default=None)
    except stack_file.StackFileError as e:
        raise ProjectError(str(e)) from e


def read_stack_config(
    root: pathlib.Path, stack: str, project: str
) -> tuple[dict[str, str], list[str], dict[str, Any]]:
    """Pulumi.<stack>.yaml (trainforge/stack/file.py) as (engine config, secret keys, display
    config); secure values reach the program as "[secret]"."""
    try:
        found = stack_file.read_stack(root, stack, project)
    except stack_file.StackFileError as e:
        raise ProjectError(str(e)) from e
    return found.engine(), found.secret_keys, found.config


_SILENT = logging.getLogger("trainforge.plan.standin")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


class _ProgramLog(logging.Handler):
    """Keeps the program's warnings and errors for the plan; echoes them to stderr, as the
    engine would, when `echo` (run-local, which shows no verdict)."""

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
    """Pulumi's callback servicer without its gRPC server and poller thread: the mock monitor
    resolves transforms in-process (`pulumi.runtime.mocks._resolve_callbacks`), so nothing
    calls it, and without that thread the plan may fork (registry.in_child). Restored after."""
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
    """Run `program` under mocks (by default the platform's, in the run's mode), by default
    in preview mode (no ids, inputs echoed). `preview=False` with mocks that invent ids runs
    every apply, so values built from cloud ones (policy documents) exist with stand-ins
    (the stand-in run, plan/core.py). `references`: StackReference
    target -> its state, a fleet manager's workers as planned (plan/fleet.py)."""
    from pulumi.runtime.sync_await import _sync_await

    from trainforge.plan.mocks import TrainforgeMocks, run_in_process

    echo = preview and mocks is None
    mocks = TrainforgeMocks(preview=preview) if mocks is None else mocks
    mocks.references = dict(references or {})
    sink: list[Recorded] = []
    # the stand-in run repeats the preview's program: its warnings are neither kept nor shown
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
    """__main__.py, or `--program FILE` under the project's path rule (inside the project)."""
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
    """Run the project's program (`program_path`) with Pulumi.<stack>.yaml as its config."""
    from trainforge.plan.mocks import program_file

    project = project_name(root)
    config, secret_keys, shown = read_stack_config(root, stack, project)
    for key, value in (config_overrides or {}).items():
        config[key] = config_value(value)
        shown[key] = value
    main = program_path(root, program)
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
