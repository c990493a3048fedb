"""Offline plan: run the Pulumi program under mocks, rebuild its Kubernetes objects, validate
them and apply the policy rules, with no Pulumi CLI, credentials or network.

Two parts. The engine, here: runner (mocks + recording), mocks (the platform's catalog-aware
mocks), manifests (objects, YAML), core (the plan as a library), registry (the checks it
runs), check_types (what a check sees and returns), waivers, cli (`trainforge plan`), verdict,
diff/sides/review/job_view/job_diff (a plan against a base), cost/price_facts (the cost
model), policy_adapter (glue for the pulumi-policy pack). The checks, in `checks/`: schema and
webhook validation, the policy rules shared with policy/, and the behaviour rehearsals and
reports. Submodules are imported lazily by their users.
"""
