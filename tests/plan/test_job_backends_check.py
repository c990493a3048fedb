"""The plan check that rehearses the pod Kubeflow Trainer builds for each TrainJob and lists
every job's backend."""

from __future__ import annotations

import copy
from types import SimpleNamespace

from tests.jobs.helpers import CODE, DLC_IMAGE, GPU_POOL, target
from trainforge.core.contract import BACKENDS, Declared, DeclaredJob, PlatformContract
from trainforge.jobs.backends import emit
from trainforge.jobs.spec import parse_job
from trainforge.jobs.trainjob import runtime_manifest, runtime_manifests, runtimes_in
from trainforge.jobs.wiring import resolve_job
from trainforge.plan.check_types import PlanContext
from trainforge.plan.checks.job_backends import RULE, check


def declared(*backends: str) -> Declared:
    t = target(GPU_POOL, backends=BACKENDS)
    out = Declared(contracts=[PlatformContract(pools={}, teams={}, backends=BACKENDS)])
    for i, backend in enumerate(backends):
        raw = {"name": f"j{i}", "team": "research", "pool": "gpu-workloads", "backend": backend}
        job = resolve_job(parse_job(raw, "j"), t, "j")
        out.jobs.append(DeclaredJob(job, t, emit(job, t, CODE), f"job-research-j{i}"))
    return out


def obj(doc: dict) -> SimpleNamespace:
    return SimpleNamespace(kind=doc["kind"], obj_name=doc["metadata"]["name"], doc=doc)


def test_every_job_is_listed_with_its_backend_and_trainjob_pods_match():
    result = check(PlanContext(None, [], declared(*BACKENDS)))
    assert result.findings == []
    (section,) = result.sections
    assert [d["backend"] for d in section.data] == list(BACKENDS)
    # restartPolicy ExitCode is the jobs' default (docs/reliability.md): its runtime
    assert (
        section.lines[1]
        == "team-research/j1: trainjob -> TrainJob runtime trainforge-torch-exitcode"
    )
    assert "indexed-job" in section.title


def test_a_runtime_that_drops_what_the_job_needs_is_found():
    runtime = copy.deepcopy(runtime_manifest("ExitCode"))  # the default jobs' runtime
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    pod["template"]["spec"]["enableServiceLinks"] = True
    pod["template"]["spec"]["containers"][0]["ports"] = []  # no metrics port
    result = check(PlanContext(None, [obj(runtime)], declared("trainjob")))
    (finding,) = result.findings
    assert finding.rule == RULE and "job-research-j0" in finding.names
    assert "enableServiceLinks" in finding.message and "port metrics" in finding.message


def test_checkov_sees_the_pod_trainer_builds():
    """Scanners skip custom resources: a TrainJob's pod is written out as a wrapped Job."""
    from trainforge.plan.manifests import K8sObject, pod_template_jobs

    job = declared("trainjob").jobs[0]
    wl = job.emitted.workload
    ((path, wrapped),) = pod_template_jobs(K8sObject("urn:x", "j0", "t", wl))
    assert path == "team-research/job-j0-node.yaml"
    pod = wrapped["spec"]["template"]["spec"]
    assert pod["volumes"] == job.emitted.pod["spec"]["volumes"]
    assert (
        pod["containers"][0]["resources"] == job.emitted.pod["spec"]["containers"][0]["resources"]
    )
    other = copy.deepcopy(wl)
    other["spec"]["runtimeRef"]["name"] = "deepspeed-distributed"  # not the platform's
    assert pod_template_jobs(K8sObject("urn:x", "j0", "t", other)) == []


def test_a_command_holding_a_pulumi_output_is_rehearsed_not_crashed():
    """In a program the checkpoint bucket's name is an Output until AWS creates it: the
    trainjob command (--checkpoint-s3) and env hold it, and copy.deepcopy cannot copy one."""
    import dataclasses

    import pulumi
    from pulumi.runtime.sync_await import _ensure_event_loop

    _ensure_event_loop()
    bucket = pulumi.Output.from_input("tf-checkpoints").apply(lambda b: b)
    t = dataclasses.replace(target(GPU_POOL, backends=BACKENDS), checkpoint_bucket=bucket)
    raw = {"name": "j", "team": "research", "pool": "gpu-workloads", "backend": "trainjob"}
    raw.update(checkpoint={"s3Mirror": True}, image=DLC_IMAGE)
    job = resolve_job(parse_job(raw, "j"), t, "j")
    emitted = emit(job, t, CODE)
    command = emitted.workload["spec"]["trainer"]["command"]
    assert any(isinstance(a, pulumi.Output) for a in command)  # the case that crashed
    out = Declared(contracts=[PlatformContract(pools={}, teams={}, backends=BACKENDS)])
    out.jobs.append(DeclaredJob(job, t, emitted, "job-research-j"))
    result = check(PlanContext(None, [], out))
    assert result.findings == []
    assert result.sections[0].data[0]["backend"] == "trainjob"


