"""The offline plan of a fleet's manager (docs/fleet.md): every worker stack planned once with
the same engine (trainforge.plan.runner), and the manager's `pulumi.StackReference` reads
answered from the workers' planned exports (a secret output stays secret).

A worker is planned as a stack that is up, with the stand-in mocks: in a preview one unknown
output makes the reference's whole `outputs` unknown (the SDK resolves it as one property),
while a real preview of a manager reads its up workers' outputs known. A worker of another
project (`org/project/stack`) is kept without an inventory, with a note saying why.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field, replace
from typing import Any

from trainforge.core.errors import JobConfigError
from trainforge.plan.manifests import K8sObject, k8s_objects
from trainforge.plan.runner import (
    SECRET,
    UNKNOWN,
    Inventory,
    ProjectError,
    find_config_error,
    project_name,
    read_stack_config,
    run_project,
)
from trainforge.stack.base import validate
from trainforge.stack.file import decode_value, stack_path
from trainforge.stack.fleet import KEY as FLEET_KEY
from trainforge.stack.fleet import FleetConfig


@dataclass(frozen=True)
class WorkerRef:
    """One entry of the manager's `trainforge:fleet.workers`."""

    name: str  # the MultiKueueCluster's name
    stack: str  # a stack of this project, or org/project/stack

    def local(self, project: str) -> str | None:
        """The stack's name when it is one of `project`'s (`stack`, `project/stack` or
        `org/project/stack`), else None."""
        parts = self.stack.split("/")
        if len(parts) == 1:
            return self.stack
        return parts[-1] if len(parts) in (2, 3) and parts[-2] == project else None


@dataclass
class WorkerPlan:
    """A worker stack as the manager's plan planned it; `inventory` None: not plannable
    offline (`note` says why)."""

    name: str
    stack: str
    region: str | None = None
    inventory: Inventory | None = None
    objects: list[K8sObject] = field(default_factory=list)
    note: str = ""

    @property
    def planned(self) -> bool:
        return self.inventory is not None

    @property
    def docs(self) -> list[dict[str, Any]]:
        return [o.doc for o in self.objects]

    @property
    def declared(self) -> Any:
        """The worker's typed objects (trainforge.core.contract.Declared), or None."""
        return self.inventory.declared if self.inventory is not None else None


def fleet_config(config: dict[str, Any]) -> FleetConfig | None:
    """A stack's `trainforge:fleet` by the stack model (None: unset, or a value it refuses,
    which the stack's own program run reports)."""
    return validate(FleetConfig, decode_value(config.get(FLEET_KEY)), FLEET_KEY, [])


def region(config: dict[str, Any]) -> str | None:
    """The stack's `aws:region` in its display config (None: not set)."""
    value = decode_value(config.get("aws:region"))
    return value if isinstance(value, str) else None


def plan_worker(
    root: pathlib.Path,
    ref: WorkerRef,
    project: str,
    manager: Inventory | None = None,
    also: dict[str, Any] | None = None,
) -> WorkerPlan:
    """Plan one worker stack as a stack that is up (its warnings are its own plan's).
    `manager`: the manager's stand-in run, whose outputs answer the worker's StackReference
    to it (None: not up yet, the bootstrap); `also`: the manager plan's outputs that run
    leaves out (it declares no jobs: the jobs' ConfigMaps)."""
    stack = ref.local(project)
    if stack is None:
        note = (
            f"worker {ref.name}: stack {ref.stack} belongs to another project, so the offline "
            "plan cannot plan it (its program and stack file are not here); plan it in its own "
            "project, and `pulumi preview` this stack once it is up"
        )
        return WorkerPlan(ref.name, ref.stack, note=note)
    if not stack_path(root, stack).is_file():
        raise ProjectError(
            f"{FLEET_KEY}.workers: worker {ref.name!r} names stack {ref.stack!r}; there is no "
            f"Pulumi.{stack}.yaml in {root} (name a stack of this project, or "
            "org/project/stack for one of another project)"
        )
    _, _, shown = read_stack_config(root, stack, project)
    fleet = fleet_config(shown)
    mine = fleet.manager if fleet is not None else None  # the worker's name for its manager
    references = None
    if manager is not None and mine and WorkerRef(mine, mine).local(project) is not None:
        state = stack_state(mine, manager)
        state["outputs"] = {**state["outputs"], **_wire(dict(also or {}))}
        references = {mine: state}
    from trainforge.plan.mocks import TrainforgeMocks  # noqa: PLC0415 - pulls in pulumi

    mocks = TrainforgeMocks(preview=False)  # the stand-in run's
    mocks.stack_tag = stack  # its buckets and keys apart from the manager's
    try:
        inv = run_project(
            root, stack, mocks=mocks, preview=False, echo_warnings=False, references=references
        )
    except Exception as e:
        # a worker's stack configuration error, said as the worker's (a job's is not re-worded)
        err = find_config_error(e)
        if err is None or isinstance(err, JobConfigError):
            raise
        raise ProjectError(f"worker {ref.name} (Pulumi.{stack}.yaml): {str(err).strip()}") from e
    return WorkerPlan(ref.name, ref.stack, region(shown), inv, k8s_objects(inv))


def plan_workers(
    root: pathlib.Path,
    stack: str,
    manager: Inventory | None = None,
    also: dict[str, Any] | None = None,
) -> dict[str, WorkerPlan]:
    """name -> WorkerPlan for every worker of `stack` when it is a fleet manager (each stack
    planned once, however its workers spell it); {} for any other stack."""
    project = project_name(root)
    _, _, config = read_stack_config(root, stack, project)
    fleet = fleet_config(config)
    if fleet is None or not fleet.manager_role or not fleet.workers:
        return {}
    planned: dict[str, WorkerPlan] = {}
    out: dict[str, WorkerPlan] = {}
    for ref in (WorkerRef(w.name, w.stack) for w in fleet.workers):
        if ref.local(project) == stack:
            raise ProjectError(
                f"{FLEET_KEY}.workers: worker {ref.name!r} names the manager's own stack "
                f"{stack!r}; a worker is another stack"
            )
        key = ref.local(project) or ref.stack
        if key not in planned:
            planned[key] = plan_worker(root, ref, project, manager, also)
        out[ref.name] = replace(planned[key], name=ref.name, stack=ref.stack)
    return out


def _wire(value: Any) -> Any:
    """A planned output back as the engine hands it to a reader: UNKNOWN stays unknown."""
    from pulumi.runtime.rpc import UNKNOWN as WIRE_UNKNOWN  # noqa: PLC0415

    if value == UNKNOWN:
        return WIRE_UNKNOWN
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    return [_wire(v) for v in value] if isinstance(value, list) else value


def stack_state(name: str, inv: Inventory | None) -> dict[str, Any]:
    """What a `pulumi.StackReference(name)` reads of a planned stack: its outputs (secret ones
    by their own value) and which are secret; `inv` None: a stack not up (no outputs)."""
    outputs = {} if inv is None else inv.outputs
    secret = sorted(k for k, v in outputs.items() if v == SECRET)
    shown = {
        k: inv.secret_outputs.get(k, UNKNOWN) if k in secret else v for k, v in outputs.items()
    }
    return {"name": name, "outputs": _wire(shown), "secretOutputNames": secret}


def reference_answers(workers: dict[str, WorkerPlan]) -> dict[str, dict]:
    """StackReference target -> its state, for every worker, under the stack name the manager's
    config gives. A worker not planned reads as a stack not up yet: the manager skips it with
    its bootstrap warning, and the fleet section says why."""
    return {p.stack: stack_state(p.stack, p.inventory) for p in workers.values()}
