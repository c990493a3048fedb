"""No test's answer depends on which test ran before it in the same process (tests/conftest.py,
`_fresh_process_caches`). Each pair here runs the leaking test first, as pytest runs a file's
tests in order (and `-n 2 --dist loadfile` one file after another on a worker): the second
test fails when the first one's state reaches it."""

from __future__ import annotations

import json
from pathlib import Path

import pulumi

from trainforge.plan.mocks import TrainforgeMocks, run_mocked
from trainforge.platform import instance_types

# Offered in us-west-2 (the mocks' region where a stack names none) and not in us-east-1, in
# the offline plan's EC2 data (moto's bundled offerings, plan/mocks._offerings).
WEST_ONLY = "p5e.48xlarge"


def test_a_program_run_of_a_us_east_1_stack() -> None:
    """What every test of a prod plan does: the program runs with its stack's engine config."""
    assert run_mocked(lambda: pulumi.export("region", pulumi.Config("aws").get("region")),
                      {"aws:region": "us-east-1"}).outputs["region"] == "us-east-1"  # fmt: skip


def test_code_under_mocks_alone_reads_no_earlier_program_s_region() -> None:
    """Platform code a test calls under Pulumi's mocks, without a program run of its own (the
    pool tests), reads no stack's region: the mocks' own, as in a fresh process (the last
    program's aws:region stayed in pulumi's config and decided which types were offered)."""
    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))
    assert instance_types.offered_in_region((WEST_ONLY,)) == {WEST_ONLY}
    assert "offered in this region" in instance_types.lookup_error("pool", "nope.large")


_LEDGER: list[Path] = []  # the first test's run.json, for the second


def test_a_ledger_begins_an_attempt(tmp_path) -> None:
    """What the ledger tests do (tests/training/test_loop_checks.py): rank 0 begins one."""
    from trainforge.training.ledger import RUN_FILE, RunLedger

    RunLedger(tmp_path, rank=0, world_size=1, log=lambda _: None).begin_attempt()
    _LEDGER[:] = list(tmp_path.rglob(RUN_FILE))
    assert len(_LEDGER) == 1


def test_a_restore_notes_nothing_in_another_test_s_ledger() -> None:
    """CheckpointManager.restore's note (resume_note) goes to the ledger of this process's run
    in progress: here there is none, and the earlier test's file stays as it wrote it."""
    from trainforge.training import resume_note

    before = [json.loads(p.read_text()) for p in _LEDGER]
    resume_note.note_resumed(9)  # what CheckpointManager.restore does
    assert [json.loads(p.read_text()) for p in _LEDGER] == before
