"""The plan's checks: each module finds problems in (or reports on) the rendered stack, and
`trainforge.plan.registry` registers every module here that defines `check` and `RULES`.

The engine around them (`trainforge/plan/`: runner, mocks, manifests, core, cli, review, diff,
verdict, waivers) runs the program and hands the checks what it recorded; the helpers and
models they read live there too (`kueue/`, `kueue_validate`, `ckpt_compat`, `state_shapes`,
`build_context`, `cost`). Here: the API-server validation (`validate`), the policy rules
shared with the pulumi-policy pack (`rules`), and the behaviour rehearsals and reports, with
the IAM evaluator, references and stack reader, the pod sandbox and the recorded AWS calls
(helpers still here: they are to move out with the IAM and pod-script checks' rework).

Nothing is imported here, so importing one check does not import them all.
"""
