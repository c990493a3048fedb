"""One error type for every bad job declaration.

Each message names where the value came from (`trainforge:jobs[0].gpusPerWorker`), the bad
value and what would be valid, so that `pulumi preview` points at the line to fix.
"""

from __future__ import annotations

from typing import Any


class JobConfigError(ValueError):
    """A job declaration that cannot be turned into a runnable job on its backend."""

    def __init__(self, where: str, value: Any, expected: str) -> None:
        self.where = where
        self.value = value
        self.expected = expected
        super().__init__(f"{where}: got {value!r}; {expected}")
