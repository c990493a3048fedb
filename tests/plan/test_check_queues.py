"""The plan shows how each team's Kueue queue admits the declared jobs: who runs (within
nominal quota or borrowing from the cohort), who waits and for what, who is preempted."""

from __future__ import annotations

import pulumi
import pytest

from tests.conftest import ROOT, shipped_plan
from trainforge.jobs import tenancy
from trainforge.plan import kueue as K
from trainforge.plan.checks import queues as Q
from trainforge.plan.core import plan_project
from trainforge.plan.verdict import verdict_lines

# Two teams sharing the dev GPU pool (1 GPU per node, at most 4 GPUs): 2 GPUs each; of
# the CPU pool (8 nodes within its limits: 61520m, and 111264Mi for pods as c5.2xlarge, the
# type of c5.2xlarge, m5.2xlarge that holds the least: jobs/quota.py `assumed`) 30 cores, 54Gi.
TEAMS = [
    {"name": "vision", "quota": {"gpus": "2", "cpu": "30", "memory": "54Gi"}},
    {"name": "nlp", "quota": {"gpus": "2", "cpu": "30", "memory": "54Gi"}},
]


def job(name: str, team: str, workers: int, **kw) -> dict:
    return {"name": name, "team": team, "pool": "gpu-workloads", "workers": workers,
            "model": "mlp", "steps": 100, **kw}  # fmt: skip


def plan(jobs, teams=TEAMS, **extra):
    overrides = {"trainforge:teams": teams, "trainforge:jobs": jobs, **extra}
    return plan_project(ROOT, "dev", standins=False, config_overrides=overrides)


def admission(result) -> tuple[list[str], dict[str, dict]]:
    (section,) = [s for s in result.sections if s.title.startswith("Queue admission")]
    return section.lines, {d["job"]: d for d in section.data}


def test_two_teams_one_borrowing_one_waiting():
    result = plan(
        [
            job("vision-small", "vision", 1),
            job("nlp-big", "nlp", 3),  # 3 GPUs: 1 more than nlp's nominal 2
            job("nlp-more", "nlp", 1),
        ]
    )
    lines, by_job = admission(result)
    assert by_job["vision-small"]["state"] == "runs" and not by_job["vision-small"]["borrowing"]
    # nlp-big runs on vision's idle GPU, lent through the cohort
    assert by_job["nlp-big"]["state"] == "runs"
    assert by_job["nlp-big"]["borrowing"]["nvidia.com/gpu"] == "1"
    # nothing is idle any more: nlp-more waits for quota
    assert by_job["nlp-more"]["state"] == "waits"
    assert any(
        ln.startswith("vision/vision-small [normal]: runs on gpu-workloads within its nominal")
        for ln in lines
    )
    assert "nlp/nlp-big [normal]: runs on gpu-workloads, borrowing " in next(
        ln for ln in lines if ln.startswith("nlp/nlp-big")
    )
    waits = next(ln for ln in lines if ln.startswith("nlp/nlp-more"))
    assert (
        "waits for 1 GPU in pool gpu-workloads: team nlp is guaranteed 2 GPUs there and uses "
        "3 GPUs; cohort trainforge has 0 GPUs idle" in waits
    )
    # a GPU job waits for GPUs: the CPU that comes with them is short with them (the plan's
    # words; Kueue's own message, quoted after them, names each short resource)
    ours, kueue = waits.split(" (Kueue: couldn't assign flavors to pod set main: ")
    assert "cores" not in ours and "memory" not in ours
    assert "insufficient unused quota for nvidia.com/gpu in flavor gpu-workloads" in kueue
    # the expected wait, from the durations of the jobs ahead
    # (when vision-small ends, its GPU is idle again and nlp-more borrows it)
    assert by_job["nlp-more"]["expectedStartSeconds"] == by_job["vision-small"]["durationSeconds"]
    assert lines[0].startswith(
        "1 of 3 job(s) do not start at once: nlp/nlp-more "
        + by_job["nlp-more"]["reason"]
        + "; expected to start after "
    )
    # who may take back what a borrowing job borrows
    assert "team vision may reclaim it at any time" in next(
        ln for ln in lines if ln.startswith("nlp/nlp-big")
    )
    # waiting for others is a report, not a violation
    assert not [v for v in result.failing if v.rule.startswith("TRAINFORGE_QUEUE")]
    # the verdict's first screen names the job that runs only by borrowing, and who may
    # reclaim it
    screen = verdict_lines(result, stack="dev")
    assert "Jobs that run only by borrowing (1):" in screen
    # (a long line wraps at whole words: read the screen's lines joined)
    assert (
        "nlp/nlp-big: borrows 1 GPU in pool gpu-workloads from cohort trainforge; team "
        "vision may reclaim it (preempts it)" in " ".join(ln.strip() for ln in screen)
    )


def test_a_team_takes_its_nominal_quota_back_by_preempting_the_borrower():
    result = plan(
        [
            job("vision-small", "vision", 1),
            job("nlp-big", "nlp", 3),
            job("vision-second", "vision", 1),  # vision's own second GPU, lent to nlp-big
            job("nlp-more", "nlp", 1),
        ]
    )
    _, by_job = admission(result)
    assert by_job["vision-second"]["state"] == "runs"
    assert by_job["nlp-big"]["state"] == "waits"
    assert by_job["nlp-big"]["preemptedBy"] == "vision-second"
    assert "vision reclaims its nominal quota" in by_job["nlp-big"]["reason"]
    assert by_job["nlp-more"]["state"] == "runs"  # fits nlp's own nominal quota again


def test_priority_orders_a_queue_and_may_preempt_the_teams_own_lower_jobs():
    result = plan(
        [
            job("first-low", "vision", 2, priority="low"),
            job("second-high", "vision", 2, priority="high"),
        ],
        teams=[{**TEAMS[0], "cohort": "solo"}, TEAMS[1]],
    )
    _, by_job = admission(result)
    assert by_job["second-high"]["state"] == "runs"
    assert by_job["first-low"]["state"] == "waits"  # declared first, but lower priority


def test_fifo_within_a_priority():
    result = plan(
        [job("a", "vision", 2), job("b", "vision", 2)],
        teams=[{**TEAMS[0], "cohort": "solo"}, TEAMS[1]],
    )
    _, by_job = admission(result)
    assert (by_job["a"]["state"], by_job["b"]["state"]) == ("runs", "waits")


