"""Offline plan: run the Pulumi program under mocks, rebuild its Kubernetes objects, validate
them and apply the policy rules, with no Pulumi CLI, credentials or network.

Modules: runner (mocks + recording), manifests (objects, YAML), validate (schemas, webhook and
Karpenter rules), rules (policy rules shared with policy/), waivers, diff, core (the plan as a
library), cli (`trainforge plan`), policy_adapter (glue for the pulumi-policy pack), mocks
(the platform's catalog-aware mocks). Submodules are imported lazily by their users.
"""
