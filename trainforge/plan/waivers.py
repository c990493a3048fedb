"""Per-resource rule waivers with a written reason, in stack config (`trainforge-policy:waivers`,
trainforge/stack/policy.py; docs/configuration.md), where a reviewer sees them beside the stack."""

from __future__ import annotations

from trainforge.stack.policy import WAIVERS_KEY as CONFIG_KEY
from trainforge.stack.policy import Waiver, WaiverError, parse_waivers

__all__ = ["CONFIG_KEY", "Waiver", "WaiverError", "find_waiver", "parse_waivers", "stale_note"]


def stale_note(w: Waiver) -> str:
    """The line every plan prints for a waiver that covers no finding (a stale waiver)."""
    what = (
        f"no {w.rule} finding of {w.resource} is about image {w.image} now"
        if w.image
        else "the rule passes there now"
    )
    return f"{w.where} ({w.describe()}) covers nothing: {what}; remove the waiver"


def find_waiver(
    waivers: list[Waiver], rule: str, names: set[str], image: str | None = None
) -> Waiver | None:
    """The waiver covering a finding of `rule` on a resource known by `names`; `image`: the
    image an image rule's finding is about (trainforge.stack.policy.IMAGE_RULES)."""
    return next((w for w in waivers if w.covers(rule, names, image)), None)