def test_a_job_no_queue_could_ever_admit_is_a_waivable_finding():
    """The preview refuses a job bigger than all its team may hold; quota is per pool, so a job
    can still exceed what its queue may ever hold in *its* pool: the plan says so."""
    quota = {
        "gpus": "2",
        "cpu": "32",
        "memory": "128Gi",
        # 1 CPU (+1 borrowed) on the GPU pool instead of what comes with its GPUs
        "pools": {"gpu-workloads": {"cpu": "1"}},
        "borrowingLimit": {"cpu": "1"},
    }
    teams = [{**TEAMS[0], "quota": quota}, TEAMS[1]]
    jobs = [job("wide", "vision", 1, cpu="3")]
    result = plan(jobs, teams=teams)
    (finding,) = [v for v in result.failing if v.rule == Q.RULE_NEVER]
    assert "needs 3 cpu in pool gpu-workloads, but team queue vision can hold at most 2 " \
           "there (nominal 1 + up to 1 borrowed from cohort trainforge)" \
           in finding.message  # fmt: skip
    # then Kueue's own QuotaReserved message of the idle assignment, as `status`/`why` read it
    said = "; no flavor of ClusterQueue vision fits; on idle queues Kueue would say: "
    quoted = finding.message.split(said, 1)[1]
    assert quoted == (
        "couldn't assign flavors to pod set master: flavor training-workloads doesn't match "
        "node affinity, insufficient quota for cpu in flavor gpu-workloads, previously "
        "considered podsets requests (0) + current podset request (3) > maximum capacity (2)"
    ), finding.message
    pending = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": quoted}
    assert K.outlook({"status": {"conditions": [pending]}}) == ("never", quoted)
    _, by_job = admission(result)
    assert by_job["wide"]["state"] == "never"
    waivers = [{"resource": "wide", "rule": Q.RULE_NEVER, "reason": "quota grows next week"}]
    waived = plan(jobs, teams=teams, **{"trainforge-policy:waivers": waivers})
    assert not [v for v in waived.failing if v.rule == Q.RULE_NEVER]
    # the fix: a smaller pod, or the pool's own cpu key (set in `quota.pools`, it follows no
    # GPU): the quota model said "no raise lifts it" before; each applied is admitted
    key = "trainforge:teams[0].quota.pools.gpu-workloads.cpu"
    assert finding.fix == f"use cpu of at most 2 per pod, or set {key} to 2", finding.fix
    raised = [{**teams[0], "quota": {**quota, "pools": {"gpu-workloads": {"cpu": "2"}}}}, TEAMS[1]]
    for fixed, jobs_ in ((raised, jobs), (teams, [job("wide", "vision", 1, cpu="2")])):
        assert admission(plan(jobs_, teams=fixed))[1]["wide"]["state"] == "runs"


def test_a_trainjob_kueue_never_admits_is_quoted_with_kueue_s_pod_set_name():
    """Kueue names a TrainJob's pod sets after the replicatedJobs of the JobSet its runtime
    builds (release-0.19 c90ed70 pkg/controller/jobs/trainjob `podSets` -> pkg/controller/
    jobs/jobset `JobSet.PodSets`: NewPodSetReference(replicatedJob.Name), read 2026-11-30):
    the trainer's pod set is `node` (trainjob.REPLICATED_JOB); the plan quoted `main`."""
    quota = {"gpus": "2", "cpu": "32", "memory": "128Gi",
             "pools": {"gpu-workloads": {"cpu": "1"}}, "borrowingLimit": {"cpu": "1"}}  # fmt: skip
    result = plan([job("wide", "vision", 1, cpu="3", backend="trainjob")],
                  teams=[{**TEAMS[0], "quota": quota}, TEAMS[1]])  # fmt: skip
    (finding,) = [v for v in result.failing if v.rule == Q.RULE_NEVER]
    said = "; no flavor of ClusterQueue vision fits; on idle queues Kueue would say: "
    quoted = finding.message.split(said, 1)[1]
    assert quoted.startswith("couldn't assign flavors to pod set node: "), finding.message


@pytest.mark.parametrize(
    ("key", "value", "need"),
    [("cpu", "8", "needs cpu 8000m, g4dn.xlarge: 4 vCPU"),
     ("memory", "20Gi", "needs memory 20Gi, g4dn.xlarge: 16384Mi")],
)  # fmt: skip
def test_a_stack_job_whose_pod_fits_no_node_is_refused_for_the_node_not_sent_for_quota(
    key, value, need
):
    """Its GPU fits a gpu-workloads node (g4dn/g5.xlarge: 1 GPU, 4 vCPU, 16 GiB) and its team
    has the quota, but its cpu or memory fits no node: the stack refuses it at resolve time
    (jobs/wiring.py resolve_job on `capacity.rehearse`) with the node fit, naming the key,
    before any queue check could tell the user to get more quota (as submitted.py must for
    an SDK TrainJob, which no resolve_job sees)."""
    fat = job("fat", "vision", 1, gpusPerWorker=1, **{key: value})
    with pytest.raises(pulumi.RunError) as e:
        plan([fat])
    (line,) = [ln.strip() for ln in str(e.value).splitlines() if "trainforge:jobs" in ln]
    assert line.startswith(
        f"- trainforge:jobs[0] (fat).{key}: got '{value}'; no instance type of pool "
        f"'gpu-workloads' (g4dn.xlarge, g5.xlarge) can hold one pod: {need}"
    )
    assert line.endswith("Ask for less, or use a pool with bigger nodes "
                         "(docs/rehearsals.md, Scheduling rehearsal)")  # fmt: skip
    assert "quota" not in str(e.value)


