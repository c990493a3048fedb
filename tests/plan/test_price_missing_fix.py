"""A cap or budget the price table cannot price (TF_COST_PRICE_MISSING): its fix is one a
stack's owner can apply, a ready waiver entry for the finding's resource that, pasted into the
stack with a reason, waives it (pasted as is, its placeholder reason is refused before the
program creates anything); what waiving costs is said and true; the maintainer's route
(the package's price table) comes second."""

from __future__ import annotations

import re

import pytest
import yaml
from test_plan_stacks import ROOT

from trainforge.plan import core, diff
from trainforge.plan.checks import cost_check
from trainforge.plan.runner import find_config_error
from trainforge.plan.waivers import WaiverError, parse_waivers

CAPS = {"teams": {"research": {"teamPerMonth": 5000}}}
# sa-east-1: the price table has no dated prices there (tests/plan/test_plan_cost.py)
OVERRIDES = {"aws:region": "sa-east-1", "trainforge-policy:costCaps": CAPS}


def test_the_fixs_waiver_entry_pasted_with_a_reason_waives_the_finding():
    result = core.plan_project(ROOT, "dev", standins=False, config_overrides=OVERRIDES)
    (f,) = [v for v in result.failing if v.rule == "TF_COST_PRICE_MISSING"]
    assert f.resource == "team/research"
    # what waiving costs, in the words of the cap's kind
    assert "team research's month stays unknown" in f.fix
    assert "does not check its $5,000.00/month budget" in f.fix
    # the user's route first, the maintainer's second
    assert f.fix.index("trainforge-policy:waivers") < f.fix.index("tools/regen_price_facts.py")
    entry = re.search(r"`(- \{.*?\})`", f.fix)
    assert entry, f.fix
    (waiver,) = yaml.safe_load(entry.group(1))
    assert waiver["reason"].startswith("<"), "a placeholder the user replaces"
    assert "reason replaced by yours (the placeholder is refused)" in f.fix
    # pasted as is: refused by the program's stack check (as under `pulumi up`), one line
    # naming the key, the placeholder and what is valid
    with pytest.raises(Exception) as e:
        core.plan_project(
            ROOT,
            "dev",
            standins=False,
            config_overrides={**OVERRIDES, "trainforge-policy:waivers": [waiver]},
        )
    error = str(find_config_error(e.value))
    line = (
        f"trainforge-policy:waivers[0].reason: got {waiver['reason']!r}; expected a reason a "
        "reviewer can read in place of the template's <...> placeholder: say why the rule does "
        "not apply here"
    )
    assert error.splitlines() == ["invalid stack configuration (1 problem(s)):", f"  - {line}"]
    waiver["reason"] = "AWS Budgets watches research's spend until sa-east-1 is priced"
    again = core.plan_project(
        ROOT,
        "dev",
        standins=False,
        config_overrides={**OVERRIDES, "trainforge-policy:waivers": [waiver]},
    )
    assert [v.rule for v in again.failing] == []
    assert [(v.rule, v.resource) for v in again.waived] == [
        ("TF_COST_PRICE_MISSING", "team/research")
    ]
    assert again.unused_waivers == []


@pytest.mark.parametrize(
    ("reason", "refused"),
    [
        ("<who watches the budget instead>", True),
        ("AWS Budgets watches it; see <runbook link>", True),
        ("jobs under 5 GPUs cost < $5/h and > 0", False),  # a comparison, not a placeholder
        ("AWS Budgets watches research until sa-east-1 is priced", False),
    ],
)
def test_a_reason_with_a_placeholder_in_it_is_refused(reason, refused):
    entry = {"resource": "team/research", "rule": "TF_COST_PRICE_MISSING", "reason": reason}
    if refused:
        with pytest.raises(WaiverError, match=r"^trainforge-policy:waivers\[0\]\.reason: got "):
            parse_waivers([entry], None)
    else:
        assert parse_waivers([entry], None)[0].reason == reason


def test_what_the_fix_says_stays_unknown_is_what_the_cost_report_leaves_unknown():
    result = core.plan_project(ROOT, "dev", standins=False, config_overrides=OVERRIDES)
    (section,) = [s for s in result.sections if s.title == cost_check.SECTION_TITLE]
    (team,) = [t for t in section.data["teams"] if t["name"] == "research"]
    assert team["monthEstimate"] is None


def test_the_pr_diffs_unknown_quota_ceiling_says_why():
    """`plan --diff`'s team table: an unknown ceiling is followed by the report's reason for it,
    not left as a bare `unknown`."""
    result = core.plan_project(ROOT, "dev", standins=False, config_overrides=OVERRIDES)
    (section,) = [s for s in result.sections if s.title == cost_check.SECTION_TITLE]
    new = section.data
    (team,) = [t for t in new["teams"] if t["name"] == "research"]
    assert team["quotaCeilingPerMonth"] is None and team["quotaCeiling"].startswith("unknown")
    text = "\n".join(diff.cost_markdown(None, new))
    assert f"Quota ceiling of research = {team['quotaCeiling']}" in text, text
