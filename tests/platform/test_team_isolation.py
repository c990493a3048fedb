"""Tenants isolated by behaviour, not convention: egress only to the VPC's endpoints, S3, DNS,
the team's own pods and MLflow (and enforced); S3 credentials useless outside the VPC; each
team's files unreachable for another team's UID even with the whole file system mounted;
platform pods on system nodes and only node agents privileged."""

from __future__ import annotations

import copy
import ipaddress
import json
import os

import pytest

from tests.conftest import ROOT, shipped_plan
from trainforge.plan.checks import pod_sandbox as sandbox
from trainforge.plan.core import plan_project
from trainforge.plan.mocks import S3_PREFIX_LIST_CIDRS
from trainforge.platform import (
    checkpoint_bucket,
    fsx,
    kueue,
    monitoring,
    network,
    trainer,
    training_operator,
)
from trainforge.platform.placement import SYSTEM_NODE_SELECTOR
from trainforge.platform.services_config import KueueConfig

POD_IDENTITY_AGENT = "169.254.170.23/32"


@pytest.fixture(scope="module")
def plans():
    return {stack: shipped_plan(stack) for stack in ("dev", "prod")}


def team_namespaces(result) -> set[str]:
    ((contract),) = result.inventory.declared.contracts
    return {t.namespace for t in contract.teams.values()}


def vpc_cidr(result) -> str:
    (vpc,) = [r for r in result.inventory.resources if r.type == "aws:ec2/vpc:Vpc"]
    return vpc.inputs["cidrBlock"]