def test_a_job_that_skipped_resolve_and_fits_no_node_is_told_the_node_fit_not_quota(monkeypatch):
    """resolve refusal turned off (a program that skips `resolve_job`): a pod of 8 or 20 cpu
    fits no gpu-workloads node (3.6 cpu left to pods). Beside TRAINFORGE_JOB_CANNOT_SCHEDULE,
    the queue's findings (never admitted: 20 cpu over the 14.4 its queue may hold there;
    admitted but unlaunchable: 8) named quota as the fix; they name the node fit, read from
    the one rehearsal (`capacity.rehearse`)."""
    from dataclasses import replace

    from trainforge.jobs import capacity, wiring
    from trainforge.plan.checks import scheduling as S

    class Unrefused:  # resolve_job's node-fit refusal turned off; everything else as it is
        def __getattr__(self, name):
            return getattr(capacity, name)

        @staticmethod
        def rehearse(*a, **kw):
            return replace(capacity.rehearse(*a, **kw), problems=[])

    monkeypatch.setattr(wiring, "capacity", Unrefused())
    fat = [job(n, "vision", 1, gpusPerWorker=1, cpu=c) for n, c in (("fat", "8"), ("fatter", "20"))]
    result = plan(fat)
    assert {v.message.split(" ")[1] for v in result.failing if v.rule == S.RULE} == {
        "vision/fat",
        "vision/fatter",
    }
    queue = {v.rule: v for v in result.failing if v.rule in (Q.RULE_NEVER, Q.RULE_UNLAUNCHABLE)}
    assert set(queue) == {Q.RULE_NEVER, Q.RULE_UNLAUNCHABLE}
    assert queue[Q.RULE_NEVER].message.startswith("job fatter ")
    assert queue[Q.RULE_UNLAUNCHABLE].message.startswith("job fat ")
    for v in queue.values():
        assert v.fix == (
            "more quota cannot help: its pod fits no node of pool gpu-workloads "
            f"({S.RULE} says by how much); ask for less per pod, or use a pool with bigger "
            "nodes (docs/rehearsals.md, Scheduling rehearsal)"
        )


@pytest.mark.parametrize("backend", ["pytorchjob", "indexed-job", "trainjob"])
def test_a_job_without_a_queue_label_is_admitted_through_the_teams_default_queue(
    monkeypatch, backend
):
    """Kueue manages every job of a team namespace (manageJobsWithoutQueueName) and labels
    one that names no queue with the namespace's LocalQueue `default` (the team's queue)."""
    monkeypatch.setattr(tenancy, "queue_labels", lambda job, target: {})
    result = plan([job("unlabelled", "vision", 1, backend=backend)])
    assert not [v for v in result.failing if v.rule == Q.RULE_LABEL]
    lines, by_job = admission(result)
    assert by_job["unlabelled"]["state"] == "runs" and by_job["unlabelled"]["queue"] == "vision"
    assert "(no queue label: through LocalQueue default)" in next(
        ln for ln in lines if ln.startswith("vision/unlabelled")
    )


def test_without_a_default_queue_a_job_without_its_label_is_a_finding(monkeypatch):
    from trainforge.platform import queues as platform_queues

    monkeypatch.setattr(tenancy, "queue_labels", lambda job, target: {})
    real = platform_queues.queue_objects
    monkeypatch.setattr(
        platform_queues,
        "queue_objects",
        lambda *a: [d for d in real(*a) if d["metadata"]["name"] != "default"],
    )
    result = plan([job("unqueued", "vision", 1)])
    (finding,) = [v for v in result.failing if v.rule == Q.RULE_LABEL]
    assert "no kueue.x-k8s.io/queue-name label" in finding.message
    # one wording of the fact: the rehearsal of a job any client wrote (admit_object: the
    # Kubeflow SDK, kubectl) says what the queue section says (it said "Kueue leaves it alone")
    alone = Q.admit_object([], "vision", {}, {"containers": []}, {})
    assert alone.workload.state == "never"
    assert finding.message == f"job unqueued (team vision): {alone.workload.reason}"


def test_a_declared_job_whose_object_is_not_found_is_not_called_unlabelled(monkeypatch):
    """A backend whose object lacks the trainforge.io/job label: the plan finds no object of
    the job at all, so "no queue-name label" (what it said) is not the fact: nothing of the
    job reaches Kueue."""
    from trainforge.jobs import indexed_job
    from trainforge.jobs.pod import JOB_LABEL

    real = indexed_job.workload_manifest

    def without_job_label(*a, **kw):
        doc = real(*a, **kw)
        doc["metadata"]["labels"].pop(JOB_LABEL)
        return doc

    monkeypatch.setattr(indexed_job, "workload_manifest", without_job_label)
    result = plan([job("lost", "vision", 1, backend="indexed-job")])
    assert not [v for v in result.failing if v.rule == Q.RULE_LABEL]
    (finding,) = [v for v in result.failing if v.rule == Q.RULE_NO_OBJECT]
    assert finding.message == "job lost (team vision): " + Q.no_object("lost", "vision")
    assert f"no object labelled {JOB_LABEL}=lost" in finding.message
    assert "queue-name" not in finding.message


@pytest.mark.parametrize("backend", ["pytorchjob", "indexed-job"])
def test_a_job_object_setting_suspend_is_a_finding(monkeypatch, backend):
    from trainforge.jobs import indexed_job, pytorchjob

    if backend == "pytorchjob":
        real = pytorchjob.run_policy
        monkeypatch.setattr(pytorchjob, "run_policy", lambda j: {**real(j), "suspend": False})
    else:
        real_manifest = indexed_job.workload_manifest

        def with_suspend(*a, **kw):
            doc = real_manifest(*a, **kw)
            doc["spec"]["suspend"] = False
            return doc

        monkeypatch.setattr(indexed_job, "workload_manifest", with_suspend)
    result = plan([job("owned", "vision", 1, backend=backend)])
    (finding,) = [v for v in result.failing if v.rule == Q.RULE_OWNED]
    assert "suspend (Kueue suspends and resumes the job)" in finding.message


