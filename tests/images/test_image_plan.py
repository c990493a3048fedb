"""Images in the plan: the pull-through cache, the runtime images jobs run, facts and refusals."""

from __future__ import annotations

import json
import pathlib

import pulumi
import pytest

from tests.conftest import shipped_plan
from trainforge.core import image_routes, versions
from trainforge.core.contract import recording, start_record
from trainforge.core.errors import JobConfigError
from trainforge.jobs.declare import check_jobs
from trainforge.jobs.spec import parse_job
from trainforge.plan.core import plan_project
from trainforge.platform import monitoring, training_operator
from trainforge.platform.config import ConfigError, parse_config
from trainforge.platform.image_cache import PULL_THROUGH_ACTIONS
from trainforge.platform.published import contract_from_config
from trainforge.platform.services_config import MonitoringConfig

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOST = "111122223333.dkr.ecr.us-west-2.amazonaws.com"
SECRET = "arn:aws:secretsmanager:us-west-2:111122223333:secret:ecr-pullthroughcache/dockerhub-AbC"
# the image kubeflow/trainer v1.9.4's manifests/overlays/standalone runs (its kustomization.yaml
# `images:` newTag on manifests/base/deployment.yaml's image), read 2026-11-27
OPERATOR = "ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489"


@pytest.fixture(scope="module", autouse=True)
def _fresh_record_after():
    """A plan run leaves its record (the cache routes, `image_routes.current()`) behind: start
    the next module from a fresh one, as every program run does."""
    yield
    start_record()


# precision: fp8 on H100s (p5): one job on the stock PyTorch image (no torchao: the runtime
# refuses it at pod start, training/fp8.py), one on the runtime image (torchao 0.18.0)
FP8_JOBS = [
    {"name": f"fp8-{kind}", "team": "llm", "pool": "efa-training", "workers": 1, "efa": False}
    | {"precision": "fp8", "model": "gpt", "steps": 10}
    | more
    for kind, more in (("stock", {"image": versions.PYTORCH_IMAGE}), ("runtime", {}))
]


@pytest.fixture(scope="module")
def plans():
    out = {s: shipped_plan(s) for s in ("dev", "prod")}
    # prod with a Docker Hub credential of its own (us-east-1), as a user would set it, and
    # two fp8 jobs
    hub = {
        "trainforge:images": {"dockerHubCredentialArn": SECRET.replace("us-west-2", "us-east-1")},
        "trainforge:jobs": _prod_config()["jobs"] + FP8_JOBS,
    }
    out["prod-hub"] = plan_project(ROOT, "prod", standins=False, config_overrides=hub)
    return out


