"""Plan check: every Helm release resolves to a chart the way pulumi-kubernetes resolves it (an
unresolvable one fails `pulumi up` after everything before it was created). `resolve` replays
pulumi-kubernetes' `provider/pkg/provider/helm_release.go` (`resolveChartName`, `locateChart`),
read at master of 2026-07-01 (94977969, after v4.32.0; the SDK pin is 4.34.2), checked
2026-11-25; each form: docs/rehearsals.md, "Helm charts as the provider resolves them".
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from trainforge.plan.check_types import CheckResult, Finding, PlanContext, Section
from trainforge.plan.resource_types import HELM_RELEASE
from trainforge.plan.runner import UNKNOWN

RULE = "HELM_CHART_UNRESOLVABLE"
PIN_RULE = "HELM_CHART_UNPINNED"
RULES = {
    RULE: "give an OCI chart whole in `chart` (chart='oci://registry/path/name', no "
    "repository_opts), a classic repository as repository_opts.repo='https://...' with the "
    "chart's name, or a local chart directory that exists",
    PIN_RULE: "pin the chart's `version` (trainforge.core.versions) and leave `devel` off",
}
# Schemes Helm has a built-in getter for (helm.sh/helm/v3/pkg/getter.All: http/https and oci);
# any other scheme needs a Helm plugin on the deployer's machine.
_HTTP = ("http", "https")


@dataclass(frozen=True)
class Resolution:
    """How the provider finds one release's chart (`how`: local | oci | repository | url |
    alias), where (path, OCI reference or index URL), and why it cannot ("": it can)."""

    how: str
    where: str
    error: str = ""


def resolve(
    chart: str, repo: str | None, root: pathlib.Path | None = None, has_repo_opts: bool = False
) -> Resolution:
    """A Release's chart resolution from `chart` and `repositoryOpts.repo` (`has_repo_opts`:
    the mapping was given, even empty)."""
    name = chart.strip()
    repo_url = ""
    if has_repo_opts:
        if name.startswith("oci://"):
            pass  # resolveChartName: the OCI chart wins, the repo is ignored
        elif repo and _is_request_uri(repo):
            repo_url = repo
        elif repo and "/" not in name:
            name = f"{repo}/{name}"  # a local repository alias
    if repo_url:
        scheme = urlparse(repo_url).scheme
        if scheme == "oci":
            return Resolution(
                "repository",
                f"{repo_url.rstrip('/')}/index.yaml",
                f"repository_opts.repo {repo_url!r} is an OCI registry, but a repo is fetched "
                "as a classic Helm repository (<repo>/index.yaml), which a registry does not "
                f"serve: give chart='{repo_url.rstrip('/')}/{name}' with no repository_opts",
            )
        if scheme not in _HTTP:
            return Resolution(
                "repository",
                repo_url,
                f"repository_opts.repo {repo_url!r}: Helm has no getter for scheme "
                f"{scheme!r} (only http, https and oci: without a plugin it cannot download)",
            )
        if "/" in name or name.startswith("."):
            return Resolution(
                "repository",
                repo_url,
                f"chart {name!r} with repository_opts.repo: the chart must be the chart's "
                "name as the repository's index.yaml lists it",
            )
        return Resolution("repository", f"{repo_url.rstrip('/')}/index.yaml#{name}")
    if name.startswith("oci://"):
        if "/" not in name[len("oci://") :].strip("/"):
            return Resolution("oci", name, f"chart {name!r}: an OCI reference needs a path")
        return Resolution("oci", name)
    if urlparse(name).scheme in _HTTP:
        return Resolution("url", name)  # a chart archive's URL, downloaded as is
    path = pathlib.Path(name)
    if not path.is_absolute() and root is not None:
        path = root / path
    if path.is_file() or (path.is_dir() and (path / "Chart.yaml").is_file()):
        return Resolution("local", str(path))
    if pathlib.Path(name).is_absolute() or name.startswith("."):
        return Resolution("local", name, f"chart path {name!r} not found (no Chart.yaml there)")
    return Resolution(
        "alias",
        name,
        f"chart {name!r} is neither an OCI reference, nor a chart in a repository URL, nor "
        "a local path: Helm would look it up in the deployer's own repositories file "
        "(`helm repo add`), which no stack sets up",
    )


def _is_request_uri(value: str) -> bool:
    """Go's url.ParseRequestURI accepts an absolute URI (scheme + something) or an absolute
    path; both make the provider treat the repo as a repository URL."""
    parsed = urlparse(value)
    return bool(parsed.scheme and (parsed.netloc or parsed.path)) or value.startswith("/")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def check(ctx: PlanContext) -> CheckResult:
    findings: list[Finding] = []
    lines: list[str] = []
    data: list[dict[str, Any]] = []
    for rel in ctx.resources_of(HELM_RELEASE):
        inputs = rel.inputs
        chart, version = _text(inputs.get("chart")), _text(inputs.get("version"))
        opts = inputs.get("repositoryOpts")
        repo = _text(opts.get("repo")) if isinstance(opts, dict) else None
        if chart is None or chart == UNKNOWN or repo == UNKNOWN:
            lines.append(f"{rel.name}: chart known only at apply time (not checked)")
            data.append({"release": rel.name, "how": "unknown"})
            continue
        res = resolve(chart, repo, ctx.root, isinstance(opts, dict))
        problems = [(RULE, res.error)] if res.error else []
        if res.how in ("oci", "repository", "url", "alias") and not version:
            problems.append((PIN_RULE, f"chart {chart!r} has no version: it floats to the newest"))
        if inputs.get("devel") is True:
            problems.append((PIN_RULE, f"chart {chart!r} sets devel: pre-releases may install"))
        findings += [
            Finding.on(rel, r, f"Helm release {rel.name}: {m}", RULES[r]) for r, m in problems
        ]
        at = f"@{version}" if version else " (no version)"
        verdict = "cannot resolve" if res.error else "resolves"
        lines.append(f"{rel.name}: {res.how} {res.where}{at} -> {verdict}")
        data.append(
            {"release": rel.name, "how": res.how, "where": res.where, "version": version,
             "error": res.error or None}
        )  # fmt: skip
    title = "Helm charts (as pulumi-kubernetes resolves them)"
    return CheckResult(findings, [Section(title, lines, data)] if lines else [])