def test_a_teams_gpus_are_split_over_its_gpu_pools_and_the_rest_is_borrowed():
    """2 GPUs over two 4-GPU pools: 1 guaranteed in each; the pools' other GPUs are the
    cohort's, so a 2-GPU job in either pool runs at once by borrowing one."""
    pools = [
        {"name": "gpu-workloads", "instanceTypes": ["g4dn.xlarge", "g5.xlarge"],
         "limits": {"gpus": 4}},
        {"name": "gpu-b", "instanceTypes": ["g5.xlarge"], "limits": {"gpus": 4}},
        {"name": "training-workloads", "instanceTypes": ["c5.2xlarge"]},
    ]  # fmt: skip
    teams = [{**TEAMS[0], "cohort": "solo"}]
    result = plan(
        [job("here", "vision", 2), {**job("there", "vision", 1), "pool": "gpu-b"}],
        teams=teams,
        **{"trainforge:nodePools": pools},
    )
    _, by_job = admission(result)
    assert by_job["here"]["state"] == "runs" and by_job["here"]["borrowing"]["nvidia.com/gpu"] \
        == "1"  # fmt: skip
    assert by_job["there"]["state"] == "runs" and not by_job["there"]["borrowing"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_shipped_job_is_admitted_at_once(stack):
    """No shipped job waits for quota: the sizing defaults and the quota shape fit them."""
    lines, by_job = admission(shipped_plan(stack))
    assert lines[0] == f"all {len(by_job)} job(s) are admitted at once"
    assert all(d["state"] == "runs" and not d["borrowing"] for d in by_job.values())
    assert all(d["sizing"] for d in by_job.values())  # the rule that sized each job


def test_a_quota_bigger_than_the_cluster_is_a_plan_line_naming_the_key_and_the_figures():
    """64 GPUs asked on a 32-GPU cluster: the plan says so (and the program warns), and
    the ClusterQueue's nominal quota is what exists, 32."""
    pools = [
        {"name": "gpu-workloads", "instanceTypes": ["g5.48xlarge"], "limits": {"gpus": 32}},
        {"name": "training-workloads", "instanceTypes": ["c5.2xlarge"],
         "limits": {"cpu": "64", "memory": "256Gi"}},
    ]  # fmt: skip
    # the CPU pool: 8 c5.2xlarge within its limits, 61.52 cores and 111264Mi for pods
    teams = [{"name": "vision", "quota": {"gpus": "64", "cpu": "32", "memory": "100Gi"}}]
    result = plan([job("small", "vision", 1)], teams=teams, **{"trainforge:nodePools": pools})
    lines, _ = admission(result)
    assert lines[0] == (
        "quota: trainforge:teams[0].quota.gpus: 64 asked, but the GPU pools (gpu-workloads) "
        "hold 32 shared by 1 team(s): team vision is guaranteed 32; the pools hold no more; "
        "fix: set trainforge:teams[0].quota.gpus to 32"
    )
    (cq,) = [o.doc for o in result.objects if o.kind == "ClusterQueue"]
    # the flavor by name: CPU pools come first in a ClusterQueue (platform.queues.flavor_order)
    (flavor,) = [
        f for f in cq["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "gpu-workloads"
    ]
    gpu = flavor["resources"][2]
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": "32"}
    # said once in the report (the queue section), once in the verdict's warnings; the
    # program warnings section keeps only what no section says (the alert receivers)
    from trainforge.plan import core, verdict

    report = [ln for s in result.sections for ln in s.lines]
    assert sum("quota.gpus: 64 asked" in ln for ln in report) == 1, report
    (own,) = [s for s in result.sections if s.title == core.PROGRAM_WARNINGS]
    assert not any("quota.gpus" in ln for ln in own.lines)
    assert any("monitoring.receivers" in ln for ln in own.lines)
    warns = verdict.verdict_lines(result, stack="dev")
    assert sum("quota.gpus: 64 asked" in ln for ln in warns) == 1, warns
    assert "  Queue admission: quota: trainforge:teams[0].quota.gpus: 64 asked" in "\n".join(warns)


def _one_replica_on(monkeypatch, replica: str, pool: str) -> None:
    """The PyTorchJob's `replica` pod template selects pool `pool` (the other keeps the job's)."""
    from trainforge.jobs import pytorchjob

    real = pytorchjob.workload_manifest

    def patched(*a, **kw):
        doc = real(*a, **kw)
        r = doc["spec"]["pytorchReplicaSpecs"][replica]
        t = r["template"]  # shared by both replicas, and holds Pulumi outputs: copy shallowly
        selector = {**t["spec"]["nodeSelector"], "trainforge.io/pool": pool}
        r["template"] = {**t, "spec": {**t["spec"], "nodeSelector": selector}}
        return doc

    monkeypatch.setattr(pytorchjob, "workload_manifest", patched)


@pytest.mark.parametrize("replica", ["Master", "Worker"])
def test_a_pod_template_no_flavor_takes_is_never_admitted_whichever_it_is(monkeypatch, replica):
    """Kueue reads every pod template as a pod set and assigns each its flavor
    (pkg/scheduler/flavorassigner at release-0.19): a Worker whose nodeSelector no flavor
    matches keeps the job out as a Master's does (the plan said the job "runs" and only
    noted the Worker's selector as a field Kueue owns)."""
    _one_replica_on(monkeypatch, replica, "nowhere")
    result = plan([job("two", "vision", 2)])
    (finding,) = [v for v in result.failing if v.rule == Q.RULE_NEVER]
    assert finding.message == (
        f"job two (team vision): no flavor of ClusterQueue vision matches its pod template "
        f"{replica}'s nodeSelector {{'trainforge.io/pool': 'nowhere'}}, tolerations and "
        "topology request"
    )
    assert admission(result)[1]["two"]["state"] == "never"
    assert not [v for v in result.failing if v.rule == Q.RULE_OWNED]


@pytest.mark.parametrize("replica", ["Master", "Worker"])
def test_a_pod_template_on_another_pool_is_counted_there_and_named(monkeypatch, replica):
    """One replica selects pool training-workloads, where team vision has no GPU quota: Kueue
    gives that pod set that flavor and never admits the job, whichever replica it is (the
    plan said a Worker's job "runs" on gpu-workloads); the selector that contradicts the
    flavor of the job's first pod template is named either way (it fired only for a
    template after the first, and said Kueue "could not start the job")."""
    _one_replica_on(monkeypatch, replica, "training-workloads")
    result = plan([job("two", "vision", 2)])
    assert admission(result)[1]["two"]["state"] == "never"
    (never,) = [v for v in result.failing if v.rule == Q.RULE_NEVER]
    assert "nvidia.com/gpu" in never.message and "training-workloads" in never.message
    (owned,) = [v for v in result.failing if v.rule == Q.RULE_OWNED]
    other, flavor = {
        "Master": ("Worker", "training-workloads"),
        "Worker": ("Worker", "gpu-workloads"),
    }[replica]
    assert f"in pod template {other}, which contradicts flavor {flavor}'s" in owned.message


def test_the_owned_selector_check_reads_every_pod_template():
    """Called with a flavor, the check names any template whose selector contradicts it,
    the first included (`_simulate` passes the first template's flavor, so there it names
    the others)."""
    from types import SimpleNamespace

    from trainforge.plan import kueue as K

    def replica(pool: str) -> dict:
        spec = {"containers": [{"name": "pytorch"}], "nodeSelector": {"trainforge.io/pool": pool}}
        return {"replicas": 1, "template": {"spec": spec}}

    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "two", "namespace": "vision"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica("a"), "Worker": replica("b")}},
    }
    flavor = K.Flavor("b", {"trainforge.io/pool": "b"}, [], None)
    assert Q._owned_fields(SimpleNamespace(doc=doc), flavor) == [
        "nodeSelector trainforge.io/pool=a in pod template Master, which contradicts flavor "
        "b's trainforge.io/pool=b: Kueue gives that pod set another flavor or none, not the "
        "job's"
    ]
    assert Q._owned_fields(SimpleNamespace(doc=doc), None) == []


