"""The vendored CRDs' CEL rules, evaluated by a real CEL implementation (`trainforge.plan.crd_cel`)
with Kubernetes' semantics (apiextensions-apiserver v0.35.7 pkg/apiserver/schema/cel/
validation.go): every rule compiles, each runs where its schema node's value is present, a
transition rule does not run on create, defaults are applied first, and each refusal reads as
the API server prints it. Upstream's own test cases: tests/plan/test_crd_cel_upstream.py."""

from __future__ import annotations

import copy

import pytest
import yaml

from trainforge.plan import crd_cel, crds

KUEUE = "kueue.x-k8s.io/v1beta2"


def _validations(node) -> list[dict]:
    """Every `x-kubernetes-validations` entry anywhere in a document (a walk independent of
    crd_cel.build, so a rule its tree dropped would be missed)."""
    if isinstance(node, dict):
        found = list(node.get("x-kubernetes-validations") or [])
        return found + [v for k, x in node.items() if k != "x-kubernetes-validations"
                        for v in _validations(x)]  # fmt: skip
    if isinstance(node, list):
        return [v for x in node for v in _validations(x)]
    return []


def _every_version():
    for f in crds.crd_files():
        crd = yaml.safe_load(f.read_text("utf-8"))
        for version in crd["spec"]["versions"]:
            yield f.name, version["name"], version["schema"]["openAPIV3Schema"]


def test_every_rule_of_every_vendored_crd_compiles():
    total = transition = 0
    for name, version, schema in _every_version():
        rules = crd_cel.rules(crd_cel.build(schema))
        assert len(rules) == len(_validations(schema)), (name, version)
        for rule in rules:
            compiled = crd_cel.compile_rule(rule)  # RuleError fails the test
            total += 1
            transition += compiled.uses_old_self
            assert compiled.uses_old_self == ("oldSelf" in rule.rule), rule.rule
    # the 143 the lead counted, and the TrainingRuntime CRD's 10 (vendored with this evaluator)
    assert (total, transition) == (153, 40)


def test_a_rule_that_does_not_compile_is_a_finding_never_a_pass():
    node = crd_cel.Node(type="object", rules=(crd_cel.Rule("self.size() >", "m"),))
    with pytest.raises(crd_cel.RuleError, match="rule compile error"):
        crd_cel.compile_rule(node.rules[0])
    # a library Kubernetes has and this evaluator does not (quantity) is said, not skipped
    node = crd_cel.Node(type="string", rules=(crd_cel.Rule("quantity(self).isInteger()"),))
    (err,) = crd_cel._validate(node, "1", ["spec", "x"])
    assert err.startswith('spec.x: Invalid value: "string": rule compile error:'), err
    assert "undeclared reference to 'quantity'" in err


@pytest.mark.parametrize(
    "expr,want",
    [
        # k8s.io/apiserver v0.35.7 pkg/cel/environment/environment_test.go and library/cost_test.go
        ("'a 1 b 2'.find('[0-9]') == '1'", True),
        ("'abc 123 def 123'.find('123') == '123'", True),
        ("'abc 123'.find('xyz') == ''", True),
        # the vendored CRDs' patterns (Karpenter's alias family, label domain)
        ("'al2023@v20260903'.find('^[^@]+') == 'al2023'", True),
        ("'node.karpenter.sh/x'.find('^([^/]+)').endsWith('karpenter.sh')", True),
        ("'kubernetes.io/hostname'.find('^([^/]+)') == 'kubernetes.io'", True),
        # cel-go's ext strings `split` (Kubernetes' StringsVersion(2))
        ("'al2023@latest'.split('@') == ['al2023', 'latest']", True),
    ],
)
def test_kubernetes_find_and_split(expr, want):
    program = crd_cel.compile_rule(crd_cel.Rule(expr)).program
    assert program.eval(data={"self": None}).value() is want


def test_an_illegal_find_pattern_is_an_evaluation_error():
    node = crd_cel.Node(type="string", rules=(crd_cel.Rule("self.find('(') == ''", "m"),))
    (err,) = crd_cel._validate(node, "x", ["spec", "k"])
    assert err.startswith('spec.k: Invalid value: "string": ') and "evaluating rule: m" in err


