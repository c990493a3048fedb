"""The existence rehearsal: every Secret, ConfigMap, ServiceAccount and claim a pod or a chart
value names is created by the stack before its consumer, or the plan says who must create
it, where and with which keys."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks import existence
from trainforge.plan.checks.existence import KEYS, MISSING, ORDER
from trainforge.plan.core import plan_program
from trainforge.plan.manifests import k8s_objects
from trainforge.plan.registry import CHECKS


def findings(result, rule=None):
    return [v for v in result.failing if v.rule in ((rule,) if rule else tuple(existence.RULES))]


def _ns():
    return k8s.core.v1.Namespace("team-ns", metadata={"name": "team-a"})


def _job(name, ns, pod, opts=None):
    return k8s.batch.v1.Job(
        name,
        metadata={"name": name, "namespace": ns.metadata.name},
        spec={"template": {"spec": {"restartPolicy": "Never", **pod}}},
        opts=pulumi.ResourceOptions.merge(
            pulumi.ResourceOptions(depends_on=[ns]), opts or pulumi.ResourceOptions()
        ),
    )


def _reads(secret, key="token", optional=None):
    ref = {"name": secret, "key": key, **({"optional": optional} if optional is not None else {})}
    return {
        "containers": [
            {"name": "c", "image": "i", "env": [{"name": "T", "valueFrom": {"secretKeyRef": ref}}]}
        ]
    }


def test_the_check_is_registered():
    assert existence.check in [c.run for c in CHECKS]


def test_a_secret_nothing_creates_is_a_finding_naming_namespace_and_keys():
    def prog():
        ns = _ns()
        _job("needs", ns, _reads("api-token", "token"))
        _job("maybe", ns, _reads("other", "token", optional=True))  # optional: never required

    (f,) = findings(plan_program(prog))
    assert f.rule == MISSING
    assert "Secret 'api-token' in namespace 'team-a'" in f.message
    assert "with keys token" in f.message and "user must create it" in f.message


def test_a_secret_the_consumer_does_not_wait_for_is_refused_and_depends_on_fixes_it():
    def prog():
        ns = _ns()
        secret = k8s.core.v1.Secret(
            "tok",
            metadata={"name": "api-token", "namespace": ns.metadata.name},
            string_data={"token": "x"},
        )
        _job("races", ns, _reads("api-token"))
        _job("waits", ns, _reads("api-token"), pulumi.ResourceOptions(depends_on=[secret]))

    found = findings(plan_program(prog))
    assert [(f.rule, f.message.split(":")[0]) for f in found] == [
        (ORDER, "Job team-a/races (spec.template.spec)")
    ]


def test_a_key_the_secret_does_not_have_is_refused():
    def prog():
        ns = _ns()
        secret = k8s.core.v1.Secret(
            "tok",
            metadata={"name": "api-token", "namespace": ns.metadata.name},
            string_data={"token": "x"},
        )
        _job("typo", ns, _reads("api-token", "tokn"), pulumi.ResourceOptions(depends_on=[secret]))

    (f,) = findings(plan_program(prog))
    assert f.rule == KEYS and "tokn" in f.message and "has only token" in f.message


def test_service_accounts_and_claims_are_references_and_default_is_builtin():
    def prog():
        ns = _ns()
        pod = {
            "serviceAccountName": "runner",
            "containers": [{"name": "c", "image": "i"}],
            "volumes": [
                {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "ca", "configMap": {"name": "kube-root-ca.crt"}},
            ],
        }
        _job("sa", ns, pod)
        _job("plain", ns, {"containers": [{"name": "c", "image": "i"}]})  # SA default

    kinds = sorted(f.message.split(" ")[0] for f in findings(plan_program(prog), MISSING))
    assert kinds == ["PersistentVolumeClaim", "ServiceAccount"]


def _release(values, deps=()):
    ns = k8s.core.v1.Namespace("mon-ns", metadata={"name": "monitoring"})
    return k8s.helm.v3.Release(
        "prom",
        chart="kube-prometheus-stack",
        version="88.5.3",
        repository_opts={"repo": "https://prometheus-community.github.io/helm-charts"},
        namespace=ns.metadata.name,
        values=values,
        opts=pulumi.ResourceOptions(depends_on=[ns, *deps]),
    ), ns


GRAFANA = {
    "grafana": {
        "enabled": True,
        # a secret elsewhere in the values masks them whole in the recorded inputs
        "adminUser": pulumi.Output.secret("x"),
        "admin": {"existingSecret": "grafana-admin", "userKey": "u", "passwordKey": "p"},
    }
}


def test_a_chart_value_naming_a_secret_nothing_creates_is_a_finding():
    (f,) = findings(plan_program(lambda: _release(GRAFANA)))
    assert f.rule == MISSING
    assert "Secret 'grafana-admin' in namespace 'monitoring'" in f.message
    assert "values grafana.admin.existingSecret" in f.message and "with keys p, u" in f.message


def test_a_chart_value_s_secret_created_before_the_release_passes():
    def prog():
        ns = k8s.core.v1.Namespace("mon-ns0", metadata={"name": "monitoring"})
        secret = k8s.core.v1.Secret(
            "admin",
            metadata={"name": "grafana-admin", "namespace": ns.metadata.name},
            string_data={"u": "admin", "p": "pw"},
        )
        _release(GRAFANA, deps=[secret])

    assert findings(plan_program(prog)) == []


def _prod_ctx(repo_root, standin=None):
    from trainforge.plan.runner import run_project

    inv = run_project(repo_root, "prod")
    return PlanContext(
        inventory=inv, objects=k8s_objects(inv), declared=inv.declared, standin=standin
    )


def test_prod_creates_grafana_s_admin_secret_before_the_release(repo_root, prod_standin):
    """prod's Grafana reads `monitoring/grafana-admin` (a non-optional secretKeyRef in the
    grafana chart): the stack makes it, with both keys, and the release waits for it."""
    ctx = _prod_ctx(repo_root, standin=lambda: prod_standin)
    result = existence.check(ctx)
    assert result.findings == []
    (release,) = [r for r in ctx.inventory.resources if r.name.endswith("monitoring-prometheus")]
    assert release.revealed["values"]["grafana"]["admin"]["existingSecret"] == "grafana-admin"
    (secret,) = [o for o in ctx.objects if o.ident == "monitoring/Secret/grafana-admin"]
    assert secret.urn in release.options["dependencies"]
    keys = existence.producers(ctx)[("Secret", "monitoring", "grafana-admin")].keys
    assert keys == {"admin-user", "admin-password"}


def test_mutation_prod_without_the_grafana_secret_is_caught(repo_root, monkeypatch):
    """The mutation: the Secret removed (as the stack was before), the plan names it."""
    from trainforge.platform import monitoring

    monkeypatch.setattr(monitoring.Monitoring, "_grafana_admin", lambda *a, **k: [])
    result = existence.check(_prod_ctx(repo_root))
    (f,) = result.findings
    assert f.rule == MISSING and f.resource == "monitoring/Secret/grafana-admin"
    assert "with keys admin-password, admin-user" in f.message
    data = result.sections[0].data["user_must_create"]
    assert data == [
        {
            "kind": "Secret",
            "namespace": "monitoring",
            "name": "grafana-admin",
            "keys": ["admin-password", "admin-user"],
            "needed_by": "release kube-prometheus-stack (kube-prometheus-stack): values "
            "grafana.admin.existingSecret",
        }
    ]
