"""ImageCache: the stack's ECR pull-through cache rules, the node roles' right to use them, and
the trainforge runtime images built and pushed to the stack's ECR repository.

Why: see `trainforge.core.image_routes` (Docker Hub's 10 anonymous pulls per hour per NAT
address) and `trainforge.jobs.runtime_images` (the image a job runs must carry what the
platform promises). Both are resources of the stack, so `pulumi up` is the one command.

* one `aws.ecr.PullThroughCacheRule` per upstream the stack uses: ECR Public, registry.k8s.io
  and Quay always; Docker Hub and GitHub's registry with the Secrets Manager credential config
  names (`images.dockerHubCredentialArn`, `images.githubCredentialArn`);
* a policy on each node role: the first pull of an image through a rule creates its
  repository and imports the image, which needs `ecr:CreateRepository` and
  `ecr:BatchImportUpstreamImage` on the rule's prefix (the read actions come from
  AmazonEC2ContainerRegistryReadOnly, already attached);
* the runtime images (images/runtime/Dockerfile), built with pulumi-docker-build (BuildKit)
  FROM their bases through the cache and pushed to `<cluster>/trainforge-runtime` (immutable
  tags named by content), with a registry build cache in `<cluster>/trainforge-runtime-cache`.
  A stack that names prebuilt images (`images.runtimeImage` / `runtimeEfaImage`) builds none.
  The machine running `pulumi up` needs a Docker daemon with BuildKit for the build; previews
  do not build (`buildOnPreview: false`), the offline plan shows the build's inputs.
"""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws

from trainforge.core.image_routes import (
    CREDENTIAL_KEYS,
    UPSTREAMS,
    CacheRoutes,
    credential_problems,
)
from trainforge.jobs import dockerfile
from trainforge.jobs.runtime_images import RuntimeImages, repository
from trainforge.platform.mocked import under_mocks
from trainforge.stack.platform import ImagesConfig

# source: docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-iam.html (the IAM
# principal that pulls through a rule needs ecr:BatchImportUpstreamImage, and
# ecr:CreateRepository when the repository does not exist yet), checked 2026-11-25
PULL_THROUGH_ACTIONS = ("ecr:BatchImportUpstreamImage", "ecr:CreateRepository")


@dataclass
class ImageCacheArgs:
    config: ImagesConfig
    cluster: str
    region: str
    account_id: str
    partition: str
    routes: CacheRoutes | None
    images: RuntimeImages | None
    # node roles' names (managed node groups' and Karpenter's)
    node_role_names: list[pulumi.Input[str]]
    tags: dict[str, str]


def node_pull_policy(partition: str, region: str, account: str, prefixes: list[str]) -> str:
    """The node roles' pull-through statement: the two actions on the rules' prefixes only."""
    resources = [
        f"arn:{partition}:ecr:{region}:{account}:repository/{prefix}/*" for prefix in prefixes
    ]
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "PullThroughCache",
                    "Effect": "Allow",
                    "Action": list(PULL_THROUGH_ACTIONS),
                    "Resource": resources,
                }
            ],
        }
    )


def _check_credentials(
    credentials: dict[str, str | None], region: str, account: str, resource: Any
) -> None:
    """At `pulumi preview`: a credential ECR would refuse (another Region or account than the
    stack's) is an error naming its key, before anything is created. Under mocks the account is
    not the caller's and the plan reports the Region itself (TRAINFORGE_IMAGE_CREDENTIAL)."""
    if under_mocks():  # the caller's account is a stand-in, not the one `pulumi up` uses
        return
    for prefix, arn in credentials.items():
        if not arn:
            continue
        for why in credential_problems(arn, region, account):
            pulumi.log.error(f"{CREDENTIAL_KEYS[prefix]}: {arn}: {why}", resource)


def project_relative(path: Path) -> str:
    """`path` relative to the directory the program runs in (Pulumi runs it, and the
    docker-build provider resolves a relative context, in the project's root), '/'-separated.

    Why not absolute: the build's inputs are in the state and in every diff; an absolute
    checkout path differs between two clones of the same commit, so a no-op change would show
    the images as changed (`trainforge plan --diff`, docs/pr-review.md). What the build reads is
    still in its identity: the tag is the content's hash (`dockerfile.content_digest`)."""
    return Path(os.path.relpath(path, os.getcwd())).as_posix()