def test_a_job_outside_the_namespace_limit_range_max_is_never_admitted(monkeypatch):
    """A team LimitRange whose Container `max` is 2 CPUs: Kueue's ValidateLimitRange refuses
    the Workload of a job whose pods ask 3 for good (release-0.19 pkg/workload/resources.go),
    and the queue check says so in Kueue's words through the same path as a request over its
    limit (TRAINFORGE_QUEUE_REQUESTS_OVER_LIMITS); it took the job as admissible before."""
    from trainforge.platform import teams

    real = teams.limit_range_spec

    def with_max(team):
        spec = real(team)
        spec["limits"][0]["max"] = {"cpu": "2"}
        return spec

    monkeypatch.setattr(teams, "limit_range_spec", with_max)
    result = plan([job("wide", "vision", 1, cpu="3"), job("narrow", "nlp", 1, cpu="1")])
    (finding,) = [v for v in result.failing if v.rule == Q.RULE_OVER_LIMITS]
    assert finding.message.startswith("job wide (team vision): Kueue never admits it")
    assert (
        "resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec."
        'containers[0]: Invalid value: ["cpu"]: requests must not be above the limitRange max'
        in finding.message
    )
    _, by_job = admission(result)
    assert by_job["wide"]["state"] == "never"
    assert by_job["narrow"]["state"] != "never"


def test_a_job_whose_request_exceeds_the_limit_range_default_limit_is_never_admitted(monkeypatch):
    """A container that requests 3 CPUs and names no CPU limit takes the team LimitRange's
    `default` (2: trainforge.stack.services.ContainerDefaults) as its limit; Kueue's
    ValidateResources then refuses the Workload for good (release-0.19
    pkg/workload/resources.go), and the plan says so in Kueue's own words, waivably."""
    from trainforge.jobs import pod

    real = pod.resources

    def cpu_without_limit(job, target):
        got = real(job, target)
        return {**got, "limits": {k: v for k, v in got["limits"].items() if k != "cpu"}}

    monkeypatch.setattr(pod, "resources", cpu_without_limit)
    result = plan([job("greedy", "vision", 1, cpu="3"), job("modest", "nlp", 1, cpu="1")])
    (finding,) = [v for v in result.failing if v.rule == Q.RULE_OVER_LIMITS]
    assert finding.message.startswith("job greedy (team vision): Kueue never admits it")
    assert (
        "resources validation failed: spec.podSets[0].template.spec.containers[0]: Invalid "
        'value: ["cpu"]: requests must not exceed its limits' in finding.message
    )
    assert Q.RULE_OVER_LIMITS in Q.RULES
    lines, by_job = admission(result)
    assert by_job["greedy"]["state"] == "never"
    assert "requests must not exceed its limits" in by_job["greedy"]["reason"]
    (line,) = [x for x in lines if x.startswith("vision/greedy [normal]: ")]
    assert "Kueue never admits it (QuotaReserved False, reason Pending)" in line
    assert by_job["modest"]["state"] != "never"  # 1 CPU under the default limit of 2
    assert not [v for v in result.failing if v.rule == Q.RULE_NEVER]


def test_a_trainjobs_refused_pod_is_named_by_its_replicated_jobs_pod_set(monkeypatch):
    """Kueue's pod sets of a TrainJob are the replicatedJobs of the JobSet its runtime builds,
    in order (Kueue release-0.19 jobset JobSet.PodSets): with an initializer before `node`, the
    trainer's container over its limit is spec.podSets[1], not podSets[0] as the plan said."""
    import copy

    from trainforge.jobs import pod, trainjob

    real_runtime, real_resources = trainjob.runtime_manifest, pod.resources

    def with_initializer(*a, **kw):
        doc = real_runtime(*a, **kw)
        rjobs = doc["spec"]["template"]["spec"]["replicatedJobs"]
        init = copy.deepcopy(rjobs[0])
        init["name"] = "dataset-initializer"
        rjobs.insert(0, init)
        return doc

    def cpu_without_limit(job, target):
        got = real_resources(job, target)
        return {**got, "limits": {k: v for k, v in got["limits"].items() if k != "cpu"}}

    monkeypatch.setattr(trainjob, "runtime_manifest", with_initializer)
    monkeypatch.setattr(pod, "resources", cpu_without_limit)
    result = plan(
        [
            job("greedy", "vision", 2, cpu="3", backend="trainjob"),
            job("alone", "nlp", 1, cpu="3", backend="trainjob"),  # numNodes 1: was missed
        ]
    )
    found = {v.message.split(" ", 2)[1]: v for v in result.failing if v.rule == Q.RULE_OVER_LIMITS}
    assert found.keys() == {"greedy", "alone"}
    for finding in found.values():
        assert (
            "resources validation failed: spec.podSets[1].template.spec.containers[0]: Invalid "
            'value: ["cpu"]: requests must not exceed its limits' in finding.message
        ), finding.message


USER_CODE = {"entrypoint": {"command": ["python", "-c", "pass"]}, "image": "repo/img:1"}


DEADLINE_ONLY = {"runPolicy": {"activeDeadlineSeconds": 7200}, **USER_CODE}  # no estimate


