"""A small, offline AWS IAM policy evaluator for the plan's IAM rehearsal.

Why our own, and what it models: docs/rehearsals.md, IAM rehearsal (looked for 2026-11-23:
moto 5.2.5 evaluates only `StringEquals`, moto/iam/policy_conditions.py; policyuniverse parses
but does not evaluate). The rules: the AWS IAM User Guide ("Policy evaluation logic", "IAM JSON
policy elements", "Condition operators", single- vs multi-valued keys), KMS's "Key policies".
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import ipaddress
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import eq, ge, gt, le, lt
from typing import Any

ContextValue = str | bool | int | float | Sequence[str]


@dataclass(frozen=True)
class Request:
    """One authorization request: who, what, on which resource, with which context keys."""

    principal: str  # role ARN (arn:aws:iam::<acct>:role/<name>) or service (svc:<name>)
    action: str  # "s3:ListBucket"
    resource: str  # ARN, or "*" for actions without resource-level permissions
    context: Mapping[str, ContextValue] = field(default_factory=dict)
    account: str = ""  # the principal's account ("" for service principals)
    resource_account: str = ""  # the resource owner's account ("" = same as the principal's)

    def key(self, name: str) -> tuple[bool, list[str]]:
        """(present, values as strings) for a context key, looked up case-insensitively."""
        lowered = name.lower()
        for k, v in self.context.items():
            if k.lower() == lowered:
                if isinstance(v, bool):
                    v = "true" if v else "false"
                return True, [str(x) for x in (v if isinstance(v, list | tuple) else [v])]
        return False, []


def policy_doc(value: Any) -> dict | None:
    """An IAM policy document from a JSON string or dict; None when unknown or unparsable."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class Policy:
    """A policy document with a name for explanations (e.g. "role research / inline")."""

    name: str
    document: Mapping[str, Any]

    def statements(self) -> list[Mapping[str, Any]]:
        st = self.document.get("Statement", [])
        return [st] if isinstance(st, Mapping) else list(st)


@dataclass(frozen=True)
class Match:
    policy: str
    sid: str


@dataclass
class Decision:
    """The outcome and why: the decisive statements, or what was missing."""

    allowed: bool
    reason: str
    allows: list[Match] = field(default_factory=list)
    denies: list[Match] = field(default_factory=list)
    # statements whose Action and Resource matched but whose Condition did not hold
    near_misses: list[str] = field(default_factory=list)

    def explain(self) -> str:
        return f"{self.reason}: {'; '.join(self.near_misses)}" if self.near_misses else self.reason


def as_list(v: Any) -> list[Any]:
    return [] if v is None else list(v) if isinstance(v, list | tuple) else [v]


@functools.lru_cache(maxsize=4096)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A pattern's regex, built once: a plan matches a few hundred patterns ~10,000 times."""
    regex = "".join(
        ".*" if c == "*" else "." if c == "?" else re.escape(_LITERAL.get(c, c)) for c in pattern
    )
    return re.compile(regex, flags=re.DOTALL)


def _glob(pattern: str, value: str) -> bool:
    """IAM wildcards: `*` any run, `?` one character; nothing else is special."""
    return _glob_regex(pattern).fullmatch(value) is not None


_VAR = re.compile(r"\$\{([^}]+)\}")
# A `*` or `?` that a policy variable puts into a pattern is that character, not a wildcard
# (`${*}`, or a request value such as a tag holding `*`): substitution writes it as a stand-in
# character, which the wildcard matcher reads as the literal and `literal()` turns back.
_STAND_IN = str.maketrans({"*": "\x00", "?": "\x01"})
_LITERAL = {"\x00": "*", "\x01": "?"}


def literal(value: str) -> str:
    """A substituted value for an exact comparison: stand-ins back to `*` and `?`."""
    return value.translate(str.maketrans(_LITERAL))


def substitute(value: str, request: Request) -> str | None:
    """Replace policy variables (`${aws:username}`, `${*}`); None when a key is absent.

    AWS: a policy variable whose key is not in the request context makes that element not
    match (reference_policies_variables.html, "Request information that you can use for
    policy variables").
    """
    missing = False

    def repl(m: re.Match[str]) -> str:
        nonlocal missing
        name = m.group(1)
        if name in ("*", "?", "$"):  # ${*}, ${?}, ${$}: the character itself
            return name.translate(_STAND_IN)
        name, _, default = name.partition(", '")
        present, vals = request.key(name.strip())
        if present and len(vals) == 1:
            return vals[0].translate(_STAND_IN)
        if default:
            return default.rstrip("'").translate(_STAND_IN)
        missing = True
        return ""

    out = _VAR.sub(repl, value)
    return None if missing else out


