"""The plan's checks: each module finds problems in (or reports on) the rendered stack.

The engine around them (`trainforge/plan/`: runner, mocks, manifests, core, cli, review, diff,
verdict, waivers) runs the program and hands the checks what it recorded. Here: the
API-server validation (`validate`, `kueue_validate`), the policy rules shared with the
pulumi-policy pack (`rules`), and the behaviour rehearsals and reports registered in
`trainforge.plan.registry` with the helpers only they use (the IAM evaluator and references,
the pod sandbox, the recorded AWS calls, the checkpoint layout comparison).

Nothing is imported here, so importing one check does not import them all.
"""
