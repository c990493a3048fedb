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


def _replaced(fsx: bool, mirror: bool) -> Compat:
    """The prod job replaced by one whose pods no longer mount the FSx claim (`fsx.enabled:
    false`: jobs/pod.py puts an emptyDir at the same path) and, unless `mirror`, without its
    S3 mirror (`checkpoint.s3Mirror: false`), classified as `plan --diff` does
    (checks/resume.diff_check on the emitted objects)."""
    import copy
    from types import SimpleNamespace

    from tests.conftest import shipped_plan
    from trainforge.jobs import backends
    from trainforge.plan import job_diff
    from trainforge.plan.checks import resume
    from trainforge.plan.job_view import job_view
    from trainforge.training.contract import CHECKPOINT_S3

    prod = shipped_plan("prod")
    objects = {o.ident: o.doc for o in prod.objects}
    sections = {s.title: s.data for s in prod.sections}
    ident = "vision/PyTorchJob/gpt-350m-fsdp"
    doc = copy.deepcopy(objects[ident])
    for tmpl in backends.pod_templates(doc):
        for vol in tmpl.spec["volumes"]:
            if vol["name"] == "fsx" and not fsx:
                vol.pop("persistentVolumeClaim")
                vol["emptyDir"] = {}
        for c in tmpl.spec["containers"]:
            if not mirror:
                c["env"] = [e for e in c.get("env") or [] if e.get("name") != CHECKPOINT_S3]
                cmd = c.get("command") or []
                if "--checkpoint-s3" in cmd:
                    i = cmd.index("--checkpoint-s3")
                    del cmd[i : i + 2]
    old, new = job_view(objects[ident]), job_view(doc)
    assert old.checkpoint_s3, "the prod job mirrors its checkpoints to S3"
    ch = job_diff.job_change(old, new, sections, sections, replaced=True)
    base = SimpleNamespace(objects=objects, sections=sections)
    head = SimpleNamespace(objects={**objects, ident: doc}, sections=sections)
    resume.diff_check(SimpleNamespace(jobs={ident: ch}, base=base, head=head))
    assert ch.compat is not None
    return ch.compat


def test_a_replacement_whose_checkpoints_this_change_removes_starts_at_step_0():
    """FSx off and the S3 mirror off in one PR: the new pods' /fsx is a pod-local emptyDir and
    nothing holds the old checkpoints; not 'resumes' because the path string is the same."""
    lost = _replaced(fsx=False, mirror=False)
    assert (
        lost.line()
        == lost.short()
        == (
            "starts at step 0: its checkpoints were on PersistentVolumeClaim fsx-vision and the S3 "
            "mirror (its bucket is named at deploy), which this change removes (the new pods' "
            "directory is on a pod-local emptyDir)"
        )
    )
    kept = _replaced(fsx=False, mirror=True)  # the mirror remains: the runtime downloads it
    assert kept.line().startswith("resumes from the S3 mirror (its bucket is named at deploy)")
    assert _replaced(fsx=True, mirror=False).line() == "resumes"  # the same claim and path
