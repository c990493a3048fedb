"""Every documented configuration key, fed malformed and wrong-typed values, gets a one-line
error naming that key; nothing ends in a Python traceback.

The keys come from the reference itself (docs/configuration.md and docs/jobs.md tables, read by
documented_keys below), so a key added to the docs is tested here without touching this file.
Each case runs what `pulumi preview` runs before any resource (platform/stack_check.py): every
area's parser with the instance-type lookups and region check, every job against the platform
contract, the policy keys. The tables are generated from the stack model; the last tests keep
the committed docs and JSON Schema equal to what it generates.
"""

from __future__ import annotations

import copy
import pathlib
import re

import pulumi
import pytest

from trainforge import schema
from trainforge.plan.core import known_rule_ids
from trainforge.plan.mocks import TrainforgeMocks
from trainforge.platform.stack_check import check_stack
from trainforge.stack.base import StackError
from trainforge.stack.file import read_stack

# The configuration reference, machine-readable: every key docs/configuration.md and
# docs/jobs.md document, read from their tables. Each table row's first cell names its keys in
# backticks; a `### \`trainforge:<key>\`` heading gives the keys of its table their prefix
# (`[]` marks a list of entries).
DOCS = ("docs/configuration.md", "docs/jobs.md")
_HEADING = re.compile(r"^#{2,3} `(?P<key>(?:trainforge|aws):[A-Za-z\[\]]+)`")
_JOBS_TABLE = "| Key | Default | Notes |"


def documented_keys(root: pathlib.Path) -> list[str]:
    """Every documented key as a full path, e.g. `trainforge:nodeGroups[].minSize`."""
    keys: list[str] = []
    for doc in DOCS:
        prefix = "trainforge:jobs[]." if doc.endswith("jobs.md") else ""
        in_jobs_table = False
        for line in (root / doc).read_text().splitlines():
            if doc.endswith("configuration.md"):
                m = _HEADING.match(line)
                if m:
                    prefix = m.group("key") + "."
                elif line.startswith("## "):
                    prefix = ""
            else:
                if line.startswith(_JOBS_TABLE):
                    in_jobs_table = True
                    continue
                if in_jobs_table and not line.startswith("|"):
                    in_jobs_table = False
                if not in_jobs_table:
                    continue
            if not line.startswith("| `"):
                continue
            first = line.split("|")[1]
            for token in re.findall(r"`([^`]+)`", first):
                full = token if ":" in token else prefix + token
                if full not in keys:
                    keys.append(full)
    return keys


ROOT = pathlib.Path(__file__).resolve().parents[1]
KEYS = documented_keys(ROOT)
# Wrong for every key in some way: a structure where a scalar belongs, a scalar where a list or
# mapping belongs, garbage text, a negative number, a boolean where text or a number belongs.
MALFORMED = [{"bogus": [1]}, [[{"x": 1}]], "no such thing !", -7, True]


def base() -> tuple[dict, str]:
    """The prod stack (every section present) with full keys, plus its region."""
    data = copy.deepcopy(read_stack(ROOT, "prod").config)
    data["trainforge:nodePools"][1]["labels"] = {"team": "vision"}
    data["trainforge:nodeGroups"][0]["taints"] = [{"key": "dedicated", "value": "p4d"}]
    data["trainforge:nodePools"][0]["taints"] = [{"key": "dedicated", "value": "p5"}]
    data["trainforge:nodeGroups"][0]["labels"] = {"team": "llm"}
    data["trainforge:fsx"]["dataRepository"] = {"dataRepositoryPath": "s3://bucket/prefix"}
    data["trainforge:jobs"][0]["env"] = {"A": "1"}
    data["trainforge:trainingOperator"] = {
        "chart": {"repository": "oci://example.com/charts", "version": "1.9.4"}
    }
    data["trainforge-policy:costCaps"] = {"jobPerHour": 100, "teams": {"llm": {"teamPerHour": 9}}}
    data["trainforge-policy:waivers"] = [
        {"resource": "gpt-350m-fsdp", "rule": "TF_COST_JOB_CAP", "reason": "approved"}
    ]
    return data, data["aws:region"]


def check(config: dict, region) -> None:
    """What the program runs before declaring anything (__main__.py); the job's name after its
    index (`trainforge:jobs[0] (gpt-350m-fsdp).workers`) left out: these tests name keys."""
    errors = check_stack({**config, "aws:region": region}, known_rules=RULES, lookups=True).errors
    if errors:
        raise StackError([re.sub(r"(trainforge:jobs\[\d+\]) \([^)]*\)", r"\1", e) for e in errors])


RULES = known_rule_ids()


