"""A mocked run registers its resources without the SDK's per-resource stack trace capture,
and gives the SDK's own capture back afterwards (trainforge.plan.mocks._no_stack_traces)."""

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime import resource as sdk_resource

from trainforge.plan.runner import run_program


def test_no_stack_trace_is_captured_while_the_plan_runs_a_program(monkeypatch):
    captured = []
    original = sdk_resource._get_stack_trace

    def capture():
        captured.append(1)
        return original()

    monkeypatch.setattr(sdk_resource, "_get_stack_trace", capture)

    def program():
        k8s.core.v1.Namespace("ns", metadata={"name": "ns"})
        k8s.core.v1.ConfigMap("cm", metadata={"name": "cm", "namespace": "ns"}, data={"a": "b"})
        pulumi.export("name", "ns")

    inv = run_program(program, stack="test", echo_warnings=False)
    assert {r.name for r in inv.resources} >= {"ns", "cm"}  # the resources were registered
    assert captured == []  # ... and none asked for a stack trace
    assert sdk_resource._get_stack_trace is capture  # restored after the run
