"""core/names.py against apimachinery's own test cases (k8s.io/apimachinery v0.35.7:
pkg/api/validate/content/dns_test.go TestIsDNS1123Label/TestIsDNS1123Subdomain, kube_test.go
TestIsLabelKey/TestIsLabelValue, pkg/util/validation/validation_test.go TestIsDNS1035Label,
transcribed with `strings.Repeat(s, n)` as `s * n`), and the stack keys that read it."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from trainforge.core import names

# dns_test.go TestIsDNS1123Label
LABEL_GOOD = [
    "a", "ab", "abc", "a1", "a-1", "a--1--2--b",
    "0", "01", "012", "1a", "1-a", "1--a--b--2",
    "a" * 63,
]  # fmt: skip
LABEL_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A",
    "-", "a-", "-a", "1-", "-1",
    "_", "a_", "_a", "a_b", "1_", "_1", "1_2",
    ".", "a.", ".a", "a.b", "1.", ".1", "1.2",
    " ", "a ", " a", "a b", "1 ", " 1", "1 2",
    "a" * 64,
]  # fmt: skip
# dns_test.go TestIsDNS1123Subdomain
SUBDOMAIN_GOOD = [
    "a", "ab", "abc", "a1", "a-1", "a--1--2--b",
    "0", "01", "012", "1a", "1-a", "1--a--b--2",
    "a.a", "ab.a", "abc.a", "a1.a", "a-1.a", "a--1--2--b.a",
    "a.1", "ab.1", "abc.1", "a1.1", "a-1.1", "a--1--2--b.1",
    "0.a", "01.a", "012.a", "1a.a", "1-a.a", "1--a--b--2",
    "0.1", "01.1", "012.1", "1a.1", "1-a.1", "1--a--b--2.1",
    "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5", "11.22.33.44.55",
    "a" * 253,
]  # fmt: skip
SUBDOMAIN_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A",
    "-", "a-", "-a", "1-", "-1",
    "_", "a_", "_a", "a_b", "1_", "_1", "1_2",
    ".", "a.", ".a", "a..b", "1.", ".1", "1..2",
    " ", "a ", " a", "a b", "1 ", " 1", "1 2",
    "A.a", "aB.a", "ab.A", "A1.a", "a1.A",
    "A.1", "aB.1", "A1.1", "1A.1",
    "0.A", "01.A", "012.A", "1A.a", "1a.A",
    "A.B.C.D.E", "AA.BB.CC.DD.EE", "a.B.c.d.e", "aa.bB.cc.dd.ee",
    "a@b", "a,b", "a_b", "a;b",
    "a:b", "a%b", "a?b", "a$b",
    "a" * 254,
]  # fmt: skip
# validation_test.go TestIsDNS1035Label
DNS1035_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "a" * 63]
DNS1035_BAD = [
    "0", "01", "012", "1a", "1-a", "1--a--b--2",
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A",
    "-", "a-", "-a", "1-", "-1",
    "_", "a_", "_a", "a_b", "1_", "_1", "1_2",
    ".", "a.", ".a", "a.b", "1.", ".1", "1.2",
    " ", "a ", " a", "a b", "1 ", " 1", "1 2",
    "a" * 64,
]  # fmt: skip
# kube_test.go TestIsLabelKey
KEY_GOOD = [
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "1234",
    "simple/simple",
    "now-with-dashes/simple",
    "now-with-dashes/now-with-dashes",
    "now.with.dots/simple",
    "now-with.dashes-and.dots/simple",
    "1-num.2-num/3-num",
    "1234/5678",
    "1.2.3.4/5678",
    "Uppercase_Is_OK_123",
    "example.com/Uppercase_Is_OK_123",
    "requests.storage-foo",
    "a" * 63,
    "a" * 253 + "/" + "b" * 63,
]
KEY_BAD = [
    "nospecialchars%^=@",
    "cantendwithadash-",
    "-cantstartwithadash-",
    "only/one/slash",
    "Example.com/abc",
    "example_com/abc",
    "example.com/",
    "/simple",
    "a" * 64,
    "a" * 254 + "/abc",
]
# kube_test.go TestIsLabelValue
VALUE_GOOD = [
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "end-with-num-1",
    "1234",
    "a" * 63,
    "",
]
VALUE_BAD = [
    "nospecialchars%^=@",
    "Tama-nui-te-rā.is.Māori.sun",
    "\\backslashes\\are\\bad",
    "-starts-with-dash",
    "ends-with-dash-",
    ".starts.with.dot",
    "ends.with.dot.",
    "a" * 64,
]

CASES = [
    (names.is_dns1123_label, LABEL_GOOD, LABEL_BAD),
    (names.is_dns1123_subdomain, SUBDOMAIN_GOOD, SUBDOMAIN_BAD),
    (names.is_dns1035_label, DNS1035_GOOD, DNS1035_BAD),
    (names.is_label_key, KEY_GOOD, KEY_BAD),
    (names.is_label_value, VALUE_GOOD, VALUE_BAD),
]


@pytest.mark.parametrize(("rule", "good", "bad"), CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_each_rule_gives_apimachinerys_answer_on_its_own_cases(rule, good, bad):
    assert [v for v in good if not rule(v)] == []
    assert [v for v in bad if rule(v)] == []


@pytest.mark.parametrize("rule", [c[0] for c in CASES], ids=lambda r: r.__name__)
def test_a_final_newline_is_not_the_end_of_the_text(rule):
    """Go's `$` is the end of the text; Python's also matches before a final newline."""
    assert not rule("abc\n")


def _accepts(kind, value) -> bool:
    try:
        TypeAdapter(kind).validate_python(value)
    except ValidationError:
        return False
    return True


def test_a_claim_name_is_a_subdomain_of_labels_not_any_run_of_dots_and_dashes():
    """The stack's own PVC-name pattern took `a..b` and `a.-b` (apimachinery refuses both)."""
    from trainforge.stack.services import ClaimName

    assert _accepts(ClaimName, "data.team-a")
    assert not _accepts(ClaimName, "a..b")
    assert not _accepts(ClaimName, "a.-b")


