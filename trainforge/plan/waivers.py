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

A waiver without a reason, or naming an unknown rule, is a configuration error.
"""

from __future__ import annotations

from trainforge.stack.policy import WAIVERS_KEY as CONFIG_KEY
from trainforge.stack.policy import Waiver, WaiverError, parse_waivers

__all__ = ["CONFIG_KEY", "Waiver", "WaiverError", "find_waiver", "parse_waivers"]


def find_waiver(waivers: list[Waiver], rule: str, names: set[str]) -> Waiver | None:
    for w in waivers:
        if w.covers(rule, names):
            return w
    return None
