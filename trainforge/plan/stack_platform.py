"""A stack's platform as its program builds it, offline: the config check and the platform
contract, built under the plan's mocks from `Pulumi.<stack>.yaml`.

Why one function: `trainforge import` (the pools and quotas an imported job lands on) and
`trainforge why --stack` (the sized fix of a never-admitted Workload) each built it with their
own copy of the same mocked program; two copies drift (which config check, which errors).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainforge.stack import file as stack_file


class StackRefused(Exception):
    """The stack file cannot be read or its platform config is refused: the one-line reason,
    without the caller's prefix (the caller names the flag or the stack)."""


@dataclass(frozen=True)
class StackPlatform:
    contract: Any  # trainforge.core.contract.PlatformContract
    platform: Any  # the checked platform config (trainforge.stack.platform)

    @property
    def kueue(self) -> Any | None:
        """The Kueue config, None where the stack runs without Kueue."""
        services = self.platform.services
        return services.kueue if services is not None and services.kueue.enabled else None


def stack_platform(root: Path, stack: str) -> StackPlatform:
    """The checked platform config and contract of `root`'s stack `stack`, with the checks the
    program runs first (no AWS lookups: offline)."""
    from trainforge.plan.mocks import run_mocked  # noqa: PLC0415

    try:
        config = stack_file.read_stack(root, stack).config
    except Exception as e:  # a missing or unparsable stack file: its one line
        raise StackRefused(str(e)) from None
    found: dict[str, Any] = {}

    def program() -> None:
        from trainforge.platform.published import contract_from_config  # noqa: PLC0415
        from trainforge.platform.stack_check import check_stack, engine_config  # noqa: PLC0415

        checked = check_stack(engine_config(), lookups=False)
        if checked.platform is None:
            found["errors"] = checked.errors
            return
        found["built"] = StackPlatform(contract_from_config(checked.platform), checked.platform)

    run_mocked(program, config, stack=stack)
    if "built" not in found:
        first = (found.get("errors") or ["unreadable"])[0]
        raise StackRefused(f"fix its platform configuration first: {first}")
    return found["built"]
