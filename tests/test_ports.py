"""tests/ports.py: a lost port race costs a retry, never a failed test."""

from __future__ import annotations

import errno

import pytest

from tests import ports


def test_retry_on_clash_starts_again_on_a_new_port():
    seen: list[int] = []

    def start(port: int) -> str:
        seen.append(port)
        if len(seen) == 1:
            return "RuntimeError: ... port: 1234, code: -98, name: EADDRINUSE, message: ..."
        return "ok"

    assert ports.retry_on_clash(start, lambda out: [out]) == "ok"
    assert len(seen) == 2


def test_retry_on_clash_gives_the_last_result_back_for_the_test_to_report():
    result = ports.retry_on_clash(lambda p: "Address already in use", lambda o: [o], attempts=2)
    assert result == "Address already in use"


def test_start_on_free_port_retries_only_address_in_use():
    calls = []

    def start(port: int) -> int:
        calls.append(port)
        if len(calls) == 1:
            raise OSError(errno.EADDRINUSE, "Address already in use")
        return port

    assert ports.start_on_free_port(start) == calls[-1] and len(calls) == 2
    with pytest.raises(PermissionError):
        ports.start_on_free_port(lambda p: (_ for _ in ()).throw(PermissionError("denied")))
