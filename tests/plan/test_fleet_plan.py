"""`plan --stack fleet` end to end: the example manager's plan plans its two workers, reads
their kubeconfigs through its StackReferences (so it renders a MultiKueueCluster per worker),
and keeps the kubeconfigs secret in everything it writes."""

from __future__ import annotations

import json
from types import SimpleNamespace

from tests.conftest import ROOT, shipped_plan
from trainforge.jobs.duration import duration_text
from trainforge.plan.checks import cost_check
from trainforge.plan.checks import fleet as FC
from trainforge.plan.runner import SECRET


def test_the_manager_connects_to_each_planned_worker_and_keeps_its_kubeconfig_secret():
    result = shipped_plan("fleet")
    clusters = {o.doc["metadata"]["name"] for o in result.objects if o.kind == "MultiKueueCluster"}
    assert clusters == {"use1", "usw2"}
    secrets = [o.doc for o in result.objects if o.kind == "Secret"
               and o.doc["metadata"]["name"].endswith("-kubeconfig")]  # fmt: skip
    assert {s["metadata"]["name"] for s in secrets} == {"use1-kubeconfig", "usw2-kubeconfig"}
    assert all(s["stringData"] == {"kubeconfig": SECRET} for s in secrets)
    # the stand-in token of a worker never reaches what the plan prints or writes
    assert "standin-token" not in json.dumps(result.to_json())
    assert not any("exports no fleetKubeconfig" in w for w in result.inventory.warnings)


def test_the_fleet_section_lists_each_job_on_each_worker_with_its_cost():
    section = next(s for s in shipped_plan("fleet").sections if s.title == FC.TITLE)
    jobs = {j["job"]: j for j in section.data["jobs"]}
    assert set(jobs) == {"mnist-ddp", "gpt-small-fsdp"}
    for job in jobs.values():
        assert [w["worker"] for w in job["workers"]] == ["use1", "usw2"]
    gpu = {w["worker"]: w for w in jobs["gpt-small-fsdp"]["workers"]}
    assert gpu["use1"]["pool"] == "gpu" and "g6.xlarge" in gpu["use1"]["cost"]
    assert "g5.xlarge" in gpu["usw2"]["cost"] and "us-west-2" in gpu["usw2"]["cost"]
    # a price the facts lack is said, not guessed
    cpu = {w["worker"]: w for w in jobs["mnist-ddp"]["workers"]}
    assert cpu["usw2"]["onDemandPerHour"] is None and "price missing" in cpu["usw2"]["cost"]


def _worker_grant(workers, worker: str) -> dict:
    """The policy a worker's plan grants its research role on the manager's bucket."""
    (policy,) = [
        r.inputs["policy"]
        for r in workers[worker].inventory.resources
        if r.type == "aws:iam/rolePolicy:RolePolicy" and r.name.endswith("research-manager-ckpt")
    ]
    return json.loads(policy)


def test_the_example_fleet_is_clean_its_workers_granted_the_managers_bucket_per_team():
    """The manager exports its bucket (fleetCheckpoints); each worker, planned as it is once
    the manager is up, grants its team role that team's prefix there; the IAM evaluator says
    team research reaches research/ only, and the bucket's key only through S3 in its region."""
    from trainforge.plan import fleet as F
    from trainforge.plan.checks.iam_eval import Policy, Request, evaluate
    from trainforge.plan.core import standin_pass

    result = shipped_plan("fleet")
    assert result.clean and not [f for f in result.violations if f.rule == FC.RULE_CHECKPOINTS]
    manager = standin_pass(ROOT, "fleet", None, None, None)()
    ckpt = manager.outputs["fleetCheckpoints"]
    assert ckpt["region"] == "us-east-1" and ckpt["bucketArn"].endswith(ckpt["bucketName"])
    workers = F.plan_workers(ROOT, "fleet", manager=manager)
    for name in ("use1", "usw2"):
        own = {r.id for r in workers[name].inventory.resources if r.type == "aws:s3/bucket:Bucket"}
        assert ckpt["bucketName"] not in own  # the worker's own bucket is another
        policy = Policy("worker research", _worker_grant(workers, name))
        role = "arn:aws:iam::123456789012:role/research"

        def may(action: str, resource: str, policy=policy, role=role, **context) -> bool:
            return evaluate(Request(role, action, resource, context), [policy]).allowed

        arn = ckpt["bucketArn"]
        assert may("s3:PutObject", f"{arn}/research/mnist-ddp/step-200/model.pt")
        assert may("s3:GetObject", f"{arn}/research/mnist-ddp/latest")
        assert not may("s3:PutObject", f"{arn}/vision/x")  # another team's prefix
        assert not may("s3:GetObject", f"{arn}/vision/x")
        assert may("s3:ListBucket", arn, **{"s3:prefix": "research/mnist-ddp/"})
        assert not may("s3:ListBucket", arn, **{"s3:prefix": "vision/"})
        via = {"kms:ViaService": "s3.us-east-1.amazonaws.com"}
        assert may("kms:Decrypt", ckpt["kmsKeyArn"], **via)
        assert not may("kms:Decrypt", ckpt["kmsKeyArn"], **{"kms:ViaService": "ec2.x"})
        # what the fleet check asks of each worker: the job's team role reaches its prefix
        inv = workers[name].inventory
        assert FC.team_reaches(inv, ckpt["bucketName"], "research") is True
        assert FC.team_reaches(inv, ckpt["bucketName"], "vision") is False  # no such role
        # a research role granted only another team's prefix does not reach research/
        other = json.dumps(_worker_grant(workers, name)).replace("/research/", "/vision/")
        swapped = SimpleNamespace(config=inv.config, resources=[
            SimpleNamespace(**{**vars(r), "inputs": {**r.inputs, "policy": other}})
            if r.name.endswith("research-manager-ckpt") else r
            for r in inv.resources
        ])  # fmt: skip
        assert FC.team_reaches(swapped, ckpt["bucketName"], "research") is False


