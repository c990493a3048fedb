"""Bumping the Kubernetes minor of a live stack replaces nothing that holds data.

docs/upgrading.md promises that moving a stack from one Kubernetes minor to the next updates
the control plane, add-ons and node groups in place and leaves the FSx file system, the
checkpoint bucket, the KMS keys and the volumes alone. This plans the prod stack at the
previous minor and at the pinned one and compares the two inventories: every data-holding
resource must exist under the same URN with identical inputs (no input changes, so the engine
has nothing to update, let alone replace).
"""

from __future__ import annotations

import pathlib

import pytest

from tests.conftest import shipped_plan
from trainforge.core import versions
from trainforge.plan.core import plan_project

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA_TYPES = (
    "aws:fsx/lustreFileSystem:LustreFileSystem",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation",
    "aws:s3/bucket",
    "aws:kms/key:Key",
    "kubernetes:core/v1:PersistentVolume",
    "kubernetes:core/v1:PersistentVolumeClaim",
    "kubernetes:storage.k8s.io/v1:StorageClass",
)


def previous(minor: str) -> str:
    major, m = minor.split(".")
    return f"{major}.{int(m) - 1}"


def data_resources(result) -> dict[str, dict]:
    return {r.urn: r.inputs for r in result.inventory.resources if r.type.startswith(DATA_TYPES)}


@pytest.fixture(scope="module")
def plans():
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(versions, "KUBERNETES_VERSION", previous(versions.KUBERNETES_VERSION))
        old = plan_project(ROOT, "prod", standins=False)
        old_cluster = [r for r in old.inventory.resources if r.type == "eks:index:Cluster"]
    finally:
        mp.undo()
    new = shipped_plan("prod")
    return old, new, old_cluster


def test_the_bump_reaches_the_cluster(plans):
    old, new, old_cluster = plans
    new_cluster = [r for r in new.inventory.resources if r.type == "eks:index:Cluster"]
    assert old_cluster[0].inputs["version"] == previous(versions.KUBERNETES_VERSION)
    assert new_cluster[0].inputs["version"] == versions.KUBERNETES_VERSION


def test_no_resource_that_holds_data_changes(plans):
    old, new, _ = plans
    before, after = data_resources(old), data_resources(new)
    kinds = {urn.split("::")[-2] for urn in before}
    assert any("lustreFileSystem" in k for k in kinds) and any("kms/key" in k for k in kinds)
    assert any("s3/bucket" in k for k in kinds) and any("PersistentVolume" in k for k in kinds)
    assert before.keys() == after.keys()
    changed = [urn for urn in before if before[urn] != after[urn]]
    assert changed == []
