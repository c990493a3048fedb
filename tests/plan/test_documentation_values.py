"""Documentation values refused: a stack that carries TEST-NET ranges (RFC 5737, RFC 3849),
AWS's example account ids or counting placeholder ids is a finding naming the key and the
value; the shipped prod carries none and plans CLEAN (issue 41: prod shipped
203.0.113.0/24, 198.51.100.0/24, cr-0a1b2c3d4e5f60789 and 111122223333 principals, CLEAN)."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import ROOT, prod_own_values, shipped_plan
from trainforge.plan import core
from trainforge.plan.checks import documentation_values as D
from trainforge.stack.file import read_stack_file


@pytest.mark.parametrize(
    "value",
    [
        "203.0.113.0/24",
        "198.51.100.0/24",
        "192.0.2.10",
        "2001:db8:1::/48",
        "arn:aws:iam::111122223333:role/PlatformAdmin",
        "arn:aws:iam::123456789012:role/X",
        "cr-0a1b2c3d4e5f60789",
        "i-1234567890abcdef0",
        "AKIAIOSFODNN7EXAMPLE",
    ],
)
def test_documentation_values(value):
    assert D.why_documentation(value)


@pytest.mark.parametrize(
    "value",
    ["0.0.0.0/0", "10.40.0.0/16", "52.94.76.0/22", "cr-07f3a9c1b2d4e5f60", "efa-training",
     "arn:aws:iam::210987654321:role/X", "p4d.24xlarge", "us-east-1"],
)  # fmt: skip
def test_real_values(value):
    assert D.why_documentation(value) is None


def test_shipped_prod_is_clean_and_carries_no_documentation_value():
    config = read_stack_file(ROOT / "Pulumi.prod.yaml").engine()
    for key, value in config.items():
        for path, text in D._walk(json.loads(value) if value[:1] in "[{" else value, key):
            assert D.why_documentation(text) is None, (path, text)
    result = shipped_plan("prod")
    assert result.clean, [v.message for v in result.failing]


def test_the_old_prod_values_are_findings_naming_key_and_value():
    own = prod_own_values()
    old = {
        "trainforge:endpoint": json.dumps(
            {"publicAccessCidrs": ["203.0.113.0/24", "198.51.100.0/24"]}
        ),
        "trainforge:admins": json.dumps(["arn:aws:iam::111122223333:role/PlatformAdmin"]),
        "trainforge:nodeGroups": own["trainforge:nodeGroups"].replace(
            "cr-07f3a9c1b2d4e5f60", "cr-0a1b2c3d4e5f60789"
        ),
    }
    result = core.plan_project(ROOT, "prod", standins=False, config_overrides=old)
    found = [v for v in result.failing if v.rule == D.DOCUMENTATION_VALUE]
    assert all(f"{v.resource}: got " in v.message for v in found)
    found = {v.message.split(", a documentation value")[0] for v in found}
    assert found == {
        "trainforge:endpoint.publicAccessCidrs[0]: got '203.0.113.0/24'",
        "trainforge:endpoint.publicAccessCidrs[1]: got '198.51.100.0/24'",
        "trainforge:admins[0]: got 'arn:aws:iam::111122223333:role/PlatformAdmin'",
        "trainforge:nodeGroups[0].capacityReservationId: got 'cr-0a1b2c3d4e5f60789'",
    }


def test_a_secret_config_value_is_not_read():
    """A `secure:` value (Pulumi's encrypted secret) is skipped, never decrypted or shown; the
    plain values beside it are judged."""
    value = {"token": {"secure": "AAABAM...192.0.2.1"}, "cidr": "192.0.2.0/24"}
    assert list(D._walk(value, "trainforge:x")) == [("trainforge:x.cidr", "192.0.2.0/24")]


def test_the_fix_names_a_readme_section_that_exists():
    """The finding's fix sends the reader to a README section: it named 'Before your first
    `pulumi up`', which README.md does not have."""
    (section,) = re.findall(r"README\.md, '([^']+)'", D.RULES[D.DOCUMENTATION_VALUE])
    headings = re.findall(r"^#+ (.+)$", (ROOT / "README.md").read_text(), re.M)
    assert section in headings, headings
