"""Data safety: resources that hold data are protected, and a change that would replace or
delete one (`trainforge plan --diff BASE`) is a finding that needs a waiver (docs/services.md,
"Data that survives": FSx, the checkpoint bucket, their KMS keys, MLflow's volume).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from trainforge.core.pods import get
from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.resource_types import FSX_LUSTRE as FSX
from trainforge.plan.resource_types import KMS_KEY, PVC
from trainforge.plan.resource_types import S3_BUCKET as BUCKET
from trainforge.plan.runner import Recorded
from trainforge.plan.sides import urn_type_name

UNPROTECTED = "TF_DATA_UNPROTECTED"
REPLACE = "TF_DATA_REPLACE"
RULES = {
    UNPROTECTED: "declare the resource with pulumi.ResourceOptions(protect=True) (and "
    "retain_on_delete=True where it must outlive a destroy)",
    REPLACE: "keep the property as it was (or move the data first), or waive the rule for "
    "this resource with the reason the loss is accepted",
}


@dataclass(frozen=True)
class DataKind:
    what: str
    replace_on: tuple[str, ...]  # dotted input paths (wire names) that force a replacement


# What replaces each: the provider schema's ForceNew (terraform-provider-aws internal/service/
# {fsx,s3,kms}, read 2026-11-25; for Kubernetes the API server's immutable fields). One that
# became updatable since shows as a false alarm to waive, never as a silent loss.
# aws_fsx_lustre_file_system (storage_capacity forces new when it shrinks: _changed)
_FSX_FORCE_NEW = ("subnetIds", "securityGroupIds", "kmsKeyId", "deploymentType", "storageType",
    "perUnitStorageThroughput", "fileSystemTypeVersion", "driveCacheType", "copyTagsToBackups",
    "backupId", "importPath", "exportPath", "importedFileChunkSize", "efaEnabled")  # fmt: skip
# a claim's spec is immutable except resources.requests; a new claim gets a new, empty volume
_CLAIM_IMMUTABLE = ("metadata.name", "metadata.namespace", "spec.accessModes",
    "spec.storageClassName", "spec.volumeName", "spec.selector", "spec.dataSource",
    "spec.dataSourceRef", "spec.volumeMode")  # fmt: skip
DATA_HOLDING: dict[str, DataKind] = {
    FSX: DataKind("FSx for Lustre file system (datasets, checkpoints)", _FSX_FORCE_NEW),
    # aws_s3_bucket: bucket, bucket_prefix and object_lock_enabled
    BUCKET: DataKind("S3 bucket (checkpoints)", ("bucket", "bucketPrefix", "objectLockEnabled")),
    # aws_kms_key: a new key cannot decrypt what the old one encrypted
    KMS_KEY: DataKind(
        "KMS key (encrypts stored data)",
        ("customerMasterKeySpec", "keyUsage", "multiRegion", "customKeyStoreId", "xksKeyId"),
    ),
    PVC: DataKind(
        "PersistentVolumeClaim with a provisioned volume (MLflow's history)", _CLAIM_IMMUTABLE
    ),
}


def holds_data(type_: str, inputs: dict[str, Any]) -> bool:
    """Claims hold data only when a storage class provisions their volume: one pre-bound to a
    static volume (`storageClassName: ""`, the FSx team claims) holds nothing of its own."""
    return type_ in DATA_HOLDING and (type_ != PVC or bool(get(inputs, "spec", "storageClassName")))


def _records(resources: list[Any]) -> dict[str, Recorded]:
    """The data-holding ones of recorded resources: an Inventory's, or a base plan's
    inventory.json read loosely (an older trainforge may have written fewer or other keys)."""
    known = {f.name for f in dataclasses.fields(Recorded)}
    base = {"urn": "", "type": "", "name": "", "parent": None, "custom": True, "inputs": {}}
    recs = [
        Recorded(**{**base, **{k: v for k, v in r.items() if k in known and v is not None}})
        if isinstance(r, dict)
        else r
        for r in resources
    ]
    return {urn_type_name(r.urn): r for r in recs if holds_data(r.type, r.inputs)}


def stack_of(resources: list[Any] | None) -> str | None:
    """The stack a plan's recorded resources belong to (`urn:pulumi:STACK::...`), None if none."""
    for r in resources or []:
        urn = r.get("urn") if isinstance(r, dict) else getattr(r, "urn", None)
        if isinstance(urn, str) and urn.startswith("urn:pulumi:") and "::" in urn:
            return urn.split("::", 1)[0].removeprefix("urn:pulumi:")
    return None


def other_stack(base: Any, head: Any) -> str | None:
    """`base is stack prod, head is stack pe: ...` when a `--diff` base is another stack's plan;
    both sides then match resources by type and name (the diff's key), never by URN, which
    holds the stack's name."""
    b, h = stack_of(base.records), stack_of(head.records)
    if b is None or h is None or b == h:
        return None
    return f"base is stack {b}, head is stack {h}: resources matched by type and name"


def _parents(urn: str) -> str:
    """The type chain of a URN (`pkg:C$aws:...:Key`): a new parent is a new URN."""
    parts = urn.split("::")
    return parts[-2] if len(parts) >= 2 else ""


def base_records(base: Any) -> dict[str, Recorded] | None:
    """The data-holding resources of a `--diff` base (plan.sides.Side) that is a plan folder,
    as its inventory.json recorded them; None for a deployed state or no base."""
    return None if base.records is None else _records(base.records)


def _deps(rec: Recorded, prop: str) -> list[str]:
    """The resources (type::name, as the diff keys them) a property's value comes from."""
    nested = "." in prop  # a nested property's dependencies are its parent's, not its own
    return [] if nested else sorted(urn_type_name(u) for u in rec.dependencies.get(prop, []))


