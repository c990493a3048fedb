"""Validate a whole stack and report every area's problems together, before any resource.

Why: each area parses its own keys (platform/config.py: platform, pools, services, teams;
jobs/spec.py: jobs; stack/policy.py: cost caps and waivers). Run one after the other with the
first failure stopping the program, a user with a typo in a pool, a job and a waiver fixes
them in three `pulumi preview` rounds. `check_stack` runs every area's parser on the same
config and concatenates their lines, so one run reports them all, each with the path, the bad
value, what is valid and a did-you-mean where one exists.

Jobs are checked against the platform contract (teams, pools, GPUs) when the platform's own
keys are valid; otherwise each job's own keys are still checked, without that contract.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainforge.core.errors import JobConfigError
from trainforge.core.labels import ZONE
from trainforge.stack.base import StackError, one_of, problem
from trainforge.stack.file import decode_value, namespace
from trainforge.stack.model import unknown_keys
from trainforge.stack.policy import (
    CAPS_KEY,
    WAIVERS_KEY,
    CostCaps,
    Waiver,
    parse_caps,
    parse_waivers,
)
from trainforge.stack.policy import NS as POLICY_NS

JOBS_KEY = "trainforge:jobs"
# The NodePool CRD's `spec.template.metadata.labels` maxProperties (pool_label_problems)
NODEPOOL_LABELS_MAX = 100


@dataclass
class CheckedStack:
    """What `check_stack` parsed; `errors` holds every problem of every area (empty: valid)."""

    platform: Any = None  # PlatformConfig, None when its keys have problems
    raw_jobs: list[Any] = field(default_factory=list)
    waivers: list[Waiver] = field(default_factory=list)
    caps: CostCaps = field(default_factory=CostCaps)
    errors: list[str] = field(default_factory=list)

    def raise_errors(self) -> CheckedStack:
        """Raise StackError with every line when there is any problem; else self."""
        if self.errors:
            raise StackError(self.errors)
        return self


def error_lines(exc: BaseException) -> list[str]:
    """The lines of an area's error: `.errors` (StackError, ConfigError) or its one message."""
    lines = getattr(exc, "errors", None)
    return list(lines) if lines else [str(exc)]


def check_stack(
    config: Mapping[str, Any],
    *,
    known_rules: Collection[str] | None = None,
    lookups: bool = False,
) -> CheckedStack:
    """Every area's problems in `config` (full keys: `trainforge:cluster`, `aws:region`, ...;
    values as written in the stack file or as the engine hands them over, JSON text).

    `known_rules` checks the waivers' rule names (None: shape only). `lookups` also looks up
    every instance type (needs the Pulumi runtime or the plan's mocks) and checks jobs against
    the platform contract (and the files of jobs that ship their own code).
    """
    from trainforge.jobs.spec import parse_jobs  # noqa: PLC0415
    from trainforge.platform.config import parse_config  # noqa: PLC0415

    out = CheckedStack()
    config, out.errors = read_misspelt_namespaces(config)
    raw = namespace(config, "trainforge")
    region = decode_value(config.get("aws:region")) if "aws:region" in config else None
    out.platform = _collect(out.errors, parse_config, raw, lookups=lookups, region=region)
    jobs = raw.get("jobs")
    out.raw_jobs = jobs if isinstance(jobs, list) else []
    if out.platform is not None and lookups:
        from trainforge.jobs.declare import check_jobs  # noqa: PLC0415 - imports pulumi
        from trainforge.platform.acceptance import check_acceptance  # noqa: PLC0415
        from trainforge.platform.published import contract_from_config  # noqa: PLC0415

        # what TrainingPlatform and declare_jobs check again once resources exist
        contract = _collect(out.errors, contract_from_config, out.platform)
        if contract is not None:
            _collect(out.errors, check_acceptance, out.platform, contract.pools)
            out.errors += pool_label_problems(out.platform)
            _collect(out.errors, check_jobs, contract, jobs or [])
    else:
        _collect(out.errors, parse_jobs, jobs, JOBS_KEY)
        out.errors += _job_references(raw, out.raw_jobs)
    policy = namespace(config, POLICY_NS)
    out.errors += unknown_keys(policy, POLICY_NS)
    out.waivers = parse_waivers(policy.get("waivers"), known_rules, out.errors)
    out.caps = parse_caps(policy.get("costCaps"), _team_names(out.platform, raw), out.errors)
    out.errors = name_jobs(out.errors, out.raw_jobs)
    return out


