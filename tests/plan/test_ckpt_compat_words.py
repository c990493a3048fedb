"""A resume verdict's two phrasings (the review's `checkpoint:` line and the verdict table's
cell), pinned to the strings plan/ckpt_compat.py wrote at 432a5f74."""

from __future__ import annotations

from trainforge.plan import ckpt_compat as CC
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


def _replaced(
    fsx: bool, mirror: bool, base_stack: str = "prod", found: list | None = None
) -> Compat:
    """The prod job replaced by one whose pods no longer mount the FSx claim (`fsx.enabled:
    false`: jobs/pod.py puts an emptyDir at the same path) and, unless `mirror`, without its
    S3 mirror (`checkpoint.s3Mirror: false`), classified as `plan --diff` does
    (checks/resume.diff_check on the emitted objects); the base a plan folder of `base_stack`;
    the check's findings go to `found`."""
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
    records = [{"urn": r.urn} for r in prod.inventory.resources[:1]]  # urn:pulumi:prod::...
    assert records[0]["urn"].startswith("urn:pulumi:prod::")
    other = [{"urn": records[0]["urn"].replace(":prod::", f":{base_stack}::", 1)}]
    base = SimpleNamespace(objects=objects, sections=sections, records=other)
    head = SimpleNamespace(objects={**objects, ident: doc}, sections=sections, records=records)
    res = resume.diff_check(SimpleNamespace(jobs={ident: ch}, base=base, head=head))
    (found if found is not None else []).extend(res.findings)
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


def test_another_stacks_base_does_not_resume_from_a_mirror_named_at_deploy():
    """`plan --stack pe --diff <prod's plan folder>`: both mirrors' buckets are unknown, but each
    stack has its own; the plan says it cannot tell, not 'resumes from the S3 mirror'."""
    c = _replaced(fsx=False, mirror=True, base_stack="pe")
    assert c.verdict == CC.UNSURE, c.line()
    assert (
        c.line()
        == c.short()
        == (
            "may start at step 0: its checkpoints were on PersistentVolumeClaim fsx-vision, which "
            "this change removes (the new pods' directory is on a pod-local emptyDir), and on the S3 "
            "mirror (its bucket is named at deploy); the plan cannot tell whether the new pods' "
            "mirror is the same bucket: the base is stack pe and the head stack prod, each with its "
            "own bucket, named at deploy"
        )
    )


def _mirrored(old_s3: str, new_s3: str) -> Compat:
    """A replacement whose directory moves off the claim onto an emptyDir, with these mirrors."""
    old = CC.JobState(
        None, fingerprint=1, store=CC.Store(("claim", "fsx", "", "/c"), "claim fsx", True, old_s3)
    )
    new = CC.JobState(
        None, fingerprint=1, store=CC.Store(("emptyDir", "{}", "", "/c"), "emptyDir", False, new_s3)
    )
    return CC.classify(old, new)


def test_a_mirror_resumes_only_where_the_plan_knows_it_is_the_same_one():
    u = CC.UNKNOWN
    assert _mirrored(f"s3://{u}/v/checkpoints/j", f"s3://{u}/v/checkpoints/j").source
    assert _mirrored("s3://b/v/checkpoints/j", "s3://b/v/checkpoints/j").source
    # another known bucket, or another prefix in any bucket: the runtime never lists the old one
    assert _mirrored("s3://b/v/checkpoints/j", "s3://c/v/checkpoints/j").verdict == CC.LOST
    assert _mirrored(f"s3://{u}/v/checkpoints/j", f"s3://{u}/w/checkpoints/j").verdict == CC.LOST
    # a known bucket against one named at deploy: maybe the same, maybe not
    c = _mirrored("s3://b/v/checkpoints/j", f"s3://{u}/v/checkpoints/j")
    assert (c.verdict, c.line().rsplit(": ", 1)[1]) == (
        CC.UNSURE,
        "the base's bucket is b and the other's is named at deploy",
    )


def test_a_replacement_that_loses_its_checkpoints_is_a_decision():
    """'starts at step 0: its checkpoints were on ..., which this change removes' was told in
    words only (the plan was CLEAN); it is a finding like TF_CKPT_CANNOT_RESUME: decided by a
    fix or by a waiver with its reason, which review() attaches as for every diff check."""
    from trainforge.plan.checks import resume
    from trainforge.plan.core import attach_waiver, known_rule_ids
    from trainforge.plan.waivers import parse_waivers

    found: list = []
    lost = _replaced(fsx=False, mirror=False, found=found)
    (f,) = found
    assert (f.rule, f.resource) == ("TF_CKPT_LOST", "vision/PyTorchJob/gpt-350m-fsdp")
    assert f.message == f"replaced, and the new job {lost.line()}"
    assert f.fix == resume.RULES["TF_CKPT_LOST"] and "waive TF_CKPT_LOST" in f.fix
    assert "checkpoint.s3Mirror" in f.fix
    why = "the old run is finished; the new one is meant to start over"
    entry = {"resource": "gpt-350m-fsdp", "rule": "TF_CKPT_LOST", "reason": why}
    (w,) = parse_waivers([entry], known_rule_ids())  # as the stack's config is read
    assert attach_waiver(f, [w], {f.resource, *f.names}).waived == why
    # the mirror kept (it resumes), or a mirror the plan cannot place (said, not decided)
    for kwargs in ({"mirror": True}, {"mirror": True, "base_stack": "pe"}):
        found.clear()
        assert _replaced(fsx=False, found=found, **kwargs).verdict != CC.LOST
        assert not found, found
