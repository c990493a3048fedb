"""What a program declares is recorded for a plan run only, and the image cache routes are
scoped to the platform that routes through them: no module-level state that production
code reads.

Why: the record of a program run (contracts, jobs, installed images, quota warnings) used
to be a module-level object that production image routing also read, so what one platform
set stayed behind for whatever ran next in the process. Now the plan starts the record it
owns (`contract.start_record`), components add to it only when there is one, and
`image_routes.routing` makes a platform's routes current for the block that declares its
pods.
"""

from __future__ import annotations

import contextvars

from trainforge.core import contract, image_routes

HOST = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
ROUTES = image_routes.routes_for(HOST, docker_hub=True, github=False)
IMAGE = "docker.io/library/busybox:1.37"
ROUTED = f"{HOST}/docker-hub/library/busybox:1.37"


def in_a_fresh_process(fn):  # a context with no variable set: a deployment's program
    return contextvars.Context().run(fn)


def test_outside_a_plan_nothing_is_recorded_and_no_routes_are_current() -> None:
    def deploy() -> tuple:
        pulled = image_routes.installed("monitoring", IMAGE)
        return contract.record(), image_routes.current(), pulled

    assert in_a_fresh_process(deploy) == (None, None, IMAGE)


def test_routes_are_current_inside_the_platform_block_only() -> None:
    def deploy() -> list[str]:
        seen = []
        with image_routes.routing(ROUTES):
            seen.append(image_routes.cached(IMAGE))
        seen.append(image_routes.cached(IMAGE))  # after the platform: nothing leaks
        return seen

    assert in_a_fresh_process(deploy) == [ROUTED, IMAGE]


def test_a_plan_run_records_what_components_install_and_its_routes_outlive_the_block() -> None:
    """The plan's checks rebuild pods after the program ran: they read the routes the run's
    platform recorded."""

    def plan() -> tuple:
        rec = contract.start_record()
        rec.image_routes = ROUTES  # as TrainingPlatform records its routes
        with image_routes.routing(ROUTES):
            image_routes.installed("monitoring", IMAGE)
        return rec, contract.record(), image_routes.cached(IMAGE)

    rec, current, after = in_a_fresh_process(plan)
    assert current is rec and after == ROUTED
    assert [(i.component, i.pulled) for i in rec.installed_images] == [("monitoring", ROUTED)]


def test_recording_is_scoped_to_its_block() -> None:
    def run() -> tuple:
        with contract.recording() as rec:
            image_routes.installed("c", IMAGE)
        return rec.installed_images, contract.record()

    installed, after = in_a_fresh_process(run)
    assert [i.image for i in installed] == [IMAGE] and after is None


def test_a_declared_pool_is_looked_up_in_one_place() -> None:
    """`Declared.pool`: the pool a Kueue flavor names, for the fleet's cost and the SDK
    section's node fit alike; the first contract declaring the name wins."""
    first, second = contract.PoolFacts("gpu"), contract.PoolFacts("gpu", kind="node-group")
    declared = contract.Declared(
        contracts=[
            contract.PlatformContract(pools={"gpu": first}, teams={}),
            contract.PlatformContract(
                pools={"gpu": second, "cpu": contract.PoolFacts("cpu")}, teams={}
            ),
        ]
    )
    assert declared.pool("gpu") is first
    assert declared.pool("cpu") == contract.PoolFacts("cpu")
    assert declared.pool("tpu") is None and declared.pool(None) is None
    assert contract.Declared().pool("gpu") is None
