"""The FSx setup Job: each team's UID/GID, CAP_CHOWN only, and jobs wait for it to complete."""

from __future__ import annotations

import dataclasses
import inspect
import pathlib

import pulumi_kubernetes as k8s

from tests.platform.test_services import PROD, declare
from trainforge.plan.mocks import run_mocked
from trainforge.platform import fsx, services
from trainforge.stack.file import read_stack_file

JOB = "kubernetes:batch/v1:Job"


def test_each_team_gets_its_own_uid_from_the_team_facts(monkeypatch):
    """Another issue gives every team its own UID: the Job must chown to the TeamFacts one."""
    real = services.team_facts

    def with_uids(cfg, **kw):
        facts = real(cfg, **kw)
        return {
            name: dataclasses.replace(f, run_as_user=2000 + i, run_as_group=3000 + i)
            for i, (name, f) in enumerate(sorted(facts.items()))
        }

    monkeypatch.setattr(services, "team_facts", with_uids)
    run = declare(PROD, gpu=True, efa=True)
    # one Job per team, all in the platform's fsx-admin namespace (so a `restricted` team
    # such as nlp gets its directory too)
    jobs = {
        r.inputs["metadata"]["labels"]["trainforge.io/team"]: r.inputs for r in run.of_type(JOB)
    }
    assert {j["metadata"]["namespace"] for j in jobs.values()} == {fsx.ADMIN_NAMESPACE}
    script = jobs["vision"]["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert script.endswith("chown 2001:3001 /fsx/vision")  # vision sorts after nlp
    script = jobs["nlp"]["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert script.endswith("chown 2000:3000 /fsx/nlp")


def test_the_script_chmods_only_while_root_owns_the_directory():
    script = fsx.team_dir_script("/fsx/a", 1000, 1000)
    assert script == (
        "set -eu; mkdir -p /fsx/a; if [ -O /fsx/a ]; then chmod 0770 /fsx/a; fi; "
        "chown 1000:1000 /fsx/a"
    )


def test_jobs_wait_for_the_team_dir_job_to_complete(repo_root: pathlib.Path):
    # pulumi-kubernetes (the pinned SDK) awaits a batch/v1 Job until its Complete condition
    # and fails the update on Failed, unless the object says pulumi.com/skipAwait.
    doc = inspect.getsource(k8s.batch.v1.Job)  # its docstrings say how it is awaited
    assert "has a status of type 'Complete'" in doc and "'Failed'" in doc
    run = run_mocked(
        (repo_root / "__main__.py").resolve(),
        read_stack_file(repo_root / "Pulumi.dev.yaml").engine(),
    )
    (setup,) = [r for r in run.resources if r.type == JOB and r.name == "fsx-team-dir-research"]
    meta = setup.inputs["metadata"]
    assert "pulumi.com/skipAwait" not in (meta.get("annotations") or {})
    assert "ttlSecondsAfterFinished" not in setup.inputs["spec"]
    jobs = [r for r in run.resources if r.type == "kubernetes:kubeflow.org/v1:PyTorchJob"]
    # every PyTorchJob of the dev stack (the bundled runtime's and user code's alike)
    assert {"job-research-mnist-ddp", "job-research-gpt-small-fsdp"} <= {r.name for r in jobs}
    for r in jobs:
        # the PyTorchJob itself (not only its component) depends on the Job
        assert setup.urn in r.options["dependencies"], r.name
