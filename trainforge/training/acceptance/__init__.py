"""Acceptance tests of GPU capacity: the all-reduce benchmark, the facts it is judged by, and
the parsers that turn NCCL / DCGM output into a pass or a fail with the numbers.

Runs in pods (shipped in the runtime's ConfigMap) and offline (`python -m trainforge
acceptance parse ...`): torch is imported only by the benchmark itself.
"""