def test_references_through_the_cache():
    routes = image_routes.routes_for(HOST, docker_hub=False, github=False)
    assert routes.rewrite("public.ecr.aws/docker/library/busybox:1.37.0") == (
        f"{HOST}/ecr-public/docker/library/busybox:1.37.0"
    )
    assert (
        routes.rewrite("registry.k8s.io/kueue/kueue:v0.19.5") == f"{HOST}/k8s/kueue/kueue:v0.19.5"
    )
    # no rule: unchanged (and Docker Hub without a credential is a finding elsewhere)
    assert routes.rewrite("busybox:1.37.0") == "busybox:1.37.0"
    assert routes.rewrite("nvcr.io/nvidia/dcgm:4.6.0") == "nvcr.io/nvidia/dcgm:4.6.0"
    hub = image_routes.routes_for(HOST, docker_hub=True, github=False)
    assert hub.rewrite("busybox:1.37.0") == f"{HOST}/docker-hub/library/busybox:1.37.0"
    # a digest: the cache's first pull of it fails (aws/containers-roadmap#2837), so never routed
    pinned = "busybox:1.37.0@sha256:" + "ab" * 32
    assert hub.rewrite(pinned) == pinned
    assert routes.rewrite("registry.k8s.io/pause@sha256:" + "cd" * 32).startswith(
        "registry.k8s.io/"
    )
    assert hub.rewrite("pytorch/pytorch:2.13.0") == f"{HOST}/docker-hub/pytorch/pytorch:2.13.0"
    assert image_routes.is_docker_hub("docker.io/library/alpine:3.10")
    assert not image_routes.is_docker_hub("localhost:5000/x:1")


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_pod_image_comes_from_docker_hub_and_jobs_run_the_runtime_image(plans, stack):
    result = plans[stack]
    assert result.clean, [v.rule for v in result.failing]
    images = set()
    for o in result.objects:
        for text in [json.dumps(o.doc)]:
            images |= {part.split('"')[0] for part in text.split('"image": "')[1:]}
    assert images
    assert not [i for i in images if image_routes.is_docker_hub(i)], images
    account = "123456789012"  # the plan's mocked account
    jobs = result.inventory.declared.jobs
    assert jobs
    for dj in jobs:
        assert dj.spec.image.startswith(f"{account}.dkr.ecr."), dj.spec.image
        # the stacks have no Docker Hub credential: the standard image (FROM Docker Hub's
        # PyTorch) is not built and every job runs the EFA runtime image (ECR Public base)
        assert "/trainforge-runtime:runtime-efa-" in dj.spec.image, dj.spec.image
        assert dj.spec.code_source == "image" and dj.emitted.configmap is None
        facts = dj.spec.image_facts
        assert facts.mlflow == "3.17.0" and facts.boto3 == "1.44.5" and facts.torchao == "0.18.0"
        assert facts.aws_ofi_nccl
        assert dj.spec.checkpoint.s3_mirror is True  # mirrored to S3 by default
    section = next(s for s in result.sections if s.title.startswith("Images"))
    text = "\n".join(section.lines)
    assert "MLflow: on" in text and "S3 mirror: on" in text
    assert "facts: torch 2.13.0" in text


def test_cache_rules_and_node_permissions_are_least_privilege(plans):
    inv = plans["prod-hub"].inventory
    rules = {
        r.inputs["ecrRepositoryPrefix"]: r.inputs
        for r in inv.resources
        if r.type == "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"
    }
    # the stack names a Docker Hub credential: its rule is there, with the secret
    assert set(rules) == {"docker-hub", "ecr-public", "k8s", "quay"}
    assert rules["ecr-public"]["upstreamRegistryUrl"] == "public.ecr.aws"
    assert rules["docker-hub"]["upstreamRegistryUrl"] == "registry-1.docker.io"
    assert rules["docker-hub"]["credentialArn"].startswith(
        "arn:aws:secretsmanager:us-east-1:111122223333:secret:ecr-pullthroughcache/"
    )
    policies = [
        json.loads(r.inputs["policy"])
        for r in inv.resources
        if r.type == "aws:iam/rolePolicy:RolePolicy" and "images-node-pull" in r.name
    ]
    assert len(policies) == 2  # managed node groups' role and Karpenter's
    (stmt,) = policies[0]["Statement"]
    assert stmt["Action"] == list(PULL_THROUGH_ACTIONS)
    assert sorted(stmt["Resource"]) == [
        f"arn:aws:ecr:us-east-1:123456789012:repository/{p}/*"
        for p in ("docker-hub", "ecr-public", "k8s", "quay")
    ]
    builds = {r.inputs["target"]: r for r in inv.resources if r.type == "docker-build:index:Image"}
    assert sorted(builds) == ["runtime", "runtime-efa"]  # the standard one FROM Docker Hub
    assert builds["runtime"].inputs["buildArgs"]["REGISTRY"].endswith(".amazonaws.com/docker-hub")
    build = builds["runtime-efa"]
    assert build.inputs["buildArgs"]["EFA_REGISTRY"].endswith(".amazonaws.com/ecr-public")
    assert build.inputs["push"] is True and build.inputs["buildOnPreview"] is False


