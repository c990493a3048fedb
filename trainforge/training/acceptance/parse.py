"""Pass or fail, with the numbers, from the output of an acceptance test.

* ``parse_allreduce``: the results table of an all-reduce benchmark in the format NVIDIA's
  nccl-tests print (``all_reduce_perf``; 13 columns: out-of-place and in-place time, algbw,
  busbw, #wrong) or our benchmark prints (``allreduce.py``; the in-place 9 columns), plus the
  NCCL ``INFO`` lines that say which network NCCL really used. The EFA check needs both of
  aws-ofi-nccl's ``NET/OFI Selected provider is efa`` (``src/nccl_ofi_net.cpp`` in
  aws-ofi-nccl v1.21.1; older plugins print ``Selected Provider is efa (found N nics)``) and
  NCCL's ``Using network Libfabric`` (or ``AWS Libfabric``), and no ``Using network Socket``:
  NCCL falls back to TCP sockets silently, at a tenth of the bandwidth.
* ``parse_dcgm``: the JSON of ``dcgmi diag -r LEVEL -j`` (DCGM 4.x: ``"DCGM Diagnostic"`` ->
  ``test_categories`` -> ``tests`` -> ``results`` per entity with ``status`` Pass / Fail /
  Warn / Skip and ``warnings``; the shape NVIDIA's DCGM test suite asserts in
  testing/python3/tests/test_dcgm_diag.py).

Pure functions over text: they run in the test pods and on a laptop over `kubectl logs`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

_ROW_PREFIX = re.compile(r"^\s*(?:\d+:\s+|\[\d+,\d+\]<stdout>:\s*)?")
_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is ([A-Za-z0-9_;+-]+)(?:, fabric is (\S+))?"
                       r"(?:.*?\(found (\d+) nics\))?")  # fmt: skip
_NETWORK = re.compile(r"NCCL INFO Using network ([A-Za-z][A-Za-z /_-]*?)\s*$", re.M)
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([\d.]+)")


@dataclasses.dataclass
class Verdict:
    test: str
    passed: bool
    summary: str
    problems: list[str] = dataclasses.field(default_factory=list)
    numbers: dict[str, Any] = dataclasses.field(default_factory=dict)

    def render(self) -> str:
        head = f"{'PASS' if self.passed else 'FAIL'} {self.test}: {self.summary}"
        return "\n".join([head, *(f"  - {p}" for p in self.problems)])


@dataclasses.dataclass(frozen=True)
class Row:
    size: int
    busbw: float  # GB/s, the best of the row's out-of-place / in-place
    wrong: int | None  # mismatched elements (None when the tool printed N/A)
    time_us: float


def table_rows(text: str) -> list[Row]:
    """Data rows of an nccl-tests style table (13 columns) or ours (9 columns)."""
    rows = []
    for line in text.splitlines():
        body = _ROW_PREFIX.sub("", line, count=1).strip()
        if not body or body.startswith("#"):
            continue
        parts = body.split()
        if len(parts) not in (9, 13) or not (parts[0].isdigit() and parts[1].isdigit()):
            continue
        try:
            if len(parts) == 13:
                busbw = max(float(parts[7]), float(parts[11]))
                wrongs = [parts[8], parts[12]]
                t = float(parts[5])
            else:
                busbw = float(parts[7])
                wrongs = [parts[8]]
                t = float(parts[5])
        except ValueError:
            continue
        counted = [int(w) for w in wrongs if w.isdigit()]
        rows.append(Row(int(parts[0]), busbw, sum(counted) if counted else None, t))
    return rows


def efa_evidence(text: str) -> dict[str, Any]:
    """What NCCL said about its network: providers, fabrics, NIC counts, networks."""
    providers, fabrics, nics = set(), set(), set()
    for m in _PROVIDER.finditer(text):
        providers.add(m.group(1))
        if m.group(2):
            fabrics.add(m.group(2))
        if m.group(3):
            nics.add(int(m.group(3)))
    networks = {m.group(1).strip() for m in _NETWORK.finditer(text)}
    return {
        "providers": sorted(providers),
        "fabrics": sorted(fabrics),
        "nics": sorted(nics),
        "networks": sorted(networks),
    }


def parse_allreduce(
    text: str,
    *,
    min_busbw_gbps: float | None = None,
    floor_why: str = "",
    require_efa: bool = True,
) -> Verdict:
    rows = table_rows(text)
    problems: list[str] = []
    numbers: dict[str, Any] = {"rows": len(rows)}
    if not rows:
        return Verdict(
            "allreduce",
            False,
            "no results table in the output (the benchmark did not finish: read the log above it)",
            numbers=numbers,
        )
    best = max(rows, key=lambda r: r.busbw)
    largest = max(rows, key=lambda r: r.size)
    numbers.update(
        peak_busbw_gbps=best.busbw,
        peak_at_bytes=best.size,
        largest_bytes=largest.size,
        busbw_at_largest_gbps=largest.busbw,
    )
    m = _AVG.search(text)
    if m:
        numbers["avg_busbw_gbps"] = float(m.group(1))
    wrong = sum(r.wrong or 0 for r in rows)
    numbers["wrong"] = wrong
    if wrong:
        bad = [r.size for r in rows if r.wrong]
        problems.append(
            f"{wrong} wrong result element(s) at size(s) {_sizes(bad)}: data corruption on "
            "the GPUs or the network, replace the node"
        )
    if min_busbw_gbps is not None:
        numbers["min_busbw_gbps"] = min_busbw_gbps
        if best.busbw < min_busbw_gbps:
            problems.append(
                f"peak bus bandwidth {best.busbw:.2f} GB/s is below the {min_busbw_gbps:g} GB/s "
                f"floor ({floor_why or 'configured'})"
            )
    ev = efa_evidence(text)
    numbers["efa"] = ev
    if require_efa:
        if "efa" not in ev["providers"]:
            seen = ", ".join(ev["providers"]) or "none"
            problems.append(
                f"NCCL did not select the EFA provider (aws-ofi-nccl reported: {seen}): no "
                "'NET/OFI Selected provider is efa' line (is the aws-ofi-nccl plugin in the "
                "image, FI_PROVIDER=efa set, and vpc.amazonaws.com/efa requested?)"
            )
        fallback = [n for n in ev["networks"] if "libfabric" not in n.lower()]
        if fallback or not ev["networks"]:
            problems.append(
                f"NCCL used network {', '.join(ev['networks']) or '(not logged: NCCL_DEBUG=INFO?)'}"
                ", not Libfabric: collectives run over TCP sockets"
            )
    efa_text = ""
    if ev["providers"]:
        efa_text = (
            f"; provider {'/'.join(ev['providers'])}"
            + (f" (fabric {'/'.join(ev['fabrics'])})" if ev["fabrics"] else "")
            + (f", {'/'.join(map(str, ev['nics']))} NICs" if ev["nics"] else "")
        )
    if ev["networks"]:
        efa_text += f"; NCCL network {'/'.join(ev['networks'])}"
    floor_text = f" (floor {min_busbw_gbps:g} GB/s)" if min_busbw_gbps is not None else ""
    if min_busbw_gbps is None and floor_why:  # asked for a floor, none known: say so
        floor_text = f" (no floor: {floor_why})"
    summary = (
        f"peak bus bandwidth {best.busbw:.2f} GB/s at {_size(best.size)}{floor_text}, "
        f"{len(rows)} sizes up to {_size(largest.size)}, {wrong} wrong{efa_text}"
    )
    return Verdict("allreduce", not problems, summary, problems, numbers)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def _sizes(sizes: list[int]) -> str:
    return ", ".join(_size(s) for s in sizes[:6]) + (" ..." if len(sizes) > 6 else "")


# ------------------------------------------------------------------------------------- DCGM


def _json_document(text: str) -> dict[str, Any] | None:
    """The JSON object in dcgmi's output (it may be surrounded by log lines)."""
    text = text.strip()
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, dict) else None
    except ValueError:
        pass
    start = text.find("{")
    while start != -1:
        depth = 0
        for i in range(start, len(text)):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    try:
                        doc = json.loads(text[start : i + 1])
                    except ValueError:
                        break
                    if isinstance(doc, dict):
                        return doc
                    break
        start = text.find("{", start + 1)
    return None


