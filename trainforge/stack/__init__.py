"""The typed stack model: every `trainforge:` key of `Pulumi.<stack>.yaml`, declared once.

Layer 0.5 (docs/architecture.md): pydantic and core only, no Pulumi, so the plan, the
schema command and the docs generator read the same declarations the program validates with.
"""
