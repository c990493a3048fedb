"""Kueue in the dev and prod plans: objects the v0.19 CRDs accept, one flavor per pool, a
queue per team with its quota, cohort and policies, priorities, topology for EFA node groups,
the chart's configuration, and a namespace quota that never refuses what the queue admits."""

from __future__ import annotations

import pathlib
import re
import subprocess
from dataclasses import replace
from fractions import Fraction

import jsonschema
import pytest
import yaml

from tests.conftest import ROOT, shipped_plan
from trainforge.core.contract import PoolFacts, PoolLimits, Taint
from trainforge.core.quantity import parse_quantity
from trainforge.jobs import capacity, node_facts, pod
from trainforge.plan import crds, kueue_validate
from trainforge.plan.mocks import run_mocked
from trainforge.platform import kueue, queues
from trainforge.platform.services_config import (
    KueueConfig,
    PoolQuota,
    TeamConfig,
    TeamQuotaConfig,
)
from trainforge.stack.file import read_stack_file

KINDS = {
    "ClusterQueue",
    "Cohort",
    "LocalQueue",
    "ResourceFlavor",
    "Topology",
    "WorkloadPriorityClass",
}


def validator(kind: str) -> jsonschema.Draft7Validator:
    """The strict schema of the Kueue CRD the plan also validates against (package data)."""
    version = crds.crd(kueue_validate.API_VERSION, kind)["spec"]["versions"]
    assert next(v for v in version if v["name"] == "v1beta2")["storage"]
    return crds.validator(kueue_validate.API_VERSION, kind)


@pytest.fixture(scope="module")
def plans():
    return {stack: shipped_plan(stack) for stack in ("dev", "prod")}


def kueue_objects(result) -> list[dict]:
    return [o.doc for o in result.objects if o.doc["apiVersion"].startswith("kueue.x-k8s.io/")]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_kueue_objects_validate_against_the_upstream_crds(plans, stack):
    docs = kueue_objects(plans[stack])
    assert {d["kind"] for d in docs} >= KINDS - {"Topology"}
    for doc in docs:
        assert doc["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        errors = [
            f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator(doc["kind"]).iter_errors(doc)
        ]
        assert errors == [], (doc["kind"], doc["metadata"]["name"])
        # the CRDs' CEL rules (x-kubernetes-validations), which a JSON schema cannot express
        assert kueue_validate.kueue_findings(doc) == [], doc["metadata"]["name"]
    assert plans[stack].clean


def test_the_crds_cel_rules_catch_what_they_refuse():
    cq = queues.cluster_queue(TeamConfig(name="a"), [GPU_POOL], KueueConfig(), "a")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()  # one resource short
    cq["spec"].pop("cohortName")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "1"
    found = kueue_validate.kueue_findings(cq)
    assert any("same number of resources" in f for f in found)
    assert any("borrowingLimit must be nil when cohort is empty" in f for f in found)
    topo = queues.topology()
    topo["spec"]["levels"].reverse()  # hostname no longer last
    assert kueue_validate.kueue_findings(topo) == [
        "spec.levels: Invalid value: the kubernetes.io/hostname label can only be used at the "
        "lowest level of topology"
    ]


def test_one_flavor_per_pool_with_its_labels_and_taints(plans):
    result = plans["prod"]
    ((contract),) = result.inventory.declared.contracts
    flavors = {d["metadata"]["name"]: d["spec"] for d in kueue_objects(result) if d["kind"] ==
               "ResourceFlavor"}  # fmt: skip
    assert set(flavors) == set(contract.pools)
    for name, pool in contract.pools.items():
        spec = flavors[name]
        assert spec["nodeLabels"] == dict(pool.node_selector) == {"trainforge.io/pool": name}
        taints = [(t["key"], t.get("value"), t["effect"]) for t in spec.get("nodeTaints", [])]
        assert taints == [(t.key, t.value, t.effect) for t in pool.taints]
        # Kueue adds a flavor's tolerations to an admitted job's pod templates unless an equal
        # one is there: exactly what the pod builder gives a job on the pool
        tolerations = [{k: v for k, v in t.items()} for t in pod.pool_tolerations(pool, gpu=False)]
        assert spec.get("tolerations", []) == tolerations
        assert bool(tolerations) == bool(pool.taints)
        # topology-aware only where nodes exist before pods (the reserved EFA node group)
        assert ("topologyName" in spec) == (name == "p4d-reserved") == pool.topology_aware
    (topology,) = [d for d in kueue_objects(result) if d["kind"] == "Topology"]
    assert [lv["nodeLabel"] for lv in topology["spec"]["levels"]] == [
        "topology.k8s.aws/network-node-layer-1",
        "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3",
        "kubernetes.io/hostname",
    ]
    assert not [d for d in kueue_objects(plans["dev"]) if d["kind"] == "Topology"]


