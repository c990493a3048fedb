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
import os
import pathlib
import runpy
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trainforge.stack import file as stack_file
from trainforge.stack.file import config_value

UNKNOWN = "<unknown>"
SECRET = stack_file.SECRET


# The cyclic garbage collector's thresholds for a plan process (Python's defaults: 700, 10, 10).
# Why: a plan imports ~3,000 modules (pulumi_aws, pulumi_kubernetes, moto, pydantic models) and
# runs the program twice; every object stays alive to the end, so the default thresholds make
# the collector walk the whole growing heap again and again: 1,771 collections took 2.7 of
# 9.5 CPU s of `plan --stack prod` (gc.callbacks, 2026-11-29), 2.2 s of it full (generation 2)
# collections that found little to free. With these, young cycles are still collected (every
# 20,000 allocations) and a full collection is left to the end of the process: ~30% less CPU
# for the same plan, ~50 MB more peak memory (docs/performance.md, "Plan").
PLAN_GC_THRESHOLDS = (20_000, 50, 1_000)


def tune_gc() -> None:
    """Set the collector's thresholds for a plan process (see PLAN_GC_THRESHOLDS): called
    first thing by `trainforge plan` (and by the tests' session), before the heavy imports."""
    gc.set_threshold(*PLAN_GC_THRESHOLDS)


class ProjectError(Exception):
    """The project or stack file is missing or malformed (a configuration error: exit 2)."""


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
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "custom": self.custom,
            "options": self.options,
            "inputs": self.inputs,
            "dependencies": self.dependencies,
        }


@dataclass
class Inventory:
    """Everything a program declared, in registration order, plus its stack outputs."""

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

    def to_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "stack": self.stack,
            "config": self.config,
            "outputs": self.outputs,
            "resources": [r.to_json() for r in self.resources],
        }


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

    class RecordingMonitor(MockMonitor):
        """A MockMonitor that keeps the raw inputs (unknowns included) of every resource."""

        def RegisterResource(self, request):  # noqa: N802 - gRPC method name
            """MockMonitor.RegisterResource, deserializing the inputs once for both uses."""
            if request.type == "pulumi:pulumi:Stack":
                return super().RegisterResource(request)
            from pulumi.runtime.mocks import MockResourceArgs, _resolve_callbacks
            from pulumi.runtime.proto import resource_pb2
            from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

            _ensure_event_loop()
            urn = self.make_urn(request.parent, request.type, request.name)
            inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
            if echo:
                # Preview semantics (PreviewMocks): no id, outputs = inputs. Hand the request's
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
            opts: dict[str, Any] = {}
            if request.deleteBeforeReplace:
                opts["deleteBeforeReplace"] = True
            if list(request.replaceOnChanges):
                opts["replaceOnChanges"] = list(request.replaceOnChanges)
            if request.protect:
                opts["protect"] = True
            if getattr(request, "retainOnDelete", False):
                opts["retainOnDelete"] = True
            if list(request.ignoreChanges):
                opts["ignoreChanges"] = list(request.ignoreChanges)
            if request.remote:
                opts["remote"] = True
            # Every URN the SDK waited for before registering it (depends_on, expanded to a
            # component's children, and the resources its inputs came from): the ordering
            # rehearsal (trainforge.plan.checks.ordering) follows these and the parents.
            if list(request.dependencies):
                opts["dependencies"] = list(request.dependencies)
            sink.append(
                Recorded(
                    urn=resp.urn,
                    type=request.type,
                    name=request.name,
                    parent=request.parent or None,
                    custom=bool(request.custom),
                    inputs=plain(inputs),
                    options=opts,
                    dependencies={
                        k: list(v.urns)
                        for k, v in request.propertyDependencies.items()
                        if list(v.urns)
                    },
                    id=id_ or None,
                    revealed=revealed(inputs),
                )
            )
            return resp

    return RecordingMonitor(mocks)