def subnet_cidrs(result, kind: str) -> set[str]:
    """CIDRs of the platform's subnets of one kind (private: nodes, pods and the EKS control
    plane's ENIs; endpoints: the interface endpoints)."""
    return {
        r.inputs["cidrBlock"]
        for r in result.inventory.resources
        if r.type == "aws:ec2/subnet:Subnet" and f"-{kind}-" in r.name
    }


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_training_namespace_allows_egress_to_the_internet(plans, stack):
    result = plans[stack]
    region = {"dev": "us-west-2", "prod": "us-east-1"}[stack]
    endpoints = subnet_cidrs(result, "endpoints")
    assert endpoints
    allowed_blocks = {*endpoints, POD_IDENTITY_AGENT, *S3_PREFIX_LIST_CIDRS[region]}
    # nothing a team may reach over HTTPS overlaps the node subnets (API server ENIs)
    private = [ipaddress.ip_network(c) for c in subnet_cidrs(result, "private")]
    assert private and not any(
        ipaddress.ip_network(c).overlaps(n) for c in endpoints for n in private
    )
    teams = team_namespaces(result)
    policies = [o.doc for o in result.objects if o.kind == "NetworkPolicy"]
    seen = set()
    for p in policies:
        ns = p["metadata"]["namespace"]
        if ns not in teams:
            continue
        seen.add(ns)
        for rule in p["spec"].get("egress", []):
            # a rule without `to` allows every destination
            assert rule.get("to"), (ns, p["metadata"]["name"])
            for peer in rule["to"]:
                block = peer.get("ipBlock")
                if block is None:
                    # pods: the namespace's own, kube-dns, the MLflow namespace
                    sel = peer.get("namespaceSelector", {}).get("matchLabels", {})
                    name = sel.get("kubernetes.io/metadata.name")
                    assert "namespaceSelector" not in peer or name in ("kube-system", "mlflow")
                    continue
                net = ipaddress.ip_network(block["cidr"])
                assert net.prefixlen > 0 and block["cidr"] in allowed_blocks, block
                assert not block.get("except")
    assert seen == teams
    # ... and the policies are enforced: the VPC CNI's network policy agent is on
    (cni,) = [
        r
        for r in result.inventory.resources
        if r.type == "aws:eks/addon:Addon" and r.inputs.get("addonName") == "vpc-cni"
    ]
    assert json.loads(cni.inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_vpc_has_the_endpoints_jobs_and_nodes_use(plans, stack):
    res = plans[stack].inventory.resources
    endpoints = {
        r.inputs["serviceName"].split(".", 3)[-1]: r.inputs
        for r in res
        if r.type == "aws:ec2/vpcEndpoint:VpcEndpoint"
    }
    assert set(endpoints) == {"s3", *network.INTERFACE_ENDPOINTS}
    s3 = endpoints.pop("s3")
    assert s3["vpcEndpointType"] == "Gateway" and s3["routeTableIds"]
    endpoint_subnets = [
        r.urn for r in res if r.type == "aws:ec2/subnet:Subnet" and "-endpoints-" in r.name
    ]
    for name, e in endpoints.items():
        assert e["vpcEndpointType"] == "Interface" and e["privateDnsEnabled"] is True, name
        assert e["subnetIds"] and e["securityGroupIds"]
    # the interface endpoints sit in their own subnets (what team egress names)
    for r in res:
        if (
            r.type == "aws:ec2/vpcEndpoint:VpcEndpoint"
            and r.inputs["vpcEndpointType"] == "Interface"
        ):
            assert sorted(r.dependencies["subnetIds"]) == sorted(endpoint_subnets), r.name
    rules = [
        r.inputs for r in res if r.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
        and r.name.endswith("-endpoints-https")
    ]  # fmt: skip
    assert [(r["fromPort"], r["toPort"], r["ipProtocol"]) for r in rules] == [(443, 443, "tcp")]
    assert rules[0]["cidrIpv4"] == vpc_cidr(plans[stack])


def test_team_credentials_only_work_through_the_vpc_endpoint():
    arn = "arn:aws:s3:::ckpt"
    doc = json.loads(
        checkpoint_bucket.bucket_policy(
            arn, "vpce-1", ["arn:aws:iam::1:role/b", "arn:aws:iam::1:role/a"]
        )
    )
    tls, vpce = doc["Statement"]
    assert tls["Sid"] == "DenyInsecureTransport"
    assert vpce["Effect"] == "Deny" and vpce["Resource"] == [arn, f"{arn}/*"]
    # only the teams' roles: admins keep their console and CLI
    assert vpce["Condition"] == {
        "StringNotEquals": {"aws:SourceVpce": "vpce-1"},
        "ArnEquals": {"aws:PrincipalArn": ["arn:aws:iam::1:role/a", "arn:aws:iam::1:role/b"]},
    }
    no_endpoint = json.loads(checkpoint_bucket.bucket_policy(arn, None, ["arn:aws:iam::1:role/a"]))
    assert [s["Sid"] for s in no_endpoint["Statement"]] == ["DenyInsecureTransport"]


def test_the_iam_rehearsal_proves_pods_reach_s3_and_lifted_credentials_do_not():
    result = plan_project(ROOT, "dev", standins=True)
    (section,) = [s for s in result.sections if s.title == "IAM rehearsal"]
    assert not [v for v in result.failing if v.rule.startswith("TRAINFORGE_IAM")]
    role = next(ln for ln in section.lines if "(team research" in ln)
    assert "calls allowed" in role and "denied as required" in role


# --- files: UID/GID, 0770, one directory per volume ------------------------------------------------

needs_sandbox = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"pod sandbox: {sandbox.unavailable()}"
)


def pod_identity(result, namespace: str) -> sandbox.Identity:
    """The identity a team's training pods run with, from the plan's own PyTorchJob."""
    (job,) = [o.doc for o in result.objects if o.kind == "PyTorchJob" and o.namespace == namespace]
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    return sandbox.Identity.of(pod["securityContext"], pod["containers"][0]["securityContext"])


