"""Shared facts and types that every layer may import: pinned versions, the platform-to-jobs
contract, errors, quantities and image registry routes.

Pure Python with no Pulumi, no AWS SDK and no import of `platform`, `jobs`, `plan` or
`training`, so any of them can depend on it without a cycle (docs/architecture.md, "Layers";
tests/test_import_graph.py keeps it so).
"""
