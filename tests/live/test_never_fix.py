"""`trainforge why --stack` of a Workload Kueue never admits prints the sized fix the plan
prints for the same job on the same stack (one function: plan.checks.queues.workload_fix on
quota_change), against the fake API server of test_status.py."""

from __future__ import annotations

import copy
import pathlib

import pytest
import yaml

from tests.live import recorded
from tests.live.test_status import FakeApi, run
from trainforge.jobs.backends import pod_templates
from trainforge.live import cli
from trainforge.plan import kueue as K
from trainforge.plan.checks import queues as Q
from trainforge.plan.core import plan_project

ROOT = pathlib.Path(__file__).resolve().parents[2]
JOB = {"name": "speech-ddp", "team": "speech", "pool": "l40s-pool", "workers": 4,
       "model": "mlp", "steps": 100}  # fmt: skip


def _stack() -> dict:
    """The wave-19 review's stack (tests/jobs/data/quota_solo_cohort.yaml: team speech alone
    in its cohort, 8 GPUs of l40s-pool by `quota.pools`, borrowing none) with quota.gpus 16:
    4 workers x 4 GPUs fit the namespace but never the queue in l40s-pool."""
    cfg = yaml.safe_load((ROOT / "tests/jobs/data/quota_solo_cohort.yaml").read_text())
    cfg["teams"][2]["quota"]["gpus"] = "16"
    return {f"trainforge:{k}": cfg[k] for k in ("teams", "nodePools", "nodeGroups")}


def _routes(result, job_doc: dict, message: str) -> dict:
    """The cluster as `pulumi up` left it with the job submitted: its PyTorchJob, the
    Workload Kueue made of it (its pod templates' pod sets, QuotaReserved False with what
    Kueue says on idle queues), its LocalQueue and ClusterQueue as the plan rendered them."""
    ns = job_doc["metadata"]["namespace"]
    name = job_doc["metadata"]["name"]
    labels = job_doc["metadata"].get("labels") or {}
    lq_name = labels.get("kueue.x-k8s.io/queue-name", "default")
    (lq,) = [o.doc for o in result.objects if o.kind == "LocalQueue" and o.namespace == ns
             and o.doc["metadata"]["name"] == lq_name]  # fmt: skip
    cq_name = lq["spec"]["clusterQueue"]
    (cq,) = [o.doc for o in result.objects if o.kind == "ClusterQueue"
             and o.doc["metadata"]["name"] == cq_name]  # fmt: skip
    job = copy.deepcopy(job_doc)
    job["metadata"]["uid"] = "uid-never"
    job["metadata"]["creationTimestamp"] = "2026-11-25T11:18:00Z"
    job["status"] = {"conditions": []}
    sets = [
        {"name": (t.name or "main").lower(), "count": t.replicas, "template": t.template}
        for t in pod_templates(job_doc, build=False)
    ]
    wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": recorded.meta(f"pytorchjob-{name}-1a2b3", ns, "2026-11-25T11:18:01Z",
                                  labels={"kueue.x-k8s.io/job-uid": "uid-never"}),
        "spec": {"queueName": lq_name, "podSets": sets},
        "status": {"conditions": [recorded.cond("QuotaReserved", "False",
                                                "2026-11-25T11:18:01Z", "Pending", message)]},
    }  # fmt: skip
    kueue = recorded.KUEUE
    return {
        f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs/{name}": job,
        f"{kueue}/namespaces/{ns}/workloads?labelSelector=kueue.x-k8s.io/job-uid=uid-never": {
            "kind": "WorkloadList", "items": [wl]},
        f"{kueue}/namespaces/{ns}/workloads": {"kind": "WorkloadList", "items": [wl]},
        f"{kueue}/namespaces/{ns}/localqueues/{lq_name}": lq,
        f"{kueue}/clusterqueues/{cq_name}": cq,
        f"/api/v1/namespaces/{ns}/pods?labelSelector=trainforge.io/job={name}": {
            "kind": "PodList", "items": []},
        f"/api/v1/namespaces/{ns}/events": {"kind": "EventList", "items": []},
    }  # fmt: skip


@pytest.fixture
def stack_dir(tmp_path) -> pathlib.Path:
    """A project holding `Pulumi.dev.yaml`: dev's config with `_stack()`'s keys."""
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    dev = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    dev["config"].update(_stack())
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(dev))
    return tmp_path


