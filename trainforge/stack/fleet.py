"""The fleet key: `trainforge:fleet`, a stack's role in a MultiKueue fleet (docs/fleet.md).

Why a key of its own: a fleet is ordinary trainforge stacks, one per region (workers), plus a
manager stack whose Kueue dispatches jobs to them (Kueue MultiKueue). The manager names its
workers' stacks (read with Pulumi StackReferences); a worker names its manager (whose egress
addresses its API endpoint admits). Absent, the stack is a single cluster as before: nothing
it declares changes.

    trainforge:fleet:              trainforge:fleet:
      role: manager                  role: worker
      workers:                       manager: fleet
        - {name: use1, stack: fleet-use1}

Rules named at their key (one line each): a manager lists at least one worker, names unique
DNS-1123 labels (the MultiKueueCluster names) and stacks listed once; a worker names its
manager and lists no workers; jobs are declared in the manager only (a worker's jobs would
run outside the fleet's queue: `fleet_problems`, which sees the `trainforge:jobs` key too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from trainforge.core import names
from trainforge.stack.base import (
    MISSING,
    NS,
    Problems,
    Section,
    StackModel,
    matching,
    problem,
    validate,
)

KEY = f"{NS}:fleet"
# Kueue's MultiKueue controller name (kubernetes-sigs/kueue release-0.19 apis/kueue/v1beta2
# multikueue_types.go MultiKueueControllerName): the AdmissionCheck's controllerName and the
# managedBy of every job a manager declares.
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
# A Pulumi stack of this project (`fleet-use1`) or fully qualified (`org/project/stack`):
# Pulumi stack names are letters, digits, `-`, `_`, `.` (pulumi/sdk/go/common/tokens).
STACK = r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?"
StackName = matching(STACK, "a stack of this project (fleet-use1) or org/project/stack", 200)
# A MultiKueueCluster name and its Secret's prefix: a DNS-1123 label (the Secret name
# `<name>-kubeconfig` must stay a DNS subdomain, so at most 52 characters).
WorkerName = matching(
    names.DNS1123_LABEL,
    "a DNS-1123 label (lowercase letters, digits, '-') of at most 52 characters",
    52,
)


class FleetWorker(Section):
    """One worker cluster of a manager: its MultiKueueCluster name and its stack."""

    name: WorkerName = Field(
        description="The worker's MultiKueueCluster name (a DNS-1123 label, unique); its "
        "kubeconfig Secret is `<name>-kubeconfig` in `kueue-system`."
    )
    stack: StackName = Field(
        description="The worker's stack: one of this project (`fleet-use1`, its "
        "Pulumi.fleet-use1.yaml) or `org/project/stack`; read with a StackReference."
    )


class FleetConfig(Section):
    """A stack's role in a MultiKueue fleet."""

    role: Literal["manager", "worker"] = Field(
        description="`manager`: its Kueue dispatches jobs to `workers` (MultiKueue); "
        "`worker`: a regional cluster that runs the jobs its `manager` dispatches."
    )
    workers: tuple[FleetWorker, ...] = Field(
        (),
        validate_default=True,
        description="The manager's workers (at least one); a worker lists none.",
    )
    manager: StackName | None = Field(
        None,
        validate_default=True,
        description="The worker's manager stack (its egress addresses reach this worker's API "
        "endpoint); a manager names none.",
    )

    @field_validator("workers")
    @classmethod
    def _workers(cls, value: tuple[FleetWorker, ...], info: ValidationInfo) -> Any:
        role = info.data.get("role")
        if role == "worker" and value:
            raise ValueError(
                "no workers in a worker stack (role: worker); list them in its manager"
            )
        if role == "manager" and not value:
            raise ValueError("at least one worker {name, stack} (role: manager)")
        names: set[str] = set()
        stacks: set[str] = set()
        dup: list[tuple[tuple[Any, ...], Any, str]] = []
        for i, w in enumerate(value):
            if w.name in names:
                dup.append(((i, "name"), w.name, "a worker name not used by another worker"))
            if w.stack in stacks:
                dup.append(((i, "stack"), w.stack, "a stack not listed by another worker"))
            names.add(w.name)
            stacks.add(w.stack)
        Problems.raise_any(dup)
        return value

    @field_validator("manager")
    @classmethod
    def _manager(cls, value: str | None, info: ValidationInfo) -> str | None:
        role = info.data.get("role")
        if role == "worker" and not value:
            raise Problems(
                [((), MISSING, "the manager's stack (role: worker), e.g. manager: fleet")]
            )
        if role == "manager" and value:
            raise ValueError("unset in a manager stack (role: manager names its workers)")
        return value

    @property
    def manager_role(self) -> bool:
        return self.role == "manager"

    @property
    def worker_role(self) -> bool:
        return self.role == "worker"


