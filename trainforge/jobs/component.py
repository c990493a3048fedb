"""`TrainingJob`: a training job as a Pulumi component (`trainforge:index:TrainingJob`).

Children: the immutable code ConfigMaps (the runtime library, and the job's own code when it
ships any), the workload its backend runs (a PyTorchJob or a
TrainJob as a CustomResource, or a batch/v1 Job with its headless Service) and its PodMonitor.
The workload is never updated in place: any change to its spec replaces it, and the old job
is deleted (foreground, so its pods are gone, after checkpointing on SIGTERM) before the new
one is created. Two copies of a job must never write the same checkpoint directory; the
replacement resumes from the checkpoints the old one left. A change of backend is such a
replacement too: the workload resource has the same name on every backend and lists the
other backends' types as aliases, so Pulumi plans a replace (deleted first), not a create of
a new object beside the old one.

Everything is validated before the component registers, so a bad declaration fails the
preview with a message naming the job and field and creates nothing.
"""

from typing import TYPE_CHECKING, Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from trainforge.core.contract import (
    BACKENDS,
    DEFAULT_BACKEND,
    DeclaredJob,
    JobTarget,
    PlatformContract,
    PoolFacts,
    Taint,
    TeamFacts,
    TeamQuota,
    record,
)
from trainforge.core.errors import JobConfigError
from trainforge.jobs import codeship, entrypoint
from trainforge.jobs.backends import WORKLOAD_TYPES, emit
from trainforge.jobs.estimate import fit_warnings
from trainforge.jobs.pod import EmittedJob, checkpoint_dir
from trainforge.jobs.spec import JobSpec, parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.stack import component_args
from trainforge.stack.jobs import (
    CheckpointSpec,
    ElasticSpec,
    EntrypointSpec,
    JobModel,
    ModelSize,
    RunPolicySpec,
    ShippedFunction,
    VolumeSpec,
)

TYPE_TOKEN = "trainforge:index:TrainingJob"
# How long Pulumi waits for a deleted job's pods to go; they get grace + 30 s to checkpoint.
DELETE_TIMEOUT_MARGIN_S = 300


class JobTaintArgs(TypedDict, total=False):
    key: str
    value: str
    effect: str


class JobPoolArgs(TypedDict, total=False):
    name: str
    instance_types: list[str]
    gpus_per_node: int
    efa_interfaces: int
    taints: list[JobTaintArgs]
    node_selector: dict[str, str]
    capacity_type: str
    vcpus_per_node: int
    memory_mib_per_node: int


class JobQuotaArgs(TypedDict, total=False):
    gpus: str
    cpu: str
    memory: str
    pods: str


class JobTargetArgs(TypedDict, total=False):
    """Platform wiring, for programs that do not pass a `JobTarget` (other languages)."""

    namespace: str
    service_account: str
    claim_name: str
    fsx_mount_path: str
    fsx_sub_path: str
    checkpoint_bucket: pulumi.Input[str]
    """May be the platform's bucket-name output."""
    checkpoint_prefix: str
    mlflow_tracking_uri: pulumi.Input[str]
    pool: JobPoolArgs
    quota: JobQuotaArgs
    backend: str
    """The platform's default backend (pytorchjob when unset)."""
    backends: list[str]
    """Backends whose controllers the cluster runs (unset: any; the job's is not checked)."""


# TrainingJobArgs and its blocks: generated from the job model (the provider host's schema
# reads them); a job's arguments are the model's attribute names, its target the hand-written
# wiring above (a program of another language has no JobTarget to pass)
_ARGS = component_args.generate(
    JobModel,
    "TrainingJobArgs",
    module="trainforge.jobs.component_args",
    doc="A training job; see docs/jobs.md for every field and its default.",
    # the names other languages have used since the first schema
    names={
        CheckpointSpec: "JobCheckpointArgs",
        ElasticSpec: "JobElasticArgs",
        RunPolicySpec: "JobRunPolicyArgs",
        EntrypointSpec: "JobEntrypointArgs",
        VolumeSpec: "JobVolumeArgs",
        ShippedFunction: "JobFunctionArgs",
        ModelSize: "JobModelSizeArgs",
    },
    # imageFacts.mlflow is a flag or a string: a union the package schema has no type for
    exclude=("image_facts",),
    given={"target": ("Platform wiring (other languages: no JobTarget to pass).", JobTargetArgs)},
    by_attribute=True,
)
if TYPE_CHECKING:  # a type built at import: plain data to a type checker
    TrainingJobArgs = dict[str, Any]