def test_why_prints_the_plans_sized_fix_for_a_job_kueue_never_admits(capsys, tmp_path, stack_dir):
    """The plan's never-admitted finding for speech-ddp and `why --stack dev` of the same job
    submitted to a cluster with the plan's queues say the same fix; without --stack, why
    says where the sized fix comes from instead of the generic one alone."""
    result = plan_project(
        ROOT, "dev", standins=False, config_overrides={**_stack(), "trainforge:jobs": [JOB]}
    )
    (finding,) = [v for v in result.failing if v.rule == Q.RULE_NEVER]
    assert finding.fix.startswith("use workers: 2, or set trainforge:teams[2]"), finding.fix
    said = finding.message.split("on idle queues Kueue would say: ")[1]
    (obj,) = [o for o in result.objects if o.kind == "PyTorchJob"
              and o.doc["metadata"]["name"] == JOB["name"]]  # fmt: skip
    api = FakeApi(_routes(result, obj.doc, said))
    api.config = api.kubeconfig(tmp_path)
    try:
        argv = [JOB["name"], "-n", obj.namespace, "--kubeconfig", api.config]
        code, out, err = run(
            capsys, cli.why_main, *argv, "--stack", "dev", "--project-dir", str(stack_dir),
            now=lambda: recorded.NOW,
        )  # fmt: skip
        assert code == 0, err
        line = next(ln for ln in out.splitlines() if "it never waits its turn" in ln)
        assert line.split("it never waits its turn: ", 1)[1] == finding.fix, out
        code, out, _ = run(capsys, cli.why_main, *argv, now=lambda: recorded.NOW)
        assert code == 0 and "(--stack STACK: the sized fix)" in out, out
        code, _, err = run(
            capsys, cli.why_main, *argv, "--stack", "nowhere", "--project-dir", str(stack_dir),
            now=lambda: recorded.NOW,
        )  # fmt: skip
        assert code == 2 and err.startswith("trainforge why: --stack nowhere: "), err
        assert "Traceback" not in err
    finally:
        api.httpd.shutdown()


