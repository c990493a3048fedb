"""A controller component given its own kubeconfig applies with server-side apply.

The training operator's and Trainer's CRDs are too large for client-side apply; used on its
own with a kubeconfig, each component must make a provider with server-side apply and use it
for its objects. Without one it uses the provider it was given."""

from __future__ import annotations

import pulumi_kubernetes as k8s
import pytest

from trainforge.plan.mocks import run_mocked
from trainforge.platform.services_config import TrainingOperatorConfig
from trainforge.platform.trainer import KubeflowTrainer, KubeflowTrainerArgs
from trainforge.platform.training_operator import TrainingOperator, TrainingOperatorArgs

PROVIDER = "pulumi:providers:kubernetes"


def _operator(provider, kubeconfig):
    return TrainingOperator(
        "op", TrainingOperatorArgs(TrainingOperatorConfig(), provider, kubeconfig)
    )


def _trainer(provider, kubeconfig):
    return KubeflowTrainer("tr", KubeflowTrainerArgs(provider, kubeconfig))


@pytest.mark.parametrize("component", [_operator, _trainer])
def test_a_kubeconfig_makes_a_server_side_apply_provider_used_by_every_child(component):
    run = run_mocked(lambda: component(k8s.Provider("given", kubeconfig="{}"), "{kube}"))
    made = [r for r in run.of_type(PROVIDER) if r.name.endswith("-ssa")]
    assert len(made) == 1
    assert made[0].inputs["kubeconfig"] == "{kube}"
    assert made[0].inputs["enableServerSideApply"] == "true"
    objects = [r for r in run.resources if r.type.startswith("kubernetes:")]
    assert objects and all(f"::{made[0].name}::" in r.provider for r in objects)


@pytest.mark.parametrize("component", [_operator, _trainer])
def test_without_a_kubeconfig_the_given_provider_is_used(component):
    run = run_mocked(lambda: component(k8s.Provider("given", kubeconfig="{}"), None))
    assert [r.name for r in run.of_type(PROVIDER)] == ["given"]
    objects = [r for r in run.resources if r.type.startswith("kubernetes:")]
    assert objects and all("::given::" in r.provider for r in objects)
