"""The queue rehearsal (tests/plan/queue_rehearsal.py): two teams sharing GPU pools submit
in both orders through the plan's queue simulation, on the Kueue objects the platform
renders. Each team reaches its guarantee within one job's duration of asking, and no
admitted gang needs more than its pool can launch; with one flavor given the old nominal
quota (each team's whole total in every pool), the rehearsal fails."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from tests.plan import queue_rehearsal as R
from trainforge.platform import queues
from trainforge.platform.services_config import KueueConfig


def _docs():
    return queues.queue_objects(R.TEAMS, R.POOLS, KueueConfig())


def _reaches_its_guarantee_in_time(docs) -> list[str]:
    """Problems: a later team that waited longer than the jobs ahead of it run, or a gang
    its pool could not launch."""
    problems = []
    for title, jobs in R.orders().items():
        by, sim = R.simulate(docs, R.POOLS, jobs)
        problems += [f"{title}: {u}" for u in sim.unlaunchable]
        first, later = jobs
        w = by[later.job]
        if w.started is None or w.started - later.at > first.hours * 3600:
            problems.append(f"{title}: {later.job} started at {w.started}")
    return problems


@pytest.mark.parametrize("order", list(R.orders()))
def test_each_team_reaches_its_guarantee_within_one_jobs_duration(order):
    jobs = R.orders()[order]
    by, sim = R.simulate(_docs(), R.POOLS, jobs)
    first, later = jobs
    # the later team asks for no more than its guarantee in that pool, and gets it at once:
    # it reclaims what the first team borrowed (reclaimWithinCohort: Any)
    plan = queues.quota_plan(R.TEAMS, R.POOLS)
    assert later.gpus <= plan.nominal[later.team][later.pool]["nvidia.com/gpu"]
    assert by[later.job].started == later.at
    assert by[first.job].preempted_by == later.job
    assert sim.unlaunchable == []
    assert _reaches_its_guarantee_in_time(_docs()) == []


def test_a_label_less_job_is_admitted_through_the_default_queue_in_the_rehearsal():
    docs = _docs()
    assert {
        (d["metadata"]["namespace"], d["spec"]["clusterQueue"])
        for d in docs
        if d["kind"] == "LocalQueue" and d["metadata"]["name"] == "default"
    } == {("llm", "llm"), ("vision", "vision")}


def test_the_old_nominal_quota_on_one_flavor_fails_the_rehearsal():
    """Mutation: each team's whole total as its nominal quota in one pool (no Cohort share),
    as before: the guarantees add up to more than the pool holds, the second team's job is
    admitted within its 'guarantee' and the pool cannot launch it."""
    docs = _docs()
    totals = {t.name: t.quota.gpus for t in R.TEAMS}
    for d in docs:
        if d["kind"] in ("ClusterQueue", "Cohort"):
            for f in d["spec"]["resourceGroups"][0]["flavors"]:
                if f["name"] != "h100":
                    continue
                for r in f["resources"]:
                    if r["name"] == "nvidia.com/gpu":
                        r["nominalQuota"] = (
                            totals[d["metadata"]["name"]] if d["kind"] == "ClusterQueue" else "0"
                        )
    problems = _reaches_its_guarantee_in_time(docs)
    assert problems and "llm first: vision-finetune: 40 GPUs admitted in pool h100" in problems[0]


def test_the_worked_example_in_docs_teams_md_is_the_rehearsals_output():
    text = (ROOT / "docs" / "teams.md").read_text()
    m = re.search(r"<!-- queue-rehearsal -->\n```text\n(.*?)```", text, re.S)
    assert m, "docs/teams.md has no queue-rehearsal block"
    assert m.group(1) == R.worked_example()


def test_an_sdk_trainjob_without_label_tolerations_or_selector_is_admitted_to_a_pool():
    """What the Kubeflow SDK sends: no queue label, no tolerations, no nodeSelector. Kueue
    queues it through LocalQueue `default`, picks the first flavor with room, and adds the
    flavor's node labels and tolerations to its pods, so they land on the tainted pool."""
    from fractions import Fraction

    from trainforge.plan.checks import queues as Q

    pod = {"containers": [{"name": "node", "image": "pytorch"}]}
    got = Q.admit_object(_docs(), "vision", {}, pod, {Q.GPU: Fraction(8)}, pods=4)
    assert (got.local_queue, got.workload.queue, got.workload.state) == (
        "default", "vision", "admitted"
    )  # fmt: skip
    assert got.workload.flavor == "h100"
    assert got.node_selector == {"trainforge.io/pool": "h100"}
    assert got.tolerations == [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule", "operator": "Equal", "value": "true"}
    ]
    # without the flavor's tolerations the pool's taint refuses it: no flavor at all
    docs = _docs()
    for d in docs:
        if d["kind"] == "ResourceFlavor":
            d["spec"].pop("tolerations")
    refused = Q.admit_object(docs, "vision", {}, pod, {Q.GPU: Fraction(8)}, pods=4)
    assert refused.workload.state == "never" and "no flavor" in refused.workload.reason