def test_fp8_on_an_image_without_torchao_is_a_plan_finding(plans):
    """The stock image has no torchao: the pod would refuse `--precision fp8` at start
    (training/fp8.problem); the plan says so, naming the job, the image and the fix. On the
    runtime image (torchao from requirements.lock) fp8 is on and nothing is found."""
    from trainforge.training.fp8 import INSTALL

    result = plans["prod-hub"]
    (found,) = [
        v for v in result.failing if v.rule == "TRAINFORGE_IMAGE_PIECE" and "torchao" in v.message
    ]
    # the image as the pod pulls it: through the stack's cache (the mocks' account)
    image = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/docker-hub/{versions.PYTORCH_IMAGE}"
    assert found.message == (
        f"llm/fp8-stock: precision fp8 (torchao's float8 training) needs torchao, which image "
        f"{image} lacks; {found.fix}"
    )
    assert INSTALL in found.fix and "precision: bf16" in found.fix
    section = next(s for s in result.sections if s.title.startswith("Images"))
    lines = "\n".join(section.lines).split("  llm/")
    stock = next(block for block in lines if block.startswith("fp8-stock:"))
    assert "no torchao" in stock and "fp8: refused at pod start (no torchao)" in stock
    runtime = next(block for block in lines if block.startswith("fp8-runtime:"))
    assert "torchao 0.18.0" in runtime and "fp8: on (torchao in image: yes)" in runtime


def test_fp8_needs_torchao_only_where_the_image_is_known_to_lack_it():
    """Declared `torchao: false` lacks it; true or unknown (not declared) passes."""
    from trainforge.jobs.image_facts import missing_pieces
    from trainforge.training.fp8 import INSTALL

    job = {"name": "j", "team": "t", "pool": "p", "image": "my/train:1.0"}
    for declared, lacking in (
        ({"torchao": False}, True),
        ({"torchao": "0.18.0"}, False),
        ({}, False),
    ):
        facts = parse_job({**job, "imageFacts": {"torch": "2.13", **declared}}, "j").image_facts
        kw = {"mlflow": False, "s3_mirror": False, "efa": False, "where": "t/j"}
        assert missing_pieces(facts, **kw) == []  # bf16: nothing needs torchao
        found = missing_pieces(facts, **kw, fp8=True)
        assert [(m.piece, m.key, m.value) for m in found] == (
            [("torchao", "t/j.precision", "fp8")] if lacking else []
        )
        assert all(INSTALL in m.fix for m in found)


def test_docker_hub_credential_adds_its_rule_and_the_standard_build(tmp_path):
    result = plan_project(
        ROOT,
        "dev",
        standins=False,
        config_overrides={"trainforge:images": {"dockerHubCredentialArn": SECRET}},
    )
    inv = result.inventory
    rules = {
        r.inputs["ecrRepositoryPrefix"]: r.inputs
        for r in inv.resources
        if r.type == "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"
    }
    assert rules["docker-hub"]["credentialArn"] == SECRET
    targets = sorted(
        r.inputs["target"] for r in inv.resources if r.type == "docker-build:index:Image"
    )
    assert targets == ["runtime"]  # dev has no EFA pool: no EFA image is built for nobody
    # CPU/GPU pools without EFA run the smaller standard image now
    images = {dj.spec.name: dj.spec.image for dj in inv.declared.jobs}
    assert ":runtime-" in images["mnist-ddp"] and "runtime-efa" not in images["mnist-ddp"]
    # clean but for the secret's account: the mocks' caller is AWS's documentation account
    # 111122223333, which a credential in "the stack's account" must share here, and the plan
    # refuses documentation values in a stack's config (a real account is never one)
    others = [v.rule for v in result.failing if v.rule != "TRAINFORGE_DOCUMENTATION_VALUE"]
    assert others == [], others


