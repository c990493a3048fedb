"""The plan's program runs start no gRPC server (trainforge.plan.runner._in_process_callbacks).

Why: the SDK starts one, with a poller thread, for the engine to call resource transforms
back; the plan's mock monitor resolves them in-process, so nothing called it, and its thread
made forking the plan process unsafe.
"""

from __future__ import annotations


def test_transforms_reach_the_mocks_without_a_grpc_server(monkeypatch):
    """The plan's runs resolve resource transforms in-process (runner._in_process_callbacks):
    no gRPC server, and so no gRPC poller thread that would make a fork unsafe; the mocks of
    a stand-in run still get each resource's transforms."""
    import grpc.aio
    import pulumi
    import pulumi_aws as aws

    from trainforge.plan.mocks import TrainforgeMocks
    from trainforge.plan.runner import run_program

    def no_server(*args, **kwargs):
        raise AssertionError("the plan started a gRPC server")

    monkeypatch.setattr(grpc.aio, "server", no_server)
    seen: dict[str, list] = {}

    class Mocks(TrainforgeMocks):
        def new_resource(self, args):
            seen[args.name] = list(args.transforms)
            return super().new_resource(args)

    def tag(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult:
        return pulumi.ResourceTransformResult({**args.props, "tags": {"by": "tag"}}, args.opts)

    def prog() -> None:
        aws.s3.Bucket("data", opts=pulumi.ResourceOptions(transforms=[tag]))

    run_program(prog, mocks=Mocks(preview=False), preview=False)
    assert seen["data"] == [tag]