def _submitted_ctx(docs, pool_taints):
    """A plan of the rehearsal's Kueue objects and pool h100's NodePool (labels and taints
    as trainforge.platform.karpenter.node_pool_spec writes them)."""
    from trainforge.plan.check_types import PlanContext
    from trainforge.plan.manifests import K8sObject
    from trainforge.plan.runner import Inventory

    nodepool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "h100"},
        "spec": {
            "template": {
                "metadata": {"labels": {"trainforge.io/pool": "h100"}},
                "spec": {"taints": pool_taints},
            }
        },
    }
    objects = [
        K8sObject(urn=f"urn:{i}", name=f"o{i}", type="kubernetes:test", doc=d)
        for i, d in enumerate([*docs, nodepool])
    ]
    return PlanContext(inventory=Inventory(project="p", stack="s", resources=[]), objects=objects)


def test_a_submitted_job_kueue_admits_onto_a_pool_its_pods_cannot_land_on_never_starts():
    """admit_submitted's second question: Kueue admits the job on a flavor, and adds the
    flavor's node labels and tolerations; do its pods then tolerate the taints of the
    NodePool those labels select? A flavor that names neither the pool's taint (nodeTaints,
    which Kueue's flavor assignment checks) nor a toleration lets Kueue admit the job onto
    nodes its pods never land on; the pods' own toleration, or the flavor's, lets them on."""
    from trainforge.plan.checks import queues as Q

    gpu_taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    doc = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sdk", "namespace": "vision"},
    }
    pod = {"spec": {"containers": [{"name": "node", "resources": {"limits": {Q.GPU: "8"}}}]}}
    # as planned: the flavor names the taint and tolerates it
    w = Q.admit_submitted(_submitted_ctx(_docs(), [gpu_taint]), doc, pod, 4)
    assert (w.state, w.flavor, w.reason) == ("admitted", "h100", "")
    bare = _docs()
    for d in bare:
        if d["kind"] == "ResourceFlavor":
            del d["spec"]["nodeTaints"], d["spec"]["tolerations"]
    w = Q.admit_submitted(_submitted_ctx(bare, [gpu_taint]), doc, pod, 4)
    assert (w.state, w.reason) == (
        "never",
        "admitted on flavor h100, but its pods do not tolerate the pool's taint nvidia.com/gpu",
    )
    tolerating = {"spec": {**pod["spec"], "tolerations": [{"key": Q.GPU, "operator": "Exists"}]}}
    w = Q.admit_submitted(_submitted_ctx(bare, [gpu_taint]), doc, tolerating, 4)
    assert (w.state, w.flavor) == ("admitted", "h100")
    # a pool taint the flavor does not know of refuses the planned flavor's pods too
    extra = {"key": "trainforge.io/reserved", "value": "x", "effect": "NoExecute"}
    w = Q.admit_submitted(_submitted_ctx(_docs(), [gpu_taint, extra]), doc, pod, 4)
    assert w.state == "never" and w.reason.endswith("taint trainforge.io/reserved"), w.reason
    # one that does not keep pods off (PreferNoSchedule) does not
    soft = {**extra, "effect": "PreferNoSchedule"}
    assert Q.admit_submitted(_submitted_ctx(_docs(), [gpu_taint, soft]), doc, pod, 4).state == (
        "admitted"
    )


