"""Whether the program runs under Pulumi's mocks (the offline plan, tests): no network, no AWS
account, EC2 answered from moto's bundled tables (trainforge.plan.mocks). The one test, read
wherever the platform must say so or skip what only `pulumi up` can learn (the deployer's
address, the caller's account, the EC2 catalog's source); a module of its own so that every
platform module may import it without a cycle."""

from __future__ import annotations


def under_mocks() -> bool:
    from pulumi.runtime import settings  # noqa: PLC0415
    from pulumi.runtime.mocks import MockMonitor  # noqa: PLC0415

    return isinstance(settings.get_monitor(), MockMonitor)
