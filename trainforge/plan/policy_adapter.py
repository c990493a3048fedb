"""Glue between pulumi-policy and the pure rules, testable without starting a PolicyPack
(a blocking gRPC server). The engine's unknowns become "<unknown>", as the plan records them."""

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


def plain_props(value: Any) -> Any:
    """Copy policy-engine props into plain dicts/lists, unknowns as "<unknown>"."""
    from pulumi_policy import proxy

    sentinels = {v for k, v in vars(proxy).items() if k.startswith("UNKNOWN_")}

    def at(container: Any, key: Any) -> Any:
        try:
            return conv(container[key])
        except proxy.UnknownValueError:
            return R.UNKNOWN

    def conv(v: Any) -> Any:
        if isinstance(v, str):
            return R.UNKNOWN if v in sentinels else v
        if isinstance(v, Mapping):
            return {k: at(v, k) for k in list(v.keys())}
        if isinstance(v, Sequence) and not isinstance(v, bytes | bytearray):
            return [at(v, i) for i in range(len(v))]
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return v

    return conv(value)


def load_waivers(env: Mapping[str, str] | None = None) -> list[Waiver]:
    """Waivers from the stack file named by $TRAINFORGE_STACK_CONFIG (none when unset)."""
    path = (env if env is not None else os.environ).get(WAIVERS_ENV)
    if not path:
        return []
    # every check's rule ids: the same file waives them for the plan, and an unknown id
    # would make the pack refuse the whole file
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
    """Messages left after waivers, each on its own (an image rule's waiver covers one image)."""
    return [
        m for m in messages if not find_waiver(waivers, rule, {urn, name}, R.finding_image(rule, m))
    ]