else:
    TrainingJobArgs = _ARGS["TrainingJobArgs"]


def spec_from_args(name: str, args: dict[str, Any], where: str) -> JobSpec:
    raw = {k: v for k, v in dict(args).items() if k != "target" and v is not None}
    raw.setdefault("name", name)
    return parse_job(raw, where)


def target_from_args(raw: dict[str, Any]) -> JobTarget:
    """A JobTarget from `args['target']` (programs in other languages send plain data)."""
    pool = dict(raw.get("pool") or {})
    facts = PoolFacts(
        name=pool.get("name", ""),
        instance_types=tuple(pool.get("instance_types") or ()),
        gpus_per_node=int(pool.get("gpus_per_node") or 0),
        efa_interfaces=int(pool.get("efa_interfaces") or 0),
        taints=tuple(
            Taint(key=t["key"], effect=t.get("effect", "NoSchedule"), value=t.get("value"))
            for t in pool.get("taints") or ()
        ),
        node_selector=tuple(sorted((pool.get("node_selector") or {}).items())),
        capacity_type=pool.get("capacity_type", "on-demand"),
        vcpus_per_node=pool.get("vcpus_per_node"),
        memory_mib_per_node=pool.get("memory_mib_per_node"),
    )
    team = TeamFacts(
        name=raw.get("team", raw["namespace"]),
        namespace=raw["namespace"],
        service_account=raw.get("service_account", "training"),
        claim_name=raw.get("claim_name"),
        fsx_sub_path=raw.get("fsx_sub_path"),
        fsx_mount_path=raw.get("fsx_mount_path", "/fsx"),
        checkpoint_prefix=raw.get("checkpoint_prefix", ""),
        quota=TeamQuota(**(raw.get("quota") or {})),
    )
    backend = raw.get("backend") or DEFAULT_BACKEND
    return JobTarget(
        team=team,
        pool=facts,
        checkpoint_bucket=raw.get("checkpoint_bucket"),
        mlflow_tracking_uri=raw.get("mlflow_tracking_uri"),
        backend=backend,
        backends=tuple(raw.get("backends") or BACKENDS),
    )


def job_options(
    parent: pulumi.Resource,
    provider: pulumi.ProviderResource | None,
    job: JobSpec,
    depends_on: list[pulumi.Resource],
) -> pulumi.ResourceOptions:
    """Replace, never update; delete the old job before creating the new one. The other
    backends' workload types are aliases: a change of backend is a replacement too."""
    timeout = job.checkpoint.grace_period + 30 + DELETE_TIMEOUT_MARGIN_S
    others = [t for b, t in WORKLOAD_TYPES.items() if b != job.backend]
    return pulumi.ResourceOptions(
        parent=parent,
        provider=provider,
        delete_before_replace=True,
        replace_on_changes=["spec"],
        depends_on=depends_on,
        aliases=[pulumi.Alias(type_=t) for t in others],
        custom_timeouts=pulumi.CustomTimeouts(delete=f"{timeout}s"),
    )


# Foreground deletion: Pulumi's delete returns only once the job's pods are gone, so the
# replacement cannot start while the old pods still write checkpoints.
DELETE_FOREGROUND = {"pulumi.com/deletionPropagationPolicy": "foreground"}
# A batch/v1 Job is awaited until it *completes* by default, which for a training run is
# hours. Wait only until the API server has it. (Not `pulumi.com/skipAwait`: on a Job it also
# skips awaiting the deletion, which delete-before-replace relies on.)
WAIT_CREATED = {"pulumi.com/waitFor": "jsonpath={.metadata.uid}"}


def _meta(
    manifest: dict[str, Any], annotations: dict[str, str] | None = None
) -> k8s.meta.v1.ObjectMetaArgs:
    m = manifest["metadata"]
    merged = {**(m.get("annotations") or {}), **(annotations or {})} or None
    return k8s.meta.v1.ObjectMetaArgs(
        name=m["name"], namespace=m["namespace"], labels=m.get("labels"), annotations=merged
    )


