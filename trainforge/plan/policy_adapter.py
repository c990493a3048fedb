"""Glue between pulumi-policy and the pure rules, kept outside policy/__main__.py so that it
can be tested without starting a PolicyPack (which starts a gRPC server and blocks).

The policy engine hands a validation its inputs behind a proxy that raises on unknown values;
the rules expect plain data with "<unknown>" where the cloud has not decided yet, the same
shape the offline plan records, so the two always judge alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from trainforge.plan.checks import rules as R
from trainforge.plan.checks import validate as V
from trainforge.plan.manifests import is_k8s_object_type, to_object
from trainforge.plan.runner import Recorded
from trainforge.plan.waivers import CONFIG_KEY, Waiver, find_waiver, parse_waivers
from trainforge.stack.file import read_stack_file

WAIVERS_ENV = "TRAINFORGE_STACK_CONFIG"  # path to Pulumi.<stack>.yaml holding the waivers

_SENTINELS = {
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",
    "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
    "04da6b54-80e4-46f7-96ec-b56ff0331ba9",
    "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
    "030794c1-ac77-496b-92df-f27374a8bd58",
    "e48ece36-62e2-4504-bad9-02848725956a",
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
}


def plain_props(value: Any) -> Any:
    """Copy policy-engine props into plain dicts/lists, unknowns as "<unknown>"."""
    try:
        from pulumi_policy.proxy import UnknownValueError
    except ImportError:  # pragma: no cover - pulumi-policy is pinned in the lock

        class UnknownValueError(Exception):  # type: ignore[no-redef]
            pass

    def conv(v: Any) -> Any:
        if isinstance(v, str):
            return R.UNKNOWN if v in _SENTINELS else v
        if isinstance(v, Mapping):
            out = {}
            for k in list(v.keys()):
                try:
                    out[k] = conv(v[k])
                except UnknownValueError:
                    out[k] = R.UNKNOWN
            return out
        if isinstance(v, Sequence) and not isinstance(v, bytes | bytearray):
            out_list = []
            for i in range(len(v)):
                try:
                    out_list.append(conv(v[i]))
                except UnknownValueError:
                    out_list.append(R.UNKNOWN)
            return out_list
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return v

    return conv(value)


def load_waivers(env: Mapping[str, str] | None = None) -> list[Waiver]:
    """Waivers from the stack file named by $TRAINFORGE_STACK_CONFIG (none when unset)."""
    path = (env if env is not None else os.environ).get(WAIVERS_ENV)
    if not path:
        return []
    # Plan checks' rules too: the same stack file waives them for the offline plan, and a
    # waiver the pack did not know would make it refuse the whole file.
    from trainforge.plan.core import known_rule_ids  # noqa: PLC0415 - every check module

    return parse_waivers(read_stack_file(path).get(CONFIG_KEY), known_rule_ids())


def validation_messages(type_: str, name: str, urn: str, props: dict) -> list[tuple[str, str]]:
    """(rule id, message) from the Kubernetes validation of one pulumi-kubernetes object."""
    if not is_k8s_object_type(type_):
        return []
    obj = to_object(Recorded(urn, type_, name, None, True, props))
    return [(f.rule, f.message) for f in V.validate_object(obj.doc)[1]]


def unwaived(
    waivers: list[Waiver], rule: str, urn: str, name: str, messages: list[str]
) -> list[str]:
    """Messages left after waivers. Each is judged on its own: an image rule's message names
    its image, and a waiver covers that image only (trainforge.stack.policy.IMAGE_RULES)."""
    return [
        m for m in messages if not find_waiver(waivers, rule, {urn, name}, R.finding_image(rule, m))
    ]