def action_matches(patterns: Any, action: str) -> bool:
    """Actions match case-insensitively."""
    return any(_glob(str(p).lower(), action.lower()) for p in as_list(patterns))


def resource_matches(patterns: Any, resource: str, request: Request) -> bool:
    pats = (substitute(p, request) if "${" in p else p for p in map(str, as_list(patterns)))
    return any(p is not None and _glob(p, resource) for p in pats)


def principal_match(principal: Any, request: Request) -> str | None:
    """How a resource policy's Principal names the caller: "direct", "account" (delegation
    to the account's IAM policies), or None."""
    if principal == "*":
        return "direct"
    if not isinstance(principal, Mapping):
        return None
    caller = request.principal
    for kind, values in principal.items():
        for v in map(str, as_list(values)):
            if (kind == "Service" and caller == f"svc:{v}") or (kind == "AWS" and v == "*"):
                return "direct"
            if kind != "AWS" or caller.startswith("svc:"):
                continue
            if v == caller:
                return "direct"
            if v in (request.account, f"arn:aws:iam::{request.account}:root") or (
                v.endswith(":root") and v.split(":")[4:5] == [request.account]
            ):
                return "account"
    return None


def _date(x: str) -> dt.datetime:
    if re.fullmatch(r"-?\d+(\.\d+)?", x):
        return dt.datetime.fromtimestamp(float(x), tz=dt.UTC)
    d = dt.datetime.fromisoformat(x.replace("Z", "+00:00"))
    return d if d.tzinfo else d.replace(tzinfo=dt.UTC)


def arn_parts(arn: str) -> list[str] | None:
    """An ARN's six colon-separated parts (the last keeps its colons), None if it has fewer."""
    parts = arn.split(":", 5)
    return parts if len(parts) == 6 else None


def arn_like(pattern: str, value: str) -> bool:
    """ArnLike/ArnEquals: six colon-separated parts, each matched with wildcards."""
    p_parts, v_parts = arn_parts(pattern), arn_parts(value)
    if p_parts is None or v_parts is None:
        return False
    return all(_glob(p, v) for p, v in zip(p_parts, v_parts, strict=True))


def _ip_in(pattern: str, value: str) -> bool:
    return ipaddress.ip_address(value) in ipaddress.ip_network(pattern, strict=False)


def _compare(parse: Callable[[str], Any], op: Callable[[Any, Any], bool]) -> Callable:
    """A Numeric/Date operator: the request's value `op` the policy's, both parsed."""
    return lambda p, v: op(parse(v), parse(p))


_COMPARISONS = {"Equals": eq, "LessThan": lt, "LessThanEquals": le, "GreaterThan": gt,
                "GreaterThanEquals": ge}  # fmt: skip

# positive operator -> (single-value matcher(policy_value, request_value), substitutes variables)
_MATCHERS: dict[str, tuple[Callable[[str, str], bool], bool]] = {
    "StringEquals": (eq, True),
    "StringEqualsIgnoreCase": (lambda p, v: p.lower() == v.lower(), True),
    "StringLike": (_glob, True),
    "ArnEquals": (arn_like, True),
    "ArnLike": (arn_like, True),
    "Bool": (lambda p, v: p.lower() == v.lower(), False),
    "BinaryEquals": (lambda p, v: base64.b64decode(p) == base64.b64decode(v), False),
    "IpAddress": (_ip_in, False),
    **{f"Numeric{name}": (_compare(float, op), False) for name, op in _COMPARISONS.items()},
    **{f"Date{name}": (_compare(_date, op), False) for name, op in _COMPARISONS.items()},
}
# the negated operators: each the "Not" form of one above
_NEGATED = {"StringNotEquals", "StringNotEqualsIgnoreCase", "StringNotLike", "ArnNotEquals",
            "ArnNotLike", "NotIpAddress", "NumericNotEquals", "DateNotEquals"}  # fmt: skip