def test_a_job_name_ending_in_a_newline_is_refused():
    from trainforge.stack.jobs import _name

    assert _name("train") == "train"
    with pytest.raises(ValueError, match="DNS-1035"):
        _name("train\n")


def test_node_labels_are_checked_as_kubernetes_checks_them_and_tags_by_aws_rules():
    """A node label's value is a label value (Karpenter's NodePool CRD and EKS refuse
    `a b`); its prefix a DNS-1123 subdomain. AWS tags are judged by AWS's tag rules, not these
    (stack/platform.Tags: a key Kubernetes refuses, `a..b/c`, is a tag key AWS takes)."""
    from trainforge.stack.platform import Labels, Tags

    assert _accepts(Labels, {"example.com/team": "research", "tier": "", "n": 3})
    for bad in ({"team": "a b"}, {"team": "x" * 64}, {"-x.y/z": "v"}, {"a..b/c": "v"}):
        assert not _accepts(Labels, bad), bad
    assert _accepts(Tags, {"team": "a b"})
    assert _accepts(Tags, {"a..b/c": "v"})
    assert not _accepts(Tags, {"aws:team": "v"}) and not _accepts(Tags, {"k" * 129: "v"})


def test_a_bad_label_value_is_named_at_its_key_with_what_is_valid():
    from trainforge.stack.platform import Labels

    with pytest.raises(ValidationError) as e:
        TypeAdapter(Labels).validate_python({"ok": "v", "team": "a b"})
    (error,) = e.value.errors()
    assert error["loc"] == ("team",) and error["input"] == "a b"
    assert "a Kubernetes label value" in error["msg"]


def test_karpenters_namespace_is_a_namespace():
    """A namespace is a DNS-1123 label (it may start with a digit); the key took a DNS-1035
    one of any length."""
    from trainforge.stack.platform import KarpenterConfig

    assert KarpenterConfig(namespace="1-karpenter").namespace == "1-karpenter"
    with pytest.raises(ValidationError):
        KarpenterConfig(namespace="k" * 64)


