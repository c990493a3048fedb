"""The plan's keys: cost caps and policy waivers (read by trainforge/plan/).

They live in their own namespace, `trainforge-policy:` (Pulumi.<stack>.yaml keeps policy apart
from what the program builds; docs/configuration.md, "Policy"):

    config:
      trainforge-policy:costCaps: {jobPerHour: 100, teams: {llm: {teamPerHour: 2000}}}
      trainforge-policy:waivers:
        - {resource: training-operator, rule: CKV_K8S_16, reason: "needs /dev/infiniband"}

The names these keys refer to (rule ids, team names) are known only to the plan and to the
platform, so the parse functions take them as arguments and check them after the shape.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, PrivateAttr, WithJsonSchema

from trainforge.core.image_routes import names_image
from trainforge.stack.base import (
    StackError,
    StackModel,
    one_of,
    problem,
    suggest,
    validate,
    validate_as,
)
from trainforge.stack.file import decode_value

NS = "trainforge-policy"
CAPS_KEY = f"{NS}:costCaps"
WAIVERS_KEY = f"{NS}:waivers"

# Rules whose findings are about one image, of which one resource may carry many (a chart
# release records ~10): a waiver of one of them names the image (`image:`) and covers that
# image only, so that an image which moves to Docker Hub at a chart bump is reported even
# where another image of the same component is waived. The plan's findings of these rules
# carry their image (tests/plan/test_image_waivers.py).
IMAGE_RULES = frozenset({"TRAINFORGE_DOCKER_HUB"})


USD = "a number of USD per hour > 0"


def _not_bool(value: Any) -> Any:
    """pydantic's lax mode reads true as 1.0; a cap of `true` is a mistake, not one dollar."""
    if isinstance(value, bool):
        raise ValueError(USD)
    return value


def _positive(value: float) -> float:
    if not value > 0:
        raise ValueError(USD)
    return value


def _text(what: str) -> Any:
    """A string with something in it, stripped; `what` says what belongs there."""

    def check(value: str) -> str:
        if not value.strip():
            raise ValueError(what)
        return value.strip()

    return Annotated[
        str, AfterValidator(check), WithJsonSchema({"type": "string", "pattern": r"\S"})
    ]


ResourceName = _text("a resource's name, URN or namespace/Kind/name")
ImageName = _text("an image: repository[:tag], as the plan's Images section names it")
RuleId = _text("a rule id")
REASON = "a reason: say why the rule does not apply here"
# A template's stand-in for the reason, such as the plan's ready waiver entry's
# `"<who watches the budget instead>"` (trainforge/plan/checks/cost_check.py PRICE_MISSING_FIX):
# pasted as is, it would waive the finding with a reason nobody wrote, and every plan would
# print it as if someone had. A `<word ...>` span is the template's, not a reviewer's words
# (`cost < 5 and > 2` is not one: a placeholder opens on a letter and closes on a non-space).
PLACEHOLDER = re.compile(r"<[A-Za-z]([^<>\n]*[^\s<>])?>")
REASON_PLACEHOLDER = (
    "a reason a reviewer can read in place of the template's <...> placeholder: say why the "
    "rule does not apply here"
)


def _not_placeholder(value: str) -> str:
    """A waiver's reason is what every plan prints beside the waived finding; a template's
    placeholder left in it is refused before anything is created (stack_check, the plan and
    the policy pack all parse waivers with parse_waivers)."""
    if PLACEHOLDER.search(value):
        raise ValueError(REASON_PLACEHOLDER)
    return value


Reason = Annotated[
    _text(REASON),
    AfterValidator(_not_placeholder),
    # editors flag the placeholder too (schema/stack.schema.json)
    WithJsonSchema({"type": "string", "pattern": r"\S", "not": {"pattern": PLACEHOLDER.pattern}}),
]
UsdPerHour = Annotated[
    float,
    BeforeValidator(_not_bool),
    AfterValidator(_positive),
    WithJsonSchema({"type": "number", "exclusiveMinimum": 0}),
]
USD_MONTH = "a number of USD per month > 0"