def test_a_submitted_pod_over_its_limit_range_default_is_refused_with_kueues_message():
    """An SDK or kubectl job whose container requests 2Gi memory and names a 1Gi limit in a
    namespace whose LimitRange has only `defaultRequest` is fine; one that names no request
    takes a `defaultRequest` of 2Gi over its own 1Gi limit: Kueue's ValidateResources
    refuses it (admit_object, the SDK placement rehearsal's entry)."""
    from fractions import Fraction

    from trainforge.plan.checks import queues as Q

    lr = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "l", "namespace": "vision"},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"memory": "2Gi"}}]},
    }
    capped = {"containers": [{"name": "node", "resources": {"limits": {"memory": "1Gi"}}}]}
    need = {Q.GPU: Fraction(8)}
    assert Q.admit_object(_docs(), "vision", {}, capped, need, pods=4).workload.state == "admitted"
    got = Q.admit_object([*_docs(), lr], "vision", {}, capped, need, pods=4).workload
    assert got.state == "never"
    assert got.reason == (
        "Kueue never admits it (QuotaReserved False, reason Pending): resources "
        "validation failed: spec.podSets[0].template.spec.containers[0]: Invalid value: "
        '["memory"]: requests must not exceed its limits'
    )
    # a LimitRange of another namespace is not this one's
    other = {**lr, "metadata": {"name": "l", "namespace": "nlp"}}
    assert Q.admit_object([*_docs(), other], "vision", {}, capped, need, pods=4).workload.state == (
        "admitted"
    )


def test_a_sent_trainjob_kueue_refuses_for_its_limits_is_that_finding_not_never_admitted():
    """The SDK rehearsal (checks/submitted.py) reads admit_submitted: a TrainJob whose node
    limits 1Gi of memory in a namespace whose LimitRange requests 2Gi by default is filed under
    TRAINFORGE_QUEUE_REQUESTS_OVER_LIMITS with Kueue's message, not as a quota it never gets."""
    from trainforge.jobs import trainjob
    from trainforge.plan import sdk
    from trainforge.plan.check_types import PlanContext
    from trainforge.plan.checks import queues as Q
    from trainforge.plan.checks import submitted as SB
    from trainforge.plan.manifests import K8sObject
    from trainforge.plan.runner import Inventory

    lr = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "l", "namespace": "vision"},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"memory": "2Gi"}}]},
    }
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "capped", "namespace": "vision"},
        "spec": {
            "runtimeRef": {"name": trainjob.SDK_RUNTIME, "kind": "ClusterTrainingRuntime"},
            "trainer": {"numNodes": 1, "resourcesPerNode": {"limits": {"memory": "1Gi"}}},
        },
    }

    def judged(*docs) -> list:
        objects = [
            K8sObject(urn=f"urn:{i}", name=f"o{i}", type="kubernetes:test", doc=d)
            for i, d in enumerate([*_docs(), trainjob.sdk_runtime_manifest(), *docs])
        ]
        objects.append(
            K8sObject(urn=f"{sdk.SENT_URN}TrainJob::capped", name="capped", type="t", doc=job)
        )
        inv = Inventory(project="p", stack="s", resources=[])
        inv.submitted = sdk.Submission("train.py", "vision", created=[job])
        return SB.check(PlanContext(inventory=inv, objects=objects)).findings

    assert Q.RULE_OVER_LIMITS not in {f.rule for f in judged()}
    (f,) = [f for f in judged(lr) if f.rule.startswith("TRAINFORGE_QUEUE_")]
    assert f.rule == Q.RULE_OVER_LIMITS
    assert f.message.endswith(
        "Kueue never admits it (QuotaReserved False, reason Pending): resources "
        "validation failed: spec.podSets[0].template.spec.containers[0]: Invalid value: "
        '["memory"]: requests must not exceed its limits'
    )


