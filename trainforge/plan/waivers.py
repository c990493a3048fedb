"""Per-resource rule waivers, each with a written reason that every plan prints.

Waivers live in stack config, not in the program, because Pulumi resource options cannot carry
them through mocks or through the policy engine, and because a reviewer should see a waiver
change in the same file as the rest of the stack's settings. They have their own namespace,
`trainforge-policy:` (the model: trainforge/stack/policy.py):

    config:
      trainforge-policy:waivers:
        - resource: training-operator      # Pulumi name, URN, or namespace/Kind/name
          rule: CKV_K8S_16
          reason: the EFA device plugin needs /dev/infiniband; upstream chart, pinned

A waiver of an image rule (TRAINFORGE_DOCKER_HUB) names the image too (`image:
docker.io/grafana/grafana`) and covers that image only. A waiver without a reason, naming an
unknown rule, or of an image rule without its image, is a configuration error; one that covers
no finding of the plan is reported as stale (PlanResult.unused_waivers).
"""

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
    for w in waivers:
        if w.covers(rule, names, image):
            return w
    return None