@needs_sandbox
def test_team_b_cannot_reach_team_a_files_even_with_the_whole_file_system(tmp_path):
    """The real setup script makes both teams' directories as the Job would; then team B's
    pod identity (its own UID/GID, no capabilities, as the plan renders it) tries A's files
    through a mount of the file system root, which no team volume even offers."""
    teams = [
        {"name": "vision", "quota": {"gpus": "0"}},
        {"name": "nlp", "quota": {"gpus": "0"}},
    ]
    job = {"pool": "training-workloads", "workers": 1, "model": "mlp", "steps": 10}
    result = plan_project(
        ROOT,
        "dev",
        standins=False,
        config_overrides={
            "trainforge:teams": teams,
            "trainforge:jobs": [
                {"name": "a-job", "team": "vision", **job},
                {"name": "b-job", "team": "nlp", **job},
            ],
        },
    )
    a, b = pod_identity(result, "vision"), pod_identity(result, "nlp")
    assert a.uid != b.uid and a.gid != b.gid and b.gid not in a.groups
    # the ids are the teams' own (config), not whatever the job chose: a pod of B's namespace
    # claiming A's is denied by B's admission policy (test_a_job_cannot_run_as_another_team)
    teams = result.inventory.declared.contracts[0].teams
    for ident, team in ((a, "vision"), (b, "nlp")):
        assert (ident.uid, ident.gid) == (teams[team].run_as_user, teams[team].run_as_group)
    setup = {
        o.doc["metadata"]["labels"]["trainforge.io/team"]: o.doc
        for o in result.objects
        if o.kind == "Job" and o.namespace == fsx.ADMIN_NAMESPACE
    }
    root = tmp_path / "fs"
    root.mkdir()
    os.chmod(root, 0o755)
    for team, doc in setup.items():
        pod = doc["spec"]["template"]["spec"]
        c = pod["containers"][0]
        ident = sandbox.Identity.of(pod.get("securityContext"), c["securityContext"])
        r = sandbox.run(c["command"][-1], ident, [sandbox.Mount(root, "/fsx")])
        assert r.ok, (team, r.stderr)
    for team, ident in (("vision", a), ("nlp", b)):
        st = (root / team).stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (ident.uid, ident.gid, 0o770)
    # team A writes its checkpoint through its own volume (the /vision directory)
    mine = sandbox.run(
        "mkdir -p /fsx/checkpoints && echo step1 > /fsx/checkpoints/latest",
        a,
        [sandbox.Mount(root / "vision", "/fsx")],
    )
    assert mine.ok, mine.stderr
    # team B, even with the whole file system mounted (no subPath), cannot list, read or write
    whole = [sandbox.Mount(root, "/fsx")]
    for script in (
        "ls /fsx/vision",
        "cat /fsx/vision/checkpoints/latest",
        "touch /fsx/vision/evil",
        "rm -rf /fsx/vision/checkpoints",
    ):
        r = sandbox.run(script, b, whole)
        assert not r.ok and "Permission denied" in r.stderr, script
    assert (root / "vision" / "checkpoints" / "latest").read_text() == "step1\n"
    # and B works in its own directory
    assert sandbox.run("touch /fsx/ok", b, [sandbox.Mount(root / "nlp", "/fsx")]).ok


def test_a_job_cannot_run_as_another_team():
    """The file isolation above holds only while B's pods cannot be A: prod's vision job with
    llm's UID/GID (all Pod Security `baseline` would let through) is denied by vision's
    admission policy, as the plan evaluates it (tests/platform/test_team_identity.py)."""
    from trainforge.plan.check_types import PlanContext
    from trainforge.plan.checks import admission_policies

    result = shipped_plan("prod")
    llm = result.inventory.declared.contracts[0].teams["llm"]
    objects = []
    for o in result.objects:
        if o.kind == "PyTorchJob" and o.namespace == "vision":
            o = copy.copy(o)
            o.doc = copy.deepcopy(o.doc)
            for spec in o.doc["spec"]["pytorchReplicaSpecs"].values():
                pod = spec["template"]["spec"]
                pod["securityContext"] |= {"runAsUser": llm.run_as_user}
                pod["securityContext"] |= {"runAsGroup": llm.run_as_group}
        objects.append(o)
    out = admission_policies.check(PlanContext(inventory=result.inventory, objects=objects))
    assert {f.resource for f in out.findings} == {"vision/PyTorchJob/gpt-350m-fsdp"}