def test_a_sent_trainjobs_resources_per_node_replace_its_runtimes_container_limits():
    """A ClusterTrainingRuntime whose node container limits CPU to 2 (and memory), and an SDK
    TrainJob asking 3 cores per node (requests only, as the SDK writes them): Trainer v2.2.1's
    JobSet builder replaces the container's whole resources with resourcesPerNode
    (kubeflow/trainer v2.2.1 pkg/runtime/framework/plugins/jobset/builder.go:145-159,
    `WithResources`), so the pod asks 3 cores and has no limits, and Kueue admits it. The
    rehearsal merged them (requests 3 under the runtime's limit 2) and said Kueue never admits
    it: requests must not exceed its limits."""
    from trainforge.jobs import trainjob
    from trainforge.plan import sdk
    from trainforge.plan.check_types import PlanContext
    from trainforge.plan.checks import queues as Q
    from trainforge.plan.checks import submitted as SB
    from trainforge.plan.checks.job_backends import runtime_docs
    from trainforge.plan.manifests import K8sObject
    from trainforge.plan.runner import Inventory

    runtime = trainjob.sdk_runtime_manifest()
    node = trainjob.runtime_node(runtime)
    [container] = [c for c in node["spec"]["containers"] if c["name"] == trainjob.CONTAINER]
    container["resources"] = {"limits": {"cpu": "2", "memory": "4Gi"}}
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "sdk", "namespace": "vision"},
        "spec": {
            "runtimeRef": {"name": trainjob.SDK_RUNTIME, "kind": "ClusterTrainingRuntime"},
            "trainer": {"numNodes": 1, "resourcesPerNode": {"requests": {"cpu": "3"}}},
        },
    }
    objects = [
        K8sObject(urn=f"urn:{i}", name=f"o{i}", type="kubernetes:test", doc=d)
        for i, d in enumerate([*_docs(), runtime])
    ]
    objects.append(K8sObject(urn=f"{sdk.SENT_URN}TrainJob::sdk", name="sdk", type="t", doc=job))
    inv = Inventory(project="p", stack="s", resources=[])
    inv.submitted = sdk.Submission("train.py", "vision", created=[job])
    ctx = PlanContext(inventory=inv, objects=objects)
    # the pod Trainer creates: the TrainJob's resources, none of the runtime's limits
    pod = trainjob.built_pod(job, runtime_docs(ctx))
    assert pod is not None
    [built] = [c for c in pod["spec"]["containers"] if c["name"] == trainjob.CONTAINER]
    assert built["resources"] == {"requests": {"cpu": "3"}}
    # what the user reads: no refusal for requests over limits the pod does not have
    rules = {f.rule for f in SB.check(ctx).findings}
    assert Q.RULE_OVER_LIMITS not in rules and Q.RULE_NEVER not in rules, rules


def test_a_sent_trainjobs_pod_sets_are_its_runtimes_replicated_jobs_in_order():
    """Kueue's pod sets of a TrainJob are the replicatedJobs of the JobSet its runtime builds,
    in order (K.trainjob_podsets, which the queue check reads too): with a dataset-initializer
    before `node`, the SDK rehearsal names the node's container over its limit podSets[1]
    (it said podSets[0]), and refuses a job whose initializer is over its limit (it admitted
    it: it validated the node alone)."""
    import copy

    from trainforge.jobs import trainjob
    from trainforge.plan.checks import queues as Q
    from trainforge.plan.checks.job_backends import runtime_docs

    runtime = trainjob.sdk_runtime_manifest()
    rjobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    init = copy.deepcopy(rjobs[0])
    init["name"] = "dataset-initializer"
    rjobs.insert(0, init)
    init_pod = init["template"]["spec"]["template"]["spec"]
    # the team's LimitRange: a container naming no CPU limit is limited to 2
    lr = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l", "namespace": "vision"},
          "spec": {"limits": [{"type": "Container", "default": {"cpu": "2"}}]}}  # fmt: skip

    def sent(node_cpu: str) -> tuple[str, str]:
        job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
               "metadata": {"name": "sdk", "namespace": "vision"},
               "spec": {"runtimeRef": {"name": trainjob.SDK_RUNTIME},
                        "trainer": {"numNodes": 1,
                                    "resourcesPerNode": {"requests": {"cpu": node_cpu}}}}}  # fmt: skip
        ctx = _submitted_ctx([*_docs(), lr, runtime], [])
        pod = trainjob.built_pod(job, runtime_docs(ctx))
        w = Q.admit_submitted(ctx, job, pod, 1)
        return w.state, w.reason

    over = ': Invalid value: ["cpu"]: requests must not exceed its limits'
    state, reason = sent("3")
    assert state == "never" and f"spec.podSets[1].template.spec.containers[0]{over}" in reason
    assert "podSets[0]" not in reason, reason
    init_pod["containers"][0]["resources"] = {"requests": {"cpu": "3"}}
    state, reason = sent("1")
    assert state == "never" and f"spec.podSets[0].template.spec.containers[0]{over}" in reason
    init_pod["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    assert sent("1") == ("admitted", "")
