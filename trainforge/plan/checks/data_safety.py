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
DATA_HOLDING: dict[str, DataKind] = {
    # aws_fsx_lustre_file_system: ForceNew fields; storage_capacity forces new when it shrinks
    # (CustomizeDiff), see _changed
    FSX: DataKind(
        "FSx for Lustre file system (datasets, checkpoints)",
        (
            "subnetIds",
            "securityGroupIds",
            "kmsKeyId",
            "deploymentType",
            "storageType",
            "perUnitStorageThroughput",
            "fileSystemTypeVersion",
            "driveCacheType",
            "copyTagsToBackups",
            "backupId",
            "importPath",
            "exportPath",
            "importedFileChunkSize",
            "efaEnabled",
        ),
    ),
    # aws_s3_bucket: bucket, bucket_prefix and object_lock_enabled are ForceNew
    BUCKET: DataKind("S3 bucket (checkpoints)", ("bucket", "bucketPrefix", "objectLockEnabled")),
    # aws_kms_key: a new key cannot decrypt what the old one encrypted
    KMS_KEY: DataKind(
        "KMS key (encrypts stored data)",
        ("customerMasterKeySpec", "keyUsage", "multiRegion", "customKeyStoreId", "xksKeyId"),
    ),
    # a claim's spec is immutable after creation except resources.requests; a new claim gets
    # a new, empty volume
    PVC: DataKind(
        "PersistentVolumeClaim with a provisioned volume (MLflow's history)",
        (
            "metadata.name",
            "metadata.namespace",
            "spec.accessModes",
            "spec.storageClassName",
            "spec.volumeName",
            "spec.selector",
            "spec.dataSource",
            "spec.dataSourceRef",
            "spec.volumeMode",
        ),
    ),
}


def holds_data(type_: str, inputs: dict[str, Any]) -> bool:
    """A data-holding resource. Claims: only those whose volume is provisioned for them (a
    storage class); a claim pre-bound to a static volume (`storageClassName: ""`, the FSx
    team claims) holds nothing of its own."""
    if type_ not in DATA_HOLDING:
        return False
    if type_ == PVC:
        return bool(get(inputs, "spec", "storageClassName"))
    return True


def _recorded(r: dict[str, Any]) -> Recorded:
    """A resource of a base plan's inventory.json, read loosely: the base may be written by an
    older trainforge, with fewer or other keys than this one's Recorded."""
    known = {f.name for f in dataclasses.fields(Recorded)} & r.keys()
    base = {"urn": "", "type": "", "name": "", "parent": None, "custom": True, "inputs": {}}
    return Recorded(**{**base, **{k: r[k] for k in known if r[k] is not None}})


def _records(resources: list[Any]) -> dict[str, Recorded]:
    """The data-holding ones of recorded resources (an Inventory's, or inventory.json's)."""
    recs = [_recorded(r) if isinstance(r, dict) else r for r in resources]
    return {r.urn: r for r in recs if holds_data(r.type, r.inputs)}


def base_records(base: Any) -> dict[str, Recorded] | None:
    """The data-holding resources of a `--diff` base (plan.sides.Side) that is a plan folder,
    as its inventory.json recorded them; None for a deployed state or no base."""
    return None if base.records is None else _records(base.records)


def _changed(base: Recorded, head: Recorded) -> list[tuple[str, Any, Any]]:
    """(property, old, new) for every replace-triggering property that differs; a value only
    the cloud knows is compared through the recorded dependencies it came from."""
    out = []
    for prop in DATA_HOLDING[base.type].replace_on:
        old, new = get(base.inputs, *prop.split(".")), get(head.inputs, *prop.split("."))
        top = prop.split(".")[0]
        old_from = sorted(base.dependencies.get(top, [])) if "." not in prop else []
        new_from = sorted(head.dependencies.get(top, [])) if "." not in prop else []
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
    deletes. A resource retained on delete (`retainOnDelete`) and gone from head is left in
    the account, so its removal is no loss."""
    head = _records(head_resources)
    findings = []
    for urn, b in base.items():
        kind = DATA_HOLDING[b.type]
        h = head.get(urn)
        if h is None:
            if b.options.get("retainOnDelete"):
                continue
            msg = (
                f"{kind.what} {b.name} is gone from this plan: Pulumi deletes it (a rename "
                "or a new parent changes its URN, which is a replacement too)"
            )
        else:
            changes = _changed(b, h)
            if not changes:
                continue
            shown = "; ".join(f"{p}: {_fmt(o)} -> {_fmt(n)}" for p, o, n in changes)
            msg = (
                f"{kind.what} {b.name} is REPLACED (a new, empty one; the old one deleted): "
                f"{shown} (these properties cannot change in place)"
            )
        findings.append(
            Finding(b.name, REPLACE, msg, RULES[REPLACE], urn=urn, names=frozenset({b.name, urn}))
        )
    return findings


def _fmt(value: Any) -> str:
    s = json.dumps(value, sort_keys=True, default=str)
    return s if len(s) <= 100 else s[:99] + "…"


def _backups(fsx_inputs: dict[str, Any]) -> str:
    """What FSx keeps when it is deleted: said in the plan, so scratch data loss is not a
    surprise."""
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
        rows.append(
            {
                "urn": rec.urn,
                "name": rec.name,
                "type": rec.type,
                "protect": protected,
                "retainOnDelete": retained,
                "replaceOn": list(DATA_HOLDING[rec.type].replace_on),
            }
        )
        state = "NOT protected"
        if protected:
            state = f"protected{', retained on delete' if retained else ''}"
        lines.append(f"{rec.name}: {state}{_backups(rec.inputs) if rec.type == FSX else ''}")
        if not protected:
            findings.append(
                Finding(
                    rec.name,
                    UNPROTECTED,
                    f"{DATA_HOLDING[rec.type].what} {rec.name} is not protected: "
                    "`pulumi destroy` or a replacing update deletes it without a stop",
                    RULES[UNPROTECTED],
                    urn=rec.urn,
                    names=frozenset({rec.name, rec.urn}),
                )
            )
    if rows:
        lines.append(
            "`trainforge plan --diff BASE` flags any change that replaces or deletes one "
            f"({REPLACE})"
        )
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
