"""Plan check: documentation values. A stack's configuration carries no value that only
documentation uses: it would deploy, and be wrong (an allow-list nobody is in, a reservation
or a principal of nobody's account).

Why: prod shipped TEST-NET allow-list ranges, a made-up capacity reservation id and principals
of AWS's documentation account, and the plan called it CLEAN: `pulumi up` would have opened
the API to addresses that route nowhere, failed to find the reservation (or been refused the
principals' access entries), after the plan said nothing was wrong.

What is refused (a finding naming the key, e.g. `trainforge:endpoint.publicAccessCidrs[0]`,
and the value), each class from its source:
- addresses and ranges reserved for documentation: 192.0.2.0/24, 198.51.100.0/24 and
  203.0.113.0/24 (RFC 5737, "TEST-NET-1/2/3", section 3: "addresses within these blocks do not
  legitimately appear on the public Internet"), and 2001:db8::/32 (RFC 3849, the IPv6
  documentation prefix); any CIDR or address inside one (a wider range that holds one is
  real);
- AWS account ids AWS's own documentation uses for examples: 111122223333, 444455556666 and
  123456789012 (the IAM User Guide's policy examples, e.g. "arn:aws:iam::111122223333:root",
  https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html,
  read 2026-11-29), inside an ARN or alone;
- resource ids spelled as placeholders: AWS's `EXAMPLE` suffix (`AKIAIOSFODNN7EXAMPLE`), and
  an id whose hex part counts up (`i-1234567890abcdef0`, `cr-0a1b2c3d4e5f60789`: the hex
  sequence 0a1b2c3d..., 1234567890abcdef, 0123456789abcdef, abcdef0123456789).
"""

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
    "'Before your first `pulumi up`', lists what a stack needs from you",
}
DOC_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)
DOC_ACCOUNTS = ("111122223333", "444455556666", "123456789012")
_ACCOUNT = re.compile(r"(?<!\d)(" + "|".join(DOC_ACCOUNTS) + r")(?!\d)")
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
    m = _ACCOUNT.search(text)
    if m:
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
            why = why_documentation(text)
            if why is None:
                continue
            findings.append(
                Finding(
                    key,
                    DOCUMENTATION_VALUE,
                    f"{key}: got {text!r}, a documentation value ({why}): valid is a "
                    "value of your own network or account",
                    RULES[DOCUMENTATION_VALUE],
                    names=frozenset({key, top}),
                )
            )
            lines.append(f"{key}: {text} ({why})")
    if not lines:
        return CheckResult()
    return CheckResult(findings, [Section("Documentation values in the stack", lines, lines)])
