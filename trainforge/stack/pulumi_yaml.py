"""How `pulumi up` reads a plain YAML scalar in a stack file: the one model of it.

Why: Pulumi reads `Pulumi.<stack>.yaml` with Go's YAML library, gopkg.in/yaml.v3 (YAML 1.2
core rules, mostly), while PyYAML reads YAML 1.1. The two disagree on plain (unquoted) scalars,
so a stack the plan read one way ran another way on `pulumi up`: `--lr, 3e-5` was the string
"3e-5" to the plan and the number 3e-05 to Pulumi, which the job parser refuses. The stack
reader (trainforge.stack.file) resolves plain scalars here, and every YAML writer that prints
stack entries (`trainforge import`) dumps with the same resolver, so a string that Pulumi would
read as something else is quoted.

Sources, read 2026-12-01:
- pulumi/pulumi v3.259.0 (newest tag in the mirror, 2026-08-19): sdk/go.mod `gopkg.in/yaml.v3
  v3.0.1`; sdk/go/common/encoding/marshal.go (`yaml.Unmarshal` of yaml.v3);
  sdk/go/common/workspace/loaders.go LoadProjectStackBytes (decoded into `any`, re-encoded,
  decoded into config.Value); sdk/go/common/resource/config/object.go unmarshalObject (int ->
  int64, float64 kept, time.Time -> `v.String()`) and MarshalString (bool/int/float handed to
  the program as Go JSON, structures as JSON).
- go-yaml/yaml v3.0.1 (f6f7691b): resolve.go `resolve` (the table below) and decode.go
  `scalar` (a plain timestamp decoded into `any` is a time.Time).

| plain scalar                          | PyYAML (1.1)        | Pulumi (yaml.v3)          |
|---------------------------------------|---------------------|---------------------------|
| `3e-5`, `1e3`, `08`                   | string              | float (0.00003, 1000, 8)  |
| `yes`, `no`, `on`, `off`, `y`, `n`    | true / false        | string                    |
| `0o17`                                | string              | int 15                    |
| `017`, `0x1F`, `0b101`, `1_000`       | int                 | int (same)                |
| `1:30` (sexagesimal)                  | int 90              | string                    |
| `.inf`, `-.inf`, `.nan`               | float               | float; Go's JSON has no   |
|                                       |                     | infinity or NaN: refused  |
| `2026-12-01`                          | datetime.date       | "2026-12-01 00:00:00      |
|                                       |                     | +0000 UTC" (time.String)  |

Quoted scalars and block scalars (`|`, `>`) are strings in both. Floats reach the program as
Go's JSON writes them (strconv 'f' format, shortest; exponent form below 1e-6 or from 1e21),
so an integral float (`1e3`, `2.0`) is an int to the program: `go_number` returns that.
"""

from __future__ import annotations

import datetime
import math
import re
from typing import Any

STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
MERGE = "tag:yaml.org,2002:merge"
TIMESTAMP = "tag:yaml.org,2002:timestamp"

# go-yaml v3.0.1 resolve.go resolveMapList: the only words with a meaning
_WORDS: dict[str, tuple[str, Any]] = {
    **{w: (BOOL, True) for w in ("true", "True", "TRUE")},
    **{w: (BOOL, False) for w in ("false", "False", "FALSE")},
    **{w: (NULL, None) for w in ("", "~", "null", "Null", "NULL")},
    **{w: (FLOAT, math.nan) for w in (".nan", ".NaN", ".NAN")},
    **{w: (FLOAT, math.inf) for w in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{w: (FLOAT, -math.inf) for w in ("-.inf", "-.Inf", "-.INF")},
    "<<": (MERGE, "<<"),
}
# resolve.go resolveTable: the first characters that may start anything but a string
_HINTS = set("+-0123456789yYnNtTfFoO~.")
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# resolve.go allowedTimestampFormats (Go time layouts: 1-2 digit month, day, hour, minute,
# second; optional fraction; `Z07:00` is Z or +hh:mm)
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:(?:[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?(Z|[+-]\d{2}:\d{2}))"
    r"|(?: (\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?))?"
)
_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = 2**64 - 1


def _go_parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64) then ParseUint: an optional sign, then 0x/0o/0b or a
    leading 0 (octal) or decimal; None where Go fails (bad digit, out of range)."""
    sign, body = 1, text
    if body[:1] in "+-":
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    lower = body.lower()
    base, digits = 10, body
    if lower.startswith(("0x", "0o", "0b")):
        base, digits = {"x": 16, "o": 8, "b": 2}[lower[1]], body[2:]
    elif len(body) > 1 and body[0] == "0":
        base, digits = 8, body[1:]
    allowed = "0123456789abcdef"[:base]
    if not digits or any(c not in allowed for c in digits.lower()):
        return None
    value = sign * int(digits, base)
    if _INT64[0] <= value <= _INT64[1]:
        return value
    if text[:1] not in "+-" and value <= _UINT64:  # ParseUint takes no sign
        return value
    return None


def _timestamp(m: re.Match[str]) -> str | None:
    """The text Pulumi hands over for a plain timestamp: Go's `time.Time.String()`
    (`2006-01-02 15:04:05.999999999 -0700 MST`). An offset other than Z is a fixed zone
    without a name (written `+0200 +0200`), as time.Parse makes on a machine whose own zone
    is UTC. None where Go's time.Parse refuses the date or time (month 13, 25:00)."""
    year, month, day = int(m[1]), int(m[2]), int(m[3])
    start = 4 if m[4] else 9 if m[9] else 0
    hour, minute, second = (int(m[start + i]) for i in range(3)) if start else (0, 0, 0)
    frac = (m[start + 3] or "") if start else ""
    try:
        datetime.datetime(year, month, day, hour, minute, second)
    except ValueError:
        return None
    zone = m[8] or "Z"
    if zone == "Z":
        tz = "+0000 UTC"
    else:
        tz = f"{zone[:3]}{zone[4:]}"
        tz = f"{tz} {tz}"
    fraction = frac[:10].rstrip("0") if frac else ""
    fraction = "" if fraction == "." else fraction
    return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}{fraction} {tz}"