class TrainingJob(pulumi.ComponentResource):
    """A distributed PyTorch training job on the trainforge platform: a Kubeflow PyTorchJob,
    a Kubeflow Trainer v2 TrainJob or an indexed batch/v1 Job, by its backend."""

    job_name: pulumi.Output[str]
    """The job's name (of its PyTorchJob, TrainJob or Job)."""
    namespace: pulumi.Output[str]
    """The team namespace it runs in."""
    checkpoint_dir: pulumi.Output[str]
    """Where it checkpoints on the team's FSx volume (the same on every backend)."""
    workers: pulumi.Output[int]
    """Pods the job runs."""
    backend: pulumi.Output[str]
    """The backend that runs it: pytorchjob, trainjob or indexed-job."""

    def __init__(
        self,
        name: str,
        args: TrainingJobArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        contract: PlatformContract | None = None,
        target: JobTarget | None = None,
        provider: pulumi.ProviderResource | None = None,
        code: codeship.CodeBundle | None = None,
        spec: JobSpec | None = None,
        user_code: codeship.CodeBundle | None = None,
    ) -> None:
        """`contract` is the platform's (`TrainingPlatform.contract`): the job runs as its
        team on its pool, with its provider, after what it says jobs wait for. Without one,
        pass `target` (or `args['target']`, as other languages do) and `provider`."""
        args = dict(args or {})
        where = f"TrainingJob {name}"
        if spec is None:
            spec = spec_from_args(name, args, where)
        if target is None and contract is not None:
            target = contract.target(spec.team, spec.pool, where)
            provider = provider if provider is not None else contract.k8s_provider
        if target is None:
            if not args.get("target"):
                raise ValueError(
                    f"{where}: pass contract= (the platform's), target= (a JobTarget) or "
                    "args['target'] with the platform wiring"
                )
            target = target_from_args(args["target"])
        job = resolve_job(spec, target, where)
        waits: list[pulumi.Resource] = []
        if contract is not None:
            waits = [*contract.waits_for(str(job.backend)), *target.team.ready]
        if job.code_source == "configmap" and code is None:
            code = codeship.collect()
        if user_code is None:
            # Paths are relative to the project directory, where Pulumi runs the program.
            user_code = entrypoint.user_code(job, ".", where)
        entrypoint.refuse_missing_pieces(job, target, user_code, where)
        emitted = emit(
            job,
            target,
            code,
            user_code,
            managed_by=contract.managed_by if contract is not None else None,
        )
        if waits:
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=waits))
        super().__init__(TYPE_TOKEN, name, None, opts)
        warnings = fit_warnings(job, target.pool, where)
        warnings += entrypoint.mirror_warnings(spec, job, target, user_code, where)
        warnings += entrypoint.hang_warnings(spec, user_code, where)
        for warning in warnings:
            pulumi.log.warn(warning, resource=self)
        self.spec = job
        self.target = target
        self.manifests = emitted
        monitor_waits = list(contract.monitor_ready) if contract is not None else []
        self._declare(name, job, emitted, provider, waits, monitor_waits)
        if (rec := record()) is not None:  # a plan run: its checks read the typed job
            rec.jobs.append(DeclaredJob(job, target, emitted, name, tuple(warnings)))
        self.job_name = pulumi.Output.from_input(job.name)
        self.namespace = pulumi.Output.from_input(target.namespace)
        self.checkpoint_dir = pulumi.Output.from_input(checkpoint_dir(job, target))
        self.workers = pulumi.Output.from_input(job.workers)
        self.backend = pulumi.Output.from_input(str(job.backend))
        self.register_outputs(
            {
                "job_name": self.job_name,
                "namespace": self.namespace,
                "checkpoint_dir": self.checkpoint_dir,
                "workers": self.workers,
                "backend": self.backend,
            }
        )

    def _declare(
        self,
        name: str,
        job: JobSpec,
        emitted: EmittedJob,
        provider: pulumi.ProviderResource | None,
        waits: list[pulumi.Resource] | None = None,
        monitor_waits: list[pulumi.Resource] | None = None,
    ) -> None:
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        # The job object itself waits for what the contract says (the operator, the Job that
        # makes the team's FSx directory theirs): a component's depends_on is not an explicit
        # dependency of its children, so it is repeated where it matters.
        depends: list[pulumi.Resource] = list(waits or ())
        self.configmap = None
        if emitted.configmap is not None:
            cm = emitted.configmap
            # Named by content hash: new code -> new ConfigMap (created before the job is
            # replaced), the old one is deleted after.
            self.configmap = k8s.core.v1.ConfigMap(
                f"{name}-code", metadata=_meta(cm), data=cm["data"], immutable=True, opts=child
            )
            depends.append(self.configmap)
        self.user_configmap = None
        if emitted.user_configmap is not None:
            ucm = emitted.user_configmap
            # The job's own code, also named by its content hash (see above).
            self.user_configmap = k8s.core.v1.ConfigMap(
                f"{name}-src",
                metadata=_meta(ucm),
                data=ucm["data"],
                binary_data=ucm.get("binaryData"),
                immutable=True,
                opts=child,
            )
            depends.append(self.user_configmap)
        wl = emitted.workload
        options = job_options(self, provider, job, depends)
        self.workload: pulumi.CustomResource
        if wl["apiVersion"] == "batch/v1":
            self.workload = k8s.batch.v1.Job(
                name,
                metadata=_meta(wl, {**DELETE_FOREGROUND, **WAIT_CREATED}),
                spec=wl["spec"],
                opts=options,
            )
        else:
            self.workload = k8s.apiextensions.CustomResource(
                name,
                api_version=wl["apiVersion"],
                kind=wl["kind"],
                metadata=_meta(wl, DELETE_FOREGROUND),
                spec=wl["spec"],
                opts=options,
            )
        # Kept under its old name for programs written before there were backends.
        self.pytorchjob = self.workload if job.backend == "pytorchjob" else None
        self.service = None
        if emitted.service is not None:
            svc = emitted.service
            # Created after the Job: on a switch from trainjob, the old JobSet's Service of the
            # same name is gone only once the old TrainJob is (its pods resolve rank 0 as soon
            # as the Service exists; torchrun retries until then).
            self.service = k8s.core.v1.Service(
                f"{name}-rdzv",
                metadata=_meta(svc),
                spec=svc["spec"],
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=[self.workload])
                ),
            )
        self.podmonitor = None
        if emitted.podmonitor is not None:
            pm = emitted.podmonitor
            self.podmonitor = k8s.apiextensions.CustomResource(
                f"{name}-metrics",
                api_version=pm["apiVersion"],
                kind=pm["kind"],
                metadata=_meta(pm),
                spec=pm["spec"],
                # Its kind exists once the monitoring release has installed the CRD.
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=list(monitor_waits or ()))
                ),
            )

    # Presets: the same component with the preset's defaults.
    @classmethod
    def ddp(
        cls, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None, **kw: Any
    ) -> "TrainingJob":
        return cls(name, {**args, "preset": "ddp"}, opts, **kw)

    @classmethod
    def fsdp(
        cls, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None, **kw: Any
    ) -> "TrainingJob":
        return cls(name, {**args, "preset": "fsdp"}, opts, **kw)

    @classmethod
    def elastic(
        cls, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None, **kw: Any
    ) -> "TrainingJob":
        return cls(name, {**args, "preset": "elastic"}, opts, **kw)

    @classmethod
    def function(
        cls,
        name: str,
        fn: Any,
        args: TrainingJobArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        function_args: dict[str, Any] | None = None,
        **kw: Any,
    ) -> "TrainingJob":
        """A job that calls `fn(**function_args)` in every process (as the Kubeflow SDK's
        CustomTrainer(func=...)): its source and the module-level names it uses are shipped
        (`trainforge.jobs.pyfunction`), with the job's contract in the environment.
        `args` are the job's fields (team, pool, workers, ...) without an entrypoint."""
        raw = {k: v for k, v in dict(args or {}).items() if k != "target" and v is not None}
        raw.setdefault("name", name)
        if "entrypoint" in raw:
            raise JobConfigError(
                f"TrainingJob {name}.entrypoint",
                raw["entrypoint"],
                "TrainingJob.function sets the entrypoint (the function)",
            )
        raw["entrypoint"] = {"function": fn, "function_args": function_args}
        spec = parse_job(raw, f"TrainingJob {name}")
        return cls(name, args, opts, spec=spec, **kw)
