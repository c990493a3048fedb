"""The queue simulation's branches one by one (Kueue v0.19 semantics, plan/checks/queues.py),
in memory and fast: the cases a mutation run of the simulation found untested
(docs/rehearsals.md, "Mutation testing"). The whole-plan cases are in test_check_queues.py."""

from __future__ import annotations

from tests.plan.test_check_queues import F, _queue, _run, _work  # noqa: F401
from trainforge.plan.checks import queues as Q  # noqa: F401
