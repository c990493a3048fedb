"""Plan check: a stack's configuration carries no value only documentation uses (TEST-NET
ranges, placeholder ids, AWS's example accounts): it would deploy and be wrong. README.md,
"What prod needs from you", says what to put instead."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import Any

from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.stack.file import decode_value

DOCUMENTATION_VALUE = "TRAINFORGE_DOCUMENTATION_VALUE"
RULES = {
    DOCUMENTATION_VALUE: "replace the documentation value with your own (your office/VPN "
    "ranges, your reservation id, your account's principals) or drop the key; README.md, "
    "'What prod needs from you', lists what a stack needs from you",
}
# RFC 5737 section 3 (TEST-NET-1/2/3: "do not legitimately appear on the public Internet") and
# RFC 3849 (the IPv6 documentation prefix); a range inside one is refused, a wider one is real
DOC_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)
# the IAM User Guide's policy examples (reference_policies_elements_principal.html, 2026-11-29)
DOC_ACCOUNTS = ("111122223333", "444455556666", "123456789012")
_ACCOUNT = re.compile(r"(?<!\d)(" + "|".join(DOC_ACCOUNTS) + r")(?!\d)")
# placeholder ids: AWS's EXAMPLE suffix, and ids whose hex part counts up (i-1234567890abcdef0)
_COUNTING = ("0a1b2c3d", "1234567890abcdef", "0123456789abcdef", "abcdef0123456789")
_RESOURCE_ID = re.compile(r"\b[a-z]{1,8}-([0-9a-f]{8,17})\b")


def why_documentation(value: str) -> str | None:
    """Why `value` is a documentation value (which class), or None."""
    text = value.strip()
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError:
        net = None
    if net is not None:
        for doc in DOC_NETWORKS:
            if net.version == doc.version and net.subnet_of(doc):  # type: ignore[arg-type]
                rfc = "RFC 3849" if doc.version == 6 else "RFC 5737"
                return f"{doc} is reserved for documentation by {rfc}"
        return None
    if m := _ACCOUNT.search(text):
        return f"account {m.group(1)} is AWS's documentation example account"
    if "EXAMPLE" in text:
        return "AWS's EXAMPLE placeholder"
    for m in _RESOURCE_ID.finditer(text.lower()):
        if any(m.group(1).startswith(seq[:8]) for seq in _COUNTING):
            return f"the id {m.group(0)} is a counting placeholder, not a real resource id"
    return None


def _walk(value: Any, key: str) -> Iterator[tuple[str, str]]:
    """(key path, text) of every string in a config value; secrets are not read."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return
        for k, v in value.items():
            yield from _walk(v, f"{key}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{key}[{i}]")
    elif isinstance(value, str):
        yield key, value


def check(ctx: PlanContext) -> CheckResult:
    findings: list[Finding] = []
    lines: list[str] = []
    config = dict(ctx.inventory.config or {})
    for top in sorted(config):
        for key, text in _walk(decode_value(config[top]), top):
            if (why := why_documentation(text)) is None:
                continue
            msg = (
                f"{key}: got {text!r}, a documentation value ({why}): valid is a value of your "
                "own network or account"
            )
            fix, names = RULES[DOCUMENTATION_VALUE], frozenset({key, top})
            findings.append(Finding(key, DOCUMENTATION_VALUE, msg, fix, names=names))
            lines.append(f"{key}: {text} ({why})")
    if not lines:
        return CheckResult()
    return CheckResult(findings, [Section("Documentation values in the stack", lines, lines)])