def test_each_team_volume_mounts_only_its_own_directory(plans):
    for result in plans.values():
        teams = team_namespaces(result)
        pvs = {o.obj_name: o.doc for o in result.objects if o.kind == "PersistentVolume"}
        for o in result.objects:
            if o.kind != "PersistentVolumeClaim" or o.namespace not in teams:
                continue
            pv = pvs[o.doc["spec"]["volumeName"]]
            assert pv["metadata"]["annotations"] == {fsx.DIRECTORY_ANNOTATION: f"/{o.namespace}"}
            assert pv["spec"]["claimRef"]["namespace"] == o.namespace


# --- placement and privilege ------------------------------------------------------------------------


def test_platform_pods_run_on_the_system_node_group(plans):
    values = monitoring.prometheus_values(monitoring.MonitoringConfig(grafana=True), "gp3")
    system = SYSTEM_NODE_SELECTOR
    assert values["prometheus"]["prometheusSpec"]["nodeSelector"] == system
    assert values["alertmanager"]["alertmanagerSpec"]["nodeSelector"] == system
    assert values["prometheusOperator"]["nodeSelector"] == system
    assert values["prometheusOperator"]["admissionWebhooks"]["patch"]["nodeSelector"] == system
    assert values["kube-state-metrics"]["nodeSelector"] == system
    assert values["grafana"]["nodeSelector"] == system
    assert values["prometheus-node-exporter"]["namespaceOverride"] == "node-agents"
    (mlflow,) = [o.doc for o in plans["prod"].objects if o.kind == "Deployment"
                 and o.obj_name == "mlflow"]  # fmt: skip
    assert mlflow["spec"]["template"]["spec"]["nodeSelector"] == system
    trainer_values = trainer.chart_values()
    assert trainer_values["manager"]["nodeSelector"] == system
    assert trainer.jobset_values()["controller"]["nodeSelector"] == system  # JobSet's own chart
    assert kueue.chart_values(KueueConfig())["controllerManager"]["nodeSelector"] == system


def test_the_kustomize_installed_operator_is_placed_by_a_transform():
    import pulumi

    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "training-operator", "namespace": "kubeflow"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
    }
    args = pulumi.ResourceTransformArgs(
        True, "kubernetes:apps/v1:Deployment", "kubeflow/training-operator", deployment,
        pulumi.ResourceOptions(),
    )  # fmt: skip
    out = training_operator.system_placement(args)
    assert out.props["spec"]["template"]["spec"]["nodeSelector"] == SYSTEM_NODE_SELECTOR
    ds = pulumi.ResourceTransformArgs(
        True, "kubernetes:apps/v1:DaemonSet", "x", deployment, pulumi.ResourceOptions()
    )
    assert training_operator.system_placement(ds) is None


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_only_node_agents_may_run_privileged_pods(plans, stack):
    namespaces = {
        o.obj_name: o.doc["metadata"].get("labels", {})
        for o in plans[stack].objects
        if o.kind == "Namespace"
    }
    privileged = {n for n, labels in namespaces.items()
                  if labels.get("pod-security.kubernetes.io/enforce") == "privileged"}  # fmt: skip
    assert privileged == {"node-agents"}
    for name, labels in namespaces.items():
        assert labels.get("pod-security.kubernetes.io/enforce") in (
            "privileged", "baseline", "restricted"
        ), name  # fmt: skip
    helm = {h["name"]: h for h in plans[stack].helm()}
    dcgm = next(h for n, h in helm.items() if n.endswith("-dcgm"))
    assert dcgm["namespace"] == "node-agents"


def test_dcgm_has_sys_admin_only_with_profiling_metrics():
    off = monitoring.dcgm_values(profiling=False)["securityContext"]
    on = monitoring.dcgm_values(profiling=True)["securityContext"]
    assert off["capabilities"] == {"drop": ["ALL"]} and on["capabilities"]["add"] == ["SYS_ADMIN"]
    assert "DCGM_FI_PROF_" not in monitoring.dcgm_counters(profiling=False)
    assert "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" in monitoring.dcgm_counters(profiling=True)
