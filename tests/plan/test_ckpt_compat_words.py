"""A resume verdict's two phrasings (the review's `checkpoint:` line and the verdict table's
cell), pinned to the strings plan/ckpt_compat.py wrote at 432a5f74."""

from __future__ import annotations

from trainforge.plan.ckpt_compat import CANNOT, NOT_CHECKED, RESETS, RESUMES, Compat

CAVEATS = [
    "--lr 0.001 -> 0.0003 is NOT applied to the resumed run: x",
    "--weight-decay 0.1 -> 0.2 is NOT applied to the resumed run (y)",
]


def test_a_reset_with_caveats_reads_in_full_and_in_short():
    resets = ["lr schedule: --steps 10 -> 20; warmup", "RNG: ranks 2-3 have no saved stream"]
    c = Compat(RESETS, resets=resets, caveats=CAVEATS)
    assert c.line() == (
        "resumes with a reset (lr schedule: --steps 10 -> 20; warmup; RNG: ranks 2-3 have no "
        "saved stream); --lr 0.001 -> 0.0003 is NOT applied to the resumed run: x; "
        "--weight-decay 0.1 -> 0.2 is NOT applied to the resumed run (y)"
    )
    assert c.short() == (
        "resumes with a reset (lr schedule, RNG); --lr 0.001 -> 0.0003 NOT applied; "
        "--weight-decay 0.1 -> 0.2 NOT applied"
    )


def test_a_blocking_verdict_names_its_first_difference_in_short():
    c = Compat(CANNOT, "model.w differs; the restore fails", differ=["model.w (1,) -> (2,)"])
    assert c.line() == "cannot resume: model.w differs; the restore fails"
    assert c.short() == "cannot resume: model.w (1,) -> (2,)"


def test_a_detail_is_short_only_where_it_is_the_reason():
    assert Compat(NOT_CHECKED, "own code").short() == "resume not checked: own code"
    same = Compat(RESUMES, "same state fingerprint")
    assert (same.line(), same.short()) == ("resumes: same state fingerprint", "resumes")
