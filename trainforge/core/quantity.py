"""Kubernetes resource quantities ("500m", "32Gi", "1.5") as exact numbers.

Needed to check a job against its team's ResourceQuota and its pool's node size at
preview time, without a Kubernetes client.

The rules are apimachinery's `ParseQuantity` (pkg/api/resource/quantity.go at v0.35.7, the
pinned Kubernetes minor): a sign, a decimal number, then either a suffix (binary Ki..Ei,
decimal n, u, m, k, M..E) or a decimal exponent (e3, E-6); a nonzero value rounds up, away
from zero, to a whole nano (so a request of 0.1n is 1n: "if you want some resources, you
should get some resources"); a binary-suffixed value is capped at the largest int64.
apimachinery's own test cases run through it (tests/fixtures/upstream/quantity.yaml). Spaces
around the text are trimmed, as the API server's JSON decoding (`UnmarshalJSON`) does before
it parses.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_SUFFIX = {
    "": 1,
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    **_BINARY,
}
_NUMBER = r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+"
_RE = re.compile(rf"^([+-]?)({_NUMBER})(?:[eE]([-+]?[0-9]+))?([a-zA-Z]*)$")
_NANO = 10**9
MAX_BINARY = 2**63 - 1  # apimachinery math.go `maxAllowed`: a binary quantity's cap


def _pattern(sign: str) -> str:
    """The grammar `parse_quantity` accepts, as one regular expression (JSON Schema's ECMA
    dialect and Python's agree on it): a number, then an exponent or one suffix of _SUFFIX."""
    suffixes = "|".join(sorted((k for k in _SUFFIX if k), key=lambda k: (-len(k), k)))
    return rf"^{sign}(?:{_NUMBER})(?:[eE][-+]?[0-9]+|{suffixes})?$"


# What parse_quantity accepts, for a schema (no surrounding spaces: the text as written), and
# the same without a minus sign (a request, a limit, a size). tests/test_upstream_quantity.py
# proves both equal to the parser on apimachinery's cases.
PATTERN = _pattern("[+-]?")
NONNEGATIVE_PATTERN = _pattern(r"\+?")


def parse_quantity(text: str | int | float) -> Fraction:
    """The quantity's value in base units (cores, bytes, count); ValueError if malformed."""
    if isinstance(text, bool):
        raise ValueError(f"not a quantity: {text!r}")
    if isinstance(text, int | float):
        text = str(text)
    m = _RE.match(text.strip())
    if not m or m.group(4) not in _SUFFIX or (m.group(3) and m.group(4)):
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    value = Fraction(m.group(2)) * _SUFFIX[m.group(4)]
    if m.group(3):
        value *= Fraction(10) ** int(m.group(3))
    value = Fraction(math.ceil(value * _NANO), _NANO)  # ParseQuantity: inf.RoundUp at Nano
    if m.group(4) in _BINARY:
        value = min(value, Fraction(MAX_BINARY))
    return -value if m.group(1) == "-" else value


def plain(value: Fraction | int) -> str:
    """A count or a number of cores in positional decimal, never in exponent form: a million
    cores is "1000000", not `float`'s "1e+06". Whole values print exactly; others as `:g` does
    (6 significant digits) while that has no exponent, else exact to the nano, the finest
    amount `parse_quantity` keeps. Not apimachinery's canonical `String()` ("94800m", "1M"):
    the plan's sentences count cores and GPUs in plain numbers ("94.8 cores"); what it prints
    reads back through `parse_quantity` as the same amount."""
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    text = f"{float(value):g}"
    if "e" not in text:
        return text
    nanos = round(value * _NANO)
    sign, nanos = ("-" if nanos < 0 else ""), abs(nanos)
    whole, frac = divmod(nanos, _NANO)
    return f"{sign}{whole}.{frac:09d}".rstrip("0").rstrip(".")


def gibibytes(value: Fraction | int) -> str:
    """Bytes in Gi with 4 significant digits, never in exponent form ("2.902e+04Gi"): how the
    plan writes memory (its scheduling and queue sections)."""
    gi = float(Fraction(value) / 2**30)
    return f"{gi:.4g}Gi" if gi < 1000 else f"{gi:,.0f}Gi"


def figure(resource: str, value: Fraction) -> str:
    """One amount of `resource` as the plan prints it: memory in Gi, anything else `plain`."""
    return gibibytes(value) if resource == "memory" else plain(value)


def format_mebibytes(value: Fraction | int) -> str:
    """Bytes rounded down to whole Mi, the unit used for derived sizes such as /dev/shm."""
    return f"{int(value) // 2**20}Mi"


def counted(resource: str, value: Fraction) -> Fraction:
    """A pod's request (or a quota) of `resource` as Kueue and the scheduler count it: CPU in
    whole millicores, anything else in whole units, rounded up, per pod before the pod count
    multiplies it. apimachinery's Quantity.MilliValue and Value round up; Kueue reads every
    amount through them (v0.19.2, commit 8eab687 of 2026-08-20: pkg/resources/requests.go
    `ResourceValue`, amount.go `AmountFromQuantity`, pkg/workload/workload.go
    `totalRequestsFromPodSets`: one pod's requests converted, then `Mul(count)`), and so does
    the scheduler (`Resource.Add`: MilliValue for cpu). So 3 pods of `100u` are 3m, not 0.3m."""
    unit = Fraction(1, 1000) if resource == "cpu" else Fraction(1)
    return math.ceil(value / unit) * unit
