"""trainforge.core.pod_security against Pod Security admission's own test cases, and the
level/version composition of its registry and label parsing.

Every case of tests/fixtures/upstream/pod_security.yaml (k8s.io/pod-security-admission
v0.35.6, policy/check_*_test.go; the file says what was left out) runs through the check
version the upstream test calls and must give upstream's reason and detail."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from trainforge.core import pod_security as P

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "upstream" / "pod_security.yaml"
CASES = yaml.safe_load(FIXTURE.read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_upstream_case(case: dict) -> None:
    found = P.BY_ID[case["check"]].at(case["minor"])
    assert found is not None
    result = found[0](case.get("metadata", {}), case.get("spec", {}))
    if case.get("allowed"):
        assert result is None
    else:
        assert result == (case["reason"], case["detail"])


def test_every_check_has_a_case_a_field_and_a_fix() -> None:
    """A check without an upstream case is untested here; one without a field or a fix would
    print a finding with a KeyError."""
    covered = {c["check"] for c in CASES}
    missing = {c.id for c in P.CHECKS} - covered
    assert missing <= {"procMount_restricted"}  # procMount's function, with no relaxation
    assert set(P.FIELDS) == set(P.FIXES) == {c.id for c in P.CHECKS}


def _pod(**spec) -> dict:
    return {"metadata": {}, "spec": {"containers": [{"name": "c"}], **spec}}


def test_baseline_refuses_the_review_job_restricted_replaces_hostpath_by_volume_types() -> None:
    """The security review's Job (hostNetwork, hostPath /, hardened containers): baseline
    refuses it on two checks; restricted reports the hostPath under restrictedVolumes (which
    overrides hostPathVolumes, registry.go) and adds its own checks; privileged admits it."""
    hardened = {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    pod = {
        "spec": {
            "hostNetwork": True,
            "containers": [{"name": "c", "securityContext": hardened}],
            "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        }
    }
    base = P.evaluate(P.policy({P.ENFORCE: "baseline"}), pod)
    assert [r.check for r in base] == ["hostNamespaces", "hostPathVolumes"]
    assert P.message(P.policy({P.ENFORCE: "baseline"}), base) == (
        'violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), '
        'hostPath volumes (volume "h")'
    )
    strict = P.evaluate(P.policy({P.ENFORCE: "restricted"}), pod)
    assert [r.check for r in strict] == ["hostNamespaces", "restrictedVolumes"]
    assert P.evaluate(P.policy({P.ENFORCE: "privileged"}), pod) == []
    assert P.evaluate(P.policy({}), pod) == []  # no label: EKS's default, privileged


def test_enforce_version_selects_the_checks_of_that_minor() -> None:
    """hostProbesAndHostLifecycle exists from 1.34; sysctls allows tcp_rmem from 1.32."""
    probe = _pod()
    probe["spec"]["containers"][0]["livenessProbe"] = {"httpGet": {"host": "10.0.0.1"}}
    latest = P.policy({P.ENFORCE: "baseline", P.ENFORCE_VERSION: "latest"})
    old = P.policy({P.ENFORCE: "baseline", P.ENFORCE_VERSION: "v1.33"})
    assert [r.check for r in P.evaluate(latest, probe)] == ["hostProbesAndHostLifecycle"]
    assert P.evaluate(old, probe) == []
    rmem = _pod(securityContext={"sysctls": [{"name": "net.ipv4.tcp_rmem"}]})
    assert P.evaluate(P.policy({P.ENFORCE: "baseline", P.ENFORCE_VERSION: "v1.31"}), rmem)
    assert not P.evaluate(P.policy({P.ENFORCE: "baseline", P.ENFORCE_VERSION: "v1.32"}), rmem)
    assert str(old) == "baseline:v1.33"


def test_bad_labels_read_as_pod_security_reads_them() -> None:
    """ParseLevel fails closed (restricted); ParseVersion reads a bad version as latest."""
    pol = P.policy({P.ENFORCE: "strict", P.ENFORCE_VERSION: "1.35"})
    assert (pol.level, pol.minor) == ("restricted", P.LATEST)
    assert "'strict' is not one of privileged, baseline, restricted" in pol.problem
    assert '\'1.35\' is not "latest" or "v1.x"' in pol.problem


def test_a_newer_minor_evaluates_as_the_newest_and_prints_as_labelled() -> None:
    """registry.go EvaluatePod: a version past the newest check evaluates at the newest; the
    message names the namespace's policy as labelled (nsPolicy.Enforce.String())."""
    pol = P.policy({P.ENFORCE: "baseline", P.ENFORCE_VERSION: "v1.40"})
    assert (pol.minor, str(pol)) == (P.LATEST, "baseline:v1.40")
