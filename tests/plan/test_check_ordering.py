"""The ordering rehearsal: every object waits (directly, through depends_on or through its
parents) for the resource that installs its CRD and for its namespace."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pulumi
import pulumi_kubernetes as k8s

from trainforge.plan.checks import ordering
from trainforge.plan.checks.ordering import CRD_RULE, NAMESPACE_RULE
from trainforge.plan.core import plan_program
from trainforge.plan.resource_types import HELM_RELEASE, KUSTOMIZE


def rules_of(result):
    return {(v.rule, v.resource.rsplit("::", 1)[-1]) for v in result.failing}


def _monitoring():
    ns = k8s.core.v1.Namespace("mon-ns", metadata={"name": "monitoring"})
    release = k8s.helm.v3.Release(
        "prom",
        chart="kube-prometheus-stack",
        version="88.5.3",
        repository_opts={"repo": "https://prometheus-community.github.io/helm-charts"},
        namespace=ns.metadata.name,
    )
    team = k8s.core.v1.Namespace("team-ns", metadata={"name": "team-a"})
    return release, team


def _podmonitor(name, namespace, opts=None):
    return k8s.apiextensions.CustomResource(
        name,
        api_version="monitoring.coreos.com/v1",
        kind="PodMonitor",
        metadata={"name": name, "namespace": namespace},
        spec={"selector": {"matchLabels": {"app": name}}, "podMetricsEndpoints": [{"port": "m"}]},
        opts=opts,
    )


def test_a_podmonitor_without_its_crds_release_is_refused():
    def prog():
        release, team = _monitoring()
        _podmonitor("alone", team.metadata.name)  # no wait for the release
        _podmonitor("waits", team.metadata.name, pulumi.ResourceOptions(depends_on=[release]))

        class Job(pulumi.ComponentResource):  # the way a TrainingJob waits: via its parent
            def __init__(self):
                super().__init__(
                    "test:index:Job", "job", None, pulumi.ResourceOptions(depends_on=[release])
                )
                _podmonitor("child", team.metadata.name, pulumi.ResourceOptions(parent=self))

        Job()

    assert rules_of(plan_program(prog)) == {(CRD_RULE, "alone")}


def test_an_object_created_before_its_namespace_is_refused():
    def prog():
        release, team = _monitoring()
        after = pulumi.ResourceOptions(depends_on=[release])
        _podmonitor("by-name", "team-a", after)  # the name as a string: no wait for team-ns
        _podmonitor("nowhere", "team-b", after)  # nothing creates team-b
        _podmonitor("ok", team.metadata.name, after)
        k8s.core.v1.ConfigMap("sys", metadata={"name": "x", "namespace": "kube-system"})

    result = plan_program(prog)
    assert rules_of(result) == {(NAMESPACE_RULE, "by-name")}
    (section,) = [s for s in result.sections if s.title.startswith("Creation order")]
    assert "namespaces team-b: nothing in this stack creates them" in "\n".join(section.lines)


def test_a_kind_nobody_installs_is_listed_not_refused():
    def prog():
        _podmonitor("external", "default")

    result = plan_program(prog)
    assert result.failing == []
    (section,) = [s for s in result.sections if s.title.startswith("Creation order")]
    assert "PodMonitor (monitoring.coreos.com): no resource in this stack installs" in "\n".join(
        section.lines
    )


@functools.cache
def _dev_plan():
    from tests.conftest import shipped_plan

    return shipped_plan("dev")


def test_the_dev_stacks_podmonitors_wait_for_the_monitoring_release():
    from trainforge.plan.checks.ordering import creation_order

    result = _dev_plan()
    resources = result.inventory.resources
    (release,) = [r for r in resources if r.name == "platform-services-monitoring-prometheus"]
    monitors = [r for r in resources if r.type.endswith(":PodMonitor")]
    assert monitors
    after = creation_order(resources)
    for monitor in monitors:
        assert release.urn in after(monitor.urn), monitor.name
    assert not [v for v in result.failing if v.rule in (CRD_RULE, NAMESPACE_RULE)]


def test_a_crd_object_installs_its_group_and_a_release_may_create_its_namespace():
    crd = SimpleNamespace(urn="u:crd", type=ordering.CRD, inputs={"spec": {"group": "example.com"}})
    release = SimpleNamespace(
        urn="u:kueue",
        type=HELM_RELEASE,
        inputs={"chart": "kueue", "namespace": "kueue-system", "createNamespace": True},
    )
    assert ordering.installers([crd, release]) == {
        "example.com": ["u:crd"],
        "kueue.x-k8s.io": ["u:kueue"],
    }
    assert ordering._namespace_makers([crd, release]) == {"kueue-system": ["u:kueue"]}


def test_the_training_operator_overlay_installs_kubeflow_org_and_other_overlays_nothing():
    """The kustomize markers (KUSTOMIZE_INSTALLS): the standalone overlay at our pinned ref, by
    the URL the platform installs (core.versions), installs the PyTorchJob CRD; a directory no
    marker names, or a kustomize resource without one, installs no group."""
    from trainforge.core.versions import TRAINING_OPERATOR_KUSTOMIZE_URL as overlay

    dirs = {"u:op": overlay, "u:other": "./manifests/mine", "u:none": None}
    found = ordering.installers(
        SimpleNamespace(urn=u, type=KUSTOMIZE, inputs={"directory": d}) for u, d in dirs.items()
    )
    assert found == {"kubeflow.org": ["u:op"]}


def test_the_two_urn_shortenings_say_what_they_return():
    """Both were `short_urn`: the findings' name (ordering) and the diff's type::name (sides)."""
    from trainforge.plan.sides import urn_type_name

    urn = "urn:pulumi:dev::trainforge::trainforge:Platform$aws:iam/role:Role::node-role"
    assert ordering.urn_name(urn) == "node-role"
    assert urn_type_name(urn) == "aws:iam/role:Role::node-role"