@pytest.mark.parametrize(
    ("first", "words", "runs"),
    [
        (job("nlp-first", "nlp", 2, **DEADLINE_ONLY), "within", "at most "),
        (job("nlp-first", "nlp", 2, expectedStepSeconds=72), "after", "~"),  # 100 x 72 s
    ],
)
def test_a_start_behind_a_run_timed_by_its_deadline_is_said_within_not_after(first, words, runs):
    """A job ahead timed by its activeDeadlineSeconds may end sooner (a ceiling): the waiting
    job starts within that time, not after it; with an estimate ahead, after it."""
    if "entrypoint" in first:
        first = {k: v for k, v in first.items() if k not in ("model", "steps")}
    result = plan(
        [
            job("vision-long", "vision", 2, expectedStepSeconds=1000),  # holds vision's 2
            first,
            job("nlp-second", "nlp", 2, expectedStepSeconds=36),
        ]
    )
    lines, by_job = admission(result)
    assert by_job["nlp-first"]["state"] == "runs" and by_job["nlp-second"]["state"] == "waits"
    assert by_job["nlp-first"]["durationSeconds"] == 7200
    second = next(ln for ln in lines if ln.startswith("nlp/nlp-second"))
    assert f"; expected to start {words} 2.0 h;" in second
    assert f"; runs {runs}2.0 h" in next(ln for ln in lines if ln.startswith("nlp/nlp-first"))
    assert "nlp/nlp-second waits for 2 GPUs in pool gpu-workloads" in lines[0]
    assert f"expected to start {words} 2.0 h" in lines[0]
    # the verdict's first screen says it the same way
    screen = " ".join(ln.strip() for ln in verdict_lines(result, stack="dev"))
    assert "nlp/nlp-second: waits for 2 GPUs" in screen
    assert f"expected to start {words} 2.0 h" in screen


def _with_initializer(monkeypatch, **pod) -> None:
    """The platform's runtimes with a `dataset-initializer` replicatedJob before `node`, its
    pod the trainer's with `pod` merged into it (its container's resources: `resources`)."""
    import copy

    from trainforge.jobs import trainjob

    real_runtime = trainjob.runtime_manifest

    def with_initializer(*a, **kw):
        doc = real_runtime(*a, **kw)
        rjobs = doc["spec"]["template"]["spec"]["replicatedJobs"]
        init = copy.deepcopy(rjobs[0])
        init["name"] = "dataset-initializer"
        spec = init["template"]["spec"]["template"]["spec"]
        if "resources" in pod:
            spec["containers"][0]["resources"] = pod["resources"]
        spec.update({k: v for k, v in pod.items() if k != "resources"})
        rjobs.insert(0, init)
        return doc

    monkeypatch.setattr(trainjob, "runtime_manifest", with_initializer)


@pytest.mark.parametrize(
    ("pod", "said"),
    [
        # more cpu than the queue can ever hold in any flavor
        ({"resources": {"requests": {"cpu": "500"}, "limits": {"cpu": "500"}}},
         "couldn't assign flavors to pod set dataset-initializer: insufficient quota for cpu"),
        # a node selector no flavor's labels match
        ({"nodeSelector": {"trainforge.io/pool": "nowhere"}},
         "no flavor of ClusterQueue vision matches its pod template dataset-initializer's "
         "nodeSelector {'trainforge.io/pool': 'nowhere'}"),
    ],
)  # fmt: skip
def test_a_trainjob_whose_initializer_no_flavor_takes_is_never_admitted(monkeypatch, pod, said):
    """Kueue assigns a flavor to every pod set of a TrainJob's Workload, one per replicatedJob
    of the JobSet its runtime builds (an initializer's too: kueue v0.19.2 pkg/controller/jobs/
    trainjob `podSets` -> jobset `JobSet.PodSets`; flavorassigner.go `assignFlavors`), and
    leaves it pending where one gets none; the plan took the trainer's pod set alone."""
    _with_initializer(monkeypatch, **pod)
    result = plan([job("init", "vision", 1, backend="trainjob")])
    _, by_job = admission(result)
    assert by_job["init"]["state"] == "never"
    (finding,) = [v for v in result.failing if v.rule == Q.RULE_NEVER]
    assert said in finding.message, finding.message


def _set_key(cfg: dict, key: str, value: str) -> None:
    """`trainforge:teams[2].quota.pools.l40s-pool.gpus` (a fix's key) set to `value` in `cfg`."""
    import re

    here, parts = cfg, re.findall(r"[^.\[\]]+|\[\d+\]", key.removeprefix("trainforge:"))
    for i, part in enumerate(parts):
        step = int(part[1:-1]) if part.startswith("[") else part
        if i == len(parts) - 1:
            here[step] = value
        else:
            here = here.setdefault(step, {}) if isinstance(step, str) else here[step]


def test_the_never_admitted_fix_is_a_change_kueue_admits():
    """The wave-19 review (reviewpe Pulumi.bad12fix.yaml): team speech, alone in cohort
    speech-solo, `quota.gpus: 16` but `quota.pools.l40s-pool.gpus: 8`, borrowing none; 4
    workers x 4 GPUs in l40s-pool fit the namespace (16) but never the queue there (8). The
    fix said "make the job smaller, or give the team more nominal quota": now it is the
    preview refusal's (`wiring.quota_fix`, on the quota model the queues are rendered from),
    and each of its alternatives, applied to the stack and re-planned, is admitted."""
    import copy

    import yaml

    cfg = yaml.safe_load((ROOT / "tests/jobs/data/quota_solo_cohort.yaml").read_text())
    cfg["teams"][2]["quota"]["gpus"] = "16"
    spec = {"name": "speech-ddp", "team": "speech", "pool": "l40s-pool", "workers": 4,
            "model": "mlp", "steps": 100}  # fmt: skip

    def run(cfg: dict, job: dict):
        pools = {
            "trainforge:nodePools": cfg["nodePools"],
            "trainforge:nodeGroups": cfg["nodeGroups"],
        }
        return plan([job], teams=cfg["teams"], **pools)

    result = run(cfg, spec)
    (finding,) = [v for v in result.failing if v.rule == Q.RULE_NEVER]
    # its 8 GPUs' CPU and no more: the pool's 8 unguaranteed GPUs go to cohort trainforge
    # with their CPU (jobs/quota.py `_cohort_shares`), not their CPU to speech-solo
    assert "team queue speech can hold at most 94.98 there (nominal 94.98 + up to 0" in (
        finding.message
    )
    team = "trainforge:teams[2].quota"
    assert finding.fix == (
        f"use workers: 2, or set {team}.pools.l40s-pool.gpus to 16 and {team}.gpus to 24"
    ), finding.fix
    smaller, bigger = finding.fix.removeprefix("use ").split(", or set ")
    raised = copy.deepcopy(cfg)
    for change in bigger.split(" and "):
        _set_key(raised, *change.split(" to "))
    workers = int(smaller.removeprefix("workers: "))
    for fixed, job in ((raised, spec), (cfg, {**spec, "workers": workers})):
        after = run(fixed, job)
        assert not [v for v in after.failing if v.rule == Q.RULE_NEVER]
        assert admission(after)[1]["speech-ddp"]["state"] == "runs"