def _not_bool_month(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(USD_MONTH)
    return value


def _positive_month(value: float) -> float:
    if not value > 0:
        raise ValueError(USD_MONTH)
    return value


UsdPerMonth = Annotated[
    float,
    BeforeValidator(_not_bool_month),
    AfterValidator(_positive_month),
    WithJsonSchema({"type": "number", "exclusiveMinimum": 0}),
]


class TeamCaps(StackModel):
    """One team's overrides of the caps."""

    job_per_hour: UsdPerHour | None = Field(
        None, description="The team's cap for one job, USD per hour (overrides jobPerHour)."
    )
    team_per_hour: UsdPerHour | None = Field(
        None, description="The team's cap for all of its jobs at once, USD per hour."
    )
    team_per_month: UsdPerMonth | None = Field(
        None,
        description="The team's monthly budget, USD per month: checked by the plan against "
        "its declared jobs' run costs (TF_COST_TEAM_BUDGET) and an AWS Budget where AWS can "
        "attribute the team's spend (docs/cost.md).",
    )


class CostCaps(StackModel):
    """`trainforge-policy:costCaps`: USD/hour ceilings the plan checks (docs/cost.md)."""

    job_per_hour: UsdPerHour | None = Field(
        None,
        description="USD per hour at on-demand list prices for one job with all its pods "
        "(TF_COST_JOB_CAP); unset: no cap.",
    )
    team_per_hour: UsdPerHour | None = Field(
        None,
        description="USD per hour for all of a team's declared jobs at once "
        "(TF_COST_TEAM_CAP); unset: no cap.",
    )
    cluster_per_month: UsdPerMonth | None = Field(
        None,
        description="USD per month for everything tagged with the cluster: the platform's "
        "always-on cost plus every declared job run once (less their part on node groups' "
        "always-on nodes, already in the platform's; TF_COST_CLUSTER_BUDGET); the stack "
        "also creates an AWS Budget on the cluster's cost-allocation tag (docs/cost.md); "
        "unset: no budget.",
    )

    def month_for_team(self, team: str) -> float | None:
        """The team's monthly budget (teamPerMonth), or None."""
        own = self.teams.get(team)
        return own.team_per_month if own is not None else None

    teams: dict[str, TeamCaps] = Field(
        default_factory=dict,
        description="Per-team caps: team name -> {jobPerHour, teamPerHour, teamPerMonth}.",
    )

    def for_team(self, team: str) -> tuple[float | None, float | None]:
        """(job cap, team cap) for `team`: its overrides, else the stack-wide caps."""
        own = self.teams.get(team) or TeamCaps()
        return (
            own.job_per_hour if own.job_per_hour is not None else self.job_per_hour,
            own.team_per_hour if own.team_per_hour is not None else self.team_per_hour,
        )


class Waiver(StackModel):
    """One rule waived on one resource, with the reason every plan prints."""

    resource: ResourceName = Field(
        description="The waived resource: its Pulumi name, URN, or namespace/Kind/name."
    )
    rule: RuleId = Field(description="The rule id (a policy rule, a plan check or a CKV_ id).")
    reason: Reason = Field(
        description="Why the rule does not apply here (printed by every plan); a template's "
        "`<...>` placeholder left in it is refused."
    )
    image: ImageName | None = Field(
        None,
        description="The waived image, `repository[:tag]` (e.g. `docker.io/grafana/grafana`): "
        f"required for the image rules ({', '.join(sorted(IMAGE_RULES))}), whose waiver then "
        "covers that image only, not the resource's other images; no tag: every tag.",
    )
    _where: str = PrivateAttr(WAIVERS_KEY)

    @property
    def where(self) -> str:
        """Where the waiver sits in the stack file (`trainforge-policy:waivers[2]`)."""
        return self._where

    def at(self, where: str) -> Waiver:
        self._where = where
        return self

    def covers(self, rule: str, names: set[str], image: str | None = None) -> bool:
        """The finding of `rule` on a resource known by `names`, about `image` (the image
        rules' findings name one), is this waiver's."""
        if self.rule != rule or self.resource not in names:
            return False
        if self.image is None:
            return True
        return image is not None and names_image(self.image, image)

    def describe(self) -> str:
        """`RULE on resource` (`, image X`): what the waiver is for, as notes print it."""
        on = f"{self.rule} on {self.resource}"
        return f"{on}, image {self.image}" if self.image else on


class PolicyKeys(StackModel):
    """The plan's keys, in the `trainforge-policy:` namespace."""

    cost_caps: CostCaps = Field(
        default_factory=CostCaps,
        description="USD/hour caps per job and per team, checked by the plan (docs/cost.md).",
    )
    waivers: list[Waiver] = Field(
        default_factory=list,
        description="`[{resource, rule, reason, image}]`: waive one rule for one resource (and "
        "for an image rule, one image of it); the reason is printed by every plan.",
    )


class PolicyError(StackError):
    """A malformed `trainforge-policy:` value (a configuration error: the plan exits 2)."""

    def __init__(self, errors: Iterable[str] | str):
        super().__init__([errors] if isinstance(errors, str) else errors)

    def __str__(self) -> str:
        """One problem, one line (as the plan prints it); several as StackError lists them."""
        return self.errors[0] if len(self.errors) == 1 else super().__str__()


class WaiverError(PolicyError):
    """A malformed trainforge-policy:waivers entry."""


class CostCapsError(PolicyError):
    """A malformed trainforge-policy:costCaps value."""


def parse_waivers(
    raw: Any, known_rules: Collection[str] | None, errors: list[str] | None = None
) -> list[Waiver]:
    """The waivers of `raw` (a list, or its JSON as the engine hands it over).

    Every bad entry is reported: with `errors`, appended there; without, raised together as
    WaiverError. `known_rules` None skips the rule-name check (for callers that cannot know
    the plan's rules).
    """
    own: list[str] = []
    raw = decode_value(raw)
    out: list[Waiver] = []
    items = validate_as(list[Any], [] if raw in (None, "") else raw, WAIVERS_KEY, own)
    for i, item in enumerate(items or []):
        where = f"{WAIVERS_KEY}[{i}]"
        waiver = validate(Waiver, item, where, own)
        if waiver is None:
            continue
        if known_rules is not None and waiver.rule not in known_rules:
            own.append(
                problem(f"{where}.rule", waiver.rule, _rule_choices(waiver.rule, known_rules))
            )
            continue
        image_problem = _image_problem(waiver)
        if image_problem:
            own.append(
                f"{where}.image: missing; expected {image_problem}"
                if waiver.image is None
                else problem(f"{where}.image", waiver.image, image_problem)
            )
            continue
        out.append(waiver.at(where))
    return _finish(own, errors, WaiverError, out)


def _image_problem(waiver: Waiver) -> str:
    """What `image` must be for this waiver's rule ("" when it is right). A waiver of an image
    rule without `image` would cover every image of the resource, today's and any a chart bump
    adds: refused, not read as "all of them"."""
    rules = ", ".join(sorted(IMAGE_RULES))
    if waiver.rule in IMAGE_RULES and waiver.image is None:
        return (
            f"the waived image (repository[:tag], e.g. docker.io/grafana/grafana): a "
            f"{waiver.rule} waiver covers one image of the resource, so it must name it"
        )
    if waiver.rule not in IMAGE_RULES and waiver.image is not None:
        return f"no image: only waivers of {rules} name one"
    if waiver.image is not None and any(c.isspace() for c in waiver.image):
        return "an image reference without spaces: repository[:tag]"
    return ""


def _rule_choices(rule: str, known: Collection[str]) -> str:
    """The rules a waiver may name; with a close match only that (there are dozens)."""
    hint = suggest(rule, known)
    return (
        f"one of the {len(known)} rules of the plan{hint}" if hint else one_of(rule, known, "rules")
    )


def parse_caps(
    raw: Any, teams: Collection[str] | None = None, errors: list[str] | None = None
) -> CostCaps:
    """The cost caps of `raw` (a mapping, or its JSON); `teams` checks the override names."""
    own: list[str] = []
    raw = decode_value(raw)
    caps = validate(CostCaps, {} if raw in (None, "") else raw, CAPS_KEY, own) or CostCaps()
    if teams is not None:
        for name in caps.teams:
            if name not in teams:
                own.append(problem(f"{CAPS_KEY}.teams.{name}", name, one_of(name, teams, "teams")))
    return _finish(own, errors, CostCapsError, caps)


def _finish(own: list[str], errors: list[str] | None, kind: type[PolicyError], value: Any) -> Any:
    if errors is not None:
        errors.extend(own)
    elif own:
        raise kind(own)
    return value