def test_a_queue_per_team_only_its_namespace_may_use(plans):
    docs = kueue_objects(plans["prod"])
    # the acceptance tests' queue is its own (tests/platform/test_acceptance_manifests.py)
    docs = [d for d in docs if "trainforge-acceptance" not in (d["metadata"]["name"],
            d["metadata"].get("namespace"))]  # fmt: skip
    cqs = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "ClusterQueue"}
    lqs = {}
    for d in docs:
        if d["kind"] == "LocalQueue":
            lqs.setdefault(d["metadata"]["namespace"], {})[d["metadata"]["name"]] = d["spec"]
    assert set(cqs) == set(lqs) == {"llm", "vision"}
    for team, spec in cqs.items():
        # `training` for trainforge's jobs, `default` for a job that names no queue
        assert lqs[team] == {n: {"clusterQueue": team} for n in ("training", "default")}
        assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": team}}
        assert spec["cohortName"] == "trainforge"
        assert spec["queueingStrategy"] == "BestEffortFIFO"
        assert spec["preemption"] == {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        }
        (group,) = spec["resourceGroups"]
        assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    priorities = {d["metadata"]["name"]: d["value"] for d in docs if d["kind"] ==
                  "WorkloadPriorityClass"}  # fmt: skip
    assert priorities == {"high": 10000, "normal": 1000, "low": 100}


GPU_POOL = PoolFacts("gpu", gpus_per_node=4, node_selector=(("trainforge.io/pool", "gpu"),),
                     taints=(Taint("nvidia.com/gpu", "NoSchedule", "true"),))  # fmt: skip
GPU2_POOL = PoolFacts("gpu2", gpus_per_node=8, node_selector=(("trainforge.io/pool", "gpu2"),))
CPU_POOL = PoolFacts("cpu", node_selector=(("trainforge.io/pool", "cpu"),))
POOLS = [GPU_POOL, GPU2_POOL, CPU_POOL]


def test_a_teams_gpus_are_split_over_its_pools_in_proportion_to_what_they_hold():
    team = TeamConfig(name="a", quota=TeamQuotaConfig(gpus="9", cpu="10", memory="3Gi"))
    gpu = replace(GPU_POOL, limits=PoolLimits(gpus=4))
    gpu2 = replace(GPU2_POOL, limits=PoolLimits(gpus=8))
    cpu = replace(CPU_POOL, limits=PoolLimits(cpu="20", memory="8Gi"))
    q = queues.nominal_quotas(team, [gpu, gpu2, cpu])
    # 9 GPUs over 4 + 8: 3 and 6; the CPU pool gets the cpu/memory totals; nodes unknown
    # here, so a GPU pool's cpu/memory are the team's totals
    assert [q[p]["nvidia.com/gpu"] for p in ("gpu", "gpu2", "cpu")] == [3, 6, 0]
    assert q["cpu"]["cpu"] == 10 and q["cpu"]["memory"] == 3 * 2**30
    # more than the pools hold: what they hold, and a warning naming the key and the figures
    big = TeamConfig(name="big", quota=TeamQuotaConfig(gpus="64"))
    plan = queues.quota_plan([big], [gpu2])
    assert plan.nominal["big"]["gpu2"]["nvidia.com/gpu"] == 8
    assert plan.warnings == (
        "trainforge:teams[0].quota.gpus: 64 asked, but the GPU pools (gpu2) hold 8 shared by "
        "1 team(s): team big is guaranteed 8; the pools hold no more; fix: set "
        "trainforge:teams[0].quota.gpus to 8",
    )


