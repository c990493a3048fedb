"""Who may reach the EKS API endpoint: the allow-list, plus (with `endpoint.deployFrom:
deployer`) the public address of the machine that runs `pulumi up`.

Why: every Kubernetes object and Helm release of the stack is applied through the API
endpoint by the machine that runs `pulumi up`. A stack that creates its own VPC and keeps the
endpoint private-only can never be reached from a laptop or a CI runner (pulumi-eks v4.3.0
skips its own reachability check), so the README's path timed out on every object.

Trade-off of `deployer` (dev's default): the endpoint is public, but only to one /32, the
address `https://checkip.amazonaws.com` (AWS's own service) reports for the machine running
`pulumi preview`/`up`, and IAM authentication still guards it. The allow-list follows
whoever ran `pulumi up` last: a teammate on another network, or a CI runner whose egress
address changes, updates it (an EKS endpoint update, a few minutes) on their next `up`, and
loses `kubectl` access until then. EKS changes the endpoint before the Kubernetes provider
talks to the cluster (the provider and every object wait for the cluster), so an `up` from a
new address is not locked out. For a team or CI, list the office/VPN/runner ranges in
`publicAccessCidrs` (prod does), or run `pulumi up` inside the VPC (`deployFrom: vpc`).
"""

from __future__ import annotations

import ipaddress
import urllib.request
from typing import Any

import pulumi

CHECKIP_URL = "https://checkip.amazonaws.com"
KEY = "trainforge:endpoint.deployFrom"


def _offline() -> bool:
    """True under Pulumi's mocks (the offline plan, tests): no network, nothing to learn."""
    from pulumi.runtime import settings
    from pulumi.runtime.mocks import MockMonitor

    return isinstance(settings.get_monitor(), MockMonitor)


def _unknown() -> pulumi.Output[str]:
    """A value only `pulumi up` knows: shown as unknown by previews and the offline plan."""
    import asyncio

    loop = asyncio.get_event_loop()

    def done(value: Any) -> asyncio.Future:
        fut = loop.create_future()
        fut.set_result(value)
        return fut

    return pulumi.Output(set(), done(None), done(False))


def lookup(url: str = CHECKIP_URL, timeout: float = 10.0) -> str:
    """This machine's public IPv4 address as a /32, or one line naming the key (a
    pulumi.RunError: the language host prints its message alone, no traceback)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - fixed https URL
            text = resp.read(64).decode("ascii", "replace").strip()
        address = ipaddress.IPv4Address(text)
    except (OSError, ValueError) as exc:
        raise pulumi.RunError(
            f"{KEY}: got 'deployer'; could not learn this machine's public IPv4 address from "
            f"{url} ({exc}); list your address in trainforge:endpoint.publicAccessCidrs or "
            "run `pulumi up` inside the VPC (deployFrom: vpc)"
        ) from None
    if not address.is_global:
        raise pulumi.RunError(
            f"{KEY}: got 'deployer'; {url} answered {address}, not a public address; list "
            "your network's public range in trainforge:endpoint.publicAccessCidrs instead"
        )
    return f"{address}/32"


def public_access_cidrs(allow_list: tuple[str, ...], deploy_from: str) -> Any:
    """The endpoint's public allow-list: the configured CIDRs, plus the deployer's /32 with
    `deployFrom: deployer` (unknown in the offline plan: learned at `pulumi up`)."""
    cidrs: list[Any] = list(allow_list)
    if deploy_from == "deployer":
        mine = _unknown() if _offline() else lookup()
        if mine not in cidrs:  # EKS refuses a CIDR listed twice
            cidrs.append(mine)
    return cidrs or None