def test_a_worker_planned_before_its_manager_is_up_is_granted_nothing_and_warns(caplog):
    """The bootstrap: a worker whose manager exports nothing yet grants nothing, warns the
    order to run, and the fleet section then finds the job that cannot reach the bucket."""
    from trainforge.plan import fleet as F
    from trainforge.plan.check_types import PlanContext
    from trainforge.plan.core import standin_pass

    workers = F.plan_workers(ROOT, "fleet")  # no manager: the worker's first `up`
    inv = workers["use1"].inventory
    assert not [r for r in inv.resources if r.name.endswith("manager-ckpt")]
    assert "stack 'fleet' exports no fleetCheckpoints yet" in caplog.text
    result = shipped_plan("fleet")
    ctx = PlanContext(
        result.inventory,
        result.objects,
        result.inventory.declared,
        ROOT,
        standin=standin_pass(ROOT, "fleet", None, None, F.reference_answers(workers)),
        fleet_workers=workers,
    )
    found = [f for f in FC.check(ctx).findings if f.rule == FC.RULE_CHECKPOINTS]
    assert {f.message.split(":")[0] for f in found} == {"job mnist-ddp", "job gpt-small-fsdp"}
    assert (
        "team research role of worker(s) use1, usw2 may not write its research/ prefix"
        in found[0].message
    )


def test_a_job_whose_code_ships_in_a_configmap_reaches_every_worker():
    """A job of the manager running its own script ships it in a ConfigMap (codeSource:
    configmap, the default); MultiKueue copies the job object alone, so the manager exports
    its jobs' ConfigMaps (fleetJobConfigMaps) and each worker declares them. Planned as the
    fleet is after `up` manager, workers again: no finding. A worker planned before the
    manager is up lacks them: the finding, whose fix says what to run or change."""
    import yaml

    from trainforge.plan import fleet as F
    from trainforge.plan.check_types import PlanContext
    from trainforge.plan.core import plan_project, standin_pass

    config = yaml.safe_load((ROOT / "Pulumi.fleet.yaml").read_text())["config"]
    job = {"name": "own-code", "team": "research", "pool": "cpu", "workers": 1,
           "entrypoint": {"script": "examples/plain/train.py"}}  # fmt: skip
    overrides = {"trainforge:jobs": [*config["trainforge:jobs"], job]}
    result = plan_project(
        ROOT, "fleet", config_overrides=overrides, standins=False, echo_warnings=False
    )
    assert not [f for f in result.failing if f.rule == FC.RULE_INPUTS]
    [shipped] = result.inventory.outputs["fleetJobConfigMaps"]
    name = shipped["metadata"]["name"]
    assert name.startswith("own-code-src-") and shipped["metadata"]["namespace"] == "research"
    manager_cm = next(
        o.doc for o in result.objects if o.kind == "ConfigMap" and o.doc["metadata"]["name"] == name
    )
    workers = F.plan_workers(
        ROOT,
        "fleet",
        manager=standin_pass(ROOT, "fleet", None, None, None)(),
        also={"fleetJobConfigMaps": [shipped]},
    )
    for w in ("use1", "usw2"):
        [cm] = [d for d in workers[w].docs if d["kind"] == "ConfigMap"
                and d["metadata"]["name"] == name]  # fmt: skip
        assert cm["metadata"]["namespace"] == "research" and cm["immutable"] is True
        assert cm["data"] == manager_cm["data"]  # the worker's copy is the manager's code
    # before the manager is up, a worker declares none of them: the finding and its fix
    early = F.plan_workers(ROOT, "fleet")
    ctx = PlanContext(
        result.inventory, result.objects, result.inventory.declared, ROOT, fleet_workers=early
    )
    found = [f for f in FC.check(ctx).findings if f.rule == FC.RULE_INPUTS]
    assert {f.message.rsplit("which worker ", 1)[1].split(" ")[0] for f in found} == {
        "use1",
        "usw2",
    }
    assert found[0].message.startswith(f"job own-code: its pods read ConfigMap research/{name}")
    assert "`pulumi up` the manager, then each worker again" in found[0].fix
    assert "codeSource: image" in found[0].fix
    # the example's own jobs (presets, code in the image) ship no ConfigMap
    assert "fleetJobConfigMaps" not in shipped_plan("fleet").inventory.outputs