class ImageCache(pulumi.ComponentResource):
    """Pull-through cache rules, node permissions, and the runtime image builds."""

    def __init__(
        self, name: str, args: ImageCacheArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainforge:index:ImageCache", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cfg = args.config
        self.rules: dict[str, aws.ecr.PullThroughCacheRule] = {}
        credentials = {
            "docker-hub": cfg.docker_hub_credential_arn,
            "github": cfg.github_credential_arn,
        }
        _check_credentials(credentials, args.region, args.account_id, self)
        if args.routes is not None:
            for prefix in sorted(args.routes.prefixes):
                upstream, _, needs_credential = UPSTREAMS[prefix]
                self.rules[prefix] = aws.ecr.PullThroughCacheRule(
                    f"{name}-{prefix}",
                    ecr_repository_prefix=prefix,
                    upstream_registry_url=upstream,
                    credential_arn=credentials.get(prefix) if needs_credential else None,
                    opts=child,
                )
            policy = node_pull_policy(
                args.partition, args.region, args.account_id, sorted(args.routes.prefixes)
            )
            for i, role in enumerate(args.node_role_names):
                aws.iam.RolePolicy(
                    f"{name}-node-pull-{i}",
                    role=role,
                    policy=policy,
                    opts=child,
                )
        self.builds: list[Any] = []
        images = args.images
        if images is not None:
            built = {i.target: i for i in (images.standard, images.efa) if i and i.target}
            if built:
                self.builds = self._build(name, args, list(built.values()), child)
        self.register_outputs(
            {
                "rules": sorted(self.rules),
                "runtimeImage": images.standard.ref if images and images.standard else None,
                "runtimeEfaImage": images.efa.ref if images and images.efa else None,
            }
        )

    def _build(
        self, name: str, args: ImageCacheArgs, images: list[Any], child: pulumi.ResourceOptions
    ) -> list[Any]:
        import pulumi_docker_build as docker_build  # noqa: PLC0415 - only stacks that build

        repo = aws.ecr.Repository(
            f"{name}-runtime",
            name=repository(args.cluster),
            # a tag names one content forever (the tag is the content's hash)
            image_tag_mutability="IMMUTABLE",
            image_scanning_configuration={"scan_on_push": True},
            encryption_configurations=[{"encryption_type": "KMS"}],
            tags=args.tags,
            opts=child,
        )
        cache = aws.ecr.Repository(
            f"{name}-runtime-cache",
            name=f"{repository(args.cluster)}-cache",
            # BuildKit overwrites its cache manifest under one tag per target
            image_tag_mutability="MUTABLE",
            encryption_configurations=[{"encryption_type": "KMS"}],
            tags=args.tags,
            opts=child,
        )
        token = aws.ecr.get_authorization_token_output(registry_id=repo.registry_id)
        registry = docker_build.RegistryArgs(
            address=images[0].ref.split("/", 1)[0],
            username=token.user_name,
            password=token.password,
        )
        context = project_relative(dockerfile.ROOT)
        out = []
        for image in images:
            cache_ref = cache.repository_url.apply(lambda url, t=image.target: f"{url}:{t}")
            build_args = {}
            if args.routes is not None:
                build_args = {
                    "REGISTRY": args.routes.registry_for("docker-hub"),
                    "EFA_REGISTRY": args.routes.registry_for("ecr-public"),
                }
            out.append(
                docker_build.Image(
                    f"{name}-{image.target}",
                    context=docker_build.BuildContextArgs(location=context),
                    dockerfile=docker_build.DockerfileArgs(
                        location=posixpath.normpath(
                            posixpath.join(context, dockerfile.DOCKERFILE.as_posix())
                        )
                    ),
                    target=image.target,
                    build_args=build_args,
                    platforms=[docker_build.Platform.LINUX_AMD64],
                    build_on_preview=False,
                    push=True,
                    tags=[image.ref],
                    registries=[registry],
                    cache_from=[
                        docker_build.CacheFromArgs(
                            registry=docker_build.CacheFromRegistryArgs(ref=cache_ref)
                        )
                    ],
                    cache_to=[
                        docker_build.CacheToArgs(
                            registry=docker_build.CacheToRegistryArgs(
                                ref=cache_ref,
                                image_manifest=True,
                                oci_media_types=True,
                                mode=docker_build.CacheMode.MAX,
                            )
                        )
                    ],
                    opts=pulumi.ResourceOptions(
                        parent=self, depends_on=[repo, cache, *self.rules.values()]
                    ),
                )
            )
        return out