async def _resolve_output(value: Any) -> Any:
    """A stack output as the preview shows it: its value, [secret] or <unknown>."""
    from pulumi import Output

    out = Output.from_input(value)
    if await out.is_secret():
        return SECRET
    if not await out.is_known():
        return UNKNOWN
    return plain(await out.future())


async def _reveal_output(value: Any) -> Any:
    """A secret stack output's own value, or UNKNOWN (for `Inventory.secret_outputs`)."""
    from pulumi import Output

    out = Output.from_input(value)
    return plain(await out.future()) if await out.is_known() else UNKNOWN


STACK_REFERENCE = "pulumi:pulumi:StackReference"


class PreviewMocks:
    """Default mocks: echo inputs as outputs and leave ids unknown, as a first preview would.

    Provider functions (data sources) answer from `call_answers` or with an empty result.
    The platform's own mocks (trainforge.plan.mocks) answer instance-type lookups from moto's
    catalog; `load_mocks` prefers those when they exist.
    """

    def __init__(self, call_answers: dict[str, Callable[[dict], dict]] | None = None):
        self.call_answers = call_answers or {}

    def call(self, args):
        fn = self.call_answers.get(args.token)
        return (fn(args.args) if fn else {}), None

    def new_resource(self, args):
        return None, dict(args.inputs)


def _as_mocks(obj: Any):
    """Wrap any object with call/new_resource into a pulumi Mocks instance."""
    from pulumi.runtime.mocks import Mocks

    if isinstance(obj, Mocks):
        return obj

    class _Adapter(Mocks):
        def call(self, args):
            return obj.call(args)

        def new_resource(self, args):
            return obj.new_resource(args)

    return _Adapter()


class HybridMocks(PreviewMocks):
    """Provider functions answered by the platform's mocks, resources as in a first preview.

    The platform's mocks know the cloud's catalogs (instance types from moto, availability
    zones); their resource outputs are test fixtures, so resources keep preview semantics here:
    inputs echoed, ids and every computed output unknown.
    """

    def __init__(self, platform_mocks: Any):
        super().__init__()
        self.platform_mocks = platform_mocks

    def call(self, args):
        return self.platform_mocks.call(args)

    def new_resource(self, args):
        # A read of an existing resource (`Resource.get`) happens at preview too: the engine
        # hands back the cloud's state, which the platform's mocks stand in for.
        if getattr(args, "resource_id", None):
            return self.platform_mocks.new_resource(args)
        return super().new_resource(args)


def _platform_mocks() -> Any | None:
    try:
        from trainforge.plan import mocks as platform_mocks  # owned by the platform core
    except ImportError:
        return None
    from pulumi.runtime.mocks import Mocks

    factory = getattr(platform_mocks, "make_mocks", None)
    candidates: list[Any] = [factory] if callable(factory) else []
    candidates += [
        obj
        for obj in vars(platform_mocks).values()
        if isinstance(obj, type)
        and issubclass(obj, Mocks)
        and obj is not Mocks
        and obj.__module__ == platform_mocks.__name__
    ]
    for make in candidates:
        for kwargs in ({}, {"preview": True}):
            try:
                return make(**kwargs)
            except TypeError:
                continue
    return None


def standin_mocks() -> Any | None:
    """The platform's mocks in apply mode (plausible ids/ARNs), or None when absent."""
    try:
        from trainforge.plan import mocks as platform_mocks
    except ImportError:
        return None
    factory = getattr(platform_mocks, "make_mocks", None)
    return factory(preview=False) if callable(factory) else None


def load_mocks() -> Any:
    """HybridMocks over the platform's mocks when they exist, else PreviewMocks."""
    found = _platform_mocks()
    return HybridMocks(found) if found is not None else PreviewMocks()


