"""`live/` reads the plan's models through their public names only.

Why: the live commands (status, why, wait, spend) reuse the plan's Kueue model and price
table; a private name (`_amount` once) is one the plan may change without a thought for
`live/`, so the two drift apart silently. Checked on the source: every name `live/` imports
from `trainforge.plan`, and every attribute it reads of a plan module it imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

LIVE = Path(__file__).resolve().parents[2] / "trainforge" / "live"


def private_plan_names(source: str) -> list[str]:
    """`module.name` for each private name the source takes from `trainforge.plan`."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}  # local name -> the plan module it is
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trainforge.plan"):
            for a in node.names:
                if a.name.startswith("_"):
                    out.append(f"{node.module}.{a.name}")
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("trainforge.plan"):
                    aliases[a.asname or a.name] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            out.append(f"{aliases[node.value.id]}.{node.attr}")
    return out


def test_live_imports_no_private_name_of_the_plan() -> None:
    found = {
        str(p.relative_to(LIVE)): names
        for p in sorted(LIVE.rglob("*.py"))
        if (names := private_plan_names(p.read_text()))
    }
    assert found == {}


def test_the_check_sees_a_private_import_and_a_private_attribute() -> None:
    src = (
        "from trainforge.plan.checks import queues as sim\n"
        "from trainforge.plan.kueue import _amount\n"
        "x = sim._amount(1)\ny = sim.amount(1)\n"
    )
    assert sorted(private_plan_names(src)) == [
        "trainforge.plan.checks.queues._amount",
        "trainforge.plan.kueue._amount",
    ]