def test_stock_images_without_a_credential_are_plan_findings():
    """Break it: jobs on the stock PyTorch image (runtime off), no Docker Hub credential, no
    pull-through cache (the jobs name no image: the pods run their pool's default build)."""
    from trainforge.jobs.images import default_image_for

    images = {"runtime": False, "pullThroughCache": False}
    result = plan_project(
        ROOT, "dev", standins=False, config_overrides={"trainforge:images": images}
    )
    rules = {v.rule for v in result.failing}
    assert "TRAINFORGE_DOCKER_HUB" in rules  # pytorch/pytorch from Docker Hub, unauthenticated
    assert "TRAINFORGE_IMAGE_PIECE" in rules  # MLflow on, and the stock image has no mlflow
    piece = next(v for v in result.failing if v.rule == "TRAINFORGE_IMAGE_PIECE")
    assert "mlflow" in piece.message
    # the facts and the finding are the image the pods run (the pool's default build, CUDA
    # 13.0 on dev's GPUs), not the newest pin's
    section = next(s for s in result.sections if s.title.startswith("Images"))
    for dj in result.inventory.declared.jobs:
        assert dj.spec.image is None
        image = default_image_for(dj.target.pool)
        cuda = image.split("-cuda")[1].split("-")[0]
        block = "\n".join(section.lines).split(f"  {dj.target.namespace}/{dj.spec.name}: ")[1]
        assert block.split("\n")[1].startswith(f"    facts: torch 2.13.0, CUDA {cuda},"), block
    assert f"which image {versions.TORCH_CUDA_BUILDS[0].image} lacks" in piece.message


def _prod_config() -> dict:
    import yaml

    raw = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]
    return {k.removeprefix("trainforge:"): v for k, v in raw.items() if k.startswith("trainforge:")}


@pytest.mark.parametrize(
    ("job", "key", "piece"),
    [
        (
            {"image": "ghcr.io/acme/trainer:1.0", "imageFacts": {"mlflow": False}},
            ".image",
            "mlflow",
        ),
        (
            {
                "image": "ghcr.io/acme/trainer:1.0",
                "imageFacts": {"boto3": False},
                "checkpoint": {"s3Mirror": True},
            },
            ".checkpoint.s3Mirror",
            "boto3",
        ),
        (
            {
                "image": "ghcr.io/acme/trainer:1.0",
                "imageFacts": {"mlflow": True, "awsOfiNccl": False},
                "pool": "efa-training",
                "team": "llm",
            },
            ".image",
            "aws-ofi-nccl",
        ),
    ],
)
def test_declared_facts_refuse_a_job_missing_a_piece(job, key, piece):
    from trainforge.plan.mocks import TrainforgeMocks

    pulumi.runtime.set_mocks(TrainforgeMocks(preview=True))
    spec = {"name": "own", "team": "vision", "pool": "gpu-workloads", "workers": 1, **job}
    platform = contract_from_config(parse_config(_prod_config()))
    with pytest.raises(JobConfigError) as err:
        check_jobs(platform, [spec])
    (text,) = err.value.errors  # one line: the job's one problem
    assert f"trainforge:jobs[0]{key}" in text and piece in text and "\n" not in text
    # the same job with the piece declared present passes
    facts = {k: True for k in job.get("imageFacts", {})}
    check_jobs(platform, [{**spec, "imageFacts": facts}])


def test_declared_facts_with_the_pieces_pass_and_bad_facts_are_one_line():
    job = {"name": "j", "team": "t", "pool": "p", "image": "my/train:1.0"}

    def parse_declared(facts):
        return parse_job({**job, "imageFacts": facts}, "j").image_facts

    facts = parse_declared({"mlflow": "3.17.0", "awsOfiNccl": True, "torch": "2.13"})
    assert facts.mlflow == "3.17.0" and facts.aws_ofi_nccl is True and facts.torch == "2.13"
    assert facts.source == "declared by the job (imageFacts)"
    with pytest.raises(
        JobConfigError,
        match=r"j\.imageFacts\.mlfow: unknown key \(did you mean 'mlflow'\?\); known keys: awsOfiNccl",
    ):
        parse_declared({"mlfow": True})
    with pytest.raises(
        JobConfigError, match=r"j\.imageFacts\.boto3: got \[1\]; expected true, false"
    ):
        parse_declared({"boto3": [1]})