def test_in_every_pool_the_teams_nominal_quotas_add_up_to_at_most_what_it_holds():
    """Two teams asking 64 + 16 of one 32-GPU pool: scaled to 26 + 6, never 48 on 32."""
    pool = replace(GPU2_POOL, limits=PoolLimits(gpus=32))
    a = TeamConfig(name="vision", quota=TeamQuotaConfig(gpus="64"))
    b = TeamConfig(name="nlp", quota=TeamQuotaConfig(gpus="16"))
    plan = queues.quota_plan([a, b], [pool])
    got = {t: plan.nominal[t]["gpu2"]["nvidia.com/gpu"] for t in ("vision", "nlp")}
    assert sum(got.values()) == 32 and got["vision"] > got["nlp"]
    assert plan.shared["trainforge"]["gpu2"]["nvidia.com/gpu"] == 0
    assert plan.warnings[0].startswith("trainforge:teams[0].quota.gpus: 64 asked, but the GPU "
                                       "pools (gpu2) hold 32")  # fmt: skip
    # room left over is the cohort's
    small = queues.quota_plan([b], [pool])
    assert small.shared["trainforge"]["gpu2"]["nvidia.com/gpu"] == 16 and not small.warnings


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_rendered_guarantees_exist(plans, stack):
    """Per flavor, the ClusterQueues' nominal quotas add up to at most what the pool holds,
    and with the Cohort's share to exactly that (no GPU of a pool that nobody may use)."""
    result = plans[stack]
    ((contract),) = result.inventory.declared.contracts
    nominal: dict[str, dict[str, Fraction]] = {}
    shared: dict[str, dict[str, Fraction]] = {}
    for d in kueue_objects(result):
        if d["kind"] not in ("ClusterQueue", "Cohort"):
            continue
        into = nominal if d["kind"] == "ClusterQueue" else shared
        for f in d["spec"]["resourceGroups"][0]["flavors"]:
            for r in f["resources"]:
                per = into.setdefault(f["name"], {})
                per[r["name"]] = per.get(r["name"], 0) + parse_quantity(r["nominalQuota"])
    for name, pool in contract.pools.items():
        holds = queues.pool_capacity(pool, "nvidia.com/gpu") if pool.gpus_per_node else 0
        assert nominal[name]["nvidia.com/gpu"] <= holds, name
        assert nominal[name]["nvidia.com/gpu"] + shared[name]["nvidia.com/gpu"] == holds, name
    assert not result.inventory.declared.quota_warnings


def test_gpu_pool_cpu_and_memory_follow_the_gpus():
    shape = node_facts.node_shape("g6.12xlarge", 48, 196608, gpus=4)
    pool = replace(GPU_POOL, instance_types=("g6.12xlarge",), nodes=(shape,))
    team = TeamConfig(
        name="vision", quota=TeamQuotaConfig(gpus="16")
    )  # cpu/memory left at defaults
    q = queues.nominal_quotas(team, [pool])["gpu"]
    room = capacity.rooms(pool)[0]
    assert q["nvidia.com/gpu"] == 16
    assert q["cpu"] == Fraction(room.cpu_m * 4, 1000)  # four nodes' worth, not quota.cpu 16
    assert q["memory"] == room.memory_mib * 4 * 2**20


def test_per_pool_quota_takes_what_it_says():
    team = TeamConfig(
        name="a",
        quota=TeamQuotaConfig(
            gpus="16", cpu="100", memory="400Gi", pools=(("gpu2", PoolQuota(gpus="12")),)
        ),
    )
    q = queues.nominal_quotas(team, POOLS)
    # the rest of the total goes to the pools quota.pools does not name
    assert q["gpu2"]["nvidia.com/gpu"] == 12 and q["gpu"]["nvidia.com/gpu"] == 4
    assert queues.team_total(team, POOLS)["nvidia.com/gpu"] == 16
    off = TeamConfig(
        name="b", quota=TeamQuotaConfig(gpus="4", pools=(("gpu", PoolQuota(gpus="0")),))
    )
    assert queues.nominal_quotas(off, POOLS)["gpu"]["nvidia.com/gpu"] == 0
    assert queues.nominal_quotas(off, POOLS)["gpu2"]["nvidia.com/gpu"] == 4


