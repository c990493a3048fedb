"""FSx for Lustre: the shared, fast file system for datasets and checkpoints.

Why a component: the file system is only usable with its security group (Lustre ports from
the nodes), the CSI driver add-on (with its Pod Identity role) and a statically bound
PersistentVolume + ReadWriteMany claim in every team namespace; declaring them together keeps
those pieces consistent.

Teams share ONE file system, and each team's volume reaches only its own directory: every
team gets its own PV (`fsx-<team>-dir`) that mounts the Lustre *fileset* `/<team>` (the CSI
driver mounts `<dnsname>@tcp:/<mountname>`, so `mountname: <mountname>/<team>` mounts that
subdirectory: aws-fsx-csi-driver pkg/driver/node.go at the pinned v1.5.0; Lustre subdirectory
mounts, docs.aws.amazon.com/fsx/latest/LustreGuide/mounting-from-fileset.html), and a claim
pre-bound to it in the team's namespace (`claimRef` + `volumeName`, storageClassName "").
A pod of team B that mounts its claim without `subPath` sees B's directory and nothing
above it. Underneath, each directory belongs to its team's own UID/GID, mode 0770, and
every team's pods run as their team's UID/GID: even a mount of the whole file system (only
the platform's `fsx-admin` namespace has one) would not let B read or write A's files.

The directories are made by a one-shot Job per team in the platform namespace `fsx-admin`,
which alone mounts the file system root (PV `fsx-root`); team namespaces never do.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from trainforge.core import platform_names, versions
from trainforge.core.contract import DEFAULT_TRAINING_UID
from trainforge.core.contract import fsx_claim_name as claim_name
from trainforge.core.image_routes import cached
from trainforge.core.labels import ROOT_REASON
from trainforge.core.pod_security import AUDIT as PSA_AUDIT
from trainforge.core.pod_security import ENFORCE as PSA_ENFORCE
from trainforge.core.pod_security import ENFORCE_VERSION as PSA_ENFORCE_VERSION
from trainforge.core.pod_security import WARN as PSA_WARN
from trainforge.jobs.pod import TEAM_LABEL
from trainforge.platform.addons import addon_version
from trainforge.platform.iam import pod_identity_trust_output
from trainforge.platform.services_config import FsxConfig
from trainforge.platform.tags import named

CSI_DRIVER = "fsx.csi.aws.com"
CSI_CONTROLLER_SA = "fsx-csi-controller-sa"
# Lustre: 988 for the LNet/metadata connection, 1018-1023 for the client/server data ports.
LUSTRE_PORTS = ((988, 988), (1018, 1023))


@dataclass
class FsxLustreArgs:
    config: FsxConfig
    cluster_name: pulumi.Input[str]
    vpc_id: pulumi.Input[str]
    # FSx for Lustre lives in ONE subnet (one AZ); put GPU/EFA nodes in the same AZ.
    subnet_id: pulumi.Input[str]
    node_security_group_ids: list[pulumi.Input[str]]
    k8s_provider: k8s.Provider
    partition: str = "aws"
    account_id: str | None = None
    # Customer KMS key for PERSISTENT_2. SCRATCH_2 is always encrypted with an AWS-managed key
    # (FSx does not accept a customer key for scratch file systems).
    kms_key_arn: pulumi.Input[str] | None = None
    # team name -> namespace (an Output from the Namespace, so claims wait for it)
    team_namespaces: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    # team name -> (UID, GID) its training pods run as (TeamFacts); the team's directory is
    # made theirs. Teams not listed get DEFAULT_TRAINING_UID.
    team_ids: dict[str, tuple[int, int]] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


def volume_name(team: str) -> str:
    """The team's PV: its directory of the file system (see the module docstring)."""
    return f"fsx-{team}-dir"


ADMIN_NAMESPACE = platform_names.FSX_ADMIN_NAMESPACE
ROOT_CLAIM = "fsx-root"
# Which directory of the file system a PV exposes, for people (`kubectl get pv`) and for the
# plan's pod script rehearsal (the mount name itself is only known once FSx exists).
DIRECTORY_ANNOTATION = "trainforge.io/fsx-directory"


