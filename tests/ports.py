"""Ports for the servers and rendezvous the tests start, without the pick-release-hope race.

A port the kernel hands out for a socket that is then closed is only a *candidate*: another
process (a parallel test, another engineer's run) may take it before the child binds it. Where
the child can bind port 0 and say which port it got, the tests do that. Where every process
must know the port in advance (a torch rendezvous: MASTER_PORT), `retry_on_clash` starts
again on a new candidate when the child failed with EADDRINUSE, so a lost race costs a retry,
never a failed test.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

# torch's TCPStore, Python's socket errors, uvicorn, and gunicorn ("Connection in use")
ADDRESS_IN_USE = re.compile(r"EADDRINUSE|address already in use|Errno 98\b|Connection in use", re.I)
ATTEMPTS = 4


def candidate_port() -> int:
    """A port that was free a moment ago (use it only through retry_on_clash)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clashed(outputs: Iterable[str]) -> bool:
    """Whether a child's output says it could not bind its port."""
    return any(ADDRESS_IN_USE.search(o or "") for o in outputs)


def retry_on_clash(
    start: Callable[[int], T], outputs: Callable[[T], Iterable[str]], attempts: int = ATTEMPTS
) -> T:
    """`start(port)` on a fresh candidate port until its outputs show no EADDRINUSE (the last
    attempt's result is returned whatever it says, for the test to report)."""
    for _ in range(attempts - 1):
        result = start(candidate_port())
        if not clashed(outputs(result)):
            return result
    return start(candidate_port())


def communicate_all(procs: list, timeout: float) -> list[tuple[int, str]]:
    """(exit code, output) of each started process, the rendezvous host (the first) first:
    when it could not bind its port the others are stopped at once instead of waiting for
    a peer that never comes (the caller then retries on a new port)."""
    outs: list[tuple[int, str]] = []
    try:
        for i, p in enumerate(procs):
            out, _ = p.communicate(timeout=timeout)
            outs.append((p.returncode, out or ""))
            if i == 0 and clashed([out or ""]):
                for q in procs[1:]:
                    q.kill()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outs


def start_on_free_port(start: Callable[[int], T], attempts: int = ATTEMPTS) -> T:
    """In-process servers: `start(port)` on a candidate port, and again on a new one when
    binding it failed with EADDRINUSE (any other error is the test's to see)."""
    for i in range(attempts):
        try:
            return start(candidate_port())
        except Exception as e:
            text = f"{e} {getattr(e, 'strerror', '') or ''}"
            if i == attempts - 1 or not ADDRESS_IN_USE.search(text):
                raise
    raise AssertionError("unreachable")
