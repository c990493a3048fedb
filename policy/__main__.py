"""trainforge policy pack: `pulumi preview --policy-pack policy`.

Every rule is defined once in trainforge.plan.checks.rules (pure functions, unit-tested) and is run
here by the Pulumi policy engine and offline by `trainforge plan`, so both judge alike.
Waivers come from the stack file named by $TRAINFORGE_STACK_CONFIG (trainforge-policy:waivers,
each with a reason); a waived finding is not reported.
"""

from __future__ import annotations

import pathlib
import sys

# The pack runs from its own folder with its own virtualenv: import trainforge from the repo.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from pulumi_policy import (  # noqa: E402
    EnforcementLevel,
    PolicyPack,
    ResourceValidationPolicy,
    StackValidationPolicy,
)

from trainforge.plan.checks import rules as R  # noqa: E402
from trainforge.plan.policy_adapter import (  # noqa: E402
    load_waivers,
    plain_props,
    unwaived,
    validation_messages,
)
from trainforge.stack.base import StackError  # noqa: E402
from trainforge.stack.file import StackFileError  # noqa: E402

try:
    WAIVERS = load_waivers()
except (StackError, StackFileError) as e:
    # a bad waiver (a placeholder reason, an unknown rule) is the stack file's error: one line
    # naming it, as `pulumi up`'s own stack check and `trainforge plan` say it, not a traceback
    # from the analyzer plugin
    sys.exit(f"trainforge policy pack: {e}")


def resource_policy(rule: R.Rule) -> ResourceValidationPolicy:
    def validate(args, report_violation):
        if not rule.applies(args.resource_type):
            return
        props = plain_props(args.props)
        msgs = rule.check(args.resource_type, props)
        for msg in unwaived(WAIVERS, rule.id, args.urn, args.name, msgs):
            report_violation(f"{msg}. Fix: {rule.fix}")

    return ResourceValidationPolicy(
        name=rule.id.lower().replace("_", "-"),
        description=rule.title,
        validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY,
    )


def stack_policy(rule: R.StackRule) -> StackValidationPolicy:
    def validate(args, report_violation):
        resources = [
            R.StackResource(
                r.urn,
                r.resource_type,
                r.name,
                plain_props(r.props),
                {k: [d.urn for d in v] for k, v in (r.property_dependencies or {}).items()},
            )
            for r in args.resources
        ]
        names = {r.urn: r.name for r in resources}
        for urn, msg in rule.check(resources):
            if unwaived(WAIVERS, rule.id, urn, names.get(urn, ""), [msg]):
                report_violation(f"{msg}. Fix: {rule.fix}", urn)

    return StackValidationPolicy(
        name=rule.id.lower().replace("_", "-") + "-stack",
        description=rule.title,
        validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY,
    )


def kubernetes_validation(args, report_violation):
    props = plain_props(args.props)
    for rule_id, msg in validation_messages(args.resource_type, args.name, args.urn, props):
        for m in unwaived(WAIVERS, rule_id, args.urn, args.name, [msg]):
            report_violation(f"[{rule_id}] {m}")


PolicyPack(
    name="trainforge",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        *(resource_policy(r) for r in R.RESOURCE_RULES),
        *(stack_policy(r) for r in R.STACK_RULES),
        ResourceValidationPolicy(
            name="kubernetes-validation",
            description="Kubernetes objects pass the API schema, the PyTorchJob webhook and "
            "Karpenter's CRD rules",
            validate=kubernetes_validation,
        ),
    ],
)
