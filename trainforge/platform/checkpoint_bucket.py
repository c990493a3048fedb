"""The durable checkpoint store: one S3 bucket, one prefix and one Pod Identity role per team.

Why: FSx is fast but lives in one AZ; checkpoints that represent days of GPU time also go to
S3. The bucket is encrypted with a customer KMS key (with an S3 bucket key, so every PUT does
not call KMS), versioned (an overwritten `latest` marker can be recovered), private, TLS-only,
and cleans up after itself (old versions and abandoned multipart uploads expire). Each team's
training ServiceAccount can read and write only `<team>/` in it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from trainforge.platform.iam import pod_identity_trust_output
from trainforge.platform.services_config import CheckpointConfig
from trainforge.platform.tags import team_tags


def team_prefix(team: str) -> str:
    return f"{team}/"


def team_policy(bucket_arn: str, key_arn: str, team: str, region: str | None = None) -> str:
    """Least privilege for one team: its objects, listing its prefix, and the bucket's key.

    What the runtime's S3 mirror calls (rehearsed by the plan, docs/rehearsals.md): Get/Put/
    DeleteObject and AbortMultipartUpload (s3transfer aborts a failed multipart upload, which
    needs its own action) on `<team>/*`; ListBucket only with an `s3:prefix` under `<team>/`
    (so the runtime never calls HeadBucket, which carries no prefix); and the bucket's KMS key
    only through S3 (kms:ViaService) for SSE-KMS reads, writes and multipart parts.
    """
    key_statement: dict = {
        "Sid": "BucketKey",
        "Effect": "Allow",
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
        "Resource": key_arn,
    }
    if region:
        key_statement["Condition"] = {
            "StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}
        }
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "TeamObjects",
                    "Effect": "Allow",
                    "Action": [
                        "s3:GetObject",
                        "s3:PutObject",
                        "s3:DeleteObject",
                        "s3:AbortMultipartUpload",
                    ],
                    "Resource": f"{bucket_arn}/{team}/*",
                },
                {
                    "Sid": "ListTeamPrefix",
                    "Effect": "Allow",
                    "Action": "s3:ListBucket",
                    "Resource": bucket_arn,
                    "Condition": {"StringLike": {"s3:prefix": [f"{team}/*"]}},
                },
                key_statement,
            ],
        }
    )


def bucket_policy(bucket_arn: str, vpc_endpoint_id: str | None, team_role_arns: list[str]) -> str:
    """TLS only, for everyone; and the teams' training roles only through the VPC's S3
    gateway endpoint, so that credentials lifted from a pod are useless outside the VPC.

    Deliberately scoped to the team roles (`aws:PrincipalArn`): a bucket-wide
    `aws:SourceVpce` condition would also lock out the platform admins' console and CLI,
    and FSx's data repository association, which reach S3 from outside the VPC.
    """
    statements: list[dict] = [
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [bucket_arn, f"{bucket_arn}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    ]
    if vpc_endpoint_id and team_role_arns:
        statements.append(
            {
                "Sid": "TeamRolesOnlyThroughTheVpcEndpoint",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [bucket_arn, f"{bucket_arn}/*"],
                "Condition": {
                    "StringNotEquals": {"aws:SourceVpce": vpc_endpoint_id},
                    "ArnEquals": {"aws:PrincipalArn": sorted(team_role_arns)},
                },
            }
        )
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


@dataclass
class CheckpointBucketArgs:
    config: CheckpointConfig
    cluster_name: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str]
    partition: str = "aws"
    account_id: str | None = None
    # the bucket's region: the team roles may use the key only through S3 in this region
    region: str | None = None
    # team name -> (namespace, training ServiceAccount name)
    teams: dict[str, tuple[pulumi.Input[str], str]] = field(default_factory=dict)
    # The VPC's S3 gateway endpoint: the teams' roles may use the bucket only through it.
    s3_vpc_endpoint_id: pulumi.Input[str] | None = None
    tags: dict[str, str] = field(default_factory=dict)


class CheckpointBucket(pulumi.ComponentResource):
    """S3 bucket (split v7 resources) + per-team Pod Identity roles scoped to `<team>/`."""

    bucket: aws.s3.Bucket
    team_roles: dict[str, aws.iam.Role]

    def __init__(
        self, name: str, args: CheckpointBucketArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainforge:index:CheckpointBucket", name, None, opts)
        cfg = args.config
        child = pulumi.ResourceOptions(parent=self)

        self.bucket = aws.s3.Bucket(
            name,
            bucket_prefix=f"{name}-"[:37],
            force_destroy=cfg.force_destroy,
            tags=args.tags,
            # Checkpoints are weeks of GPU time: protected (a destroy or a replacement stops
            # until someone unprotects it on purpose), and kept in the account when the stack
            # is destroyed (retained: Pulumi forgets it, S3 keeps it and its objects).
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True),
        )
        bucket_id = self.bucket.id  # the bucket's name
        self.bucket_name = bucket_id
        bucket_arn = pulumi.Output.concat("arn:", args.partition, ":s3:::", bucket_id)
        self.bucket_arn = bucket_arn

        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=bucket_id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        pab = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access",
            bucket=bucket_id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-sse",
            bucket=bucket_id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms", kms_master_key_id=args.kms_key_arn
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        versioning = aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=bucket_id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
                status="Enabled"
            ),
            opts=child,
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle",
            bucket=bucket_id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-noncurrent-versions",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                        noncurrent_days=cfg.noncurrent_version_expiration_days
                    ),
                ),
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="abort-incomplete-multipart-uploads",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=cfg.abort_incomplete_multipart_days
                    ),
                ),
            ],
            # noncurrent-version rules need versioning to be on first
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
        )

        self.team_roles = {}
        self.team_prefixes: dict[str, str] = {}
        for team, (namespace, service_account) in args.teams.items():
            role = aws.iam.Role(
                f"{name}-{team}",
                assume_role_policy=pod_identity_trust_output(
                    args.account_id, args.cluster_name, namespace, service_account
                ),
                description=f"trainforge team {team}: read/write s3://<checkpoint bucket>/{team}/",
                tags=team_tags(args.tags, team),
                opts=child,
            )
            aws.iam.RolePolicy(
                f"{name}-{team}",
                role=role.id,
                policy=pulumi.Output.all(bucket_arn, args.kms_key_arn).apply(
                    lambda a, t=team: team_policy(a[0], a[1], t, args.region)
                ),
                opts=child,
            )
            aws.eks.PodIdentityAssociation(
                f"{name}-{team}",
                cluster_name=args.cluster_name,
                namespace=namespace,
                service_account=service_account,
                role_arn=role.arn,
                tags=team_tags(args.tags, team),
                opts=child,
            )
            self.team_roles[team] = role
            self.team_prefixes[team] = team_prefix(team)
        aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=bucket_id,
            policy=pulumi.Output.all(
                bucket_arn,
                args.s3_vpc_endpoint_id,
                [r.arn for r in self.team_roles.values()],
            ).apply(lambda a: bucket_policy(a[0], a[1], a[2])),
            # S3 rejects policy changes while the public access block is being applied.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[pab]),
        )

        self.register_outputs({"bucketName": bucket_id, "bucketArn": bucket_arn})
