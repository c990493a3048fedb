"""Who may reach the EKS API endpoint: the allow-list, plus (with `endpoint.deployFrom:
deployer`) the public address of the machine that runs `pulumi up`.

Why: every Kubernetes object and Helm release of the stack is applied through the API
endpoint by the machine that runs `pulumi up`. A stack that creates its own VPC and keeps the
endpoint private-only can never be reached from a laptop or a CI runner (pulumi-eks v4.3.0
skips its own reachability check), so the README's path timed out on every object.

Trade-off of `deployer` (dev's default, and prod's until it lists its ranges): the endpoint
is public, but only to /32s, each the address `https://checkip.amazonaws.com` (AWS's own
service) reports for a machine that ran `pulumi up`, and IAM authentication still guards it.

The list is additive, so a second operator or CI never locks out whoever ran before: `pulumi
up` reads the cluster's live allow-list (EKS DescribeCluster) and keeps every /32 an earlier
deployer added (a live entry that is a /32 and not in `publicAccessCidrs`), then adds its own.
A new machine's `up` changes the endpoint (an EKS update, a few minutes) before the Kubernetes
provider talks to the cluster (the provider and every object wait for the cluster), so it is
not locked out either. `pulumi refresh` and `destroy` (which never run the program) work from
any address that ran `up` before. A `pulumi preview` never adds its machine (CI previews
change nothing; the program logs that an `up` from there would add it): the list a preview
shows is the live one. Forgetting addresses: one `up` with `deployFrom: allowList` (and the
ranges to keep) resets the list to `publicAccessCidrs`.

Offline (mocks: the plan, tests) there is no cluster and no network: the deployers' entry is
the stable stand-in `DEPLOYERS`, so `trainforge plan --diff` shows an allow-list change
(`deployer` on or off, a range added) and no churn between two plans of the same stack.
"""

from __future__ import annotations

import ipaddress
import urllib.request
from typing import Any

import pulumi

from trainforge.platform.mocked import under_mocks

CHECKIP_URL = "https://checkip.amazonaws.com"
KEY = "trainforge:endpoint.deployFrom"
# what the offline plan shows for the deployers' /32s (known only to the live cluster and `up`)
DEPLOYERS = "<deployers' /32s: kept across `pulumi up`s, this machine's added at up>"


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


def kept_deployers(cluster: str, region: str | None, allow_list: tuple[str, ...]) -> list[str]:
    """The /32s earlier deployers added to the live cluster's allow-list (entries that are a
    /32 and not in the configured list); none before the cluster exists. A failed read is a
    one-line pulumi.RunError naming the key (the language host prints it, no traceback)."""
    try:  # only a real preview/up reads the live cluster (requirements.lock installs boto3)
        import boto3  # noqa: PLC0415
        import botocore.exceptions  # noqa: PLC0415
    except ImportError:
        raise pulumi.RunError(
            f"{KEY}: got 'deployer'; reading the cluster's allow-list needs boto3 in the "
            "program's virtualenv (`make venv` installs it from requirements.lock)"
        ) from None

    try:
        live = boto3.client("eks", region_name=region).describe_cluster(name=cluster)
    except botocore.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return []
        raise pulumi.RunError(
            f"{KEY}: got 'deployer'; could not read cluster {cluster}'s allow-list to keep "
            f"earlier deployers' addresses (EKS DescribeCluster: {exc}); the deploying identity "
            "needs eks:DescribeCluster"
        ) from None
    except botocore.exceptions.BotoCoreError as exc:
        raise pulumi.RunError(
            f"{KEY}: got 'deployer'; could not read cluster {cluster}'s allow-list ({exc})"
        ) from None
    cidrs = live["cluster"].get("resourcesVpcConfig", {}).get("publicAccessCidrs") or []
    return [c for c in cidrs if c.endswith("/32") and c not in allow_list]


def public_access_cidrs(
    allow_list: tuple[str, ...],
    deploy_from: str,
    cluster: str | None = None,
    region: str | None = None,
) -> Any:
    """The endpoint's public allow-list: the configured CIDRs, plus with `deployFrom:
    deployer` the earlier deployers' /32s kept from the live cluster (`cluster`) and, at
    `pulumi up`, this machine's (offline: the stand-in `DEPLOYERS`)."""
    cidrs: list[Any] = list(allow_list)
    if deploy_from != "deployer":
        return cidrs or None
    if under_mocks():  # no network, nothing to learn
        return [*cidrs, DEPLOYERS]
    kept = kept_deployers(cluster, region, allow_list) if cluster else []
    cidrs += [c for c in kept if c not in cidrs]
    mine = lookup()
    if mine in cidrs:  # EKS refuses a CIDR listed twice
        return cidrs
    if pulumi.runtime.is_dry_run() and kept:
        pulumi.log.info(
            f"{KEY}: this preview keeps the endpoint's allow-list; `pulumi up` from this "
            f"machine adds {mine} to it"
        )
        return cidrs
    return [*cidrs, mine]
