"""Engine paths a stack rarely takes: a CRD pattern with an inline flag, an apiVersion no
vendored CRD serves, an object the provider autonames, a custom resource's scope read from
its CRD, and a lookup of a resource the mocks did not record."""

from __future__ import annotations

import re

import pytest

from trainforge.plan import crds
from trainforge.plan.manifests import to_object
from trainforge.plan.mocks import TrainforgeMocks
from trainforge.plan.runner import Recorded


def test_an_inline_flag_moves_to_the_front_of_a_pattern_as_re_needs():
    s = crds.strict({"type": "string", "pattern": "^(?i)[a-z]+$"})
    assert s["pattern"] == "(?i)^[a-z]+$" and re.match(s["pattern"], "AbC")


def test_a_version_no_vendored_crd_serves_has_no_schema():
    assert crds.schema("kueue.x-k8s.io/v1beta1", "ClusterQueue") is not None
    assert crds.schema("kueue.x-k8s.io/v0", "ClusterQueue") is None


def _recorded(type_: str, inputs: dict) -> Recorded:
    return Recorded(f"urn:pulumi:dev::p::{type_}::x", type_, "My_Config", None, True, inputs)


def test_an_unnamed_object_gets_a_stable_stand_in_name_and_the_default_namespace():
    rec = _recorded("kubernetes:core/v1:ConfigMap", {"data": {"a": "b"}})
    obj = to_object(rec)
    assert obj.autonamed and obj.namespace == "default"
    assert re.fullmatch(r"my-config-[0-9a-f]{8}", obj.obj_name)
    assert to_object(rec).obj_name == obj.obj_name


def test_a_custom_resource_is_cluster_scoped_when_its_crd_says_so():
    meta = {"metadata": {"name": "q", "namespace": "team-a"}}
    cluster = to_object(_recorded("kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue", meta))
    local = to_object(_recorded("kubernetes:kueue.x-k8s.io/v1beta1:LocalQueue", meta))
    assert cluster.namespace is None and local.namespace == "team-a"


def test_find_names_what_the_mocks_have_of_that_type():
    with pytest.raises(KeyError, match=r"no aws:s3/bucket:Bucket named 'x' \(have: \[\]\)"):
        TrainforgeMocks().find("aws:s3/bucket:Bucket", "x")