_JOB_AT = re.compile(re.escape(JOBS_KEY) + r"\[(\d+)\](?! \()")


@functools.cache
def platform_label_keys() -> frozenset[str]:
    """Every label key the platform sets on its nodes, read off the emitters themselves: a
    node group's (with and without EFA) and a Karpenter pool's, configured with no labels."""
    from trainforge.platform.karpenter import pool_labels  # noqa: PLC0415 - pulumi_aws
    from trainforge.platform.node_groups import group_labels  # noqa: PLC0415
    from trainforge.stack.platform import NodeGroupConfig, NodePoolConfig  # noqa: PLC0415

    groups = [
        group_labels(NodeGroupConfig.model_construct(name="n", labels=(), efa=efa))
        for efa in (False, True)
    ]
    pool = pool_labels(NodePoolConfig.model_construct(name="n", labels=()))
    return frozenset(k for emitted in (*groups, pool) for k in emitted)


def _platform_label_problems(where: str, labels: tuple[tuple[str, str], ...]) -> list[str]:
    """A line per configured label whose key the platform sets on its nodes: the emitter
    replaces the value silently, and jobs and the device plugins select nodes by these keys
    (a user's `nvidia.com/gpu.present` on a CPU pool would draw the GPU plugin there)."""
    own = platform_label_keys()
    return [
        problem(
            f"{where}.labels.{key}",
            value,
            f"a label key the platform does not set itself (it sets {', '.join(sorted(own))} "
            "on its nodes, and jobs and device plugins select nodes by them), such as "
            "example.com/team",
        )
        for key, value in labels
        if key in own
    ]


def _type_label_problems(where: str, labels: Any, facts: Any, skip: Collection[str]) -> list[str]:
    """A line per label Karpenter derives from the instance type (core/labels.
    karpenter_type_labels) with a value none of the pool's types gives, or, each given by some
    type, a set no one type gives all of (Karpenter needs one type meeting every requirement)."""
    from trainforge.platform.instance_types import karpenter_labels  # noqa: PLC0415

    derived = [karpenter_labels(t) for t in facts.per_type]
    # a label is judged only where every type's value is known (held facts, never a guess)
    known = set.intersection(*(set(d) for d in derived)) if derived else set()
    mine = {k: v for k, v in labels if k in known and k not in skip}
    out = []
    for key, value in mine.items():
        given = sorted({d[key] for d in derived if d[key] is not None}, key=_natural)
        if value not in given:
            values = ", ".join(given) if given else "none (no type of the pool has this label)"
            out.append(
                problem(
                    f"{where}.labels.{key}",
                    value,
                    f"a value one of the pool's instance types gives {key}: {values} "
                    "(Karpenter adds template labels to the NodePool's requirements: no "
                    "type would match and no node could launch), or no such label",
                )
            )
    if not out and mine and not any(all(d[k] == v for k, v in mine.items()) for d in derived):
        keys = ", ".join(f"{k}={v}" for k, v in mine.items())
        out.append(
            problem(
                f"{where}.labels",
                keys,
                "labels one of the pool's instance types gives together (each is some type's, "
                "no one type has them all: Karpenter adds them to the NodePool's "
                "requirements and no node could launch)",
            )
        )
    return out


def _capacity_type_problems(where: str, pool: Any, facts: Any) -> list[str]:
    """A capacityTypes value none of the pool's types offers (EC2's SupportedUsageClasses: an
    hpc7a has no spot). Why: Karpenter gives a type the capacity types of its usage classes
    among on-demand and spot (karpenter-provider-aws v1.14.1 types.go `computeRequirements`);
    the NodePool requires the pool's list, so that value never launches a node (and alone,
    none launches at all)."""
    offered = {c for t in facts.per_type for c in t.usage_classes if c in ("on-demand", "spot")}
    if not offered:  # a lookup that does not say (an old provider): nothing to judge by
        return []
    return [
        problem(
            f"{where}.capacityTypes",
            capacity,
            f"a capacity type one of the pool's instance types offers: "
            f"{', '.join(sorted(offered))} (EC2 sells {', '.join(pool.instance_types)} "
            f"as no {capacity} instance: Karpenter would launch none)",
        )
        for capacity in pool.capacity_types
        if capacity not in offered
    ]


