"""Which registry an image reference pulls from, and its path through the ECR pull-through cache.

Why: nodes in private subnets pull through 1-3 NAT addresses. Docker Hub allows 10
unauthenticated pulls per hour per address, so a 32-node job on `pytorch/pytorch` stalls in
ImagePullBackOff; other registries throttle anonymous pulls too. An ECR pull-through cache rule
per upstream (a resource of the stack, `trainforge.platform.image_cache`) serves every public
image from the stack's own registry: `<account>.dkr.ecr.<region>.amazonaws.com/<prefix>/<path>`,
authenticated with the node role and reached through the ECR VPC endpoints. Docker Hub and
GitHub's registry need a credential for a rule (a Secrets Manager secret, config keys
`images.dockerHubCredentialArn` / `images.githubCredentialArn`); without it their images stay
as they are, and a Docker Hub image is a plan finding (trainforge.plan.checks.rules,
TRAINFORGE_DOCKER_HUB).

Pulumi-free: the jobs package and the plan rules use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

# prefix -> (upstream registry URL as ECR wants it, the hosts references name it by, needs a
# credential). source: docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache.html
# (supported upstream registries; Docker Hub, GitHub Container Registry, Azure and GitLab need a
# Secrets Manager secret prefixed ecr-pullthroughcache/), checked 2026-11-25
UPSTREAMS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "ecr-public": ("public.ecr.aws", ("public.ecr.aws",), False),
    "k8s": ("registry.k8s.io", ("registry.k8s.io",), False),
    "quay": ("quay.io", ("quay.io",), False),
    "docker-hub": (
        "registry-1.docker.io",
        ("docker.io", "index.docker.io", "registry-1.docker.io"),
        True,
    ),
    "github": ("ghcr.io", ("ghcr.io",), True),
}
DOCKER_HUB = "docker-hub"


# A container image reference, [registry[:port]/]path[:tag][@sha256:<64 hex>]: the grammar of
# github.com/distribution/reference (regexp.go; path components lowercase, a tag at most 128
# word characters). ASCII, and `\Z`: Go's `\w` and `$` (Python's `$` also matches before a final
# newline, and its `\w` takes any letter).
REFERENCE = re.compile(
    r"(?:(?P<registry>[a-zA-Z0-9][a-zA-Z0-9.-]*(?::[0-9]+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[a-f0-9]{64}))?\Z",
    re.ASCII,
)


CREDENTIAL_KEYS = {
    DOCKER_HUB: "trainforge:images.dockerHubCredentialArn",
    "github": "trainforge:images.githubCredentialArn",
}


def credential_problems(arn: str, region: str | None, account: str | None) -> list[str]:
    """Why ECR cannot use `arn` as a pull-through rule's credential for a stack in `region`
    under `account` (None: not known here, not judged). source:
    docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-creating-rule.html
    ("The account and Region that the secret is in must match the account and Region that the
    pull through cache rule is in"), checked 2026-11-27."""
    parts = arn.split(":")
    if len(parts) < 7 or parts[2] != "secretsmanager":
        return [f"{arn!r} is not a Secrets Manager secret ARN"]
    out = []
    if region is not None and parts[3] != region:
        out.append(f"the secret is in {parts[3]}, the stack in {region} (same Region needed)")
    if account is not None and parts[4] != account:
        out.append(f"the secret is in account {parts[4]}, the stack's caller in {account}")
    return out


def split(image: str) -> tuple[str, str]:
    """(registry host, repository path with tag/digest) the way Docker resolves a reference:
    no host means Docker Hub, and a one-word Docker Hub name is in `library/`."""
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = "docker.io", image
    if host in UPSTREAMS[DOCKER_HUB][1] and "/" not in path:
        path = f"library/{path}"
    return host, path


def upstream_of(image: str) -> str | None:
    """The cache prefix of the image's registry, or None for a registry without a rule kind
    (nvcr.io, another ECR registry, ...)."""
    host, _ = split(image)
    for prefix, (_, hosts, _) in UPSTREAMS.items():
        if host in hosts:
            return prefix
    return None


def is_docker_hub(image: str) -> bool:
    return upstream_of(image) == DOCKER_HUB


def parts(image: str) -> tuple[str, str, str, str]:
    """(registry host, repository, tag or "", digest or "") of a reference, the host and a
    Docker Hub `library/` as `split` resolves them: `grafana/grafana:13.2.0` is
    ("docker.io", "grafana/grafana", "13.2.0", "")."""
    host, path = split(image)
    path, _, digest = path.partition("@")
    repo, tag = path, ""
    last = path.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = path.rsplit(":", 1)
    return host, repo, tag, digest


def digest_pinned(image: str) -> bool:
    """Whether `image` names a digest (`...@sha256:`). A pull-through cache rule does not
    fetch an image it has not cached yet when the reference names a digest, even with a tag
    next to it: the first pull fails as "not found" (github.com/aws/containers-roadmap/issues/
    2837, open, read 2026-11-27). A chart's digest-pinned image is therefore left direct
    (trainforge.platform.chart_images.route), not routed to a first pull that fails."""
    return bool(parts(image)[3])


def names_image(pattern: str, image: str) -> bool:
    """Whether `pattern` (`repository[:tag][@digest]`, as a waiver names an image) names
    `image`: the same registry and repository, and the same tag / digest where the pattern
    gives one. `grafana/grafana` names `docker.io/grafana/grafana:13.2.0`; it does not name
    `docker.io/grafana/loki:3.0.0` (why a waiver names its image: trainforge.stack.policy)."""
    want, got = parts(pattern), parts(image)
    return want[:2] == got[:2] and all(w in ("", g) for w, g in zip(want[2:], got[2:], strict=True))


@dataclass(frozen=True)
class CacheRoutes:
    """The stack's pull-through cache: its registry host and the prefixes it has rules for."""

    registry: str  # <account>.dkr.ecr.<region>.amazonaws.com
    prefixes: frozenset[str]

    def rewrite(self, image: str) -> str:
        """The reference through the cache, or the image unchanged when no rule covers it or
        it names a digest (`digest_pinned`: the cache's first pull of it would fail, so a
        user's `image@sha256:...` is pulled as written, and judged where it comes from)."""
        prefix = upstream_of(image)
        if prefix is None or prefix not in self.prefixes or digest_pinned(image):
            return image
        _, path = split(image)
        return f"{self.registry}/{prefix}/{path}"

    def registry_for(self, prefix: str) -> str:
        """What a Dockerfile's `FROM ${REGISTRY}/<path>` gets for an upstream."""
        return f"{self.registry}/{prefix}"


def routes_for(
    registry: str, *, docker_hub: bool, github: bool, enabled: bool = True
) -> CacheRoutes | None:
    """The rules a stack has: every credential-free upstream, and the others it has a secret
    for. None when the cache is off."""
    if not enabled:
        return None
    prefixes = {p for p, (_, _, cred) in UPSTREAMS.items() if not cred}
    if docker_hub:
        prefixes.add(DOCKER_HUB)
    if github:
        prefixes.add("github")
    return CacheRoutes(registry, frozenset(prefixes))


def _ecr_suffix(region: str) -> str:
    """The DNS suffix of a region's partition: aws-cn regions (cn-*) are under .com.cn."""
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


def registry_host(account: str, region: str) -> str:
    return f"{account}.dkr.ecr.{region}.{_ecr_suffix(region)}"


# an account ID is 12 digits (docs.aws.amazon.com/accounts/latest/reference/manage-acct-identifiers.html)
_ECR_HOST = re.compile(
    r"[0-9]{12}\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.(?P<suffix>amazonaws\.com(?:\.cn)?)\Z"
)


def ecr_region(image: str) -> str | None:
    """The region of the ECR registry an image is pulled from, None when it is not a private
    ECR registry: the reader of what `registry_host` writes (a host it would not write for
    that region, such as a cn- region under .com, is not one)."""
    m = _ECR_HOST.match(split(image)[0])
    if m is None or _ecr_suffix(m["region"]) != m["suffix"]:
        return None
    return m["region"]


# The stack's cache, current while TrainingPlatform declares what runs a pod (`routing`), so
# that every platform component rewrites its images the same way (`cached`) without each one
# being handed the cache. Scoped to that block (a context variable, reset when it ends), so
# nothing of one platform leaks into another. A plan run records it (contract.record(),
# TrainingPlatform): its checks, which rebuild pods after the program ran, read it there.
# None: no cache.
_ROUTES: ContextVar[CacheRoutes | None] = ContextVar("trainforge_image_routes", default=None)


@contextmanager
def routing(routes: CacheRoutes | None) -> Iterator[CacheRoutes | None]:
    """`routes` current for the block."""
    token = _ROUTES.set(routes)
    try:
        yield routes
    finally:
        _ROUTES.reset(token)


def current() -> CacheRoutes | None:
    """The routes of the `routing` block in progress; after it, in a plan run, the ones the
    run's platform routed through (what its checks rebuild pods with)."""
    from trainforge.core.contract import record  # noqa: PLC0415

    routes = _ROUTES.get()
    if routes is None and (rec := record()) is not None:
        return rec.image_routes
    return routes


def cached(image: str) -> str:
    """`image` through the stack's pull-through cache when a rule covers it."""
    routes = current()
    return routes.rewrite(image) if routes is not None else image


@dataclass(frozen=True)
class InstalledImage:
    """An image a component installs inside a chart or overlay: the plan renders no pod of it,
    so the component records it here and the plan's image check judges it
    (TRAINFORGE_DOCKER_HUB when it is still pulled from Docker Hub)."""

    component: str  # the Pulumi name of the component that installs it
    image: str  # as the chart/overlay names it (a tag the chart picks is left out)
    pulled: str  # what the nodes pull: through the cache when a rule covers it


def installed(component: str, image: str) -> str:
    """Record `image` as installed by `component` and return its reference through the cache."""
    ref = cached(image)
    _record(InstalledImage(component, image, ref))
    return ref


def as_named(component: str, image: str) -> str:
    """Record `image` as installed by `component` and pulled as it is named: a chart's own
    image that the component's values leave alone (no cache rewrite: its nodes pull it from
    its registry)."""
    return pulled_as(component, image, image)


def pulled_as(component: str, image: str, pulled: str) -> str:
    """Record `image` as installed by `component` and pulled as `pulled`: what the values the
    component passes make the chart run (trainforge.platform.chart_images.route)."""
    _record(InstalledImage(component, image, pulled))
    return pulled


def _record(image: InstalledImage) -> None:
    """Add to the plan run's record (none outside a plan)."""
    from trainforge.core.contract import record  # noqa: PLC0415

    rec = record()
    if rec is not None and image not in rec.installed_images:
        rec.installed_images.append(image)


def chart_image(component: str, image: str) -> dict[str, str]:
    """Helm values `{registry, repository[, tag]}` pulling `image` through the cache (recorded
    like `installed`). Without a tag in `image` the chart's own tag is kept."""
    ref = installed(component, image)
    host, path = split(ref)
    last = path.rsplit("/", 1)[-1]
    out = {"registry": host, "repository": path}
    if ":" in last:
        repo, tag = path.rsplit(":", 1)
        out.update(repository=repo, tag=tag)
    return out


def torch_image() -> str:
    """A pinned image with torch for the platform's own pods (acceptance tests): the stock
    PyTorch image where the cache has a Docker Hub rule, else the AWS Deep Learning Container
    (ECR Public), so that no pod pulls from Docker Hub without a credential."""
    from trainforge.core import versions

    routes = current()
    if routes is not None and DOCKER_HUB in routes.prefixes:
        return cached(versions.PYTORCH_IMAGE)
    return cached(versions.EFA_TEST_IMAGE)