def test_images_config_errors_name_the_key():
    with pytest.raises(
        ConfigError, match=r"images\.dockerHubCredentialArn: got 'arn:aws:secretsmanager"
    ):
        parse_config(
            {
                "cluster": "c",
                "images": {
                    "dockerHubCredentialArn": "arn:aws:secretsmanager:us-west-2:1:secret:nope"
                },
            }
        )
    with pytest.raises(ConfigError, match=r"images\.runtimeImage"):
        parse_config({"cluster": "c", "images": {"runtimeImage": "Not An Image"}})


def test_operator_worker_init_container_image_is_set_by_its_flag():
    image = image_routes.routes_for(HOST, docker_hub=False, github=False).rewrite(
        versions.BUSYBOX_IMAGE
    )
    deployment = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "training-operator", "image": "x", "command": ["/manager"]}
                    ]
                }
            }
        }
    }
    args = pulumi.ResourceTransformArgs(
        True, "kubernetes:apps/v1:Deployment", "kubeflow/training-operator", deployment,
        pulumi.ResourceOptions(),
    )  # fmt: skip
    out = training_operator.init_container_image(image)(args)
    (c,) = out.props["spec"]["template"]["spec"]["containers"]
    assert c["args"] == [f"--pytorch-init-container-image={image}"]
    assert not image_routes.is_docker_hub(image) and "alpine" not in image
    other = pulumi.ResourceTransformArgs(
        True, "kubernetes:v1:Service", "x", {}, pulumi.ResourceOptions()
    )
    assert training_operator.init_container_image(image)(other) is None


def test_chart_and_overlay_images_go_through_the_cache_with_the_credential(plans):
    """Grafana (prod) and the training operator's overlay: no rendered pod shows them, so the
    components record them; with the stack's Docker Hub credential they pull via the cache."""
    result = plans["prod-hub"]
    installed = {
        (i.component, i.image): i.pulled for i in result.inventory.declared.installed_images
    }
    # the operator is on ghcr.io (the vendored overlay says so): no Docker Hub rule needed;
    # without a GitHub credential (no `github` rule) it is pulled from ghcr.io directly
    operator = installed[("platform-services-training-operator", OPERATOR)]
    assert operator == OPERATOR
    assert not [i for i in installed.values() if image_routes.is_docker_hub(i)]
    section = next(s for s in result.sections if s.title.startswith("Images"))
    assert any(
        "installs docker.io/grafana/grafana:13.2.0 -> pulls" in line for line in section.lines
    )


def test_grafana_values_pull_through_the_cache():
    """The chart values Grafana gets (the plan shows the Release's values redacted)."""
    with image_routes.routing(image_routes.routes_for(HOST, docker_hub=True, github=False)):
        values = monitoring.prometheus_values(MonitoringConfig(grafana=True), "gp3", component="m")
        grafana = values["grafana"]
        # the images and tags grafana chart 12.11.1's values.yaml names (appVersion 13.2.0)
        assert grafana["image"] == {
            "registry": HOST,
            "repository": "docker-hub/grafana/grafana",
            "tag": "13.2.0",
        }
        # curl from its official Quay copy (no credential), at the chart's tag
        assert grafana["downloadDashboardsImage"] == {
            "registry": HOST,
            "repository": "quay/curl/curl",
            "tag": "8.21.0",
        }
        busybox = {
            "registry": HOST,
            "repository": "ecr-public/docker/library/busybox",
            "tag": versions.BUSYBOX_IMAGE.rsplit(":", 1)[1],
        }
        assert grafana["initChownData"]["image"] == busybox
        assert values["crds"]["upgradeJob"]["image"]["busybox"] == busybox
        assert values["prometheus-node-exporter"]["permissionInitContainer"]["image"] == busybox
        assert grafana["testFramework"] == {"enabled": False}
    # without the docker-hub rule Grafana stays on Docker Hub, recorded for the plan
    routes = image_routes.routes_for(HOST, docker_hub=False, github=False)
    with recording() as record, image_routes.routing(routes):
        values = monitoring.prometheus_values(MonitoringConfig(grafana=True), "gp3", component="m")
        assert values["grafana"]["image"]["registry"] == "docker.io"
        assert ("m", "docker.io/grafana/grafana:13.2.0") in {
            (i.component, i.pulled) for i in record.installed_images
        }


