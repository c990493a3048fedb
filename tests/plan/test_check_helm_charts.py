"""The provider-semantics rehearsal: each Helm release's chart resolved as pulumi-kubernetes
resolves it; a form that cannot resolve (Kueue's old `repo=oci://...`) fails the plan."""

from __future__ import annotations

import pytest

from trainforge.core import versions
from trainforge.plan.checks.helm_charts import PIN_RULE, RULE, resolve
from trainforge.plan.core import plan_program


def _release(name, **kwargs):
    import pulumi_kubernetes as k8s

    return k8s.helm.v3.Release(name, namespace="x", **kwargs)


def rules_of(result):
    return {(v.rule, v.resource.rsplit("::", 1)[-1]) for v in result.failing}


def test_the_old_kueue_form_is_refused_and_the_chart_form_resolves():
    def prog():
        import pulumi_kubernetes as k8s

        _release(  # the form Kueue's release had: an OCI registry as a classic repository
            "kueue-old",
            chart="kueue",
            version="0.19.5",
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(
                repo="oci://registry.k8s.io/kueue/charts"
            ),
        )
        _release("kueue", chart=versions.KUEUE_CHART, version=versions.KUEUE_CHART_VERSION)

    result = plan_program(prog)
    assert rules_of(result) == {(RULE, "kueue-old")}
    (message,) = [v.message for v in result.failing]
    assert "index.yaml" in message and "chart='oci://registry.k8s.io/kueue/charts/kueue'" in message


@pytest.mark.parametrize(
    ("chart", "repo", "how", "ok"),
    [
        ("oci://public.ecr.aws/karpenter/karpenter", None, "oci", True),
        ("nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "repository", True),
        # an OCI chart wins over a repo (resolveChartName)
        ("oci://ghcr.io/kubeflow/charts/kubeflow-trainer", "https://x.example", "oci", True),
        ("kueue", "oci://registry.k8s.io/kueue/charts", "repository", False),
        ("chart", "s3://bucket/charts", "repository", False),  # needs a Helm plugin
        ("stable/chart", "https://x.example", "repository", False),  # not an index name
        ("kueue", None, "alias", False),  # the deployer's `helm repo add`
        ("myrepo/kueue", None, "alias", False),
        ("kueue", "myrepo", "alias", False),  # repo that is no URL: an alias, myrepo/kueue
        ("./charts/missing", None, "local", False),
        ("oci://registry-only", None, "oci", False),
    ],
)
def test_resolution_follows_the_provider(chart, repo, how, ok):
    res = resolve(chart, repo, None, has_repo_opts=repo is not None)
    assert (res.how, not res.error) == (how, ok), res


def test_a_local_chart_directory_resolves_when_it_has_a_chart_yaml(tmp_path):
    (tmp_path / "charts" / "mine").mkdir(parents=True)
    assert resolve("./charts/mine", None, tmp_path).error  # no Chart.yaml: not a chart
    (tmp_path / "charts" / "mine" / "Chart.yaml").write_text("name: mine\n")
    res = resolve("./charts/mine", None, tmp_path)
    assert (res.how, res.error) == ("local", "")


def test_a_remote_chart_without_a_version_is_a_finding():
    result = plan_program(lambda: _release("floating", chart=versions.KUEUE_CHART))
    assert rules_of(result) == {(PIN_RULE, "floating")}
