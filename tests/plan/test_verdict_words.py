"""The verdict says whole things: lines wrap (never cut mid-word) and an unknown cost says so.

Before, a finding's fix was cut at 300 characters and a warning at 200 (`... see docs/co…`: the
part to act on was the part cut), and a stack whose only job had no price read
`run costs $0.00 + 1 unknown in all`.
"""

from __future__ import annotations

from types import SimpleNamespace

from trainforge.plan import verdict

FIX = (
    "give the job a pool whose nodes hold its pods: "
    + "a longer explanation of what to change and why it matters for this job, " * 4
    + "as docs/configuration.md says (section Node pools)"
)
WARNING = "warning: " + "the team's quota is larger than its pools can hold, " * 4 + "docs/cost.md"


def result(jobs: list[dict], failing: list | None = None, warnings: list[str] = ()):
    sections = [
        SimpleNamespace(title=verdict.COST_TITLE, data={"fixedPerHourKnown": 1.0,
                        "fixedPerMonthKnown": 730.0, "jobs": jobs}, lines=[]),
        SimpleNamespace(title="Program warnings", data=None, lines=list(warnings)),
    ]  # fmt: skip
    return SimpleNamespace(
        failing=failing or [],
        waived=[],
        sections=sections,
        unused_waivers=[],
        validation={"pass": 1, "fail": 0, "unchecked": 0},
        inventory=SimpleNamespace(resources=[], to_create=1),  # the stack resource only
        objects=[],
    )


def job(name: str, per_hour: float | None, run: float | None) -> dict:
    return {"name": name, "team": "research", "onDemandPerHour": per_hour, "runCost": run,
            "admission": "runs"}  # fmt: skip


def test_a_long_fix_and_warning_wrap_into_whole_lines():
    finding = SimpleNamespace(rule="TF_X", resource="research/blog-ddp", message=FIX, fix=FIX)
    lines = verdict.verdict_lines(result([], [finding], [WARNING]), stack="dev")
    text = "\n".join(lines)
    assert "…" not in text
    assert all(len(line) <= verdict.WIDTH for line in lines), lines
    # every word of the fix is there, in order, and its last words too
    at = next(i for i, line in enumerate(lines) if line.startswith("      fix: "))
    fix_lines = [lines[at]] + [
        line for line in lines[at + 1 :] if line.startswith(" " * len("      fix: "))
    ]
    assert " ".join(" ".join(fix_lines).split()).removeprefix("fix: ") == " ".join(FIX.split())
    assert any(line.strip().endswith("docs/cost.md") for line in lines)
    md = "\n".join(verdict.verdict_markdown(result([], [finding]), stack="dev"))
    assert FIX in md and "…" not in md


def test_a_run_cost_without_any_price_says_unknown_and_names_the_job():
    lines = verdict.cost_lines(result([job("blog-ddp", None, None)]), None)
    assert lines[1] == (
        "      + jobs: 1 of 1 run at once, cost per hour unknown (1 job without a price: "
        "research/blog-ddp); run cost unknown (1 job without a price: research/blog-ddp)"
    )
    assert "$0.00" not in lines[1]


def test_a_partly_priced_stack_says_which_job_has_no_figure_and_why():
    jobs = [job("a", 2.0, 4.0), job("b", None, None), job("c", 3.0, None)]
    (line,) = verdict.cost_lines(result(jobs), None)[1:]
    assert line == (
        "      + jobs: 3 of 3 run at once, $5.00/h while running + unknown for 1 job without "
        "a price: research/b, each job on its own nodes; run costs $4.00 for the priced jobs + unknown for 1 job "
        "without a price: research/b and 1 job without a run length: research/c"
    )


def test_a_run_timed_by_its_deadline_makes_the_sum_a_ceiling():
    """The report's table says `<= $4.21` for a run timed by its activeDeadlineSeconds; the
    verdict's sum of it is a ceiling too (a newcomer's review: it read as a known cost)."""
    jobs = [job("a", 2.0, 4.0), {**job("b", 1.0, 1.0), "runCostBasis": "activeDeadlineSeconds"}]
    (line,) = verdict.cost_lines(result(jobs), None)[1:]
    assert line.endswith("; run costs at most $5.00 in all"), line
    (line,) = verdict.cost_lines(result(jobs[:1]), None)[1:]
    assert line.endswith("; run costs $4.00 in all"), line


