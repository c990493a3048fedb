"""Data that survives: the prod stack's data-holding resources are protected (and the bucket
and its key retained on delete), FSx takes backups, and a change that replaces one of them is
a plan finding that needs a waiver (`trainforge plan --diff BASE`).

The comparisons below start from the prod plan's real recorded resources and change one
replace-triggering property at a time, as a pull request would.
"""

from __future__ import annotations

import copy
import json
import pathlib
from types import SimpleNamespace

import pytest

from tests.conftest import shipped_plan
from trainforge.plan import sides
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import data_safety as DS
from trainforge.plan.cli import main as plan_main
from trainforge.plan.core import attach_waiver
from trainforge.plan.diff import INVENTORY_FILE
from trainforge.plan.waivers import Waiver

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prod():
    return shipped_plan("prod")


def records(result) -> list[dict]:
    """A copy of the recorded resources, to change without touching the fixture."""
    return copy.deepcopy([r.to_json() for r in result.inventory.resources])


def one(recs: list[dict], type_: str, name_part: str = "") -> dict:
    (r,) = [r for r in recs if r["type"] == type_ and name_part in r["name"]]
    return r


def test_data_holding_resources_are_protected_and_fsx_backs_up(prod):
    section = next(s for s in prod.sections if s.title == "Data safety")
    by_type: dict[str, list[dict]] = {}
    for row in section.data:
        by_type.setdefault(row["type"], []).append(row)
    assert len(by_type[DS.FSX]) == 1 and len(by_type[DS.BUCKET]) == 1
    assert len(by_type[DS.KMS_KEY]) == 2  # EKS secrets + the FSx/bucket data key
    # the MLflow volume; the FSx team claims are pre-bound to static volumes: not data holders
    assert [r["name"] for r in by_type[DS.PVC]] == ["platform-services-monitoring-mlflow-data"]
    assert all(r["protect"] for r in section.data)
    assert by_type[DS.BUCKET][0]["retainOnDelete"]
    data_key = next(r for r in by_type[DS.KMS_KEY] if r["name"].endswith("-data"))
    assert data_key["retainOnDelete"], "the surviving bucket's key must survive a destroy"
    assert not [v for v in prod.violations if v.rule.startswith("TF_DATA")]

    fsx = one(records(prod), DS.FSX)["inputs"]
    assert fsx["skipFinalBackup"] is False
    assert fsx["automaticBackupRetentionDays"] == 7


def test_an_unprotected_data_resource_is_a_finding(prod):
    recs = records(prod)
    one(recs, DS.FSX)["options"].pop("protect")
    ctx = PlanContext(inventory=SimpleNamespace(resources=recs), objects=[])
    (finding,) = DS.check(ctx).findings
    assert finding.rule == DS.UNPROTECTED and finding.resource == "platform-services-fsx"


@pytest.mark.parametrize(
    ("type_", "change", "prop"),
    [
        (DS.FSX, ("dependencies", "subnetIds", "private-1"), "subnetIds"),
        (DS.FSX, ("dependencies", "kmsKeyId", "eks-secrets"), "kmsKeyId"),
        (DS.FSX, ("inputs", "deploymentType", "PERSISTENT_1"), "deploymentType"),
        (DS.FSX, ("inputs", "storageCapacity", 2400), "storageCapacity"),  # shrink
        (DS.BUCKET, ("inputs", "bucketPrefix", "renamed-ckpt-"), "bucketPrefix"),
        (DS.BUCKET, ("inputs", "bucket", "trainforge-checkpoints"), "bucket"),
        (DS.KMS_KEY, ("inputs", "multiRegion", True), "multiRegion"),
    ],
)
def test_a_replacing_change_is_a_finding(prod, type_, change, prop):
    base = DS._records(records(prod))
    head = records(prod)
    rec = one(head, type_, "services")
    where, key, value = change
    if where == "dependencies":
        # the value is unknown at preview; what changed is the resource it comes from
        old = rec["dependencies"][key][0]
        rec["dependencies"][key] = [old.rsplit("::", 1)[0] + "::" + f"platform-{value}"]
    else:
        rec["inputs"][key] = value
    (finding,) = DS.replacements(base, head)
    assert finding.rule == DS.REPLACE and finding.resource == rec["name"]
    assert f"{prop}: " in finding.message and "REPLACED" in finding.message


def test_in_place_changes_and_retained_removals_are_not_findings(prod):
    base = DS._records(records(prod))
    head = records(prod)
    one(head, DS.FSX)["inputs"]["storageCapacity"] = 9600  # FSx grows in place
    one(head, DS.FSX)["inputs"]["automaticBackupRetentionDays"] = 30
    one(head, DS.BUCKET)["inputs"]["tags"] = {"owner": "ml"}
    assert DS.replacements(base, head) == []
    # the bucket and its key are retained on delete: gone from the stack, kept in the account
    retained = {(DS.BUCKET, "platform-services-ckpt"), (DS.KMS_KEY, "platform-services-data")}
    kept = [r for r in head if (r["type"], r["name"]) not in retained]
    assert len(kept) == len(head) - 2
    assert DS.replacements(base, kept) == []
    # the file system is not: removing it (or renaming it: a new URN) deletes it
    gone = [r for r in head if r["type"] != DS.FSX]
    (finding,) = DS.replacements(base, gone)
    assert "is gone from this plan" in finding.message