def test_namespace_quota_is_all_the_queue_can_admit_so_no_double_accounting():
    pool = replace(GPU_POOL, limits=PoolLimits(gpus=16))
    a = TeamConfig(name="a", quota=TeamQuotaConfig(gpus="4", cpu="8", memory="16Gi"))
    b = TeamConfig(name="b", quota=TeamQuotaConfig(gpus="4", cpu="8", memory="16Gi"))
    solo = TeamConfig(
        name="c", quota=TeamQuotaConfig(gpus="4", cpu="8", memory="16Gi"), cohort="alone"
    )
    capped = TeamConfig(
        name="d",
        quota=TeamQuotaConfig(
            gpus="4", cpu="8", memory="16Gi", borrowing_limit=PoolQuota(gpus="1")
        ),
    )
    teams = [a, b, solo, capped]
    held = {t.name: queues.namespace_quota(t, teams, [pool]) for t in teams}
    # 16 GPUs, 16 guaranteed: a borrows b's and d's idle GPUs; c is alone in its cohort;
    # d may borrow 1 per pool
    assert held["a"]["gpus"] == "12" and held["c"]["gpus"] == "4" and held["d"]["gpus"] == "5"
    # without Kueue, the configured totals
    assert queues.namespace_quota(a, teams, [pool], kueue_enabled=False)["gpus"] == "4"
    # the plan's ResourceQuota says the same as the queue
    rq = {
        o.doc["metadata"]["namespace"]: o.doc["spec"]["hard"]
        for o in shipped_plan("prod").objects
        if o.kind == "ResourceQuota"
    }
    # vision: 16 guaranteed in gpu-workloads, and every other GPU of the cluster borrowable
    assert parse_quantity(rq["vision"]["requests.nvidia.com/gpu"]) == 160


def test_the_chart_runs_every_backends_integration_on_the_system_nodes():
    values = kueue.chart_values(KueueConfig())
    assert values["controllerManager"]["nodeSelector"] == {"trainforge.io/system": "true"}
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert set(config["integrations"]["frameworks"]) == {
        "kubeflow.org/pytorchjob",
        "trainer.kubeflow.org/trainjob",
        "batch/job",
    }
    assert set(kueue.FRAMEWORKS) == {"pytorchjob", "trainjob", "indexed-job"}
    # team namespaces (and the acceptance tests') carry the label (test_acceptance_manifests)
    assert config["managedJobsNamespaceSelector"] == {
        "matchLabels": {"trainforge.io/queued": "true"}
    }
    # every job of a team namespace goes through the queue, labelled or not
    assert config["manageJobsWithoutQueueName"] is True
    assert config["resources"]["excludeResourcePrefixes"] == ["vpc.amazonaws.com/efa"]
    assert config["waitForPodsReady"]["timeout"] == "30m"
    assert "featureGates" not in values["controllerManager"]
    off_values = kueue.chart_values(KueueConfig(pods_ready_timeout=None))
    off = yaml.safe_load(off_values["managerConfig"]["controllerManagerConfigYaml"])
    # Kueue 0.19 defaults an absent section to a 30 min timeout: only the gate turns it off
    assert "waitForPodsReady" not in off
    assert off_values["controllerManager"]["featureGates"] == [
        {"name": "DisableWaitForPodsReady", "enabled": True}
    ]


def test_queue_objects_wait_for_the_release_and_jobs_wait_for_the_queues():
    run = run_mocked(
        (ROOT / "__main__.py").resolve(), read_stack_file(ROOT / "Pulumi.dev.yaml").engine()
    )
    (release,) = [r for r in run.resources if r.type == "kubernetes:helm.sh/v3:Release"
                  and r.name.endswith("-kueue")]  # fmt: skip
    queue_objs = [r for r in run.resources if r.type.startswith("kubernetes:kueue.x-k8s.io/")]
    assert {r.type.rsplit(":", 1)[-1] for r in queue_objs} == KINDS - {"Topology"}
    for r in queue_objs:
        # Kueue's webhook must be serving (and its CRDs installed) first
        assert release.urn in r.options["dependencies"], r.name
    (local_queue,) = [r for r in queue_objs if r.type.endswith(":LocalQueue")
                      and r.name.endswith("-training")]  # fmt: skip
    jobs = [r for r in run.resources if r.type == "kubernetes:kubeflow.org/v1:PyTorchJob"]
    assert jobs
    for r in jobs:
        # a labelled job created before Kueue's webhook (or its LocalQueue) would run unqueued
        assert local_queue.urn in r.options["dependencies"], r.name