def test_the_managers_cost_prices_each_job_on_the_workers_not_on_its_own_pools():
    """The manager's pools start no node (docs/fleet.md): its Cost section prices each job on
    every worker that admits it, with the fleet section's figures (one model), and counts the
    dearest. The manager's gpu pool lists g5.xlarge and g6.xlarge in us-east-1; the job runs on
    g6.xlarge there (use1) or on g5.xlarge in us-west-2 (usw2), each timed on its own GPU."""
    plan = shipped_plan("fleet")
    fleet = next(s for s in plan.sections if s.title == FC.TITLE)
    cost = next(s for s in plan.sections if s.title == cost_check.SECTION_TITLE)
    jobs = {j["name"]: j for j in cost.data["jobs"]}
    gpt = jobs["gpt-small-fsdp"]
    runs = {w["worker"]: w for w in gpt["workers"]}
    assert (runs["use1"]["instanceType"], runs["use1"]["region"]) == ("g6.xlarge", "us-east-1")
    assert (runs["usw2"]["instanceType"], runs["usw2"]["region"]) == ("g5.xlarge", "us-west-2")
    assert "on 2 x L4" in runs["use1"]["durationDetail"]
    assert "on 2 x A10G" in runs["usw2"]["durationDetail"]
    fleet_gpt = {w["worker"]: w for w in next(j for j in fleet.data["jobs"]
                                               if j["job"] == "gpt-small-fsdp")["workers"]}  # fmt: skip
    for w in ("use1", "usw2"):
        assert runs[w]["onDemandPerHour"] == fleet_gpt[w]["onDemandPerHour"]
    assert (
        gpt["onDemandPerHour"] == runs["usw2"]["onDemandPerHour"] > runs["use1"]["onDemandPerHour"]
    )
    assert gpt["runCost"] == max(r["runCost"] for r in runs.values())
    assert gpt["dearestWorker"] == "usw2"
    text = "\n".join(cost.lines)
    assert (
        "gpt-small-fsdp: MultiKueue runs it on the first worker that admits it (use1, usw2)" in text
    )
    # a worker whose price the facts lack leaves the job's figure unknown, never the cheaper one
    mnist = jobs["mnist-ddp"]
    assert mnist["onDemandPerHour"] is None
    assert "warning: the price table has no on-demand m6i.2xlarge in us-west-2" in text
    # the manager's queue holds the job's quota while it runs on a worker: its longest run
    queue = next(s for s in plan.sections if s.title.startswith("Queue admission"))
    (runs_line,) = [ln for ln in queue.lines if "research/gpt-small-fsdp [" in ln]
    longest = max(r["durationSeconds"] for r in runs.values())
    assert f"runs ~{duration_text(longest)} (the longest on a worker that may run it)" in runs_line
    est = next(s for s in plan.sections if s.title.startswith("Memory per GPU"))
    assert "it runs on a worker, and the Cost section times it there" in "\n".join(est.lines)
    # the team's quota ceiling: the workers' types in their regions, not the manager's pools
    (team,) = cost.data["teams"]
    assert team["quotaCeiling"] == "unknown: no price for m6i.2xlarge in us-west-2"