@pytest.mark.parametrize(
    "image",
    [
        "registry.example.com/trainforge-runtime",  # no tag: what runs changes under the pod
        "registry.example.com/trainforge-runtime:latest",
        "pytorch/pytorch:2.13.0\n",  # Go's `$` is the end of the text
        "pytorch/pytorch:2.13.0-é",  # a tag is ASCII word characters (Go's \w)
    ],
)
def test_an_image_key_takes_a_pinned_reference_only(image):
    """The job's `image` and the runtime image keys read one grammar and one pin rule
    (core/image_routes.REFERENCE, stack/base.pinned_image); `images.runtimeImage` said
    "a pinned image reference" and took an unpinned one."""
    from trainforge.stack.jobs import JobModel
    from trainforge.stack.platform import ImagesConfig

    with pytest.raises(ValidationError, match="runtime_image|runtimeImage"):
        ImagesConfig(runtime_image=image)
    with pytest.raises(ValidationError) as e:
        JobModel.model_validate({"name": "j", "team": "t", "pool": "p", "image": image})
    assert [err["loc"] for err in e.value.errors()] == [("image",)]
    assert (
        ImagesConfig(runtime_image="r.example.com/rt:1.2").runtime_image == "r.example.com/rt:1.2"
    )


# Names only one rule accepts: swapping DNS-1035 and DNS-1123 anywhere fails a test below.
# "0-test" is upstream's own case: training-operator v1.9.4
# pkg/webhooks/pytorch/pytorchjob_webhook_test.go, "pytorchJob name does not meet DNS1035"
# (read 2026-11-30 from the kubeflow/trainer mirror, tag v1.9.4).
DIGIT_FIRST = "0-test"  # a DNS-1123 label, not a DNS-1035 label
DOTTED = "data.0-test"  # a DNS-1123 subdomain, not a label


def test_the_names_that_tell_the_rules_apart():
    assert names.is_dns1123_label(DIGIT_FIRST) and not names.is_dns1035_label(DIGIT_FIRST)
    assert names.is_dns1123_subdomain(DOTTED) and not names.is_dns1123_label(DOTTED)


def test_a_job_name_is_a_dns1035_label_as_its_operators_check_it():
    """A job's name names its PyTorchJob (training-operator v1.9.4 pytorchjob_webhook.go:
    NameIsDNS1035Label) or TrainJob (trainer v2.2.1 pkg/apis/trainer/v1alpha1/trainjob_types.go:
    CEL `^[a-z]([-a-z0-9]*[a-z0-9])?$`), and the Services named after it: a leading digit is
    refused by the stack key and by the plan's PyTorchJob rule."""
    from tests.plan.test_plan_validate import job
    from trainforge.plan.checks import validate as V
    from trainforge.stack.jobs import _name

    with pytest.raises(ValueError, match="DNS-1035"):
        _name(DIGIT_FIRST)
    assert V.pytorchjob_findings(job(), "1.35") == []
    found = V.pytorchjob_findings(job(metadata__name=DIGIT_FIRST), "1.35")
    assert f"metadata.name {DIGIT_FIRST!r} is not a DNS-1035 label (a-z, 0-9, '-', <= 63)" in found


def test_dns1123_names_take_a_leading_digit():
    """A team (its namespace: IsDNS1123Label), a cohort, a claim (a PVC: a subdomain), a Kueue
    object (apiextensions-apiserver NameIsDNSSubdomain) and a runtime's replicated job (JobSet
    v0.12.0 names its Jobs <trainjob>-<name>-<index>, pkg/util/placement GenJobName, and labels
    them with the name: a DNS-1123 label) are not DNS-1035 labels: "0-test" is valid."""
    import copy

    from trainforge.jobs import trainjob
    from trainforge.plan.checks import validate as V
    from trainforge.plan.kueue_validate import kueue_findings
    from trainforge.stack.services import ClaimName, Cohort, TeamName

    assert _accepts(TeamName, DIGIT_FIRST) and not _accepts(TeamName, DOTTED)
    assert _accepts(Cohort, DIGIT_FIRST)
    assert _accepts(ClaimName, DOTTED)
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "spec": {}}
    assert kueue_findings({**flavor, "metadata": {"name": DOTTED}}) == []
    assert kueue_findings({**flavor, "metadata": {"name": "Flavor"}}) != []
    runtime = copy.deepcopy(trainjob.runtime_manifests()[0])
    rjobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    rjobs[-1]["name"] = "1node"
    assert not [m for m in V.runtime_findings(runtime, "1.35") if "label" in m]
    rjobs[-1]["name"] = "Node_1"
    assert [m for m in V.runtime_findings(runtime, "1.35") if "not a DNS-1123 label" in m]