def test_the_config_is_the_charts_default_with_only_our_keys_set():
    """Replacing controllerManagerConfigYaml whole used to drop the chart's clientConnection
    (QPS 300, burst 500; client-go's default is QPS 5, burst 10) and controller concurrency."""
    config = yaml.safe_load(
        kueue.chart_values(KueueConfig())["managerConfig"]["controllerManagerConfigYaml"]
    )
    assert config["clientConnection"] == {"qps": 300, "burst": 500}
    default = kueue.chart_default_config()
    ours = {
        "manageJobsWithoutQueueName",
        "managedJobsNamespaceSelector",
        "integrations",
        "resources",
        "waitForPodsReady",
    }
    for key, value in default.items():
        if key not in ours:
            assert config[key] == value, key
    assert set(config) - set(default) <= ours
    assert config["controller"]["groupKindConcurrency"]["Workload.kueue.x-k8s.io"] == 10


MIRROR = pathlib.Path("/work/.mirror/kubernetes-sigs+kueue/repo")


@pytest.mark.skipif(not MIRROR.is_dir(), reason="no local mirror of kubernetes-sigs/kueue")
def test_the_vendored_default_is_the_charts_own():
    """Rehearsal against the source: the vendored default equals the chart's
    managerConfig.controllerManagerConfigYaml at the commit its header names."""
    vendored = kueue.default_config_path().read_text()
    commit = re.search(r"at\s+#?\s*([0-9a-f]{40})", vendored.replace("\n# ", " ")).group(1)
    values = subprocess.run(
        ["git", "-C", str(MIRROR), "show", f"{commit}:charts/kueue/values.yaml"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    upstream = yaml.safe_load(
        yaml.safe_load(values)["managerConfig"]["controllerManagerConfigYaml"]
    )
    assert kueue.chart_default_config() == upstream


def test_kueue_runs_two_replicas_a_drain_never_takes_both():
    """Kueue's webhooks fail closed on team namespaces: with one replica a drain or crash
    blocks every job creation there (Pulumi's own included)."""
    manager = kueue.chart_values(KueueConfig())["controllerManager"]
    assert manager["replicas"] == 2
    assert manager["podDisruptionBudget"] == {"enabled": True, "minAvailable": 1}
    [spread] = manager["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["labelSelector"]["matchLabels"]["control-plane"] == "controller-manager"
    # the chart's own keys (its values.yaml key list): a misspelt key would be ignored by Helm
    keys = {
        line.split("\t")[0]
        for line in (ROOT / "tests/platform/chart_values/kueue-0.19.5.keys")
        .read_text()
        .splitlines()
        if line and not line.startswith("#")
    }
    for key in ("replicas", "podDisruptionBudget.enabled", "podDisruptionBudget.minAvailable",
                "topologySpreadConstraints"):  # fmt: skip
        assert f"controllerManager.{key}" in keys


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_release_selecting_namespaces_by_label_waits_for_the_labelled_namespaces(plans, stack):
    """Kueue selects team namespaces by `trainforge.io/queued=true`. A stack upgraded from
    the earlier selector (`trainforge.io/team` exists) got the new selector and the new label
    in one `up` with no order between them: had the release gone first, a Job created in
    between would have run unqueued. The release now waits for the Namespaces."""
    resources = plans[stack].inventory.resources
    (release,) = [r for r in resources if r.type == "kubernetes:helm.sh/v3:Release"
                  and r.name.endswith("-kueue")]  # fmt: skip
    assert "trainforge.io/queued" in str(release.inputs["values"])
    team_ns = [r for r in resources if r.type == "kubernetes:core/v1:Namespace"
               and r.inputs["metadata"].get("labels", {}).get("trainforge.io/team")]  # fmt: skip
    assert team_ns
    for ns in team_ns:
        if ns.inputs["metadata"]["labels"].get("trainforge.io/queued"):
            assert ns.urn in release.options["dependencies"], ns.name


def _cohorts(teams, pools) -> tuple[dict[str, dict[str, Fraction]], object]:
    """cohort -> pool -> the GPUs on its emitted `Cohort` object, and Kueue's own view of
    all the emitted objects (trainforge.plan.kueue, the never-admitted check's arithmetic)."""
    from trainforge.plan import kueue as K

    docs = queues.queue_objects(teams, pools, KueueConfig())
    gpus = {
        d["metadata"]["name"]: {
            f["name"]: parse_quantity(
                next(r for r in f["resources"] if r["name"] == "nvidia.com/gpu")["nominalQuota"]
            )
            for f in d["spec"]["resourceGroups"][0]["flavors"]
        }
        for d in docs
        if d["kind"] == "Cohort"
    }
    m = K.read(docs)
    return gpus, (lambda team, pool: K.Quotas(m.queues, m.shared).potential(
        m.queues[team], pool, K.GPU))  # fmt: skip


def test_each_pools_spare_quota_goes_to_the_cohorts_by_their_teams_guarantees_there():
    """The wave-19 review: "A team alone in its cohort never borrows" (docs/configuration.md)
    was false: speech, alone in cohort speech-solo with 8 of l40s-pool's 16 GPUs, got the
    other 8 on its Cohort object and could hold 16 (Kueue: a Cohort's nominalQuota is a shared
    pool for the ClusterQueues within it, apis/kueue/v1beta2/cohort_types.go at v0.19.2). The
    words now say what the objects do: each pool's spare goes to the cohorts in proportion to
    their teams' guarantees there, evenly where none has one, a team that may borrow nothing
    counting for nothing; and Kueue's arithmetic over the emitted objects agrees."""
    l40s = replace(GPU_POOL, name="l40s", limits=PoolLimits(gpus=16))
    g5 = replace(GPU2_POOL, limits=PoolLimits(gpus=32))
    llm = TeamConfig(name="llm", quota=TeamQuotaConfig(gpus="16", pools=(("l40s", PoolQuota(gpus="0")),)))  # fmt: skip
    speech = TeamConfig(
        name="speech",
        cohort="speech-solo",
        quota=TeamQuotaConfig(gpus="8", pools=(("l40s", PoolQuota(gpus="8")), ("gpu2", PoolQuota(gpus="0")))),
    )  # fmt: skip
    shared, most = _cohorts([llm, speech], [l40s, g5])
    # l40s: only speech is guaranteed there, so its cohort's Cohort holds the spare 8, and the
    # team alone in it borrows them; g5: only llm's cohort
    assert shared == {"speech-solo": {"l40s": 8, "gpu2": 0}, "trainforge": {"l40s": 0, "gpu2": 16}}
    assert most("speech", "l40s") == 16 and most("llm", "l40s") == 0
    # speech may borrow none: its cohort's share would sit idle, so llm's cohort takes it
    capped = speech.model_copy(
        update={"quota": speech.quota.model_copy(update={"borrowing_limit": PoolQuota(gpus="0")})}
    )
    shared, most = _cohorts([llm, capped], [l40s, g5])
    assert shared["speech-solo"]["l40s"] == 0 and shared["trainforge"]["l40s"] == 8
    assert most("speech", "l40s") == 8 and most("llm", "l40s") == 8
    # both cohorts guaranteed in a pool: their spare 4 split by their guarantees, 4 : 8
    vision = TeamConfig(name="vision", quota=TeamQuotaConfig(gpus="4", pools=(("gpu2", PoolQuota(gpus="0")),)))  # fmt: skip
    shared, _ = _cohorts([vision, speech], [l40s, g5])
    assert shared["trainforge"]["l40s"] == 1 and shared["speech-solo"]["l40s"] == 3
    # the model the quota refusal's fix is tried on (`pool_room`) is Kueue's arithmetic over
    # the emitted objects, for every team and pool of these stacks
    from trainforge.jobs.quota import pool_room

    two = speech.model_copy(
        update={"quota": speech.quota.model_copy(update={"borrowing_limit": PoolQuota(gpus="2")})}
    )
    assert _cohorts([llm, two], [l40s, g5])[1]("speech", "l40s") == 10  # 8 + at most 2
    for teams in (
        [llm, speech],
        [llm, capped],
        [llm, two],
        [vision, speech],
        [llm, vision, capped],
    ):
        _, most = _cohorts(teams, [l40s, g5])
        for t in teams:
            room = pool_room(t, teams, [l40s, g5])
            assert {p: room[p]["nvidia.com/gpu"] for p in ("l40s", "gpu2")} == {
                p: most(t.name, p) for p in ("l40s", "gpu2")
            }, t.name