@pytest.mark.parametrize(
    ("init_cpu", "words"),
    [
        ("5", "within"),  # fits once the first job's initializer is given back: sooner
        ("9", "after"),  # fits only once the first job ends
    ],
)
def test_a_trainjobs_initializer_holds_its_quota_from_admission(monkeypatch, init_cpu, words):
    """Kueue admits a TrainJob with every pod set charged, its initializer's too, and gives the
    initializer's quota back when its replicatedJob succeeds (kueue v0.19.2 8eab687, pkg/
    controller/jobs/trainjob/trainjob_controller.go `ReclaimablePods`, as jobset's; read
    2026-11-30). Team vision alone may hold 14.4 CPUs in gpu-workloads (7.2 nominal, 7.2 the
    cohort's own); two jobs of 3 CPUs, each with an initializer there (its nodeSelector) of 5
    or 9 CPUs: the second waits; the plan charged the trainers alone and ran both at once. Let
    in by the first job's initializer (3 + 3 + 5 <= 14.4), its start is a bound ("within": the
    initializer ends before the job); needing the first job's trainer's CPUs too
    (3 + 3 + 9 > 14.4), it starts after."""
    cpu = {"cpu": init_cpu, "memory": "64Mi"}
    _with_initializer(
        monkeypatch, resources={"requests": cpu, "limits": cpu},
        nodeSelector={"trainforge.io/pool": "gpu-workloads"},  # the trainer's flavor
    )  # fmt: skip
    result = plan(
        [
            job("first", "vision", 1, cpu="3", backend="trainjob"),
            job("second", "vision", 1, cpu="3", backend="trainjob"),
        ],
        teams=TEAMS[:1],
    )
    lines, by_job = admission(result)
    assert by_job["first"]["state"] == "runs"
    assert by_job["second"]["state"] == "waits", lines
    need = 3 + int(init_cpu)
    assert by_job["second"]["reason"].startswith(
        f"waits for {need} cores in pool gpu-workloads: team vision is guaranteed 7.2 cores "
        f"there and uses {need} cores"
    ), by_job["second"]["reason"]
    assert by_job["second"]["expectedStartIsBound"] is (words == "within")
    second = next(ln for ln in lines if ln.startswith("vision/second"))
    assert f"; expected to start {words} " in second, second


def test_where_the_borrowing_limit_holds_it_the_never_admitted_fix_raises_it():
    """The wave-20 review (rev20pe Pulumi.pe3.yaml): research holds 4 GPUs of l40s by the
    split and may borrow 4 (`borrowingLimit: {gpus: 4}`); l40s-ft's 4 workers x 4 GPUs never
    fit. The fix said no raise lifts it, yet pe4.yaml (`borrowingLimit: {gpus: 12}`) admits
    it: the fix now names that key at the least value, and applied and re-planned, the job
    is admitted; so is the smaller job the fix offers."""
    import copy

    import yaml

    cfg = yaml.safe_load((ROOT / "tests/jobs/data/quota_borrow_limit.yaml").read_text())
    spec = {"name": "l40s-ft", "team": "research", "pool": "l40s", "workers": 4,
            "model": "mlp", "steps": 100}  # fmt: skip

    def run(cfg: dict, job: dict):
        pools = {
            "trainforge:nodePools": cfg["nodePools"],
            "trainforge:nodeGroups": cfg["nodeGroups"],
        }
        return plan([job], teams=cfg["teams"], **pools)

    (finding,) = [v for v in run(cfg, spec).failing if v.rule == Q.RULE_NEVER]
    assert "team queue research can hold at most 8 there" in finding.message
    key = "trainforge:teams[2].quota.borrowingLimit.gpus"
    assert finding.fix == f"use workers: 2, or set {key} to 12", finding.fix
    raised = copy.deepcopy(cfg)
    _set_key(raised, key, "12")
    for fixed, job in ((raised, spec), (cfg, {**spec, "workers": 2})):
        after = run(fixed, job)
        assert not [v for v in after.failing if v.rule == Q.RULE_NEVER]
        assert admission(after)[1]["l40s-ft"]["state"] == "runs"


def test_a_job_its_queue_cannot_admit_waits_on_kueue_s_quota_not_the_resource_quota():
    """The wave-20 review (rev20kf Pulumi.kf.yaml): team research's 4 GPUs, jobs of 2, 2 and
    3 GPUs. The third waited "for the team's total ... namespace research's ResourceQuota":
    but ClusterQueue research holds 4 with no lender, so Kueue keeps its Workload pending
    with its own message (what status and why show); a ResourceQuota queues nothing."""
    teams = [{"name": "research", "quota": {"gpus": "4", "cpu": "32", "memory": "128Gi"}}]
    jobs = [
        job("llm-ft", "research", 2),
        job("tj-ft", "research", 2),
        job("bert-pt", "research", 3),
    ]
    lines, by_job = admission(plan(jobs, teams=teams))
    assert [by_job[j]["state"] for j in ("llm-ft", "tj-ft", "bert-pt")] == [
        "runs",
        "runs",
        "waits",
    ]
    reason = by_job["bert-pt"]["reason"]
    assert "ResourceQuota" not in reason, reason
    assert reason.startswith(
        "waits for 3 GPUs in pool gpu-workloads: team research is guaranteed 4 GPUs there"
    ), reason
    # Kueue's own QuotaReserved message, as plan.kueue.words writes it
    assert "(Kueue: couldn't assign flavors to pod set main: " in reason, reason
    assert reason.endswith(
        "insufficient unused quota for nvidia.com/gpu in flavor gpu-workloads, 3 more needed)"
    ), reason