def _natural(value: str) -> tuple[int, str]:
    return (int(value), "") if value.isdigit() else (0, value)


def _zone_problems(where: str, pool: Any, platform: Any) -> list[str]:
    """A `topology.kubernetes.io/zone` label outside the zones the pool's nodes can be in.

    Why: Karpenter gives each instance type the zones of its NodePool's subnets that offer it
    (karpenter-provider-aws v1.14.1 types.go `computeRequirements`, LabelTopologyZone), and adds
    the template label to the requirements: another zone matches no offering, no node launches.
    The zones are Network's (private_subnet_zones) and EC2's offerings, read at preview; an EFA
    pool's one zone is the one its EC2NodeClass selects (capacity_placement.zone_index)."""
    from trainforge.platform import capacity_placement as cp  # noqa: PLC0415 - pulumi_aws
    from trainforge.platform.network import private_subnet_zones  # noqa: PLC0415

    value = dict(pool.labels).get(ZONE)
    if value is None:
        return []
    subnets = private_subnet_zones(platform.network)
    if pool.efa:
        zones = [subnets[cp.zone_index(where, pool.instance_types, subnets)]]
    else:
        offered = set().union(*(cp.offering_zones([t]) for t in pool.instance_types))
        zones = [z for z in subnets if z in offered]
    if value in zones:
        return []
    return [
        problem(
            f"{where}.labels.{ZONE}",
            value,
            f"a zone the pool's nodes can be in: {', '.join(zones) or 'none'} (the VPC's private "
            "subnets' zones that offer its types; Karpenter adds template labels to the "
            "NodePool's requirements: no node could launch), or no such label",
        )
    ]


def _group_subnet_zone_problems(where: str, group: Any, platform: Any) -> list[str]:
    """An EFA group's subnetId (one of the stack's, stack/platform.group_subnet_problems) in a
    zone EC2 does not offer its type in (DescribeInstanceTypeOfferings, read at preview): the
    group goes to that subnet alone (node_groups.py) and no instance launches."""
    from trainforge.platform import capacity_placement as cp  # noqa: PLC0415 - pulumi_aws
    from trainforge.platform.network import private_subnet_zones  # noqa: PLC0415

    ids = list(platform.network.private_subnet_ids)
    if not (group.efa and group.subnet_id in ids):
        return []
    zones = private_subnet_zones(platform.network)
    offered = cp.offering_zones(group.instance_types)
    if zones[ids.index(group.subnet_id)] in offered:
        return []
    fits = [f"{s} ({z})" for s, z in zip(ids, zones, strict=True) if z in offered]
    return [
        problem(
            f"{where}.subnetId",
            group.subnet_id,
            f"a private subnet whose zone offers {', '.join(group.instance_types)}: "
            f"{', '.join(fits) or 'none'} ({group.subnet_id} is in "
            f"{zones[ids.index(group.subnet_id)]}, where EC2 offers no such instance), or unset",
        )
    ]


def _group_zone_label_problems(where: str, group: Any, platform: Any) -> list[str]:
    """A node group's `topology.kubernetes.io/zone` label that is not the zone of every one of
    its nodes. Why: EKS passes the group's labels to every node it launches in any of its
    subnets (node_groups.py: an EFA group's one subnet, a reserved group's reservation zone,
    any other group every private subnet whose zone offers its types), so the label is true
    only on a group whose subnets are all in that one zone; a job selecting by it lands on
    nodes elsewhere. A reserved group's zone is read with the reservation, later: here only
    one of the VPC's zones."""
    from trainforge.platform import capacity_placement as cp  # noqa: PLC0415 - pulumi_aws
    from trainforge.platform.network import private_subnet_zones  # noqa: PLC0415

    value = dict(group.labels).get(ZONE)
    if value is None:
        return []
    subnets = private_subnet_zones(platform.network)
    ids = list(platform.network.private_subnet_ids)
    if group.capacity_reservation_id:
        zones = sorted(set(subnets))
    elif group.efa and group.subnet_id in ids:
        zones = [subnets[ids.index(group.subnet_id)]]
    elif group.efa:
        zones = [subnets[cp.zone_index(where, group.instance_types, subnets)]]
    else:
        zones = sorted({subnets[i] for i in cp.zone_indexes(group.instance_types, subnets)})
    if value in zones and (len(zones) == 1 or group.capacity_reservation_id):
        return []
    where_nodes = f"{', '.join(zones) or 'none'}: its subnets' zones that offer its types"
    expected = (
        f"no such label: the group's nodes are in {where_nodes}, and every node gets it"
        if len(zones) > 1 and not group.capacity_reservation_id
        else f"the zone of the group's nodes ({where_nodes}), or no such label"
    )
    return [problem(f"{where}.labels.{ZONE}", value, expected)]