def test_overlay_transform_points_the_operator_at_the_cache():
    routes = image_routes.routes_for(HOST, docker_hub=True, github=False)
    pod = {"containers": [{"name": "training-operator", "image": "kubeflow/training-operator:v1"}]}
    args = pulumi.ResourceTransformArgs(
        True, "kubernetes:apps/v1:Deployment", "kubeflow/training-operator",
        {"spec": {"template": {"spec": pod}}}, pulumi.ResourceOptions(),
    )  # fmt: skip
    out = training_operator.images_through_cache(routes)(args)
    (c,) = out.props["spec"]["template"]["spec"]["containers"]
    assert c["image"] == f"{HOST}/docker-hub/kubeflow/training-operator:v1"
    # without a docker-hub rule the image stays (and the plan reports it, next test)
    no_hub = image_routes.routes_for(HOST, docker_hub=False, github=False)
    out = training_operator.images_through_cache(no_hub)(args)
    assert out.props["spec"]["template"]["spec"]["containers"][0]["image"].startswith("kubeflow/")


def test_chart_and_overlay_images_without_the_credential_are_findings():
    """Break it: prod without its Docker Hub credential and without the waiver of Grafana's
    anonymous pull."""
    result = plan_project(
        ROOT,
        "prod",
        standins=False,
        config_overrides={"trainforge:images": {}, "trainforge-policy:waivers": []},
    )
    hub = [v for v in result.failing if v.rule == "TRAINFORGE_DOCKER_HUB"]
    text = {(v.resource, v.message, v.fix) for v in hub}
    # Grafana truly needs Docker Hub; the operator (ghcr.io) does not
    assert not [v for v in hub if v.resource == "platform-services-training-operator"]
    for component, image in (
        ("platform-services-monitoring-prometheus", "docker.io/grafana/grafana"),
    ):
        (message, fix) = next((m, f) for r, m, f in text if r == component and image in m)
        assert "Docker Hub without credentials" in message
        assert "images.dockerHubCredentialArn" in fix and "ecr-pullthroughcache/" in fix
    # busybox comes from ECR Public and curl from Quay: never a finding
    assert not [v for v in hub if "busybox" in v.message or "curl" in v.message]


def test_an_image_without_core_does_not_count_as_carrying_the_runtime(tmp_path):
    """The runtime imports trainforge/core (the GPU catalog): a Dockerfile that copies only
    trainforge/training would fail at `python -m trainforge.training`, so its facts say so."""
    import shutil

    from trainforge.jobs import dockerfile, runtime_images

    for f in ("images/runtime/Dockerfile", "images/runtime/requirements.txt", "requirements.lock"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(dockerfile.ROOT / f, tmp_path / f)
    assert runtime_images.target_facts("runtime", tmp_path).trainforge is True
    df = tmp_path / "images/runtime/Dockerfile"
    df.write_text(
        df.read_text().replace("COPY trainforge/core /opt/trainforge/src/trainforge/core\n", "")
    )
    assert runtime_images.target_facts("runtime", tmp_path).trainforge is False


def test_dev_without_any_docker_hub_credential_plans_clean_and_names_the_operator_on_ghcr():
    """The shipped dev stack names no Docker Hub credential (no placeholder ARN) and needs
    none: every image it picks comes from a registry without one."""
    import yaml

    dev = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    prod = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]
    for cfg in (dev, prod):
        assert "dockerHubCredentialArn" not in (cfg.get("trainforge:images") or {})
    for name in ("Pulumi.dev.yaml", "Pulumi.prod.yaml"):
        assert "secretsmanager" not in (ROOT / name).read_text()
    result = shipped_plan("dev")
    assert result.clean, [(v.rule, v.message) for v in result.failing]
    section = next(s for s in result.sections if s.title.startswith("Images"))
    assert any(
        f"platform-services-training-operator installs {OPERATOR}" in line for line in section.lines
    ), section.lines