def resolve_plain(text: str) -> tuple[str, Any]:
    """(tag, value) of a plain scalar as go-yaml v3.0.1 resolves it (resolve.go `resolve`
    with no tag): the words above, then a timestamp, an int (underscores dropped), a YAML-style
    float, otherwise a string. A timestamp's value is the text Pulumi hands the program."""
    if text in _WORDS:
        return _WORDS[text]
    if not text or text[0] not in _HINTS:
        return STR, text
    if text[0] == ".":
        return (FLOAT, float(text)) if _YAML_STYLE_FLOAT.fullmatch(text) else (STR, text)
    if text[0] in "+-0123456789":
        if (m := _TIMESTAMP.fullmatch(text)) is not None and (ts := _timestamp(m)) is not None:
            return TIMESTAMP, ts
        plain = text.replace("_", "")
        if (number := _go_parse_int(plain)) is not None:
            return INT, number
        if _YAML_STYLE_FLOAT.fullmatch(plain):
            value = float(plain)
            if not math.isinf(value):  # strconv.ParseFloat: out of range is an error
                return FLOAT, value
    return STR, text


def go_number(value: float) -> int | float:
    """A YAML float as the program receives it: Pulumi hands it over as Go's JSON
    (strconv.FormatFloat 'f', shortest), so an integral one reads back as an int."""
    if value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def pulumi_value(text: str) -> Any:
    """The value a Pulumi program receives for the plain scalar `text` (after JSON)."""
    tag, value = resolve_plain(text)
    return go_number(value) if tag == FLOAT and math.isfinite(value) else value


def stays_string(text: str) -> bool:
    """Whether `text`, written plain, is still this string to Pulumi (else a writer quotes)."""
    return resolve_plain(text)[0] == STR


class NotForPulumi(ValueError):
    """A plain scalar Pulumi reads but cannot hand to a program (`.inf`, `.nan`)."""

    def __init__(self, text: str, line: int, column: int) -> None:
        super().__init__(
            f"line {line}, column {column}: `{text}` is a float Pulumi cannot hand to the "
            "program (it passes config as JSON, which has no infinity or NaN); expected a "
            f'finite number, or quotes for the text ("{text}")'
        )
        self.line = line


def with_pulumi_scalars(base: type) -> type:
    """`base` (a PyYAML Loader or Dumper class) resolving plain scalars as Pulumi does
    (`resolve_plain`): a loader builds the values the program receives, a dumper quotes every
    string that Pulumi would read, written plain, as something else (`'3e-5'`, `'0o17'`)."""
    import yaml  # noqa: PLC0415 - only readers and writers of files need it

    class _Pulumi(base):  # type: ignore[misc, valid-type]
        def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
            if kind is yaml.ScalarNode and implicit[0]:
                return resolve_plain(value)[0]
            return super().resolve(kind, value, implicit)

    if hasattr(base, "construct_scalar"):

        def construct(loader: Any, node: Any) -> Any:
            tag, value = resolve_plain(loader.construct_scalar(node))
            if tag == FLOAT and not math.isfinite(value):
                mark = node.start_mark
                raise NotForPulumi(node.value, mark.line + 1, mark.column + 1)
            return go_number(value) if tag == FLOAT else value

        for tag in (INT, FLOAT, BOOL, NULL, TIMESTAMP):
            _Pulumi.add_constructor(tag, construct)
    return _Pulumi


def dump(data: Any, **options: Any) -> str:
    """`data` as YAML for a stack file: what `pulumi up` reads back is `data` (strings that
    would resolve to a number, a date or null when plain are quoted)."""
    import yaml  # noqa: PLC0415

    return yaml.dump(data, Dumper=with_pulumi_scalars(yaml.SafeDumper), **options)