# Each team's directory on the file system must belong to the UID/GID its training pods run
# as (TeamFacts.run_as_user/run_as_group, passed in per team): the FSx CSI driver does not
# apply fsGroup to shared volumes and a new file system's root is root-owned (0755).
ROOT_REASON_ANNOTATION = ROOT_REASON
TEAM_DIR_ROOT_REASON = (
    "creates the team's directory on the root-owned FSx file system and chowns it to the "
    "training UID; one-shot, no privilege escalation, only CAP_CHOWN"
)
# checkov reads its inline suppressions from annotations on the object it scans.
TEAM_DIR_CHECKOV_SKIPS = {
    "checkov.io/skip1": "CKV_K8S_23=" + TEAM_DIR_ROOT_REASON,
    "checkov.io/skip2": "CKV_K8S_37=adds CAP_CHOWN only, after dropping ALL",
    "checkov.io/skip3": "CKV_K8S_25=CAP_CHOWN is what the helper is for",
}


def team_dir_script(path: str, uid: int, gid: int) -> str:
    """The setup script: make `path` belong to uid:gid, mode 0770, with CAP_CHOWN only.

    Why this shape (the pod script rehearsal runs it, trainforge.plan.checks.pod_scripts):
    `chmod` on a file one does not own needs CAP_FOWNER, so chmod runs only while root still
    owns the directory (just made, or made root-owned by the kubelet for a pod's subPath),
    before the chown hands it over. Every later run (a Job retry, a re-created Job after the
    team has written there) finds it owned by the team: mkdir -p is a no-op, chmod is
    skipped (the owner's mode is the team's to keep) and chown to the same or a new team UID
    needs only CAP_CHOWN. So the Job never needs CAP_FOWNER, which would let it change the
    mode of any file on the shared file system.
    """
    d = shlex.quote(path)
    return (
        f"set -eu; mkdir -p {d}; "
        f"if [ -O {d} ]; then chmod 0770 {d}; fi; "
        f"chown {int(uid)}:{int(gid)} {d}"
    )


def team_dir_job(
    team: str,
    namespace: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
    uid: int = DEFAULT_TRAINING_UID,
    gid: int = DEFAULT_TRAINING_UID,
) -> Any:
    """A one-shot Job, in the platform's `fsx-admin` namespace (`namespace`), that makes /<team>
    on the file system (through the root claim) owned by the team's UID/GID, mode 0770.

    The deliberate exception to non-root pods: only root may create a directory in the
    root-owned file-system root and chown it. Everything else is locked down (no escalation,
    ALL capabilities dropped but CHOWN, read-only root filesystem, no API token).
    Pulumi waits for a batch/v1 Job to complete (pulumi-kubernetes Job await: Complete
    condition, fails on Failed; no `pulumi.com/skipAwait` here), so the team's jobs, which
    depend on it (TeamFacts.ready), start only once the directory is the team's.
    """
    script = team_dir_script(f"/fsx/{team}", uid, gid)
    return k8s.batch.v1.Job(
        f"fsx-team-dir-{team}",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=f"fsx-team-dir-{team}",
            namespace=namespace,
            labels={TEAM_LABEL: team},
            annotations={ROOT_REASON_ANNOTATION: TEAM_DIR_ROOT_REASON, **TEAM_DIR_CHECKOV_SKIPS},
        ),
        spec=k8s.batch.v1.JobSpecArgs(
            backoff_limit=6,
            template=k8s.core.v1.PodTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(labels={TEAM_LABEL: team}),
                spec=k8s.core.v1.PodSpecArgs(
                    restart_policy="OnFailure",
                    automount_service_account_token=False,
                    security_context=k8s.core.v1.PodSecurityContextArgs(
                        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault")
                    ),
                    containers=[
                        k8s.core.v1.ContainerArgs(
                            name="mkdir",
                            image=cached(versions.BUSYBOX_IMAGE),
                            command=["sh", "-c", script],
                            security_context=k8s.core.v1.SecurityContextArgs(
                                run_as_user=0,
                                run_as_group=0,
                                run_as_non_root=False,
                                allow_privilege_escalation=False,
                                read_only_root_filesystem=True,
                                capabilities=k8s.core.v1.CapabilitiesArgs(
                                    drop=["ALL"], add=["CHOWN"]
                                ),
                            ),
                            resources=k8s.core.v1.ResourceRequirementsArgs(
                                requests={"cpu": "50m", "memory": "32Mi"},
                                limits={"cpu": "100m", "memory": "32Mi"},
                            ),
                            volume_mounts=[
                                k8s.core.v1.VolumeMountArgs(name="fsx", mount_path="/fsx")
                            ],
                        )
                    ],
                    volumes=[
                        k8s.core.v1.VolumeArgs(
                            name="fsx",
                            persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                                claim_name=ROOT_CLAIM
                            ),
                        )
                    ],
                ),
            ),
        ),
        opts=opts,
    )


