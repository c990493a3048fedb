"""A minimal Pulumi mocks harness that also records the resource options each
RegisterResource request carried (delete-before-replace, replace-on-changes, provider,
parent), which `pulumi.runtime.Mocks` alone does not expose."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.runtime import mocks as pm


@dataclass
class Registered:
    typ: str
    name: str
    inputs: dict
    parent: str
    delete_before_replace: bool
    replace_on_changes: list[str]
    provider: str
    custom_timeouts: Any
    aliases: list[str]
    dependencies: list[str]


class RecordingMocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = dict(args.inputs)
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class RecordingMonitor(pm.MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registered: list[Registered] = []

    def RegisterResource(self, request):  # noqa: N802 (gRPC name)
        response = super().RegisterResource(request)
        self.registered.append(
            Registered(
                typ=request.type,
                name=request.name,
                inputs=self.resources[response.urn].state if response.urn in self.resources else {},
                parent=request.parent,
                delete_before_replace=request.deleteBeforeReplace,
                replace_on_changes=list(request.replaceOnChanges),
                provider=request.provider,
                custom_timeouts=request.customTimeouts,
                # alias URNs, or the type of each alias spec (same name and parent)
                aliases=[
                    *request.aliasURNs,
                    *(a.spec.type for a in request.aliases if a.HasField("spec")),
                ],
                dependencies=list(request.dependencies),
            )
        )
        return response


def run(program) -> RecordingMonitor:
    """Run `program()` under mocks and wait for every registration; returns the monitor."""
    monitor = RecordingMonitor(RecordingMocks())
    pm.set_mocks(monitor.mocks, project="trainforge", stack="test", preview=True, monitor=monitor)
    result: dict[str, Any] = {}

    @pulumi.runtime.test
    def _body():
        result["value"] = program()
        outs = result["value"]
        items = outs if isinstance(outs, list) else [outs]
        return pulumi.Output.all(*[o.urn for o in items if isinstance(o, pulumi.Resource)])

    _body()
    monitor.result = result.get("value")
    return monitor
