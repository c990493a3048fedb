"""A request finer than Kueue's and the scheduler's unit (a millicore of CPU, one unit of
anything else) counts as a whole unit per pod, as apimachinery's MilliValue/Value round it
(trainforge.core.quantity.counted): the plan's Kueue model must not admit what Kueue refuses."""

from __future__ import annotations

from fractions import Fraction

import pytest

from trainforge.core.quantity import counted, parse_quantity
from trainforge.plan import kueue as K


@pytest.mark.parametrize(
    ("resource", "text", "want"),
    [
        ("cpu", "100u", Fraction(1, 1000)),  # MilliValue rounds up
        ("cpu", "1500u", Fraction(2, 1000)),
        ("cpu", "1n", Fraction(1, 1000)),
        ("cpu", "250m", Fraction(250, 1000)),  # whole millicores unchanged
        ("cpu", "0", Fraction(0)),
        ("memory", "1500m", Fraction(2)),  # Value rounds up to a whole byte
        ("memory", "1Gi", Fraction(2**30)),
        ("nvidia.com/gpu", "1", Fraction(1)),
    ],
)
def test_counted_rounds_up_to_the_unit_kueue_and_the_scheduler_count(resource, text, want):
    assert counted(resource, parse_quantity(text)) == want


def _mode(pods: int, cpu: str, quota: str) -> str:
    docs = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
         "metadata": {"name": "default"}, "spec": {}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
         "metadata": {"name": "cq"},
         "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
             {"name": "default", "resources": [{"name": "cpu", "nominalQuota": quota}]}]}]}},
    ]  # fmt: skip
    model = K.read(docs)
    assigner = K.Assigner(
        K.Quotas(model.queues, model.shared), model.flavors, lambda *a: ("Preempt", 0)
    )
    podset = K.PodSet(name="main", count=pods, requests={"cpu": parse_quantity(cpu)})
    return assigner.assign(model.queues["cq"], [podset]).mode


def test_the_kueue_model_counts_sub_millicore_requests_per_pod_as_kueue_does():
    # Kueue v0.19: one pod's 100u is 1m (MilliValue), times 3 pods is 3m: over a 2m quota
    assert _mode(2, "100u", "2m") == "Fit"
    assert _mode(3, "100u", "2m") == "NoFit"