def _matcher(base: str) -> tuple[bool, Callable[[str, str], bool], bool]:
    """(negated, single-value matcher, substitutes policy variables) of a base operator."""
    negated = base in _NEGATED
    found = _MATCHERS.get(base.replace("Not", "", 1) if negated else base)
    if found is None:
        raise ValueError(f"unknown condition operator {base!r}")
    return negated, *found


def _holds(single: Callable[[str, str], bool], p: str, v: str) -> bool:
    """A single-value match; a value the operator cannot parse (a number, date, address or
    base64 that is not one) matches nothing."""
    try:
        return single(p, v)
    except ValueError:
        return False


def condition_holds(operator: str, key: str, policy_values: Any, request: Request) -> bool:
    """One (operator, key, values) triple of a Condition block against the request."""
    qualifier = ""
    if ":" in operator:
        qualifier, _, operator = operator.partition(":")
    if_exists = operator.endswith("IfExists") and operator != "IfExists"
    base = operator[: -len("IfExists")] if if_exists else operator
    present, values = request.key(key)
    pvals = [str(p).lower() if isinstance(p, bool) else str(p) for p in as_list(policy_values)]

    if base == "Null":
        want_absent = any(p.lower() == "true" for p in pvals)
        return (not present or not values) if want_absent else (present and bool(values))

    negated, single, variables = _matcher(base)
    if variables:
        pvals = [s for s in (substitute(p, request) if "${" in p else p for p in pvals) if s]
        if single not in (_glob, arn_like):  # an exact comparison: no wildcards to keep apart
            pvals = [literal(p) for p in pvals]

    def matches_any(v: str) -> bool:
        return any(_holds(single, p, v) for p in pvals)

    # (a negated operator holds for a value that matches none of the policy's values)
    if qualifier == "ForAllValues":
        # every request value must satisfy the operator; vacuously true when absent/empty
        return all(matches_any(v) != negated for v in values)
    if qualifier == "ForAnyValue":
        return any(matches_any(v) != negated for v in values)
    if qualifier:
        raise ValueError(f"unknown condition set operator {qualifier!r}")

    if not present:
        # documented missing-key rule: IfExists -> true; negated -> true; otherwise false
        return if_exists or negated
    # a multivalued key without a set operator: each value is compared (as ForAnyValue for
    # positive operators; a negated operator holds only if no value matches)
    return any(matches_any(v) for v in values) != negated


def condition_failures(conditions: Mapping[str, Any] | None, request: Request) -> list[str]:
    """Each (operator key values) of the block that does not hold, described for a reader."""
    out: list[str] = []
    for operator, keys in (conditions or {}).items():
        for key, values in (keys or {}).items():
            if not condition_holds(operator, key, values, request):
                present, actual = request.key(key)
                got = f"request has {actual}" if present else "key absent from the request"
                out.append(f"{operator} {key} {as_list(values)} ({got})")
    return out


def _element(st: Mapping[str, Any], name: str, matches: Callable[[Any], bool]) -> bool | None:
    """Whether the statement's `name` (or `Not<name>`) element matches; None without either."""
    if name in st:
        return matches(st[name])
    if f"Not{name}" in st:
        return not matches(st[f"Not{name}"])
    return None


def _statement_applies(
    st: Mapping[str, Any], request: Request, *, resource_policy: bool
) -> tuple[str | None, list[str]]:
    """(how the statement names the principal, its failing conditions); None when its action,
    resource or principal does not match."""
    if not _element(st, "Action", lambda p: action_matches(p, request.action)):
        return None, []
    resources = _element(st, "Resource", lambda p: resource_matches(p, request.resource, request))
    if resources is False or (resources is None and not resource_policy):
        return None, []  # identity policies must name a resource
    kind: str | None = "identity"
    if resource_policy:
        if "Principal" in st:
            kind = principal_match(st["Principal"], request)
        elif "NotPrincipal" in st:
            kind = None if principal_match(st["NotPrincipal"], request) else "direct"
        else:
            kind = None
    return kind, condition_failures(st.get("Condition"), request) if kind else []


