"""The reasons Kueue's flavor assigner writes, in its words from the same data, so the plan's
text reads as Kueue's condition message and `pending.outlook` reads both alike
(tests/plan/test_kueue_model.py). Source: kubernetes-sigs/kueue release-0.19 c90ed700c1
(2026-08-22), read 2026-11-30:
pkg/scheduler/flavorassigner/flavorassigner.go:1071 (resource unavailable), :1220 (flavor
not found), :1243 (untolerated taint), :1252 (node affinity), :1350 and :1368 (quota),
tas_flavorassigner.go:182 and :200 (topology); the amounts as pkg/resources/
resource_formatter.go `ResourceQuantityString` writes them (apimachinery Quantity.String).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY = {1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}


def _decimal(mantissa: int, exponent: int) -> str:
    """Quantity.String of a DecimalSI int64Amount (AsCanonicalBytes): trailing zeros into the
    exponent, lowered to a multiple of 3 for its suffix."""
    if mantissa == 0:
        return "0"
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    shift = exponent % 3
    return f"{mantissa * 10**shift}{_DECIMAL[exponent - shift]}"


def quantity(resource: str, value: Fraction) -> str:
    """ResourceQuantityString: cpu in millicores (DecimalSI); memory, ephemeral-storage and
    hugepages-* in bytes as BinarySI's canonical (a power-of-1024 suffix where exact, else and
    under 1024 DecimalSI); anything else DecimalSI."""
    if resource == "cpu":
        return _decimal(math.ceil(value * 1000), -3)
    v = math.ceil(value)
    binary = resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")
    if not binary or abs(v) < 1024:
        return _decimal(v, 0)
    power = 0
    while v % 1024 == 0 and power < 6:
        v, power = v // 1024, power + 1
    return f"{v}{_BINARY[power]}" if power else _decimal(v, 0)


# RFC 3339 as Go's time.Parse(time.RFC3339) reads it: a fraction after the seconds (9 digits read)
_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)")


def _go_time(stamp: str) -> str:
    """A metav1.Time as Go's %s prints it: time.Time.String ("2006-01-02 15:04:05.999999999
    -0700 MST", trailing fraction zeros dropped) in the Local zone UnmarshalJSON moves it to
    (apimachinery v0.36.2, Kueue 0.19's, pkg/apis/meta/v1/time.go:117 `pt.Local()`; read
    2026-11-30). Kueue runs on gcr.io/distroless/static (release-0.19 Dockerfile:3), no TZ
    set: UTC. A CRD object's fraction reaches Kueue as written; a stamp Go cannot parse is
    returned as written."""
    m = _RFC3339.fullmatch(stamp)
    if m is None:
        return stamp
    zone = "+00:00" if m[3] == "Z" else m[3]
    when = datetime.fromisoformat(m[1] + zone).astimezone(UTC)
    frac = (m[2] or "")[:9].rstrip("0")
    return when.strftime("%Y-%m-%d %H:%M:%S") + (f".{frac}" if frac else "") + " +0000 UTC"


def taint(t: Mapping[str, Any]) -> str:
    """A corev1.Taint value as Go's %s prints it (Taint's String has a pointer receiver):
    {key value effect timeAdded}, a nil timeAdded as <nil>."""
    added = t.get("timeAdded")
    when = _go_time(str(added)) if added else "<nil>"
    return f"{{{t.get('key', '')} {t.get('value', '')} {t.get('effect', '')} {when}}}"


def untolerated(t: Mapping[str, Any], flavor: str) -> str:
    return f"untolerated taint {taint(t)} in flavor {flavor}"


def no_affinity(flavor: str) -> str:
    return f"flavor {flavor} doesn't match node affinity"


def not_found(flavor: str) -> str:
    return f"flavor {flavor} not found"


def unavailable(resource: str) -> str:
    return f"resource {resource} unavailable in ClusterQueue"


def no_tas(flavor: str) -> str:
    return f'Flavor "{flavor}" does not support TopologyAwareScheduling'


def only_tas(flavor: str) -> str:
    return f'Flavor "{flavor}" supports only TopologyAwareScheduling'


def no_level(flavor: str) -> str:
    """tas_flavorassigner.go, the same function as `no_tas`: the topology lacks the level."""
    return f'Flavor "{flavor}" does not contain the requested level'


def over_capacity(r: str, f: str, assumed: Fraction, request: Fraction, most: Fraction) -> str:
    return over_words(r, f, quantity(r, assumed), quantity(r, request), quantity(r, most))


def over_words(r: str, f: str, assumed: str, request: str, most: str) -> str:
    """`over_capacity` of amounts as written (pending.py reads its message back with it)."""
    return (
        f"insufficient quota for {r} in flavor {f}, previously considered podsets requests "
        f"({assumed}) + current podset request ({request}) > maximum capacity ({most})"
    )


def short(r: str, f: str, needed: Fraction) -> str:
    return f"insufficient unused quota for {r} in flavor {f}, {quantity(r, needed)} more needed"


POD_SET = "couldn't assign flavors to pod set "


def message(status: Mapping[str, list[str]]) -> str:
    """Assignment.Message (flavorassigner.go:228): each pod set with reasons, in order, its
    reasons sorted and joined by ", " (Status.Message), the pod sets by "; "."""
    return "; ".join(f"{POD_SET}{ps}: {', '.join(sorted(r))}" for ps, r in status.items() if r)
