"""A fleet manager's plan plans each worker stack once and answers the manager's
StackReferences from the workers' planned exports (trainforge.plan.fleet), on a tiny project
whose program reads its references the way the platform does."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from trainforge.plan import fleet as F
from trainforge.plan.core import plan_project
from trainforge.plan.runner import SECRET, UNKNOWN, ProjectError

# One program for every stack: a worker exports a secret kubeconfig (known, and one only the
# cloud can know) and its region; a manager reads each worker's outputs by StackReference
# and writes them into a Secret and a ConfigMap, as the platform's MultiKueue objects do.
PROGRAM = """
import pulumi
import pulumi_kubernetes as k8s

fleet = pulumi.Config("trainforge").get_object("fleet") or {}
if pulumi.Config("trainforge").get("broken"):
    from trainforge.stack.base import StackError

    error = StackError(["trainforge:broken: got 'yes'; expected nothing"])
    raise pulumi.RunError(str(error)) from error
if fleet.get("role") == "worker":
    pulumi.export("fleetRegion", pulumi.Config("aws").require("region"))
    pulumi.export("fleetKubeconfig", pulumi.Output.secret("kubeconfig-of-" + pulumi.get_stack()))
    ns = k8s.core.v1.Namespace("later", metadata={"name": "later"})
    pulumi.export("fleetLater", pulumi.Output.secret(ns.id))
elif fleet.get("role") == "manager":
    for w in fleet["workers"]:
        ref = pulumi.StackReference("ref-" + w["name"], stack_name=w["stack"])
        k8s.core.v1.Secret(
            w["name"] + "-kubeconfig",
            metadata={"name": w["name"] + "-kubeconfig", "namespace": "kueue-system"},
            string_data={"kubeconfig": ref.get_output("fleetKubeconfig")},
        )
        k8s.core.v1.ConfigMap(
            w["name"] + "-facts",
            metadata={"name": w["name"] + "-facts", "namespace": "kueue-system"},
            data={
                "region": ref.get_output("fleetRegion"),
                "missing": ref.get_output("nothing").apply(lambda v: str(v)),
            },
        )
        k8s.core.v1.ConfigMap(
            w["name"] + "-later",
            metadata={"name": w["name"] + "-later", "namespace": "kueue-system"},
            data={"later": ref.get_output("fleetLater").apply(lambda v: "known" if v else "")},
        )
else:
    pulumi.export("single", "yes")
