"""The plan's checks, each module one check (`check` and `RULES`), registered by
`trainforge.plan.registry`; nothing is imported here, so importing one does not import all.
"""