def _trainjob(grace_period: int):
    t = target(GPU_POOL, backends=BACKENDS, queue="training")
    raw = {"name": "j", "team": "research", "pool": "gpu-workloads", "backend": "trainjob"}
    raw["checkpoint"] = {"gracePeriod": grace_period}
    job = resolve_job(parse_job(raw, "j"), t, "j")
    return job, t, emit(job, t, CODE)


def test_the_grace_period_survives_kueues_rewrite_of_an_admitted_trainjob():
    """Kueue 0.19 re-encodes an admitted TrainJob with Trainer v2.2.1's types, whose pod patch
    has no terminationGracePeriodSeconds: the runtime of the job's grace class carries it."""
    from trainforge.jobs.trainjob import effective_pod, kueue_admitted

    job, t, emitted = _trainjob(600)
    wl = emitted.workload
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]  # Kueue manages it
    admitted = kueue_admitted(wl)
    runtimes = {d["metadata"]["name"]: d for d in runtime_manifests()}
    runtime = runtimes[wl["spec"]["runtimeRef"]["name"]]
    assert wl["spec"]["runtimeRef"]["name"] == "trainforge-torch-exitcode-grace630"
    pod = effective_pod(admitted, runtime)
    assert pod["spec"]["terminationGracePeriodSeconds"] == 630
    assert emitted.pod["spec"]["terminationGracePeriodSeconds"] == 630  # = every backend's
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["TRAINFORGE_GRACE_PERIOD"] == "600"  # the runtime's own checkpoint budget

    # The form this replaced: the grace period in the patch, the runtime without one.
    patch_pod = wl["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    pod_patch = patch_pod["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    old = copy.deepcopy(wl)
    old_patch = old["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    old_patch["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ] = 630
    bare = copy.deepcopy(runtime)
    bare_pod = bare["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    del bare_pod["template"]["spec"]["terminationGracePeriodSeconds"]
    assert "terminationGracePeriodSeconds" not in pod_patch
    assert effective_pod(old, bare)["spec"].get("terminationGracePeriodSeconds") == 630
    lost = effective_pod(kueue_admitted(old), bare)["spec"]
    assert lost.get("terminationGracePeriodSeconds") is None  # Kubernetes' default 30 s


def test_a_runtime_without_the_grace_period_is_found_after_admission():
    job, t, emitted = _trainjob(600)
    runtime = copy.deepcopy(
        {d["metadata"]["name"]: d for d in runtime_manifests()}[
            emitted.workload["spec"]["runtimeRef"]["name"]
        ]
    )
    rjob = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    del rjob["template"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    out = Declared(contracts=[PlatformContract(pools={}, teams={}, backends=BACKENDS)])
    out.jobs.append(DeclaredJob(job, t, emitted, "job-j"))
    (finding,) = check(PlanContext(None, [obj(runtime)], out)).findings
    assert "terminationGracePeriodSeconds" in finding.message


def test_every_reader_of_a_trainjobs_pod_builds_it_from_the_plans_runtime():
    """One builder (`trainjob.built_pod` behind `backends.pod_templates`): a runtime the plan
    renders differently from the platform's stock one is what the policy rules, the reference
    check and the scanners' wrapped Job see of the TrainJob's pod, as the backend check and
    the pod-script rehearsal do (they read the same runtime, `runtime_docs`)."""
    from trainforge.plan.checks import existence, rules
    from trainforge.plan.manifests import K8sObject, pod_template_jobs
    from trainforge.plan.runner import Inventory, Recorded

    wl = declared("trainjob").jobs[0].emitted.workload
    runtime = copy.deepcopy(runtime_manifest("ExitCode"))  # the job's runtime, edited
    rjob = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    container = rjob["template"]["spec"]["containers"][0]
    container["envFrom"] = [{"secretRef": {"name": "edited-in"}}]
    container["securityContext"] = {**container["securityContext"], "privileged": True}
    objects = [
        K8sObject(f"urn:{d['kind']}", d["kind"], f"kubernetes:{d['apiVersion']}:{d['kind']}", d)
        for d in (runtime, wl)
    ]
    records = [Recorded(o.urn, o.type, o.name, None, True, o.doc) for o in objects]
    ctx = PlanContext(Inventory(project="p", stack="s", resources=records), objects)
    job = objects[1].ident
    privileged = [f for f in rules.check(ctx).findings if f.rule == "CKV_K8S_16"]
    assert job in {f.resource.split(" ")[0] for f in privileged}
    secrets = [r for _, r in existence.references(ctx) if r.kind == "Secret"]
    assert f"TrainJob {job} pod: container node envFrom" in {r.where for r in secrets}
    ((_, wrapped),) = pod_template_jobs(objects[1], runtimes_in([runtime]))
    assert wrapped["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"]
    (finding,) = check(PlanContext(None, objects, declared("trainjob"))).findings
    assert "container securityContext" in finding.message