class FleetKeys(StackModel):
    """The fleet's top-level `trainforge:` key."""

    fleet: FleetConfig | None = Field(
        None,
        description="This stack's role in a MultiKueue fleet ([fleet.md](fleet.md)); unset: a "
        "single cluster.",
    )


def parse_fleet(raw: Mapping[str, Any], errors: list[str]) -> FleetConfig | None:
    """`trainforge:fleet` of the raw `trainforge:` mapping (None: unset or invalid, its
    problems appended to `errors`), and the rule across areas: no jobs in a worker stack."""
    value = raw.get("fleet")
    if value is None:
        return None
    fleet = validate(FleetConfig, value, KEY, errors)
    jobs = raw.get("jobs")
    role = value.get("role") if isinstance(value, Mapping) else None
    kueue = raw.get("kueue")
    if isinstance(kueue, Mapping) and kueue.get("enabled") in (False, "false"):
        errors.append(
            problem(
                f"{NS}:kueue.enabled",
                kueue.get("enabled"),
                "true in a fleet stack (trainforge:fleet is set): MultiKueue is Kueue's",
            )
        )
    if role == "worker" and isinstance(jobs, list) and jobs:
        errors.append(
            problem(
                f"{NS}:jobs",
                [j.get("name") if isinstance(j, Mapping) else j for j in jobs],
                "no jobs in a fleet worker stack (trainforge:fleet.role: worker): declare them "
                "in the manager stack, whose Kueue dispatches them to its workers",
            )
        )
    return fleet


# The first Kubeflow Trainer whose TrainJob controller leaves a TrainJob with another managedBy
# alone: v2.3.0 (kubeflow/trainer aeace13d3 "honor managedBy field in TrainJob reconciler"
# (#3681), 2026-07-08: pkg/controller/trainjob_controller.go returns early when
# trainjob.IsManagedByExternalController). At v2.2.1 Reconcile has no such check (read
# 2026-11-29): the manager's Trainer would build the dispatched TrainJob's JobSet on the
# manager itself. Kueue release-0.19 pins Trainer v2.2.1 (go.mod) and its MultiKueue e2e
# (test/e2e/multikueue/extended/e2e_test.go, "Should run a TrainJob on worker if admitted")
# checks only that the manager's TrainJob is unsuspended, not that no JobSet is built there.
TRAINER_HONOURS_MANAGED_BY = (2, 3, 0)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.lstrip("v").split("-", 1)[0].split(".") if p.isdigit())


def trainjob_refusal(fleet: FleetConfig | None, backends: Any, trainer: str) -> str | None:
    """The one-line refusal of a fleet manager with the `trainjob` backend while the pinned
    Trainer (`trainer`) ignores `spec.managedBy` (see TRAINER_HONOURS_MANAGED_BY); else None."""
    if fleet is None or not fleet.manager_role or "trainjob" not in set(backends or ()):
        return None
    if _version(trainer) >= TRAINER_HONOURS_MANAGED_BY:
        return None
    return problem(
        f"{NS}:fleet.role",
        "manager",
        "a manager whose jobs use no trainjob backend (trainforge:jobBackend(s) and each job's "
        f"backend: pytorchjob or indexed-job): Kubeflow Trainer {trainer} ignores a TrainJob's spec.managedBy (its TrainJob "
        "controller has no managedBy check before v2.3.0, kubeflow/trainer#3681), so the "
        "manager's Trainer would build a MultiKueue TrainJob's JobSet on the manager itself "
        "(docs/fleet.md)",
    )
