"""Per-resource rule waivers, each with a written reason that every plan prints.

Waivers live in stack config, not in the program, because Pulumi resource options cannot carry
them through mocks or through the policy engine, and because a reviewer should see a waiver
change in the same file as the rest of the stack's settings. They have their own namespace
(`trainforge-policy:`) so that the platform's strict `trainforge:` config parser, which rejects
unknown keys, never sees them:

    config:
      trainforge-policy:waivers:
        - resource: training-operator      # Pulumi name, URN, or namespace/Kind/name
          rule: CKV_K8S_16
          reason: the EFA device plugin needs /dev/infiniband; upstream chart, pinned

A waiver without a reason, or naming an unknown rule, is a configuration error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

CONFIG_KEY = "trainforge-policy:waivers"


class WaiverError(ValueError):
    """A malformed trainforge-policy:waivers entry (configuration error: exit 2)."""


@dataclass(frozen=True)
class Waiver:
    resource: str
    rule: str
    reason: str
    where: str = CONFIG_KEY  # e.g. trainforge-policy:waivers[2], for error messages

    def covers(self, rule: str, names: set[str]) -> bool:
        return self.rule == rule and self.resource in names


def parse_waivers(raw: Any, known_rules: set[str]) -> list[Waiver]:
    """Parse the config value (a list, or its JSON string as the engine hands it over)."""
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as e:
            raise WaiverError(f"{CONFIG_KEY}: not a list of mappings ({e})") from e
    if not isinstance(raw, list):
        raise WaiverError(
            f"{CONFIG_KEY}: got {type(raw).__name__}; expected a list of "
            "{{resource, rule, reason}} mappings"
        )
    out = []
    for i, item in enumerate(raw):
        where = f"{CONFIG_KEY}[{i}]"
        if not isinstance(item, dict):
            raise WaiverError(
                f"{where}: got {item!r}; expected a mapping with resource, rule, reason"
            )
        extra = set(item) - {"resource", "rule", "reason"}
        if extra:
            raise WaiverError(
                f"{where}: unknown keys {sorted(extra)}; valid: resource, rule, reason"
            )
        for key in ("resource", "rule", "reason"):
            if not isinstance(item.get(key), str) or not item[key].strip():
                raise WaiverError(
                    f"{where}.{key}: got {item.get(key)!r}; a non-empty string is required"
                    + (" (say why the rule does not apply here)" if key == "reason" else "")
                )
        if item["rule"] not in known_rules:
            raise WaiverError(
                f"{where}.rule: got {item['rule']!r}; valid rules: {', '.join(sorted(known_rules))}"
            )
        out.append(
            Waiver(item["resource"].strip(), item["rule"], item["reason"].strip(), where=where)
        )
    return out


def find_waiver(waivers: list[Waiver], rule: str, names: set[str]) -> Waiver | None:
    for w in waivers:
        if w.covers(rule, names):
            return w
    return None