def test_more_than_three_waiting_jobs_are_counted_and_sent_to_the_report():
    """Up to three waiting jobs get a line each; more are one count that points at the report."""
    waiting = [{**job(n, 1.0, 1.0), "admission": "waits"} for n in "abcd"]
    lines = verdict.cost_lines(result(waiting[:3]), None)
    assert len(lines) == 2 + 3 and not any("full report" in line for line in lines)
    lines = verdict.cost_lines(result(waiting), None)
    assert lines[2:] == ["      4 jobs wait or are never admitted (full report)"]


def test_a_verdict_past_the_first_screen_is_clipped_and_keeps_the_report_pointer():
    failing = [
        SimpleNamespace(rule=f"TF_{i}", resource=f"research/job-{i}", message=FIX, fix=FIX)
        for i in range(verdict.MAX_FINDINGS)
    ]
    lines = verdict.verdict_lines(result([], failing), report="build/plan/dev.txt", stack="dev")
    assert len(lines) == verdict.MAX_LINES
    assert lines[0] == "trainforge plan --stack dev: 5 finding(s) need a fix or a decision"
    assert lines[-1] == "Full report: build/plan/dev.txt"
    assert lines[-2] == "… (verdict clipped; see the full report)"


def test_a_new_unpriced_job_is_named_once_in_the_jobs_line():
    """Against a base, a job added without a price was named twice: `unknown added:
    research/cpu-eval`, then `+ unknown for 1 job without a price: research/cpu-eval`; the
    line names it once, with why. An unpriced job the change removes is still said."""
    base = {"fixedPerHourKnown": 1.0, "fixedPerMonthKnown": 730.0,
            "jobs": [job("a", 2.0, 4.0), job("gone", None, None)]}  # fmt: skip
    head = result([job("a", 2.0, 4.0), job("cpu-eval", None, None)])
    (line,) = verdict.cost_lines(head, {verdict.COST_TITLE: base})[1:]
    assert line.count("research/cpu-eval") == 2, line  # once per figure: $/h and run costs
    assert "unknown added" not in line, line
    assert "unknown removed: research/gone" in line, line
    assert "+ unknown for 1 job without a price: research/cpu-eval" in line, line


def test_a_platform_part_added_without_a_price_is_named_once():
    """`(-$672.69; unknown added: VPC interface endpoints) + unknown (VPC interface endpoints)`
    (plan --stack pe --diff <prod>): the part is named once, in the `+ unknown (...)` after the
    figure; a part the change removes is still said."""
    base = {"fixedPerHourKnown": 1.0, "fixedPerMonthKnown": 730.0, "jobs": [],
            "fixedUnknown": ["FSx for Lustre"]}  # fmt: skip
    head = result([])
    head.sections[0].data["fixedUnknown"] = ["VPC interface endpoints"]
    (line,) = verdict.cost_lines(head, {verdict.COST_TITLE: base})
    assert line == (
        "Cost: platform $1.00/h = $730.00/month (no change; unknown removed: FSx for Lustre) "
        "+ unknown (VPC interface endpoints)"
    )


def test_the_verdict_names_the_jobs_the_cost_model_sums():
    """The verdict's job lists and the figures beside them are one split of the rows
    (cost.row_groups): a base report's row without `admission` runs, a waiting job's run is
    paid but not in the $/h, a never-admitted job is in neither."""
    jobs = [
        {k: v for k, v in job("old", 1.0, 2.0).items() if k != "admission"},  # a base report's
        job("runs", 2.0, 4.0),
        {**job("waits", 4.0, 8.0), "admission": "waits"},
        {**job("never", 8.0, 16.0), "admission": "never"},
    ]
    totals = verdict.cost_totals({"jobs": jobs})
    assert totals is not None

    def names(key: str) -> list[str]:
        return [j["name"] for j in totals[key]]

    assert (names("running"), names("counted"), names("waiting")) == (
        ["old", "runs"],
        ["old", "runs", "waits"],
        ["waits", "never"],
    )
    assert (totals["runningPerHour"], totals["jobsPerHour"], totals["runCosts"]) == (3.0, 3.0, 14.0)
    line = verdict.cost_lines(result(jobs), None)[1]
    assert line.startswith("      + jobs: 2 of 4 run at once, $3.00/h while running"), line
    assert "run costs $14.00 in all" in line, line