def test_where_only_a_raised_pool_and_borrowing_limit_together_admit_it_the_fix_says_both():
    """Team research asks 2 GPUs of dev's gpu-workloads (4 GPUs) beside team other asking 100,
    and may borrow none: the split gives it 0. A borrowing limit alone gets it the pool's 4 at
    most; a raised pool alone goes to other's guarantee, which research may not borrow. Wave
    20's line said no raise lifts it (`quota.borrow_raise` was tried alone). The fix now raises
    both (`quota._raise_with_borrowing`); applied to the stack and planned again, the job is
    admitted."""
    import copy

    import yaml

    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    teams = [
        {"name": "research", "quota": {"gpus": "2", "borrowingLimit": {"gpus": "0"}}},
        {"name": "other", "quota": {"gpus": "100"}},
    ]
    cfg = {"trainforge:teams": teams, "trainforge:nodePools": stack["trainforge:nodePools"]}
    wide = job("wide", "research", 6)
    with pytest.raises(pulumi.RunError) as err:
        plan([wide], **cfg)
    fix = str(err.value).split("the job could never start: ")[1]
    assert fix.startswith("set trainforge:nodePools[0].limits.gpus to "), fix
    changes = fix.removeprefix("set ").split(" (Karpenter")[0].split(" and ")
    assert [c.split(" to ")[0] for c in changes] == [
        "trainforge:nodePools[0].limits.gpus",
        "trainforge:teams[0].quota.borrowingLimit.gpus",
    ], fix
    raised = {k.removeprefix("trainforge:"): v for k, v in copy.deepcopy(cfg).items()}
    for change in changes:
        _set_key(raised, *change.split(" to "))
    after = plan([wide], **{f"trainforge:{k}": v for k, v in raised.items()})
    assert not [v for v in after.failing if v.rule == Q.RULE_NEVER]
    assert admission(after)[1]["wide"]["state"] == "runs"


def test_a_declared_trainjob_over_its_quota_with_its_initializers_gets_the_sized_fix(monkeypatch):
    """A declared TrainJob (backend trainjob) of 3 CPUs with a dataset initializer of 12 CPUs
    on its pool: team vision may hold 14.4 CPUs in gpu-workloads, each pod set fits alone, both
    never (Kueue charges a Workload's pod sets together). The finding said the generic "make
    the job smaller, or give the team more nominal quota": it now says what it needs with its
    initializers and gives the fix SDK TrainJobs get (`queues.quota_change`, the one function),
    sized beside the initializer; each alternative applied and planned again is admitted."""
    import copy

    import yaml

    cpu = {"cpu": "12", "memory": "64Mi"}
    _with_initializer(
        monkeypatch, resources={"requests": cpu, "limits": cpu},
        nodeSelector={"trainforge.io/pool": "gpu-workloads"},  # the trainer's flavor
    )  # fmt: skip
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    pools = {"nodePools": stack["trainforge:nodePools"]}
    spec = job("init", "vision", 1, cpu="3", backend="trainjob")

    def run(pools: dict, spec: dict):
        return plan([spec], teams=TEAMS[:1], **{f"trainforge:{k}": v for k, v in pools.items()})

    (finding,) = [v for v in run(pools, spec).failing if v.rule == Q.RULE_NEVER]
    assert (
        "needs 15 cpu in pool gpu-workloads (3 its trainer, 12 its initializers), but team "
        "queue vision can hold at most 14.4 there" in finding.message
    ), finding.message
    assert finding.fix.startswith("use cpu of at most 2.4 per pod, or set "), finding.fix
    smaller, bigger = finding.fix.removeprefix("use ").split(", or set ")
    raised = copy.deepcopy(pools)
    for change in bigger.split(" (Karpenter")[0].split(" and "):
        _set_key(raised, *change.split(" to "))
    less = {**spec, "cpu": smaller.removeprefix("cpu of at most ").split(" ")[0]}
    for fixed, sent in ((raised, spec), (pools, less)):
        after = run(fixed, sent)
        assert not [v for v in after.failing if v.rule == Q.RULE_NEVER], after.failing
        assert admission(after)[1]["init"]["state"] == "runs"


def test_a_job_admitted_by_preempting_says_it_starts_once_the_preempted_pods_are_gone():
    """vision-small and nlp-big (3 GPUs, borrowing 1) are admitted in Kueue's first cycle;
    vision's second job, within vision's nominal quota, reclaims it by preempting nlp-big in
    the next cycle. The plan said nlp-big was "expected to start after 0 s" (its admission
    in the instant it was preempted) and that vision-two simply runs: now nlp-big starts when
    vision-small's hour frees its GPUs, and vision-two's line names the job it preempts and
    that its pods start once that job's pods are gone, within their terminationGracePeriod
    Seconds as the emitted pod spec says."""
    from trainforge.core.pods import pod_templates as walk
    from trainforge.jobs.backends import SHAPES
    from trainforge.jobs.duration import duration_text

    result = plan(
        [
            job("vision-small", "vision", 1, expectedStepSeconds=36),
            job("nlp-big", "nlp", 3, expectedStepSeconds=72),
            job("vision-two", "vision", 1, expectedStepSeconds=36),
        ]
    )
    lines, by_job = admission(result)
    assert by_job["nlp-big"]["preemptedBy"] == "vision-two"
    assert by_job["nlp-big"]["expectedStartSeconds"] == 3600  # vision-small's end
    big = next(ln for ln in lines if ln.startswith("nlp/nlp-big"))
    assert "; expected to start after 60 min;" in big and "after 0 s" not in big, big
    # the cohort's 2 idle GPUs are nlp's own guarantee, which its preempted job no longer uses
    assert (
        "team nlp is guaranteed 2 GPUs there and uses 0 GPUs; cohort trainforge has 2 GPUs "
        "idle (team nlp's own unused guarantee: 2 GPUs; to borrow: none)" in big
    ), big
    assert "after 0 s" not in lines[0]
    (obj,) = [
        o for o in result.objects
        if o.namespace == "nlp" and o.doc.get("metadata", {}).get("name") == "nlp-big"
        and o.kind == "PyTorchJob"
    ]  # fmt: skip
    grace = max(t.spec["terminationGracePeriodSeconds"] for t in walk(obj.doc, SHAPES))
    assert by_job["vision-two"]["preempts"] == ["nlp-big"]
    assert by_job["vision-two"]["preemptedStopSeconds"] == grace
    two = next(ln for ln in lines if ln.startswith("vision/vision-two"))
    assert (
        "runs on gpu-workloads within its nominal quota; it preempts nlp-big: its pods start "
        "once nlp-big's pods are gone, within their terminationGracePeriodSeconds "
        f"({duration_text(grace)})" in two
    ), two