def pool_label_problems(platform: Any, type_facts: Mapping[str, Any] | None = None) -> list[str]:
    """Each node group or pool label the platform sets itself, each pool label whose key the
    pool's requirements or types restrict to other values, and a pool with more labels than
    the NodePool CRD holds.

    Why: Karpenter adds a NodePool's template labels to its requirements
    (kubernetes-sigs/karpenter v1.14.1, `versions.KARPENTER_VERSION`,
    pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go l.84
    `nct.Requirements.Add(scheduling.NewLabelRequirements(nct.Labels).Values()...)`, read
    2026-11-30): `kubernetes.io/arch: arm64` on an amd64 pool empties the intersection, no node
    can launch and the pods stay Pending. The requirements are the emitter's own
    (karpenter.node_pool_spec), built from the looked-up types as `pulumi up` builds them
    (`type_facts`: TrainingPlatform's, by pool name; unset: looked up here). The CRD's
    `spec.template.metadata.labels` has `maxProperties: 100` (the vendored
    trainforge/plan/data/crds/karpenter.sh_nodepools.yaml, v1.14.1), counting the platform's."""
    from trainforge.platform.instance_types import resolve_pool  # noqa: PLC0415 - pulumi_aws
    from trainforge.platform.karpenter import node_pool_spec, pool_labels  # noqa: PLC0415

    out = []
    for i, group in enumerate(platform.node_groups):
        out += _platform_label_problems(f"trainforge:nodeGroups[{i}]", group.labels)
        for check in (_group_subnet_zone_problems, _group_zone_label_problems):
            out += _collect(out, check, f"trainforge:nodeGroups[{i}]", group, platform) or []
    for i, pool in enumerate(platform.node_pools):
        where = f"trainforge:nodePools[{i}]"
        out += _platform_label_problems(where, pool.labels)
        if len(emitted := pool_labels(pool)) > NODEPOOL_LABELS_MAX:
            out.append(
                problem(
                    f"{where}.labels",
                    f"{len(pool.labels)} labels",
                    f"at most {NODEPOOL_LABELS_MAX - len(emitted) + len(pool.labels)} (the "
                    f"NodePool CRD holds {NODEPOOL_LABELS_MAX} template labels, the platform's "
                    "among them)",
                )
            )
        facts = (type_facts or {}).get(pool.name) or resolve_pool(pool, where, [])
        if facts is None:
            continue
        spec = node_pool_spec(pool, facts)["template"]["spec"]
        allowed = {r["key"]: r["values"] for r in spec["requirements"] if r["operator"] == "In"}
        for key, value in pool.labels:
            if key in allowed and value not in allowed[key]:
                expected = (
                    f"one of the values the pool's requirements allow for {key}: "
                    f"{', '.join(allowed[key])} (Karpenter adds template labels to the "
                    "NodePool's requirements: no node could launch), or no such label"
                )
                out.append(problem(f"{where}.labels.{key}", value, expected))
        out += _type_label_problems(where, pool.labels, facts, skip=allowed)
        out += _capacity_type_problems(where, pool, facts)
        out += _collect(out, _zone_problems, where, pool, platform) or []
    return out