def test_a_credential_in_another_region_is_a_finding_naming_the_key():
    """Break it: a us-east-1 secret for the us-west-2 dev stack (ECR refuses the rule)."""
    arn = SECRET.replace("us-west-2", "us-east-1")
    result = plan_project(
        ROOT,
        "dev",
        standins=False,
        config_overrides={"trainforge:images": {"dockerHubCredentialArn": arn}},
    )
    (finding,) = [v for v in result.failing if v.rule == "TRAINFORGE_IMAGE_CREDENTIAL"]
    assert finding.message.startswith("trainforge:images.dockerHubCredentialArn: ")
    assert "us-east-1" in finding.message and "us-west-2" in finding.message


def test_credential_problems_region_and_account():
    assert image_routes.credential_problems(SECRET, "us-west-2", "111122223333") == []
    assert image_routes.credential_problems(SECRET, "us-west-2", None) == []
    (why,) = image_routes.credential_problems(SECRET, "us-west-2", "210987654321")
    assert "account 111122223333" in why and "210987654321" in why
    assert len(image_routes.credential_problems(SECRET, "eu-west-1", "210987654321")) == 2


def test_preview_reports_a_credential_of_another_account_or_region(monkeypatch):
    """At `pulumi preview` (not under mocks) the program knows the caller's account: a secret
    in another account or Region is an error naming the key, before anything is created."""
    from trainforge.platform import image_cache

    errors: list[str] = []
    monkeypatch.setattr(image_cache, "under_mocks", lambda: False)
    monkeypatch.setattr(pulumi.log, "error", lambda msg, resource=None: errors.append(msg))
    creds = {"docker-hub": SECRET, "github": None}
    image_cache._check_credentials(creds, "us-west-2", "111122223333", None)
    assert errors == []
    image_cache._check_credentials(creds, "us-west-2", "210987654321", None)
    image_cache._check_credentials(creds, "eu-west-1", "111122223333", None)
    assert [e.split(": ")[0] for e in errors] == ["trainforge:images.dockerHubCredentialArn"] * 2
    assert "account 111122223333" in errors[0] and "eu-west-1" in errors[1]
    # under the plan's mocks the account is a stand-in: nothing is judged there
    monkeypatch.setattr(image_cache, "under_mocks", lambda: True)
    image_cache._check_credentials(creds, "eu-west-1", "1", None)
    assert len(errors) == 2


def test_no_efa_image_is_built_without_an_efa_pool():
    """A stack that can build the standard image and has no EFA pool builds only that one;
    without Docker Hub the EFA target (its base on ECR Public) still serves every pool."""
    from trainforge.jobs.runtime_images import plan_images

    with_hub = image_routes.routes_for(HOST, docker_hub=True, github=False, enabled=True)
    images = plan_images("c", HOST, with_hub, efa_pools=False)
    assert images.standard.target == "runtime" and images.efa is None
    assert plan_images("c", HOST, with_hub, efa_pools=True).efa.target == "runtime-efa"
    no_hub = image_routes.routes_for(HOST, docker_hub=False, github=False, enabled=True)
    only = plan_images("c", HOST, no_hub, efa_pools=False)
    assert only.standard is only.efa and only.efa.target == "runtime-efa"