class FsxLustre(pulumi.ComponentResource):
    """FSx for Lustre + security group + CSI add-on + per-team static PV/PVC."""

    def team_ready(self, team: str) -> list[Any]:
        """What a job of `team` must wait for: the Job that prepares the team's directory
        (Pulumi waits for a Job to complete), so kubelet never creates the subPath root-owned,
        and the team's claim, which its pods mount by name."""
        return [
            r for r in (self.team_dir_jobs.get(team), self.team_claims.get(team)) if r is not None
        ]

    file_system: aws.fsx.LustreFileSystem
    security_group: aws.ec2.SecurityGroup
    claims: dict[str, str]

    def __init__(
        self, name: str, args: FsxLustreArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainforge:index:FsxLustre", name, None, opts)
        cfg = args.config
        child = pulumi.ResourceOptions(parent=self)
        persistent = cfg.deployment_type == "PERSISTENT_2"

        self.security_group = aws.ec2.SecurityGroup(
            f"{name}-lustre",
            vpc_id=args.vpc_id,
            description="FSx for Lustre: Lustre traffic from cluster nodes only",
            tags=named(args.tags, f"{name}-lustre"),
            opts=child,
        )
        sg_id = self.security_group.id

        def rule(kind, rule_name, sg, ref, lo, hi, description):  # one TCP port range
            kind(
                rule_name,
                security_group_id=sg,
                referenced_security_group_id=ref,
                ip_protocol="tcp",
                from_port=lo,
                to_port=hi,
                description=description,
                opts=child,
            )

        ingress, egress = aws.vpc.SecurityGroupIngressRule, aws.vpc.SecurityGroupEgressRule
        for lo, hi in LUSTRE_PORTS:
            # file servers talk to each other
            rule(
                ingress,
                f"{name}-lustre-self-{lo}",
                sg_id,
                sg_id,
                lo,
                hi,
                "Lustre between file servers",
            )
            rule(
                egress,
                f"{name}-lustre-self-out-{lo}",
                sg_id,
                sg_id,
                lo,
                hi,
                "Lustre between file servers",
            )
            for i, node_sg in enumerate(args.node_security_group_ids):
                rule(
                    ingress,
                    f"{name}-lustre-from-nodes{i}-{lo}",
                    sg_id,
                    node_sg,
                    lo,
                    hi,
                    "Lustre clients (cluster nodes)",
                )
                rule(
                    egress,
                    f"{name}-lustre-to-nodes{i}-{lo}",
                    sg_id,
                    node_sg,
                    lo,
                    hi,
                    "Lustre replies to clients",
                )
                # Lustre clients must also accept connections from the file servers.
                rule(
                    ingress,
                    f"{name}-nodes{i}-from-lustre-{lo}",
                    node_sg,
                    sg_id,
                    lo,
                    hi,
                    "Lustre servers to clients",
                )

        fs_kwargs: dict = {}
        if persistent:
            fs_kwargs["per_unit_storage_throughput"] = cfg.per_unit_storage_throughput
            fs_kwargs["kms_key_id"] = args.kms_key_arn
            # Daily backups kept `backupRetentionDays`, and a final backup when the file system
            # is deleted (the provider's default skips it). FSx backs up no scratch file system.
            fs_kwargs["automatic_backup_retention_days"] = cfg.backup_retention_days
        self.file_system = aws.fsx.LustreFileSystem(
            name,
            storage_capacity=cfg.storage_capacity_gib,
            subnet_ids=args.subnet_id,
            deployment_type=cfg.deployment_type,
            storage_type="SSD",
            file_system_type_version=versions.LUSTRE_VERSION,
            data_compression_type="LZ4",
            security_group_ids=[sg_id],
            skip_final_backup=not persistent,
            tags=named(args.tags, name),
            **fs_kwargs,
            # The teams' datasets and checkpoints: `pulumi destroy`, or a change that replaces
            # the file system (subnet, security groups, KMS key, deployment type: the plan's
            # data safety check flags those), stops here until someone unprotects it on purpose
            # (docs/services.md, "Destroying a stack on purpose").
            opts=pulumi.ResourceOptions(parent=self, protect=True),
        )
        fs = self.file_system

        self.data_repository = None
        repo = cfg.data_repository
        if repo is not None and persistent:
            self.data_repository = aws.fsx.DataRepositoryAssociation(
                f"{name}-s3",
                file_system_id=fs.id,
                data_repository_path=repo.data_repository_path,
                file_system_path=repo.file_system_path,
                batch_import_meta_data_on_create=repo.batch_import_meta_data_on_create,
                # Deleting the association must never delete the data it exported.
                delete_data_in_filesystem=False,
                s3=aws.fsx.DataRepositoryAssociationS3Args(
                    auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(
                        events=list(repo.import_events)
                    ),
                    auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(
                        events=list(repo.export_events)
                    ),
                ),
                tags=args.tags,
                opts=child,
            )

        # CSI driver: static provisioning only needs the node plugin (it mounts without AWS
        # calls); the controller describes file systems and expands this one, nothing else.
        self.csi_role = aws.iam.Role(
            f"{name}-csi",
            assume_role_policy=pod_identity_trust_output(
                args.account_id, args.cluster_name, "kube-system", CSI_CONTROLLER_SA
            ),
            description="FSx CSI controller (EKS Pod Identity)",
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-csi",
            role=self.csi_role.id,
            policy=fs.arn.apply(
                lambda arn: json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Sid": "Describe",
                                "Effect": "Allow",
                                "Action": ["fsx:DescribeFileSystems"],
                                # Describe* does not support resource-level permissions.
                                "Resource": "*",
                            },
                            {
                                "Sid": "ExpandThisFileSystem",
                                "Effect": "Allow",
                                "Action": ["fsx:UpdateFileSystem"],
                                "Resource": arn,
                            },
                        ],
                    }
                )
            ),
            opts=child,
        )
        pia = aws.eks.PodIdentityAssociation(
            f"{name}-csi",
            cluster_name=args.cluster_name,
            namespace="kube-system",
            service_account=CSI_CONTROLLER_SA,
            role_arn=self.csi_role.arn,
            tags=args.tags,
            opts=child,
        )
        self.csi_addon = aws.eks.Addon(
            f"{name}-csi",
            cluster_name=args.cluster_name,
            addon_name="aws-fsx-csi-driver",
            addon_version=addon_version("aws-fsx-csi-driver"),
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="PRESERVE",
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[pia]),
        )

        k8s_opts = pulumi.ResourceOptions(
            parent=self, provider=args.k8s_provider, depends_on=[self.csi_addon]
        )
        size = f"{cfg.storage_capacity_gib}Gi"

        def pv(
            res: str, pv_name: str, namespace: Any, claim: str, directory: str, labels: dict
        ) -> Any:
            mountname = (
                fs.mount_name
                if directory == "/"
                else fs.mount_name.apply(lambda m, d=directory: f"{m}{d}")
            )
            return k8s.core.v1.PersistentVolume(
                res,
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=pv_name, labels=labels, annotations={DIRECTORY_ANNOTATION: directory}
                ),
                spec=k8s.core.v1.PersistentVolumeSpecArgs(
                    capacity={"storage": size},
                    volume_mode="Filesystem",
                    access_modes=["ReadWriteMany"],
                    # Deleting a claim must never wipe the shared file system.
                    persistent_volume_reclaim_policy="Retain",
                    storage_class_name="",
                    mount_options=["flock"],
                    claim_ref=k8s.core.v1.ObjectReferenceArgs(namespace=namespace, name=claim),
                    csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                        driver=CSI_DRIVER,
                        volume_handle=fs.id,
                        volume_attributes={"dnsname": fs.dns_name, "mountname": mountname},
                    ),
                ),
                opts=k8s_opts,
            )

        def pvc(res: str, claim: str, namespace: Any, pv_name: str, labels: dict) -> Any:
            return k8s.core.v1.PersistentVolumeClaim(
                res,
                metadata=k8s.meta.v1.ObjectMetaArgs(name=claim, namespace=namespace, labels=labels),
                spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                    access_modes=["ReadWriteMany"],
                    storage_class_name="",
                    volume_name=pv_name,
                    resources=k8s.core.v1.VolumeResourceRequirementsArgs(
                        requests={"storage": size}
                    ),
                ),
                # Growing FSx (an in-place update) must not patch the claim: the API server
                # refuses to resize a claim bound to a static volume ("only dynamically
                # provisioned pvc can be resized", kubernetes plugin/pkg/admission/storage/
                # persistentvolume/resize/admission.go), so `pulumi up` would fail half-way.
                # The request only binds the claim (<= the volume's capacity, which follows
                # the file system); Lustre enforces no per-claim size.
                opts=pulumi.ResourceOptions.merge(
                    k8s_opts, pulumi.ResourceOptions(ignore_changes=["spec.resources"])
                ),
            )

        # The platform's own view of the whole file system: only the team-directory Jobs use
        # it, in a namespace no team can run pods in (Pod Security baseline: the Jobs run as
        # root with CAP_CHOWN only).
        self.admin_namespace = k8s.core.v1.Namespace(
            f"{name}-admin-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=ADMIN_NAMESPACE,
                labels={
                    PSA_ENFORCE: "baseline",
                    PSA_ENFORCE_VERSION: "latest",
                    PSA_WARN: "baseline",
                    PSA_AUDIT: "baseline",
                },
            ),
            opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider),
        )
        admin_ns = self.admin_namespace.metadata.name
        admin_labels = {"app.kubernetes.io/part-of": "trainforge"}
        pv(f"{name}-pv-root", "fsx-root", admin_ns, ROOT_CLAIM, "/", admin_labels)
        root_claim = pvc(f"{name}-pvc-root", ROOT_CLAIM, admin_ns, "fsx-root", admin_labels)

        self.claims = {}
        self.team_dir_jobs: dict[str, Any] = {}
        self.team_claims: dict[str, Any] = {}
        for team, namespace in args.team_namespaces.items():
            labels = {TEAM_LABEL: team}
            pv(f"{name}-pv-{team}", volume_name(team), namespace, claim_name(team), f"/{team}",
               labels)  # fmt: skip
            self.team_claims[team] = pvc(
                f"{name}-pvc-{team}", claim_name(team), namespace, volume_name(team), labels
            )
            self.claims[team] = claim_name(team)
            uid, gid = args.team_ids.get(team, (DEFAULT_TRAINING_UID, DEFAULT_TRAINING_UID))
            self.team_dir_jobs[team] = team_dir_job(
                team,
                admin_ns,
                pulumi.ResourceOptions(
                    parent=self, provider=args.k8s_provider, depends_on=[root_claim]
                ),
                uid=uid,
                gid=gid,
            )

        self.file_system_id = fs.id
        self.dns_name = fs.dns_name
        self.mount_name = fs.mount_name
        self.register_outputs(
            {
                "fileSystemId": fs.id,
                "dnsName": fs.dns_name,
                "mountName": fs.mount_name,
                "securityGroupId": sg_id,
            }
        )