def _changed(base: Recorded, head: Recorded) -> list[tuple[str, Any, Any]]:
    """(property, old, new) for every replace-triggering property that differs; a value only
    the cloud knows is compared through the recorded dependencies it came from."""
    out = []
    for prop in DATA_HOLDING[base.type].replace_on:
        old, new = get(base.inputs, *prop.split(".")), get(head.inputs, *prop.split("."))
        old_from, new_from = _deps(base, prop), _deps(head, prop)
        if old != new:
            out.append((prop, old, new))
        elif old_from != new_from:
            # the same unknown placeholder, from a different resource (another subnet/key)
            out.append((prop, old_from or old, new_from or new))
    if base.type == FSX:
        old, new = base.inputs.get("storageCapacity"), head.inputs.get("storageCapacity")
        if isinstance(old, int) and isinstance(new, int) and new < old:
            out.append(("storageCapacity", old, new))  # FSx cannot shrink: a new file system
    return out


def replacements(base: dict[str, Recorded], head_resources: list[Any]) -> list[Finding]:
    """TF_DATA_REPLACE findings: data-holding resources of `base` that `head` replaces or
    deletes. One retained on delete (`retainOnDelete`) and gone from head stays in the account."""
    head = _records(head_resources)
    findings = []
    for key, b in base.items():
        what, h = f"{DATA_HOLDING[b.type].what} {b.name}", head.get(key)
        if h is None and b.options.get("retainOnDelete"):
            continue
        if h is None:
            msg = (
                f"{what} is gone from this plan: Pulumi deletes it (a rename "
                "or a new parent changes its URN, which is a replacement too)"
            )
        elif _parents(b.urn) != _parents(h.urn):
            msg = (
                f"{what} has a new parent ({_parents(b.urn)} -> {_parents(h.urn)}): a new URN, "
                "so Pulumi deletes the old one and creates a new, empty one"
            )
        elif changes := _changed(b, h):
            shown = "; ".join(f"{p}: {_fmt(o)} -> {_fmt(n)}" for p, o, n in changes)
            msg = (
                f"{what} is REPLACED (a new, empty one; the old one deleted): "
                f"{shown} (these properties cannot change in place)"
            )
        else:
            continue
        findings.append(
            Finding(b.name, REPLACE, msg, RULES[REPLACE], b.urn, frozenset({b.name, b.urn}))
        )
    return findings


def _fmt(value: Any) -> str:
    s = json.dumps(value, sort_keys=True, default=str)
    return s if len(s) <= 100 else s[:99] + "…"


def _backups(fsx_inputs: dict[str, Any]) -> str:
    """What FSx keeps when it is deleted, so scratch data loss is not a surprise."""
    if fsx_inputs.get("skipFinalBackup", True):
        return "; NO backups (a scratch file system: its data goes with it)"
    days = fsx_inputs.get("automaticBackupRetentionDays") or 0
    return f"; final backup on delete, daily backups kept {days} days"


def check(ctx: PlanContext) -> CheckResult:
    """Every data-holding resource is protected; the section lists them and what would
    replace each (the `--diff` comparison uses the same table)."""
    findings, lines, rows = [], [], []
    for rec in _records(ctx.inventory.resources).values():
        protected = bool(rec.options.get("protect"))
        retained = bool(rec.options.get("retainOnDelete"))
        kind = DATA_HOLDING[rec.type]
        rows.append(
            {"urn": rec.urn, "name": rec.name, "type": rec.type, "protect": protected,
             "retainOnDelete": retained, "replaceOn": list(kind.replace_on)}
        )  # fmt: skip
        state = "protected" + (", retained on delete" if retained else "")
        state = state if protected else "NOT protected"
        lines.append(f"{rec.name}: {state}{_backups(rec.inputs) if rec.type == FSX else ''}")
        if not protected:
            msg = (
                f"{kind.what} {rec.name} is not protected: "
                "`pulumi destroy` or a replacing update deletes it without a stop"
            )
            names = frozenset({rec.name, rec.urn})
            findings.append(Finding(rec.name, UNPROTECTED, msg, RULES[UNPROTECTED], rec.urn, names))
    if rows:
        diff = "`trainforge plan --diff BASE` flags any change that replaces or deletes one"
        lines.append(f"{diff} ({REPLACE})")
    return CheckResult(findings, [Section("Data safety", lines, rows)])


DIFF_TITLE = "Data safety"


def diff_check(ctx: Any) -> CheckResult:
    """`--diff BASE`: TF_DATA_REPLACE for each data-holding resource of a base plan folder that
    this plan replaces or deletes. Findings like any rule's (review.review adds them to the
    violations), so the verdict, the PR comment's status, the exit code and a waiver's use
    agree; a base that is not a plan folder says it was not checked instead of passing."""
    base = ctx.base
    if base.no_base:  # --diff /dev/null: nothing there to replace or delete
        return _said("No base (/dev/null): no data-holding resource is replaced.")
    recorded = base_records(base)
    if recorded is None:
        return _said(
            f"The base ({base.path}) is a deployed state, not a plan folder: replacements"
            f" of data-holding resources were NOT checked by {REPLACE}; read the"
            " replaced resources below and `pulumi preview`."
        )
    found = replacements(recorded, ctx.head.records or [])
    if not found:
        return _said("No data-holding resource is replaced or deleted.")
    names = ", ".join(f"`{f.resource}`" for f in found)
    return CheckResult(found, [Section(DIFF_TITLE, [f"replaced or deleted: {names} ({REPLACE})"])])


def _said(line: str) -> CheckResult:
    return CheckResult(sections=[Section(DIFF_TITLE, [line])])
