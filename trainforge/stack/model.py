"""The whole stack config: every area's keys, by namespace, and the keys no area declares.

`trainforge:` keys are flat (`trainforge:nodePools`, `trainforge:teams`, `trainforge:jobs`),
each declared by one area's `*Keys` model; `StackConfig` composes them. The plan's policy keys
live in their own namespace, `trainforge-policy:` (`PolicyKeys`). `NAMESPACES` is what the
JSON Schema (`python -m trainforge schema`) and the docs tables are generated from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from trainforge.stack.base import NS, StackModel, aliases, suggest
from trainforge.stack.fleet import FleetKeys
from trainforge.stack.jobs import JobKeys
from trainforge.stack.platform import PlatformKeys
from trainforge.stack.policy import NS as POLICY_NS
from trainforge.stack.policy import PolicyKeys
from trainforge.stack.services import ServiceKeys


class StackConfig(PlatformKeys, ServiceKeys, JobKeys, FleetKeys):
    """Every `trainforge:` key of Pulumi.<stack>.yaml (each declared in its area's module)."""


# namespace -> the model of its keys (the stack file writes them `<namespace>:<key>`)
NAMESPACES: dict[str, type[StackModel]] = {NS: StackConfig, POLICY_NS: PolicyKeys}


def declared_keys() -> list[str]:
    """Every key a stack file may hold in the namespaces trainforge owns, as written there."""
    return sorted(f"{ns}:{key}" for ns, model in NAMESPACES.items() for key in aliases(model))


def unknown_keys(
    raw: Mapping[str, Any] | Iterable[str], ns: str = NS, *, also: Iterable[str] = ()
) -> list[str]:
    """One error line per key of namespace `ns` that no area declares, with a did-you-mean.

    `raw` holds bare keys (`cluster`, `nodePools`: the part after `trainforge:`); `also` are
    further keys to tolerate. A misspelt key may be meant for the other namespace
    (`trainforge:waivers` -> `trainforge-policy:waivers`); the suggestion says so. This is the
    check platform/config.py's parse_config makes for `trainforge:` keys:

        errors.extend(unknown_keys(raw))
    """
    model = NAMESPACES[ns]
    known = aliases(model) | set(also)
    everywhere = declared_keys()
    out = []
    for key in raw:
        if key in known:
            continue
        hint = suggest(key, known)
        if not hint:  # the right key in the wrong namespace?
            hint = suggest(f"{ns}:{key}", [k for k in everywhere if not k.startswith(f"{ns}:")])
            if not hint:
                other = [k for k in everywhere if k.split(":", 1)[1] == key]
                hint = f" (did you mean {other[0]!r}?)" if other else ""
        out.append(f"{ns}:{key}: unknown key{hint}; known keys: {', '.join(sorted(known))}")
    return out