def test_why_counts_a_trainjobs_initializers_as_the_plan_does(monkeypatch, capsys, tmp_path):
    """A declared TrainJob of 3 CPUs whose runtime runs a 12-CPU dataset initializer first
    (tests/plan/test_check_queues.py's case: team vision may hold 14.4 CPUs in gpu-workloads):
    the plan sizes the fix beside the initializer (queues.quota_change with `beside=`), and
    `why --stack` of the same job submitted now says the same line. Before, why summed the
    initializer into the trainer's pods (15 CPUs over 2 pods) and sized another fix."""
    from tests.plan.test_check_queues import TEAMS, _with_initializer
    from trainforge.jobs import trainjob
    from trainforge.live import stack_fix
    from trainforge.live.gather import gather
    from trainforge.live.kube import Api

    cpu = {"cpu": "12", "memory": "64Mi"}
    _with_initializer(
        monkeypatch, resources={"requests": cpu, "limits": cpu},
        nodeSelector={"trainforge.io/pool": "gpu-workloads"},
    )  # fmt: skip
    spec = {"name": "init", "team": "vision", "pool": "gpu-workloads", "workers": 1,
            "model": "mlp", "steps": 100, "cpu": "3", "backend": "trainjob"}  # fmt: skip
    teams = {"trainforge:teams": TEAMS[:1]}
    result = plan_project(
        ROOT, "dev", standins=False, config_overrides={**teams, "trainforge:jobs": [spec]}
    )
    (finding,) = [v for v in result.failing if v.rule == Q.RULE_NEVER]
    assert finding.fix.startswith("use cpu of at most 2.4 per pod, or set "), finding.fix
    (obj,) = [o for o in result.objects if o.kind == trainjob.KIND]
    doc, ns = copy.deepcopy(obj.doc), obj.namespace
    runtime = trainjob.runtime_of(doc, trainjob.runtimes_in(o.doc for o in result.objects))
    assert runtime is not None
    node = trainjob.built_pod(doc, trainjob.runtimes_in(o.doc for o in result.objects))
    # the Workload Kueue makes of it: one pod set per replicatedJob of the JobSet
    sets = [
        {"name": t.name, "count": trainjob.num_nodes(doc, runtime)
         if t.name == trainjob.REPLICATED_JOB else t.replicas,
         "template": node if t.name == trainjob.REPLICATED_JOB else t.template}
        for t in pod_templates(dict(runtime))
    ]  # fmt: skip
    assert [s["name"] for s in sets] == ["dataset-initializer", trainjob.REPLICATED_JOB]
    labels = doc["metadata"].get("labels") or {}
    lq_name = labels.get("kueue.x-k8s.io/queue-name", "default")
    (lq,) = [o.doc for o in result.objects if o.kind == "LocalQueue" and o.namespace == ns
             and o.doc["metadata"]["name"] == lq_name]  # fmt: skip
    cq_name = lq["spec"]["clusterQueue"]
    (cq,) = [o.doc for o in result.objects if o.kind == "ClusterQueue"
             and o.doc["metadata"]["name"] == cq_name]  # fmt: skip
    doc["metadata"].update(uid="uid-never", creationTimestamp="2026-11-25T11:18:00Z")
    doc["status"] = {"conditions": []}
    said = finding.message.split("on idle queues Kueue would say: ")[1]
    wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": recorded.meta("trainjob-init-1a2b3", ns, "2026-11-25T11:18:01Z",
                                  labels={"kueue.x-k8s.io/job-uid": "uid-never"}),
        "spec": {"queueName": lq_name, "podSets": sets},
        "status": {"conditions": [recorded.cond("QuotaReserved", "False",
                                                "2026-11-25T11:18:01Z", "Pending", said)]},
    }  # fmt: skip
    kueue = recorded.KUEUE
    routes = {
        f"/apis/{trainjob.API_VERSION}/namespaces/{ns}/trainjobs/init": doc,
        f"{kueue}/namespaces/{ns}/workloads?labelSelector=kueue.x-k8s.io/job-uid=uid-never": {
            "kind": "WorkloadList", "items": [wl]},
        f"{kueue}/namespaces/{ns}/workloads": {"kind": "WorkloadList", "items": [wl]},
        f"{kueue}/namespaces/{ns}/localqueues/{lq_name}": lq,
        f"{kueue}/clusterqueues/{cq_name}": cq,
        f"/api/v1/namespaces/{ns}/pods?labelSelector={trainjob.POD_NAME_LABEL}=init": {
            "kind": "PodList", "items": []},
        f"/api/v1/namespaces/{ns}/events": {"kind": "EventList", "items": []},
    }  # fmt: skip
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    dev = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    dev["config"].update(teams)
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(dev))
    api = FakeApi(routes)
    api.config = api.kubeconfig(tmp_path)
    argv = ["init", "-n", ns, "--kubeconfig", api.config]
    try:
        g = gather(Api(api.config, None), ns, "init", metrics=False)
        # Kueue's words: the initializer's 12 before the trainer's 3 (the pod sets' sum, not
        # one pod set's own) are not never alone; the stack's queue model says never
        assert "previously considered podsets requests (12)" in said, said
        assert K.over_beside(g.workload) and K.outlook(g.workload)[0] != K.NEVER
        assert stack_fix.never_fits(g, tmp_path, "dev")
        code, out, err = run(
            capsys, cli.why_main, *argv, "--stack", "dev", "--project-dir", str(tmp_path),
            now=lambda: recorded.NOW,
        )  # fmt: skip
        assert code == 0, err
        assert out.startswith("Kueue never admits it (QuotaReserved False, reason Pending): ")
        line = next(ln for ln in out.splitlines() if "it never waits its turn" in ln)
        assert line.split("it never waits its turn: ", 1)[1] == finding.fix, out
        # without --stack: not said never, and where the answer is
        code, out, err = run(capsys, cli.why_main, *argv, now=lambda: recorded.NOW)
        assert code == 0 and out.startswith("Kueue has not admitted it: "), out
        assert "(--stack STACK: never, and the sized fix, where none does)" in out, out
    finally:
        api.httpd.shutdown()
    assert stack_fix.never_fix(g, tmp_path, "dev") == finding.fix


def test_never_fits_reads_every_flavor_the_pod_sets_may_take():
    """Over beside the pod sets before it is never only where no choice of flavors holds
    them all: 12 + 3 CPUs in a flavor of 14.4 is never alone; a second flavor the initializer
    may take makes it "not now" (Kueue tries it once the first is used)."""
    from fractions import Fraction

    def cq(flavors: list[str]) -> dict:
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "q"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": f, "resources": [{"name": "cpu", "nominalQuota": "14400m"}]}
                for f in flavors]}]},
        }  # fmt: skip

    flavors = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": {"name": f}, "spec": {}} for f in ("a", "b")]  # fmt: skip
    init = K.PodSet("dataset-initializer", 1, {"cpu": Fraction(12)})
    node = K.PodSet("node", 1, {"cpu": Fraction(3)})
    for names, never in ((["a"], True), (["a", "b"], False)):
        m = K.read([cq(names), *flavors])
        q = m.queues["q"]
        assert K.never_fits(q, [init, node], K.Quotas(m.queues, m.shared), m.flavors) is never
    m = K.read([cq(["a"]), *flavors])
    assert not K.never_fits(
        m.queues["q"], [init, K.PodSet("node", 1, {"cpu": Fraction(2)})],
        K.Quotas(m.queues, m.shared), m.flavors,
    )  # fmt: skip
