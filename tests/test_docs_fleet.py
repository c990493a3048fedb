"""docs/fleet.md quotes what `trainforge plan --stack fleet` computes: its fleet section, the
manager's fixed cost and the example's checkpoint findings; the README points at the plan of
the fleet. The example fleet is planned once (tests.conftest.shipped_plan)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import shipped_plan
from trainforge.plan.checks import fleet as FC

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs/fleet.md").read_text()


def _block(starts: str) -> tuple[str, list[str]]:
    intro, rest = DOC.split("```\n" + starts, 1)
    return intro, [ln for ln in (starts + rest.split("```", 1)[0]).splitlines() if ln.strip()]


def test_the_quoted_fleet_section_is_the_plans():
    intro, lines = _block(FC.TITLE)
    assert "--full" in intro.rstrip().rsplit("\n\n", 1)[-1], "the doc must name the flag"
    section = next(s for s in shipped_plan("fleet").sections if s.title == FC.TITLE)
    printed = [section.title + ":", *(f"  {ln}" for ln in section.lines)]
    assert len(lines) == len(printed), (lines, printed)
    for want, got in zip(lines, printed, strict=True):
        # `...` in the doc stands for text left out (the image's tag)
        pieces, pos = want.split("..."), 0
        assert got.startswith(pieces[0]) and got.endswith(pieces[-1]), (want, got)
        for piece in pieces:
            found = got.find(piece, pos)
            assert found >= 0, f"docs/fleet.md quotes {want!r}; the plan prints {got!r}"
            pos = found + len(piece)


def test_the_managers_cost_is_the_plans():
    """The platform total of the manager's cost section, up to its unknown items."""
    lines = [ln for s in shipped_plan("fleet").sections for ln in s.lines]
    total = next(ln.split("total: ", 1)[1] for ln in lines if ln.strip().startswith("total: "))
    assert f"`{total.split(',')[0]}`" in DOC, total


def test_the_example_checkpoint_sentence_says_what_the_plan_finds():
    """docs/fleet.md, "Data": the workers are granted the manager's bucket, the plan is CLEAN
    and states the cross-region traffic of the worker in another region."""
    result = shipped_plan("fleet")
    found = {v.resource for v in result.failing if v.rule == FC.RULE_CHECKPOINTS}
    doc = " ".join(DOC.split())
    said = "both workers are granted it, so `plan --stack fleet` is CLEAN" in doc
    assert said == (not found and result.clean), found
    section = next(s for s in result.sections if s.title == FC.TITLE)
    assert any("usw2 reads and writes it across regions" in ln for ln in section.lines)
    assert "states that usw2 reads and writes it across regions" in doc
    assert "so this is not priced" in doc  # no inter-region transfer row in the price facts


def test_the_readme_points_at_the_plan_of_the_fleet():
    readme = (ROOT / "README.md").read_text()
    fleet = readme.split("## Fleet\n", 1)[1].split("\n## ", 1)[0]
    assert "python -m trainforge plan --stack fleet" in fleet and "docs/fleet.md" in fleet


def test_the_quoted_job_cost_lines_are_the_plans():
    """docs/fleet.md, "What it costs": the manager's Cost lines of gpt-small-fsdp, one row per
    worker and the line that says which figure the caps count, are what the plan prints."""
    from trainforge.plan.checks import cost_check  # noqa: PLC0415

    section = next(s for s in shipped_plan("fleet").sections if s.title == cost_check.SECTION_TITLE)
    printed = [ln.strip() for ln in section.lines]
    block = DOC.split("From `plan --stack fleet --full`:\n\n```\n", 1)[1].split("```", 1)[0]
    quoted = [ln.strip() for ln in block.splitlines() if ln.strip()]
    assert len(quoted) == 3 and all(q in printed for q in quoted), (quoted, printed)


def test_the_recorded_run_sentence_is_the_plans():
    """docs/fleet.md, "What it costs": the run gpt-small-fsdp's object records (what
    `trainforge status` on a worker counts) and each worker's run, as the fleet section has
    them; no worker runs it longer, so the section has no `recorded run:` line."""
    from trainforge.jobs.duration import duration_text  # noqa: PLC0415

    section = next(s for s in shipped_plan("fleet").sections if s.title == FC.TITLE)
    gpt = next(j for j in section.data["jobs"] if j["job"] == "gpt-small-fsdp")
    runs = {w["worker"]: duration_text(w["runSeconds"]) for w in gpt["workers"]}
    doc = " ".join(DOC.split())
    said = (
        f"`gpt-small-fsdp` records {duration_text(gpt['recordedSeconds'])} (the manager's pool "
        f"launches a g6.xlarge or a g5.xlarge, and the object records the longer run), use1 "
        f"runs it in {runs['use1']} and usw2 in {runs['usw2']}: the recorded figure is not "
        "shorter than the run on either worker"
    )
    assert said in doc, said
    assert all(round(w["runSeconds"]) <= gpt["recordedSeconds"] for w in gpt["workers"])
    assert not any("recorded run:" in ln for ln in section.lines)
