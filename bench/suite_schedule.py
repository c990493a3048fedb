"""`make test`'s two-worker makespan, predicted from a run's per-test durations.

    .venv/bin/python bench/suite_schedule.py DURATIONS.xml [--workers 2] [--collect FILE]
        [--scale S] [--top N]

Replays pytest-xdist's own scheduler (the class `make test` gets: tests/conftest.py's
`pytest_xdist_make_scheduler`, or xdist's `LoadFileScheduling` with `--plain`) over the
suite as it collects now, with each test taking the seconds a junit XML recorded for it
(`pytest --junitxml=...`: setup + call + teardown; tests it lacks take 0 s and are counted).
The scheduler's real code sends the files; only the clock is simulated: a worker runs what
it was sent in order, and each finished test is reported back as xdist reports it. Prints
when each worker ends, the makespan and the idle tail, and the slowest work units.

Why a replay rather than a timed run: the 2-core VM is shared by several engineers, so a
whole run's wall time is the load's. Per-test seconds of one run are at least consistent
with each other; the replay shows what the scheduling makes of them. `--scale` multiplies
every duration (e.g. a loaded run's durations against a quiet one's).
"""

from __future__ import annotations

import argparse
import heapq
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def nodeid_of(classname: str, name: str) -> str:
    """pytest's node id for a junit testcase: the longest dotted prefix that is a file."""
    parts = classname.split(".")
    for i in range(len(parts), 0, -1):
        path = "/".join(parts[:i]) + ".py"
        if (ROOT / path).is_file():
            return "::".join([path, *parts[i:], name])
    return "::".join([classname.replace(".", "/") + ".py", name])


def durations(junit: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        nodeid = nodeid_of(case.get("classname", ""), case.get("name", ""))
        out[nodeid] = out.get(nodeid, 0.0) + float(case.get("time", 0))
    return out


def collection(listing: Path | None) -> list[str]:
    """The suite's node ids in collection order (RUN_FIRST applied): `pytest --collect-only
    -q`'s lines, from a file or a fresh collection."""
    if listing is None:
        text = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    else:
        text = listing.read_text()
    return [line for line in text.splitlines() if line.startswith("tests/") and "::" in line]


class _Quiet:
    """A silent stand-in for xdist's log Producer (it prints every scheduling step)."""

    def __getattr__(self, name: str) -> _Quiet:
        return self

    def __call__(self, *args: object) -> None:
        pass


def scheduler(plain: bool, workers: int):
    """xdist's file scheduler, or the one tests/conftest.py hands xdist."""
    option = SimpleNamespace(loadscopereorder=True, tx=[f"{workers}*popen"], dist="loadfile")
    config = SimpleNamespace(option=option, getvalue=lambda name: getattr(option, name))
    import tests.conftest as conftest

    conftest.pytest_configure(config)
    if plain:
        from xdist.scheduler import LoadFileScheduling

        return LoadFileScheduling(config, _Quiet())
    return conftest.pytest_xdist_make_scheduler(config, _Quiet())


def replay(ids: list[str], took: dict[str, float], plain: bool, workers: int):
    """(end time per worker, [(worker, scope, start, seconds)]) of the scheduled run."""
    sched = scheduler(plain, workers)

    class Node:
        def __init__(self, n: int) -> None:
            self.gateway = SimpleNamespace(id=f"gw{n}")
            self.shutting_down = False
            self.queue: list[int] = []

        def send_runtest_some(self, indexes: list[int]) -> None:
            self.queue.extend(indexes)

        def shutdown(self) -> None:
            self.shutting_down = True

    nodes = [Node(n) for n in range(workers)]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, ids)
    sched.schedule()
    clock = [0.0] * workers
    ends = [0.0] * workers
    units: dict[tuple[int, str], list[float]] = {}
    events = [(0.0, n) for n in range(workers)]
    while events:
        now, n = heapq.heappop(events)
        node = nodes[n]
        if not node.queue:
            ends[n] = now
            continue
        index = node.queue.pop(0)
        seconds = took.get(ids[index], 0.0)
        unit = units.setdefault((n, sched._split_scope(ids[index])), [now, 0.0])
        unit[1] += seconds
        clock[n] = now + seconds
        sched.mark_test_complete(node, index, seconds)
        heapq.heappush(events, (clock[n], n))
    spans = [(n, scope, start, secs) for (n, scope), (start, secs) in units.items()]
    return ends, spans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--collect", type=Path, help="`pytest --collect-only -q` output")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--plain", action="store_true", help="xdist's LoadFileScheduling")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    took = {k: v * args.scale for k, v in durations(args.junit).items()}
    ids = collection(args.collect)
    missing = [i for i in ids if i not in took]
    ends, spans = replay(ids, took, args.plain, args.workers)
    total = sum(took.get(i, 0.0) for i in ids)
    print(f"{len(ids)} tests, {len(missing)} without a duration (0 s); {total:.0f} worker-s")
    for n, end in enumerate(ends):
        print(f"  gw{n} ends at {end:7.1f} s")
    print(
        f"makespan {max(ends):.1f} s; ideal {total / args.workers:.1f} s; idle tail "
        f"{max(ends) - min(ends):.1f} s"
    )
    print("slowest work units (worker, start s, seconds):")
    for n, scope, start, secs in sorted(spans, key=lambda s: -s[3])[: args.top]:
        print(f"  gw{n} {start:7.1f} {secs:7.1f}  {scope}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