def name_jobs(lines: list[str], raw_jobs: list[Any]) -> list[str]:
    """Each `trainforge:jobs[7]` of `lines` followed by the job's name: `trainforge:jobs[7]
    (blog-ddp).workers: got ...`.

    Why: a stack with ten jobs is read by name; an index alone sends the user counting list
    items. Done here, once, on every area's lines (the jobs' parser, the contract checks, the
    policy's), so every path names the job the same way; the key path after it stays the one
    the user writes. A job without a string name keeps its index alone."""

    def named(m: re.Match[str]) -> str:
        i = int(m.group(1))
        job = raw_jobs[i] if i < len(raw_jobs) else None
        name = job.get("name") if isinstance(job, dict) else None
        return f"{m.group(0)} ({name})" if isinstance(name, str) and name else m.group(0)

    return [_JOB_AT.sub(named, line) for line in lines]


def read_misspelt_namespaces(config: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`config` with each key of a misspelt namespace (`trainfroge:teams`) read as the key it
    was meant to be (`trainforge:teams`), and one line per such key naming it.

    Why: Pulumi hands the program every namespace, and a key outside `trainforge:` is not
    ours to refuse (`aws:region`); so a misspelt namespace was silently unread, and its
    absence cascaded (every job's `team: ... (none declared)`) without naming the key. Read
    as meant, the rest of the stack is checked as the user wrote it: one line for the typo,
    and only the problems that are really there. A key both misspelt and written correctly
    is not read twice: the correct one wins, the line still names the misspelt one."""
    ours = [JOBS_KEY.partition(":")[0], POLICY_NS]
    fixed = dict(config)
    lines = []
    for key in config:
        ns, sep, rest = str(key).partition(":")
        if not sep or ns in ours:
            continue
        meant = difflib.get_close_matches(ns, ours, n=1, cutoff=0.75)
        if not meant:
            continue
        right = f"{meant[0]}:{rest}"
        read = right not in config
        if read:
            fixed[right] = fixed.pop(key)
        lines.append(
            f"{key}: unknown namespace {ns!r} (did you mean {right!r}?); "
            + (
                f"trainforge reads only {meant[0]}: keys; rename it (its value was checked "
                "as that key)"
                if read
                else f"{right} is set too and this one is never read: delete it"
            )
        )
    return fixed, lines


def _collect(errors: list[str], check: Any, *args: Any, **kwargs: Any) -> Any:
    """`check(*args, **kwargs)`; an area's configuration error becomes lines in `errors`."""
    from trainforge.platform.config import ConfigError  # noqa: PLC0415

    try:
        return check(*args, **kwargs)
    except (ConfigError, JobConfigError, StackError) as e:
        errors.extend(error_lines(e))
        return None


def _names(raw: Mapping[str, Any], *keys: str) -> set[str] | None:
    """The `name`s the raw lists under `keys` declare (None: no such list to judge against)."""
    lists = [raw.get(k) for k in keys if isinstance(raw.get(k), list)]
    if not lists:
        return None
    return {str(x["name"]) for items in lists for x in items if isinstance(x, dict) and "name" in x}


def _job_references(raw: Mapping[str, Any], jobs: list[Any]) -> list[str]:
    """Each job's team and pool against the names the stack declares, when the platform did
    not parse (no contract): a misspelt pool shows in the same run as the platform's errors."""
    out = []
    pools, teams = _names(raw, "nodeGroups", "nodePools"), _names(raw, "teams")
    for i, job in enumerate(jobs):
        for key, names, what in (("team", teams, "teams"), ("pool", pools, "node pools")):
            value = job.get(key) if isinstance(job, dict) else None
            if names is not None and isinstance(value, str) and value not in names:
                out.append(problem(f"{JOBS_KEY}[{i}].{key}", value, one_of(value, names, what)))
    return out


def _team_names(platform: Any, raw: Mapping[str, Any]) -> set[str]:
    """The stack's team names: the parsed ones, else those the raw `teams` list names."""
    services = getattr(platform, "services", None)
    if services is not None:
        return {t.name for t in getattr(services, "teams", ()) or ()}
    teams = raw.get("teams")
    return (
        {str(t["name"]) for t in teams if isinstance(t, dict) and "name" in t}
        if isinstance(teams, list)
        else set()
    )


def engine_config() -> dict[str, Any]:
    """The running program's whole config (every namespace), as the engine handed it over."""
    from pulumi.runtime.config import CONFIG  # noqa: PLC0415 - the engine's config map

    return dict(CONFIG.get())


__all__ = ["CAPS_KEY", "WAIVERS_KEY", "CheckedStack", "check_stack", "engine_config"]