def set_key(raw: dict, key: str, value) -> tuple[dict, str]:
    """Set `value` at the documented `key`; returns the config and the path errors must name."""
    raw = copy.deepcopy(raw)
    ns, _, path = key.partition(":")
    parts = path.split(".")
    top = parts[0].removesuffix("[]")
    node = raw
    named = f"{ns}:"
    parts[0] = f"{ns}:{parts[0]}"
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        name = part.removesuffix("[]")
        named += ("." if i else "") + (top if i == 0 else name)
        if part.endswith("[]"):  # the first entry (one without keys when there is none)
            named += "[0]"
            entries = node.setdefault(name, [])
            if not entries:
                entries.append({})
            node = entries[0]
        elif last:
            node[name] = value
        else:
            node = node.setdefault(name, {})
            if not isinstance(node, dict):
                raise AssertionError(key)
    return raw, named


@pytest.fixture(autouse=True)
def mocks():
    # the engine config an earlier test's program run left behind (aws:region) must not decide
    # which instance types this region offers: the prod stack's own region does
    from pulumi.runtime.config import set_all_config

    set_all_config({"aws:region": base()[1]}, [])
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))


def test_the_reference_covers_every_section():
    assert len(KEYS) > 100
    for section in ("aws:region", "trainforge:nodeGroups[].minSize", "trainforge:teams[].name"):
        assert section in KEYS
    assert "trainforge:jobs[].vocabSize" in KEYS


def test_the_base_stack_is_valid():
    raw, region = base()
    check(raw, region)


@pytest.mark.parametrize("key", KEYS)
def test_malformed_values_get_one_line_naming_the_key(key):
    raw, region = base()
    rejected = []
    for value in MALFORMED:
        if key == "aws:region":
            cfg, named = raw, "aws:region"
            reg = value
        else:
            cfg, named = set_key(raw, key, value)
            reg = region
            if ".elastic." in key:
                cfg["trainforge:jobs"][0]["preset"] = "elastic"
            if ".entrypoint." in key:  # a job with its own code states no runtime flags
                job = cfg["trainforge:jobs"][0]
                cfg["trainforge:jobs"][0] = {
                    k: job[k] for k in ("name", "team", "pool", "entrypoint")
                }
        try:
            check(cfg, reg)
        except StackError as e:
            problems = e.errors
            assert len(problems) >= 1
            mine = [p for p in problems if named in p or named.replace(".", "", 0) in p]
            assert mine, f"{key} = {value!r}: no line names {named}: {problems}"
            assert all(re.search(r"(is not valid|got|expected|unknown key)", p) for p in mine)
            rejected.append(value)
    assert rejected, f"{key}: every malformed value was accepted: {MALFORMED}"


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (
            lambda r: r["trainforge:nodePools"][0].update(instanceTypes=[]),
            "trainforge:nodePools[0].instanceTypes",
        ),
        (
            lambda r: r["trainforge:nodeGroups"][0].update(instanceTypes=None),
            "trainforge:nodeGroups[0].instanceTypes",
        ),
        (lambda r: r.update({"trainforge:services": {"x": 1}}), "trainforge:services"),
        (
            lambda r: r["trainforge:systemNodeGroup"].update(instanceType="m6i.hyper"),
            "trainforge:systemNodeGroup.instanceType",
        ),
        (
            lambda r: r["trainforge:jobs"][0].update(vocabSize=100000),
            "trainforge:jobs[0].vocabSize",
        ),
        (
            lambda r: r["trainforge-policy:waivers"][0].update(rule="TF_COST_JOB_CAPP"),
            "trainforge-policy:waivers[0].rule",
        ),
    ],
)
def test_the_issues_examples(edit, named):
    raw, region = base()
    edit(raw)
    with pytest.raises(StackError, match=re.escape(named)):
        check(raw, region)


def test_parse_and_instance_type_problems_come_in_one_report():
    raw, region = base()
    raw["trainforge:cluster"] = "9 bad"
    raw["trainforge:nodePools"][0]["instanceTypes"] = ["p5.nonexistent"]
    with pytest.raises(StackError) as e:
        check(raw, region)
    assert "trainforge:cluster" in str(e.value)
    assert "trainforge:nodePools[0].instanceTypes[0]" in str(e.value)


def test_a_region_that_is_not_one():
    raw, _ = base()
    with pytest.raises(StackError, match="aws:region: got 'us-westeros-1'; expected an AWS region"):
        check(raw, "us-westeros-1")


def test_the_committed_tables_are_generated_from_the_model():
    """docs/configuration.md's key tables; regenerate: python -m trainforge schema --docs
    docs/configuration.md (a table whose model is not declared yet is left as written)."""
    docs = (ROOT / schema.DOCS_PATH).read_text()
    assert schema.render_docs(docs)[0] == docs


def test_the_committed_schema_is_generated_from_the_model():
    """Regenerate: python -m trainforge schema --out schema/stack.schema.json"""
    assert (ROOT / schema.SCHEMA_PATH).read_text() == schema.schema_text()