def test_plan_diff_fails_on_a_replacement_unless_waived(prod, tmp_path, capsys):
    """End to end: a base plan folder whose FSx had another deployment type; the plan of
    this tree against it exits 1, and its verdict (first screen and PR comment head) names
    the replacement with its fix, not CLEAN."""
    base = tmp_path / "base"
    base.mkdir()
    inv = json.loads(json.dumps({"resources": records(prod)}, default=str))
    one(inv["resources"], DS.FSX)["inputs"]["deploymentType"] = "SCRATCH_2"
    (base / INVENTORY_FILE).write_text(json.dumps(inv))
    md = tmp_path / "diff.md"
    args = ["--stack", "prod", "--project-dir", str(ROOT), "--no-standins", "--summary"]
    code = plan_main([*args, "--diff", str(base), "--diff-md", str(md)])
    out, text = capsys.readouterr().out, md.read_text()
    assert code == 1, out[-2000:]
    first = out.splitlines()[0]
    assert first.endswith("1 finding(s) need a fix or a decision"), first
    assert "[TF_DATA_REPLACE] platform-services-fsx" in out and "Policy and validation" not in out
    assert text.startswith("## trainforge plan --stack prod: ❌ 1 finding(s)")
    assert 'deploymentType: "SCRATCH_2" -> "PERSISTENT_2"' in text
    assert "### Data safety" in text and "replaced or deleted: `platform-services-fsx`" in text

    # with a waiver, review.review marks the same finding waived (and the waiver used)
    waiver = Waiver(
        resource="platform-services-fsx",
        rule=DS.REPLACE,
        reason="moving dev data to a persistent FS",
    )
    ctx = SimpleNamespace(base=sides.load_side(base), head=SimpleNamespace(records=records(prod)))
    (finding,) = DS.diff_check(ctx).findings
    waived = attach_waiver(finding, [waiver], {finding.resource, *finding.names})
    assert waived.waived == "moving dev data to a persistent FS" and waived.waived_by is waiver


def test_a_deployed_state_base_says_replacements_were_not_checked(tmp_path):
    """`plan --diff` of a `pulumi stack export` (a file, not a plan folder) cannot compare
    inventories: its Data safety section says so and finds nothing."""
    export = tmp_path / "stack.json"
    export.write_text(json.dumps({"version": 3, "deployment": {"resources": []}}))
    res = DS.diff_check(SimpleNamespace(base=sides.load_side(export), head=None))
    ((section,), (line,)) = res.sections, res.sections[0].lines
    assert res.findings == [] and section.title == "Data safety"
    assert "is a deployed state, not a plan folder" in line and "NOT checked" in line


def test_no_base_dev_null_says_nothing_is_replaced_not_a_deployed_state():
    """`plan --diff /dev/null` (no base: a first deploy, a base branch with no plan) has
    nothing to replace; it is not called a deployed state whose replacements went unchecked."""
    res = DS.diff_check(SimpleNamespace(base=sides.load_side(pathlib.Path("/dev/null")), head=None))
    (line,) = res.sections[0].lines
    assert res.findings == [] and "No base (/dev/null)" in line and "deployed state" not in line


def test_a_base_inventory_of_an_older_format_is_read(tmp_path):
    """`plan --diff BASE` reads a plan folder an older trainforge may have written: fewer keys
    (no parent, custom or id) and keys this version does not know are read, not a traceback."""
    bucket = {
        "urn": "urn:pulumi:dev::trainforge::aws:s3/bucket:Bucket::ckpt",
        "type": "aws:s3/bucket:Bucket",
        "name": "ckpt",
        "inputs": {"bucket": "ckpt"},
        "options": {"protect": True},
        "written_by": "an older trainforge",
    }
    (tmp_path / INVENTORY_FILE).write_text(json.dumps({"resources": [bucket]}))
    base = DS.base_records(sides.load_side(tmp_path))
    assert base is not None and list(base) == ["aws:s3/bucket:Bucket::ckpt"]
    assert base["aws:s3/bucket:Bucket::ckpt"].options == {"protect": True}


def _restacked(recs: list[dict], stack: str) -> list[dict]:
    """The records as another stack of the same program records them: each URN (and each
    dependency's) names that stack."""
    text = json.dumps(recs, default=str).replace("urn:pulumi:prod::", f"urn:pulumi:{stack}::")
    return json.loads(text)


def test_a_base_of_another_stack_matches_by_type_and_name_and_says_so_once(prod):
    """`plan --stack pe --diff <prod --out>`: the same resources under another stack's URNs are
    not 'gone' (the diff keys cloud resources by type and name, sides.urn_type_name); the header
    says the base is another stack; a real removal or a new parent is still a finding."""
    base_recs = records(prod)
    head = _restacked(base_recs, "pe")
    assert head != base_recs
    assert DS.replacements(DS._records(base_recs), head) == []
    note = DS.other_stack(SimpleNamespace(records=base_recs), SimpleNamespace(records=head))
    assert note is not None and note.startswith("base is stack prod, head is stack pe: ")
    same = SimpleNamespace(records=base_recs)
    assert DS.other_stack(same, same) is None

    gone = [r for r in head if r["type"] != DS.KMS_KEY or "eks" not in r["name"]]
    (finding,) = DS.replacements(DS._records(base_recs), gone)
    assert finding.resource.endswith("eks-secrets") and "is gone from this plan" in finding.message

    moved = copy.deepcopy(head)
    fsx = one(moved, DS.FSX)
    fsx["urn"] = fsx["urn"].replace("$aws:fsx", "$trainforge:index:Moved$aws:fsx")
    (finding,) = DS.replacements(DS._records(base_recs), moved)
    assert finding.resource == "platform-services-fsx" and "new parent" in finding.message