"""


@pytest.fixture
def fleet_project(tmp_path):
    def make(workers, extra_stacks=("use1", "usw2")):
        root = tmp_path / "fleetproj"
        root.mkdir()
        (root / "Pulumi.yaml").write_text("name: trainforge\nruntime: python\n")
        (root / "__main__.py").write_text(textwrap.dedent(PROGRAM))
        manager = {"trainforge:fleet": {"role": "manager", "workers": workers}}
        (root / "Pulumi.fleet.yaml").write_text(yaml.safe_dump({"config": manager}))
        regions = {"use1": "us-east-1", "usw2": "us-west-2"}
        for s in extra_stacks:
            cfg = {
                "aws:region": regions[s],
                "trainforge:fleet": {"role": "worker", "manager": "fleet"},
            }
            (root / f"Pulumi.fleet-{s}.yaml").write_text(yaml.safe_dump({"config": cfg}))
        (root / "Pulumi.single.yaml").write_text(yaml.safe_dump({"config": {}}))
        return root

    return make


def _by_name(result, name):
    return next(r for r in result.inventory.resources if r.name == name)


def test_manager_reads_each_worker_from_its_plan_and_secrets_stay_secret(fleet_project):
    root = fleet_project(
        [{"name": "use1", "stack": "fleet-use1"}, {"name": "usw2", "stack": "fleet-usw2"}]
    )
    result = plan_project(root, "fleet", standins=False)
    workers = F.plan_workers(root, "fleet")
    assert sorted(workers) == ["use1", "usw2"]
    assert workers["use1"].region == "us-east-1" and workers["usw2"].region == "us-west-2"
    assert workers["use1"].inventory.outputs["fleetKubeconfig"] == SECRET
    assert workers["use1"].inventory.secret_outputs["fleetKubeconfig"] == (
        "kubeconfig-of-fleet-use1"
    )

    secret = _by_name(result, "use1-kubeconfig")
    # masked in what the plan records and prints, its own value only in `revealed`
    assert secret.inputs["stringData"] == {"kubeconfig": SECRET}
    assert secret.revealed["stringData"] == {"kubeconfig": "kubeconfig-of-fleet-use1"}
    assert "kubeconfig-of-fleet-use1" not in str(result.to_json())
    facts = _by_name(result, "usw2-facts")
    assert facts.inputs["data"]["region"] == "us-west-2"
    # an output only the cloud assigns reads as an up worker's (a stand-in), so the
    # reference's other outputs stay known (one unknown would make them all unknown)
    assert _by_name(result, "usw2-later").revealed["data"] == {"later": "known"}
    assert UNKNOWN not in str(facts.inputs)
    # an output the worker does not export reads as none (the bootstrap case)
    assert facts.inputs["data"]["missing"] == "None"


def test_worker_plans_are_on_the_plan_context(fleet_project, monkeypatch):
    root = fleet_project([{"name": "use1", "stack": "fleet-use1"}])
    seen = {}
    from trainforge.plan import registry

    real = registry.run_checks

    def spy(ctx, *args):
        seen["workers"] = ctx.fleet_workers
        return real(ctx, *args)

    monkeypatch.setattr(registry, "run_checks", spy)
    plan_project(root, "fleet", standins=False)
    plan = seen["workers"]["use1"]
    assert isinstance(plan, F.WorkerPlan) and plan.planned and plan.stack == "fleet-use1"
    assert {o.kind for o in plan.objects} == {"Namespace"}


def test_each_worker_stack_is_planned_once(fleet_project, monkeypatch):
    """Two workers naming one stack of this project, spelt two ways (the stack model refuses
    the same spelling twice): it is planned once, and each reference reads it by its own."""
    root = fleet_project(
        [{"name": "a", "stack": "fleet-use1"}, {"name": "b", "stack": "acme/trainforge/fleet-use1"}]
    )
    runs = []
    real = F.run_project
    monkeypatch.setattr(F, "run_project", lambda r, s, **kw: runs.append(s) or real(r, s, **kw))
    workers = F.plan_workers(root, "fleet")
    assert runs == ["fleet-use1"]
    assert workers["a"].inventory is workers["b"].inventory
    assert set(F.reference_answers(workers)) == {"fleet-use1", "acme/trainforge/fleet-use1"}


def test_a_fleet_value_the_stack_model_refuses_plans_no_workers(fleet_project, monkeypatch):
    """The plan reads `trainforge:fleet` by the stack model (trainforge.stack.fleet): a value
    it refuses (one stack listed twice) plans no worker; the stack's own run says why."""
    root = fleet_project(
        [{"name": "a", "stack": "fleet-use1"}, {"name": "b", "stack": "fleet-use1"}]
    )
    monkeypatch.setattr(F, "run_project", lambda *a, **k: pytest.fail("planned a worker"))
    assert F.plan_workers(root, "fleet") == {}


def test_a_worker_of_another_project_is_a_note_not_a_crash(fleet_project):
    root = fleet_project(
        [{"name": "use1", "stack": "fleet-use1"}, {"name": "far", "stack": "acme/other/prod"}]
    )
    workers = F.plan_workers(root, "fleet")
    assert workers["use1"].planned
    far = workers["far"]
    assert not far.planned
    assert "belongs to another project" in far.note and "acme/other/prod" in far.note
    # this project's stack spelt in full is planned
    assert F.WorkerRef("x", "acme/trainforge/fleet-use1").local("trainforge") == "fleet-use1"
    result = plan_project(root, "fleet", standins=False)  # the manager plans all the same
    assert _by_name(result, "use1-kubeconfig")


def test_a_worker_stack_without_its_file_is_a_one_line_error(fleet_project):
    root = fleet_project([{"name": "use1", "stack": "fleet-nowhere"}])
    with pytest.raises(ProjectError) as e:
        F.plan_workers(root, "fleet")
    assert "trainforge:fleet.workers" in str(e.value) and "fleet-nowhere" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_single_cluster_stack_plans_no_workers(fleet_project, monkeypatch):
    root = fleet_project([])
    monkeypatch.setattr(F, "run_project", lambda *a, **k: pytest.fail("planned a worker"))
    assert F.plan_workers(root, "single") == {}
    assert F.plan_workers(root, "fleet-use1") == {}  # a worker plans no other stack


def test_a_workers_configuration_error_names_the_worker_stack(fleet_project):
    root = fleet_project([{"name": "use1", "stack": "fleet-use1"}])
    path = root / "Pulumi.fleet-use1.yaml"
    data = yaml.safe_load(path.read_text())
    data["config"]["trainforge:broken"] = "yes"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProjectError) as e:
        F.plan_workers(root, "fleet")
    assert str(e.value).startswith("worker use1 (Pulumi.fleet-use1.yaml): invalid stack config")
    assert "trainforge:broken: got 'yes'; expected nothing" in str(e.value)