def parse_dcgm(text: str, *, level: int | None = None, node: str = "") -> Verdict:
    where = f" on {node}" if node else ""
    doc = _json_document(text)
    if doc is None:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "(empty output)")
        return Verdict(
            "dcgm",
            False,
            f"no DCGM diagnostic JSON{where}: {first[:200]}",
            [
                "dcgmi could not run the diagnostic: is the node monitoring agent's dcgm-server "
                "(nv-hostengine, hostPort 5555) running on this node?"
            ],  # fmt: skip
        )
    root = doc.get("DCGM Diagnostic") or doc.get("DCGM GPU Diagnostic") or {}
    problems: list[str] = []
    runtime_error = root.get("runtime_error") if isinstance(root, dict) else None
    if runtime_error:
        problems.append(f"the diagnostic did not run: {runtime_error}")
    counts = {"Pass": 0, "Fail": 0, "Warn": 0, "Skip": 0}
    failed: list[str] = []
    warned: list[str] = []
    gpus: set[Any] = set()
    categories = root.get("test_categories", []) if isinstance(root, dict) else []
    for cat in categories if isinstance(categories, list) else []:
        for test in cat.get("tests", []) or []:
            name = test.get("name", "?")
            for res in test.get("results", []) or []:
                status = str(res.get("status", "")).capitalize()
                entity = f"{res.get('entity_group', 'GPU')} {res.get('entity_id', '?')}"
                if res.get("entity_group", "GPU") == "GPU":
                    gpus.add(res.get("entity_id"))
                counts[status] = counts.get(status, 0) + 1
                warnings = [w.get("warning", "") for w in res.get("warnings", []) or []
                            if isinstance(w, dict)]  # fmt: skip
                text_w = f": {warnings[0][:200]}" if warnings else ""
                if status == "Fail":
                    failed.append(f"{name} failed on {entity}{text_w}")
                elif status == "Warn":
                    warned.append(f"{name} warned on {entity}{text_w}")
    results = sum(counts.values())
    if not results and not runtime_error:
        problems.append("the diagnostic reported no test results")
    problems += failed
    version = (
        (doc.get("metadata") or {}).get("version")
        if isinstance(doc.get("metadata"), dict)
        else None
    )
    numbers = {"level": level, "gpus": len(gpus), "version": version, **counts}
    summary = (
        f"level {level if level is not None else '?'}{where}: {counts['Pass']} passed, "
        f"{counts['Fail']} failed, {counts['Warn']} warned, {counts['Skip']} skipped "
        f"on {len(gpus)} GPU(s)" + (f" (DCGM {version})" if version else "")
    )
    verdict = Verdict("dcgm", not problems, summary, problems, numbers)
    verdict.problems += [f"(warning) {w}" for w in warned]
    return verdict