def _scan(
    policies: Sequence[Policy], request: Request, *, resource_policy: bool
) -> tuple[list[Match], list[tuple[Match, str]], list[str]]:
    """Matching Deny statements, matching Allow statements (with principal kind), misses."""
    denies: list[Match] = []
    allows: list[tuple[Match, str]] = []
    misses: list[str] = []
    for pol in policies:
        for i, st in enumerate(pol.statements()):
            sid = str(st.get("Sid") or f"#{i}")
            kind, failed = _statement_applies(st, request, resource_policy=resource_policy)
            if kind is None:
                continue
            effect = str(st.get("Effect", ""))
            if failed:
                if effect == "Allow":
                    misses.append(f"{pol.name} {sid} does not apply: {', '.join(failed)}")
            elif effect == "Deny":
                denies.append(Match(pol.name, sid))
            elif effect == "Allow":
                allows.append((Match(pol.name, sid), kind))
    return denies, allows, misses


def evaluate(
    request: Request,
    identity: Sequence[Policy] = (),
    resource: Sequence[Policy] = (),
    *,
    key_policy: bool = False,
) -> Decision:
    """Decide one request against identity policies and (at most a few) resource policies.

    `key_policy=True` applies the KMS rule: the resource (key) policy must allow, directly
    or by delegating to the caller's account, in which case an identity Allow is needed too.
    """
    i_deny, i_allow, i_miss = _scan(identity, request, resource_policy=False)
    r_deny, r_allow, r_miss = _scan(resource, request, resource_policy=True)
    denies = i_deny + r_deny
    if denies:
        d = denies[0]
        return Decision(False, f"explicit deny by {d.policy} statement {d.sid}", denies=denies)
    id_ok = bool(i_allow)
    delegated = any(k == "account" for _, k in r_allow)
    resource_ok = any(k == "direct" for _, k in r_allow) or (delegated and id_ok)
    same_account = not request.resource_account or request.resource_account == request.account
    if key_policy:
        allowed = resource_ok
    else:  # across accounts both sides must allow
        allowed = (id_ok or resource_ok) if same_account else (id_ok and resource_ok)
    if allowed:
        return Decision(True, "allowed", allows=[m for m, _ in i_allow + r_allow])
    if key_policy and delegated:
        why = "key policy delegates to the account's IAM policies, and none allows it"
    elif key_policy:
        why = "the key policy neither allows the principal nor delegates to its account"
    elif not same_account and id_ok:
        why = "cross-account: the resource policy does not allow it"
    elif not same_account and resource_ok:
        why = "cross-account: no identity policy allows it"
    else:
        why = f"no statement allows {request.action} on {request.resource}"
    return Decision(False, f"implicit deny: {why}", near_misses=i_miss + r_miss)


def statement_within(ours: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    """Is every request `ours` allows also allowed by `ref`, judged on the document?

    Conservative and structural: `ours`' actions and resources must be covered by `ref`'s
    patterns, and every condition of `ref` must appear in `ours` with the same operator and
    key and values that are a subset (so `ours` is at least as narrow).
    """
    if ours.get("Effect") != "Allow" or ref.get("Effect") != "Allow":
        return False
    if "NotAction" in ours or "NotResource" in ours or "NotAction" in ref or "NotResource" in ref:
        return False
    if not all(action_matches(ref.get("Action"), str(a)) for a in as_list(ours.get("Action"))):
        return False
    ref_res = as_list(ref.get("Resource"))
    if not all(any(_glob(str(p), str(r)) for p in ref_res) for r in as_list(ours.get("Resource"))):
        return False
    ours_cond = {
        (op.lower(), k.lower()): {str(v) for v in as_list(vals)}
        for op, keys in (ours.get("Condition") or {}).items()
        for k, vals in keys.items()
    }
    for op, keys in (ref.get("Condition") or {}).items():
        for k, vals in keys.items():
            mine = ours_cond.get((op.lower(), k.lower()))
            if mine is None or not mine <= {str(v) for v in as_list(vals)}:
                return False
    return True


def beyond_reference(ours: Policy, reference: Sequence[Policy]) -> list[str]:
    """Statements (by Sid) of `ours` that no single reference statement covers."""
    ref_statements = [st for p in reference for st in p.statements()]
    return [
        str(st.get("Sid") or f"#{i}")
        for i, st in enumerate(ours.statements())
        if st.get("Effect") == "Allow" and not any(statement_within(st, r) for r in ref_statements)
    ]