def answering(mocks: Any, references: dict[str, dict]) -> Any:
    """`mocks` that answer a read of `pulumi:pulumi:StackReference` whose target is in
    `references` with that state (name, outputs, secretOutputNames): a fleet manager's
    workers as the plan planned them (trainforge.plan.fleet). Everything else is `mocks`'."""
    from pulumi.runtime.mocks import Mocks

    class _Answering(Mocks):
        def call(self, args):
            return mocks.call(args)

        def new_resource(self, args):
            if args.typ == STACK_REFERENCE and args.resource_id in references:
                return args.resource_id, dict(references[args.resource_id])
            return mocks.new_resource(args)

    return _Answering()


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
        message = record.getMessage()
        self.messages.append(message)
        if self.echo:
            print(message, file=sys.stderr, flush=True)


def _program_logger(echo: bool) -> tuple[logging.Logger, _ProgramLog]:
    logger = logging.getLogger("trainforge.plan.program")
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    for old in list(logger.handlers):
        logger.removeHandler(old)
    handler = _ProgramLog(echo)
    logger.addHandler(handler)
    return logger, handler


@contextlib.contextmanager
def _no_stack_traces() -> Iterator[None]:
    """Resources registered inside carry no stack trace (nor source position).

    Why: the Pulumi SDK captures both for every resource it registers, for the engine's
    diagnostics (`pulumi.runtime.resource._get_stack_trace`: `traceback.extract_stack()` and a
    file URI per frame); the plan's monitor (`_make_monitor`) never reads them, and the
    capture was ~10% of the CPU of `plan --stack prod` (docs/performance.md, "Plan"). Only
    for the mocked run: restored after it, so a real `pulumi up` in the same process is as
    the SDK makes it."""
    from pulumi.runtime import resource as sdk_resource
    from pulumi.runtime.proto import source_pb2

    def empty() -> Any:
        return source_pb2.StackTrace()

    saved = sdk_resource._get_stack_trace
    sdk_resource._get_stack_trace = empty
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = saved


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
    """Run `program` (a callable that declares resources) under mocks in preview mode.

    `preview=False` (with mocks that invent ids and ARNs) runs every apply, so values built
    from cloud-assigned ones (policy documents) exist with stand-ins; see plan.core.
    """
    import pulumi.runtime as rt
    from pulumi.runtime import settings
    from pulumi.runtime.config import set_all_config
    from pulumi.runtime.mocks import set_mocks
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    from trainforge.core.contract import start_record

    chosen = mocks if mocks is not None else load_mocks()
    echo = preview and type(chosen) in (PreviewMocks, HybridMocks)
    mocks = _as_mocks(chosen)
    if references:
        mocks = answering(mocks, references)
    sink: list[Recorded] = []
    outputs: dict[str, Any] = {}
    monitor = _make_monitor(mocks, sink, echo)

    settings.ROOT.set(None)  # a fresh root stack per run (several plans in one process)
    settings.SETTINGS.rpc_manager.clear()
    settings.SETTINGS.outputs.clear()
    set_all_config(dict(config or {}), list(secret_keys or []))
    # The stand-in run (not a preview) is the same program again, for the plan's IAM check:
    # its warnings were shown by the preview run already, so they are not printed twice.
    logger, log = _program_logger(echo_warnings) if preview else (_SILENT, None)
    declared = start_record()
    secret_outputs: dict[str, Any] = {}
    with _no_stack_traces():
        set_mocks(
            mocks, project=project, stack=stack, preview=preview, monitor=monitor, logger=logger
        )
        root = rt.get_root_resource()
        _sync_await(run_pulumi_func(program))
        for name, value in (getattr(root, "outputs", None) or {}).items():
            outputs[name] = _sync_await(_resolve_output(value))
            if outputs[name] == SECRET:
                secret_outputs[name] = _sync_await(_reveal_output(value))
    return Inventory(
        project=project,
        stack=stack,
        resources=sink,
        outputs=outputs,
        declared=declared,
        warnings=list(log.messages) if log is not None else [],
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

    def program():
        sys.path.insert(0, str(root))
        cwd = os.getcwd()
        os.chdir(root)
        try:
            runpy.run_path(str(main), run_name="__main__")
        finally:
            os.chdir(cwd)
            if sys.path and sys.path[0] == str(root):
                sys.path.pop(0)

    inv = run_program(
        program,
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