def test_only_the_find_patterns_checked_here_appear_in_the_crds():
    """Go's RE2 and Python's re agree on these two (no RE2-only syntax, no backtracking-only
    syntax); a CRD that brings another pattern fails here until it is checked."""
    import re

    patterns = set()
    for _, _, schema in _every_version():
        for v in _validations(schema):
            patterns |= set(re.findall(r"\.find\((['\"])(.*?)\1\)", v["rule"]))
    assert {p for _, p in patterns} == {"^[^@]+", "^([^/]+)"}


def _flavor(spec: dict) -> dict:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "f"},
            "spec": spec}  # fmt: skip


def test_a_transition_rule_does_not_run_on_create():
    # the immutability rules read oldSelf (`!has(oldSelf.topologyName) || ...`): on create
    # there is none, and evaluating them would be a "no such key" or "undeclared" error
    doc = _flavor({"topologyName": "t", "nodeLabels": {"a": "b"}, "tolerations": []})
    assert crds.crd_errors(doc) == []
    assert crds.crd_errors(_flavor({"topologyName": "t", "nodeLabels": {}})) == [
        "spec: Invalid value: at least one nodeLabel is required when topology is set"
    ]
    # the rule reads `self.nodeLabels`: absent, it is an evaluation error, as in the API server
    assert crds.crd_errors(_flavor({"topologyName": "t"})) == [
        'spec: Invalid value: "object": no such key: nodeLabels evaluating rule: at least one '
        "nodeLabel is required when topology is set"
    ]


def _cq(preemption: dict) -> dict:
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "q"},
            "spec": {"preemption": preemption}}  # fmt: skip


def test_the_schema_defaults_are_applied_before_the_rules_run():
    """`reclaimWithinCohort` defaults to Never; the rule reads it (without the default it would
    be a "no such key" evaluation error, not the rule's own message)."""
    doc = _cq({"borrowWithinCohort": {"policy": "LowerPriority"}})
    assert crds.crd_errors(doc) == [
        "spec.preemption: Invalid value: reclaimWithinCohort=Never and "
        "borrowWithinCohort.Policy!=Never"
    ]
    assert "reclaimWithinCohort" not in doc["spec"]["preemption"]  # the caller's doc unchanged
    assert crds.crd_errors(_cq({"reclaimWithinCohort": "Any",
                                "borrowWithinCohort": {"policy": "LowerPriority"}})) == []  # fmt: skip


def test_the_schema_is_judged_after_the_defaults_too():
    """A budget's `nodes` is required and defaults to 10%: the API server defaults it while
    decoding the request, so a budget without it is accepted (the schema alone refused it)."""
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {
            "template": {"spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"},
                                  "requirements": []}},
            "disruption": {"consolidateAfter": "1m",
                           "budgets": [{"schedule": "@daily", "duration": "10m"}]},
        },
    }  # fmt: skip
    assert crds.crd_errors(pool) == []
    assert "nodes" not in pool["spec"]["disruption"]["budgets"][0]
    pool["spec"]["disruption"]["budgets"][0]["nodes"] = "lots"
    assert crds.crd_errors(pool)[0].startswith("spec.disruption.budgets[0].nodes: 'lots' does not")


def test_the_messages_are_the_api_servers():
    nodeclass = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "n"},
        "spec": {
            "amiSelectorTerms": [{"alias": 'bad"alias'}],
            "role": "r",
            "subnetSelectorTerms": [{"tags": {"a": ""}}],
            "securityGroupSelectorTerms": [{"id": "sg-1"}],
        },
    }
    assert crds.crd_errors(nodeclass) == [
        # a scalar: its value quoted as Go's %q; a list or object: the value omitted
        'spec.amiSelectorTerms[0].alias: Invalid value: "bad\\"alias": \'alias\' is improperly '
        "formatted, must match the format 'family@version'",
        'spec.amiSelectorTerms[0].alias: Invalid value: "bad\\"alias": family is not '
        "supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', "
        "'windows2019', 'windows2022', 'windows2025'",
        "spec.subnetSelectorTerms[0].tags: Invalid value: empty tag keys or values aren't "
        "supported",
    ]
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": "Bad_Name", "namespace": "n"},
                "spec": {"runtimeRef": {"name": "r"}}}  # fmt: skip
    # a rule on the resource root: the path the API server prints for it is `<nil>`
    assert crds.crd_errors(trainjob) == [
        "<nil>: Invalid value: metadata.name must match RFC 1035 DNS label format"
    ]


