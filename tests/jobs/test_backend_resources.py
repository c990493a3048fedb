"""Each backend declares its workload object's API group, plural and Kueue integration once
(jobs/backends.RESOURCES, KUEUE_FRAMEWORKS), and the platform's RBAC rules, MultiKueue's
worker rules and Kueue's configuration read them: upstream's CRDs name the same."""

from __future__ import annotations

import yaml

from tests.conftest import ROOT
from trainforge.jobs import backends, pytorchjob, trainjob

CRDS = {
    pytorchjob.BACKEND: ROOT
    / "trainforge/platform/data/training-operator-v1.9.4/manifests/base/crds"
    / "kubeflow.org_pytorchjobs.yaml",
    trainjob.BACKEND: ROOT / "trainforge/plan/data/crds/trainer.kubeflow.org_trainjobs.yaml",
}


def test_the_declared_group_plural_and_kind_are_the_vendored_crds():
    for backend, path in CRDS.items():
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))["spec"]
        module = backends.EMITTERS[backend]
        assert backends.RESOURCES[backend] == (spec["group"], spec["names"]["plural"])
        assert spec["names"]["kind"] == module.KIND
    assert backends.RESOURCES["indexed-job"] == ("batch", "jobs")  # built in


def test_the_platform_reads_the_backends_declarations():
    from trainforge.platform import fleet, kueue, team_access

    assert fleet.BACKEND_KINDS == backends.RESOURCES
    assert kueue.FRAMEWORKS == backends.KUEUE_FRAMEWORKS
    read = dict(team_access.READ_RESOURCES)
    write = dict(team_access.WRITE_RESOURCES)
    for group, plural in backends.RESOURCES.values():
        assert read[group] == [plural, f"{plural}/status"] and write[group] == [plural]