@pytest.mark.parametrize(
    "expression,detail",
    [
        ("'  size ' + string(self.size()) + '  '", "size 2"),  # its result, trimmed
        ("'two\\nlines'", "m"),  # a line break: the rule's message instead
        ("'at ' + string(self[5])", "m"),  # an evaluation error: the message instead
        ("' '", "m"),  # empty once trimmed: the message instead
    ],
)
def test_a_message_expression_is_read_as_the_api_server_reads_it(expression, detail):
    rule = crd_cel.Rule("self.size() == 0", "m", message_expression=expression)
    node = crd_cel.Node(type="array", rules=(rule,))
    assert crd_cel._validate(node, [1, 2], ["spec", "l"]) == [f"spec.l: Invalid value: {detail}"]


def test_a_message_expression_that_does_not_compile_is_said():
    with pytest.raises(crd_cel.RuleError, match="messageExpression compile error"):
        crd_cel.compile_rule(crd_cel.Rule("true", "m", message_expression="'y' * 1"))


@pytest.mark.parametrize(
    "reason,type_,value,want",
    [
        ("", "string", "x", 'spec.k: Invalid value: "x": m'),
        ("FieldValueInvalid", "integer", 3, "spec.k: Invalid value: 3: m"),
        ("", "object", {}, "spec.k: Invalid value: m"),
        ("FieldValueForbidden", "string", "x", "spec.k: Forbidden: m"),
        ("FieldValueRequired", "object", {}, "spec.k: Required value: m"),
        ("FieldValueDuplicate", "string", "x", 'spec.k: Duplicate value: "x"'),
        ("FieldValueDuplicate", "array", [], "spec.k: Duplicate value"),
    ],
)
def test_a_rules_reason_is_printed_as_field_error_prints_it(reason, type_, value, want):
    rule = crd_cel.Rule("false", "m", reason=reason)
    node = crd_cel.Node(type=type_, rules=(rule,))
    assert crd_cel._validate(node, value, ["spec", "k"]) == [want]


def test_an_empty_rule_is_skipped():
    node = crd_cel.Node(type="object", rules=(crd_cel.Rule("  ", "m"),))
    assert crd_cel._validate(node, {}, ["spec"]) == []


def test_a_map_value_rule_runs_per_value_at_its_key():
    node = crd_cel.Node(
        type="object",
        additional=crd_cel.Node(type="string", rules=(crd_cel.Rule("self != ''", "empty"),)),
    )
    assert crd_cel._validate(node, {"a": "x", "b.io/c": ""}, ["spec", "tags"]) == [
        'spec.tags[b.io/c]: Invalid value: "": empty'
    ]


def test_one_path_writer_each_caller_with_its_root():
    """crds' schema lines and the CEL errors write a path alike (field.Path.String: a map key
    `[key]`, a field named "[x]" a child like any other); only the root differs."""
    assert crd_cel.field_path([]) == "<nil>"
    assert crd_cel.field_path([], "(root)") == "(root)"
    assert crd_cel.field_path(["spec", 0, crd_cel.Key("a.io/b"), "[x]"]) == "spec[0][a.io/b].[x]"
    assert crds.crd_errors(_flavor({"[x]": 1}))[0] == "spec.[x]: unknown field"


def test_a_blocking_schema_error_stops_the_rules_and_says_so():
    doc = _cq({"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "Sometimes"}})
    errs = crds.crd_errors(doc)
    assert errs[-1] == crd_cel.NOT_CHECKED
    assert not any("reclaimWithinCohort=Never" in e for e in errs), errs
    fixed = copy.deepcopy(doc)
    fixed["spec"]["preemption"]["borrowWithinCohort"]["policy"] = "LowerPriority"
    assert crds.crd_errors(fixed) == [
        "spec.preemption: Invalid value: reclaimWithinCohort=Never and "
        "borrowWithinCohort.Policy!=Never"
    ]


def test_each_rule_is_compiled_once_per_process():
    crd_cel.compile_rule.cache_clear()
    doc = _cq({"borrowWithinCohort": {"policy": "LowerPriority"}})
    crds.crd_errors(doc)
    first = crd_cel.compile_rule.cache_info()
    assert first.misses >= 2  # the rules on spec and spec.preemption
    for _ in range(2):
        crds.crd_errors(doc)
    again = crd_cel.compile_rule.cache_info()
    assert again.misses == first.misses and again.hits == first.hits + 2 * first.misses
