"""Policy rules as pure functions, run by the offline plan (`check`) and the pulumi-policy pack
in policy/ (docs/pr-review.md, "Policy rules"). A stack rule sees every resource at once (an S3
bucket's encryption, versioning, access block and policy are four). A rule never fails on a
value only the cloud knows ("<unknown>"), as `pulumi preview --policy-pack` behaves.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trainforge.core import catalog, image_routes, pod_security
from trainforge.core.contract import GPU_RESOURCE as GPU
from trainforge.core.labels import INSTANCE_TYPE, KARPENTER_GPU_COUNT
from trainforge.core.labels import PRIVILEGED_REASON as PRIVILEGED_REASON_ANNOTATION
from trainforge.core.labels import ROOT_REASON as ROOT_REASON_ANNOTATION
from trainforge.core.pods import containers, get, security_field
from trainforge.core.taints import EFFECTS, schedules, untolerated
from trainforge.plan import resource_types as T
from trainforge.plan.check_types import CheckResult, Finding, PlanContext
from trainforge.plan.checks.iam_eval import as_list, policy_doc
from trainforge.plan.checks.job_backends import runtime_docs
from trainforge.plan.checks.ordering import chart_name
from trainforge.plan.manifests import has_unknown
from trainforge.plan.runner import UNKNOWN


def is_unknown(value: Any) -> bool:
    return value == UNKNOWN or type(value).__name__ == "Unknown"


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    fix: str
    # (type token, inputs[, a plan's training runtimes for a TrainJob's pod: `pod_specs`])
    check: Callable[[str, dict[str, Any], Any], list[str]]
    types: tuple[str, ...] = ()  # exact type tokens; empty = decided by `check` itself

    def applies(self, type_: str) -> bool:
        return not self.types or type_ in self.types


@dataclass(frozen=True)
class StackResource:
    urn: str
    type: str
    name: str
    inputs: dict[str, Any]
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class StackRule:
    id: str
    title: str
    fix: str
    check: Callable[[list[StackResource]], Iterable[tuple[str, str]]]  # (urn, message)


RESOURCE_RULES: list[Rule] = []  # in the order they run, each registered below


def resource_rule(id_: str, title: str, fix: str, types: tuple[str, ...]):
    """Register the decorated `(type token, inputs) -> messages` as a rule on `types`."""

    def register(fn: Callable[[str, dict[str, Any]], list[str]]):
        RESOURCE_RULES.append(Rule(id_, title, fix, lambda t, i, _runtimes=None: fn(t, i), types))
        return fn

    return register


def pod_rule(id_: str, title: str, fix: str):
    """Register the decorated `(type token, inputs, pod spec) -> messages` as a rule on every
    pod spec a resource carries, each message prefixed with its pod's label."""

    def register(fn: Callable[[str, dict, dict], list[str]]):
        def check(type_: str, inputs: dict, runtimes: Any = None) -> list[str]:
            out = []
            for label, spec in pod_specs(type_, inputs, runtimes):
                out += [f"{label}: {m}" for m in fn(type_, inputs, spec)]
            return out

        RESOURCE_RULES.append(Rule(id_, title, fix, check))
        return fn

    return register


def container_rule(id_: str, title: str, fix: str):
    """A pod rule judging each container (init containers first) with the decorated
    `(type token, inputs, pod spec, container) -> problem or None`."""

    def register(fn: Callable[[str, dict, dict, dict], str | None]):
        def per_spec(type_: str, inputs: dict, spec: dict) -> list[str]:
            problems = ((c, fn(type_, inputs, spec, c)) for c in containers(spec))
            return [f"container {c.get('name')!r} {why}" for c, why in problems if why]

        return pod_rule(id_, title, fix)(per_spec)

    return register


# --- EKS: the pulumi-eks component (flat inputs) and aws.eks.Cluster (vpcConfig, ...)

EKS_TYPES = (T.EKS_COMPONENT, T.EKS_CLUSTER)
ALL_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")


def eks_endpoint(type_: str, inputs: dict) -> tuple[Any, Any, Any]:
    """(public access, private access, public CIDRs); both providers default to a public
    endpoint open to 0.0.0.0/0."""
    src = inputs if type_ == T.EKS_COMPONENT else (inputs.get("vpcConfig") or {})
    public = src.get("endpointPublicAccess")
    public = True if public is None else public
    return public, bool(src.get("endpointPrivateAccess")), src.get("publicAccessCidrs")


@resource_rule(
    "CKV_AWS_37",
    "EKS control-plane logging covers all log types",
    f"set enabledClusterLogTypes to {list(ALL_LOG_TYPES)}",
    EKS_TYPES,
)
def eks_log_types(type_: str, inputs: dict) -> list[str]:
    logs = inputs.get("enabledClusterLogTypes")
    if is_unknown(logs):
        return []
    missing = [t for t in ALL_LOG_TYPES if t not in as_list(logs)]
    return [f"control-plane log types not enabled: {', '.join(missing)}"] if missing else []


@resource_rule(
    "CKV_AWS_38",
    "EKS public endpoint is not open to 0.0.0.0/0",
    "disable endpointPublicAccess or list the allowed CIDRs in publicAccessCidrs",
    EKS_TYPES,
)
def eks_public_cidrs(type_: str, inputs: dict) -> list[str]:
    public, _, cidrs = eks_endpoint(type_, inputs)
    if public is not True:
        return []
    if cidrs is None:
        return ["public endpoint enabled with no publicAccessCidrs: AWS defaults to 0.0.0.0/0"]
    if is_unknown(cidrs):
        return []
    if any(c in ("0.0.0.0/0", "::/0") for c in as_list(cidrs)):
        return [f"public endpoint open to the internet (publicAccessCidrs={cidrs})"]
    return []


@resource_rule(
    "CKV_AWS_39",
    "EKS API endpoint is not public by default",
    "set endpointPrivateAccess: true and endpointPublicAccess: false (or an explicit allow-list)",
    EKS_TYPES,
)
def eks_public_endpoint(type_: str, inputs: dict) -> list[str]:
    public, private, cidrs = eks_endpoint(type_, inputs)
    if public is True and (cidrs is None or not as_list(cidrs)):
        return [
            "API endpoint is public by default (endpointPublicAccess unset or true with no allow-list)"
        ]
    if public is True and not private:
        return ["API endpoint is public only: nodes and controllers reach it over the internet"]
    return []


@resource_rule(
    "CKV_AWS_58",
    "EKS secrets are encrypted with a KMS key",
    "pass a customer KMS key (encryptionConfigKeyArn / encryptionConfig.provider.keyArn)",
    EKS_TYPES,
)
def eks_secrets_encryption(type_: str, inputs: dict) -> list[str]:
    if type_ == T.EKS_COMPONENT:
        if inputs.get("encryptionConfigKeyArn") is None:
            return ["secrets are not envelope-encrypted: encryptionConfigKeyArn is unset"]
        return []
    configs = inputs.get("encryptionConfig")
    if is_unknown(configs):
        return []
    for cfg in as_list(configs):
        if "secrets" in as_list(get(cfg, "resources")) and get(cfg, "provider", "keyArn"):
            return []
    return ["secrets are not envelope-encrypted: no encryptionConfig for `secrets` with a KMS key"]


# --- Instance metadata: launch templates and Karpenter EC2NodeClasses

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
EC2_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


def _metadata_option(type_: str, inputs: dict, key: str, karpenter_default: Any) -> Any:
    """A metadata option's effective value (an EC2NodeClass's unset one: Karpenter's default; a
    launch template has none); UNKNOWN when not judged: options unknown or the endpoint off."""
    node_class = type_ == EC2_NODE_CLASS
    opts = get(inputs, "spec", "metadataOptions") if node_class else inputs.get("metadataOptions")
    if is_unknown(opts) or get(opts, "httpEndpoint") == "disabled":
        return UNKNOWN
    value = get(opts, key)
    return karpenter_default if value is None and node_class else value


@resource_rule(
    "CKV_AWS_79",
    "Instance metadata requires IMDSv2 tokens",
    "set metadataOptions.httpTokens: required",
    (LAUNCH_TEMPLATE, EC2_NODE_CLASS),
)
def imdsv2_required(type_: str, inputs: dict) -> list[str]:
    tokens = _metadata_option(type_, inputs, "httpTokens", "required")
    if tokens == "required" or is_unknown(tokens):
        return []
    return [f"instance metadata allows IMDSv1 (httpTokens={tokens!r})"]


@resource_rule(
    "CKV_AWS_341",
    "Instance metadata hop limit is 1",
    "set metadataOptions.httpPutResponseHopLimit: 1",
    (LAUNCH_TEMPLATE, EC2_NODE_CLASS),
)
def imds_hop_limit(type_: str, inputs: dict) -> list[str]:
    # unset on a launch template: the AMI's (often 2)
    hops = _metadata_option(type_, inputs, "httpPutResponseHopLimit", 1)
    if is_unknown(hops) or hops == 1:
        return []
    return [f"IMDS hop limit is {hops!r}: pods can reach the node's credentials"]


# --- S3 (per resource; that every bucket has each is a stack rule below)

S3_SSES = (
    T.S3_SSE,
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
S3_VERSIONING = "aws:s3/bucketVersioning:BucketVersioning"
S3_VERSIONINGS = (S3_VERSIONING, "aws:s3/bucketVersioningV2:BucketVersioningV2")
S3_PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"


def _sse_algorithms(rules: Any) -> list[Any]:
    return [
        get(r, "applyServerSideEncryptionByDefault", "sseAlgorithm")
        for r in as_list(rules)
        if isinstance(r, dict)
    ]


@resource_rule(
    "CKV_AWS_145",
    "S3 default encryption is SSE-KMS",
    "use sseAlgorithm aws:kms with a customer key (and bucketKeyEnabled: true)",
    (*S3_SSES, *T.S3_BUCKETS),
)
def s3_kms(type_: str, inputs: dict) -> list[str]:
    inline = inputs.get("serverSideEncryptionConfiguration")  # a bucket's: judged when present
    if type_ in S3_SSES:
        algs = _sse_algorithms(inputs.get("rules"))
    elif not inline:
        return []
    else:
        algs = _sse_algorithms(get(inline, "rule") or get(inline, "rules"))
    if any(is_unknown(a) for a in algs) or any(a in ("aws:kms", "aws:kms:dsse") for a in algs):
        return []
    return [f"default encryption is {algs or 'unset'}, not SSE-KMS"]


@resource_rule(
    "CKV_AWS_21",
    "S3 versioning is enabled",
    "set versioningConfiguration.status: Enabled",
    (*S3_VERSIONINGS, *T.S3_BUCKETS),
)
def s3_versioning(type_: str, inputs: dict) -> list[str]:
    inline = inputs.get("versioning")
    if type_ in S3_VERSIONINGS:
        status = get(inputs, "versioningConfiguration", "status")
    elif not inline:
        return []
    else:
        status = "Enabled" if get(inline, "enabled") is True else get(inline, "enabled")
    if is_unknown(status) or status == "Enabled":
        return []
    return [f"versioning status is {status!r}, not 'Enabled'"]


PAB_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")


@resource_rule(
    "CKV2_AWS_6",
    "S3 public access block blocks everything",
    f"set {', '.join(PAB_FLAGS)} to true",
    (S3_PAB,),
)
def s3_public_access_block(type_: str, inputs: dict) -> list[str]:
    off = [f for f in PAB_FLAGS if inputs.get(f) is not True and not is_unknown(inputs.get(f))]
    return [f"public access block leaves {', '.join(off)} off"] if off else []


def _denies_insecure_transport(doc: dict) -> bool:
    return any(
        isinstance(st, dict)
        and st.get("Effect") == "Deny"
        and str(get(st.get("Condition") or {}, op, "aws:SecureTransport")).lower() == "false"
        for st in as_list(doc.get("Statement"))
        for op in ("Bool", "BoolIfExists")
    )


@resource_rule(
    "TRAINFORGE_S3_TLS",
    "S3 bucket policy denies non-TLS requests",
    'add a Deny statement for "s3:*" with Condition Bool aws:SecureTransport "false"',
    (T.S3_POLICY,),
)
def s3_tls_only(type_: str, inputs: dict) -> list[str]:
    policy = inputs.get("policy")
    doc = policy_doc(policy)
    if doc is None:
        return [] if policy is None or is_unknown(policy) else ["bucket policy is not valid JSON"]
    denies = _denies_insecure_transport(doc)
    return [] if denies else ["bucket policy does not deny requests with aws:SecureTransport=false"]


# --- FSx, KMS, SQS, IAM

SQS_QUEUE = "aws:sqs/queue:Queue"
IAM_POLICY_TYPES = (
    T.IAM_POLICY,
    T.IAM_ROLE_POLICY,
    "aws:iam/userPolicy:UserPolicy",
    "aws:iam/groupPolicy:GroupPolicy",
)


@resource_rule(
    "CKV_AWS_190",
    "FSx for Lustre is encrypted with a customer-managed KMS key",
    "set kmsKeyId to a customer KMS key",
    (T.FSX_LUSTRE,),
)
def fsx_customer_key(type_: str, inputs: dict) -> list[str]:
    deployment = inputs.get("deploymentType")
    # SCRATCH file systems cannot take a customer key (AWS encrypts them with its own)
    if isinstance(deployment, str) and deployment.startswith("SCRATCH"):
        return []
    if inputs.get("kmsKeyId") is None:
        return [f"{deployment or 'PERSISTENT'} file system is encrypted with the AWS-managed key"]
    return []


@resource_rule(
    "CKV_AWS_7", "KMS key rotation is enabled", "set enableKeyRotation: true", (T.KMS_KEY,)
)
def kms_rotation(type_: str, inputs: dict) -> list[str]:
    if inputs.get("customerMasterKeySpec", "SYMMETRIC_DEFAULT") not in (
        "SYMMETRIC_DEFAULT",
        UNKNOWN,
    ):
        return []  # rotation exists for symmetric keys only
    rot = inputs.get("enableKeyRotation")
    return [] if rot is True or is_unknown(rot) else ["automatic key rotation is off"]


@resource_rule(
    "CKV_AWS_27",
    "SQS queue is encrypted",
    "set kmsMasterKeyId (or sqsManagedSseEnabled: true)",
    (SQS_QUEUE,),
)
def sqs_encryption(type_: str, inputs: dict) -> list[str]:
    if inputs.get("kmsMasterKeyId") is not None or inputs.get("sqsManagedSseEnabled") is True:
        return []
    return ["queue is not encrypted at rest (no kmsMasterKeyId, sqsManagedSseEnabled unset)"]


def _allows_admin(doc: dict) -> bool:
    return any(
        isinstance(st, dict)
        and st.get("Effect") == "Allow"
        and "*" in as_list(st.get("Action"))
        and "*" in as_list(st.get("Resource"))
        for st in as_list(doc.get("Statement"))
    )


@resource_rule(
    "CKV_AWS_62",
    'IAM policy does not allow "*" actions on "*" resources',
    "list the actions and resource ARNs the principal needs",
    (*IAM_POLICY_TYPES, T.IAM_ROLE),
)
def iam_no_admin(type_: str, inputs: dict) -> list[str]:
    docs = [inputs.get("policy")]
    if type_ == T.IAM_ROLE:
        docs = [get(p, "policy") for p in as_list(inputs.get("inlinePolicies"))]
    return [
        'policy allows Action "*" on Resource "*"'
        for doc in map(policy_doc, docs)
        if doc and _allows_admin(doc)
    ]


# --- Pods: every pod spec a workload carries

SYSTEM_NAMESPACES = ("kube-system",)


def k8s_kind(type_: str) -> str | None:
    """The Kubernetes kind of a pulumi-kubernetes type token, e.g. kubernetes:apps/v1:Deployment."""
    return type_.rsplit(":", 1)[-1] if type_.startswith("kubernetes:") else None


def pod_specs(type_: str, inputs: dict, runtimes: Any = None) -> Iterator[tuple[str, dict]]:
    """(label, pod spec) of every pod template of a workload object (the one walker,
    `backends.pod_templates`; a TrainJob's built from `runtimes`, None: the platform's own)."""
    from trainforge.jobs.backends import pod_templates  # noqa: PLC0415 - plain data, no Pulumi

    kind = k8s_kind(type_)
    if kind is None:
        return
    for t in pod_templates({**inputs, "kind": kind}, runtimes=runtimes):
        if isinstance(t.template.get("spec"), dict):
            yield t.label, t.spec


def _documented_root_job(type_: str, inputs: dict, spec: dict) -> bool:
    """A one-shot Job that must run as root, says why, and cannot escalate or keep capabilities
    beyond CHOWN (the platform's FSx team-directory helper)."""
    reason = ((inputs.get("metadata") or {}).get("annotations") or {}).get(ROOT_REASON_ANNOTATION)
    if k8s_kind(type_) != "Job" or not (isinstance(reason, str) and reason.strip()):
        return False
    return all(
        not pod_security.escalation_allowed(c)
        and "ALL" in as_list(get(c, "securityContext", "capabilities", "drop"))
        and set(as_list(get(c, "securityContext", "capabilities", "add"))) <= {"CHOWN"}
        for c in containers(spec)
    )


def _uid_ok(uid: Any) -> bool:
    """checkov's `check_runAsUser(spec, 1)`: an integer UID of at least 1."""
    return isinstance(uid, int) and not isinstance(uid, bool) and uid >= 1


def root_container(spec: dict, c: dict) -> str | None:
    """Why checkov's CKV_K8S_23 ("Minimize the admission of root containers", checkov 3.3.30
    checkov/kubernetes/checks/resource/k8s/RootContainers.py) fails container `c` of pod
    `spec`, or None; then, beyond checkov, a container whose effective runAsUser is 0.

    Why not Pod Security's runAsNonRoot (core/pod_security `_run_as_non_root`): the two mean
    different things. Restricted admission wants runAsNonRoot: true and ignores the UID;
    checkov passes a container that runs as a non-zero UID with runAsNonRoot unset or false,
    and decides by the pod's fields first: a pod runAsNonRoot: true passes each container but
    one that sets its own runAsNonRoot: false without its own non-zero runAsUser; else a pod
    runAsUser >= 1 passes each container but one that sets its own runAsUser below 1; else
    each container needs its own runAsNonRoot: true or runAsUser >= 1. Where checkov passes a
    container whose effective runAsUser is 0 (runAsNonRoot: true beside it, the UID on the
    other level), the rule still fails it: the process is root, or the kubelet refuses to
    start it. checkov reads only `containers`; the rule judges init containers alike."""
    pod_sc, sc = get(spec, "securityContext"), get(c, "securityContext")
    fields = (get(pod_sc, "runAsNonRoot"), get(pod_sc, "runAsUser"), get(sc, "runAsNonRoot"))
    if any(map(is_unknown, (*fields, get(sc, "runAsUser")))):
        return None
    if security_field(pod_sc, sc, "runAsUser") == 0:
        # the kubelet refuses it: pkg/kubelet/kuberuntime/security_context_others.go
        if security_field(pod_sc, sc, "runAsNonRoot") is True:  # verifyRunAsNonRoot
            return "sets runAsUser: 0 beside runAsNonRoot: true (the kubelet will not start it)"
        return "runs as root (runAsUser: 0)"
    own_non_root, own_uid = get(sc, "runAsNonRoot"), get(sc, "runAsUser")
    if get(pod_sc, "runAsNonRoot"):
        if own_non_root is not None and not own_non_root and not _uid_ok(own_uid):
            return "sets runAsNonRoot: false without its own non-zero runAsUser"
        return None
    if _uid_ok(get(pod_sc, "runAsUser")):
        return None if own_uid is None or _uid_ok(own_uid) else f"runs as UID {own_uid!r}"
    if own_non_root or _uid_ok(own_uid):
        return None
    return "may run as root (set runAsNonRoot: true)"


@container_rule(
    "CKV_K8S_23",
    "Containers run as non-root",
    "set securityContext.runAsNonRoot: true (and a non-zero runAsUser)",
)
def pod_non_root(type_: str, inputs: dict, spec: dict, c: dict) -> str | None:
    if _documented_root_job(type_, inputs, spec):
        return None
    return root_container(spec, c)


@container_rule(
    "CKV_K8S_20",
    "Containers do not allow privilege escalation",
    "set securityContext.allowPrivilegeEscalation: false on every container",
)
def pod_no_privilege_escalation(type_: str, inputs: dict, spec: dict, c: dict) -> str | None:
    return "allows privilege escalation" if pod_security.escalation_allowed(c) else None


def drops_all(c: dict) -> bool:
    """Whether container `c` passes checkov's CKV_K8S_37 ("Minimize the admission of containers
    with capabilities assigned", checkov 3.3.30 checkov/kubernetes/checks/resource/k8s/
    MinimizeCapabilities.py): an entry of capabilities.drop contains "ALL" or "all".

    Why not Pod Security's capabilities check (core/pod_security `_capabilities_restricted`):
    it means more. Restricted admission wants the exact entry "ALL" (a lower-case "all" is
    refused there, though containerd drops every capability for it: pkg/cri/util/strings.go
    `InStringSlice` compares with EqualFold) and refuses any added capability but
    NET_BIND_SERVICE; checkov's CKV_K8S_37 never reads `add` (added capabilities are its
    CKV_K8S_25, which the plan does not model)."""
    drop = as_list(get(c, "securityContext", "capabilities", "drop"))
    return any(isinstance(d, str) and ("ALL" in d or "all" in d) for d in drop)


@container_rule(
    "CKV_K8S_37",
    "Containers drop ALL capabilities",
    'set securityContext.capabilities.drop: ["ALL"] (add back only what is needed)',
)
def pod_drop_all(type_: str, inputs: dict, spec: dict, c: dict) -> str | None:
    return None if drops_all(c) else "does not drop ALL capabilities"


SECCOMP_DEFAULT = "RuntimeDefault"
_ONLY_DEFAULT = {"Localhost": " (checkov's CKV_K8S_31 passes only RuntimeDefault)"}


def seccomp_problem(spec: dict, c: dict) -> str | None:
    """Why checkov's CKV_K8S_31 ("Ensure that the seccomp profile is set to docker/default or
    runtime/default", checkov 3.3.30 checkov/kubernetes/checks/resource/k8s/Seccomp.py) fails
    container `c` of pod `spec`, or None; then, beyond checkov, a container that runs without
    a seccomp profile.

    checkov reads the pod's seccompProfile.type first: when set, it decides alone and only
    RuntimeDefault passes, so a pod's Unconfined fails though every container sets its own
    RuntimeDefault (restricted Pod Security refuses it too) and a pod's Localhost fails
    (restricted admits it); when unset, every container needs its own RuntimeDefault. The
    profile a container runs with is Pod Security's one reader, `pod_security.seccomp_type`
    (its own, else the pod's): where checkov passes a pod's RuntimeDefault without reading
    the containers, the rule still fails a container that overrides it with Unconfined, as
    restricted admission does. Also beyond checkov: init containers (it reads only
    `containers`) and the alpha seccomp annotation, which it accepts (Pod Security reads only
    the fields since 1.19)."""
    pod = get(spec, "securityContext", "seccompProfile", "type")
    if is_unknown(pod):
        return None
    if pod is not None and pod != SECCOMP_DEFAULT:
        return f"runs in a pod whose seccomp profile is {pod}{_ONLY_DEFAULT.get(pod, '')}"
    t = pod_security.seccomp_type(spec, c)
    if is_unknown(t) or t == SECCOMP_DEFAULT:
        return None
    if pod == SECCOMP_DEFAULT and t in pod_security.SECCOMP_TYPES:
        return None  # checkov reads no container under a pod RuntimeDefault; Localhost confines
    return f"seccomp profile is {t or 'unset'}{_ONLY_DEFAULT.get(t, '')}"


@container_rule(
    "CKV_K8S_31",
    "Pods use the RuntimeDefault seccomp profile",
    "set securityContext.seccompProfile.type: RuntimeDefault",
)
def pod_seccomp(type_: str, inputs: dict, spec: dict, c: dict) -> str | None:
    return seccomp_problem(spec, c)


@container_rule(
    "TRAINFORGE_GPU_REQUESTS",
    "GPU requests equal limits",
    f"set resources.limits[{GPU!r}] (and requests, if given) to the same count",
)
def pod_gpu_requests_limits(type_: str, inputs: dict, spec: dict, c: dict) -> str | None:
    req, lim = get(c, "resources", "requests", GPU), get(c, "resources", "limits", GPU)
    if (req, lim) != (None, None) and (lim is None or (req is not None and str(req) != str(lim))):
        return f"{GPU} requests={req} limits={lim}"
    return None


def image_problem(image: Any) -> str | None:
    """Why an image reference is not pinned (tag and digest by `image_routes.parts`), or None."""
    if not isinstance(image, str) or is_unknown(image):
        return None if is_unknown(image) else "no image"
    _, _, tag, digest = image_routes.parts(image)
    if digest or tag not in ("", "latest"):
        return None
    return "tagged :latest" if tag else "untagged (resolves to :latest)"


@container_rule(
    "CKV_K8S_14",
    "Images are pinned to a tag or digest, never :latest",
    "use an explicit version tag or an @sha256 digest",
)
def pod_image_pinned(type_: str, inputs: dict, spec: dict, c: dict) -> str | None:
    why = image_problem(c.get("image"))
    return f"image {c.get('image')!r} is {why}" if why else None


DOCKER_HUB_TAIL = " is pulled from Docker Hub without credentials"
_DOCKER_HUB_IMAGE = re.compile(r"image ('[^']*'|\"[^\"]*\")" + re.escape(DOCKER_HUB_TAIL) + "$")


def finding_image(rule: str, message: str) -> str | None:
    """The image a finding's message names, for the image rules whose waivers name one
    (trainforge.stack.policy.IMAGE_RULES); None for other rules."""
    if rule != "TRAINFORGE_DOCKER_HUB":
        return None
    m = _DOCKER_HUB_IMAGE.search(message)
    return ast.literal_eval(m.group(1)) if m else None


@container_rule(
    "TRAINFORGE_DOCKER_HUB",
    "No image is pulled from Docker Hub without credentials",
    "use the image's ECR Public / registry.k8s.io / Quay copy (pulled through the stack's "
    "cache), or set trainforge:images.dockerHubCredentialArn so Docker Hub images are "
    "pulled through the cache's docker-hub rule with that credential (docs/images.md)",
)
def pod_image_not_docker_hub(type_: str, inputs: dict, spec: dict, c: dict) -> str | None:
    """Docker Hub allows 10 anonymous pulls per hour per NAT address (core/image_routes)."""
    image = c.get("image")
    hub = isinstance(image, str) and not is_unknown(image) and image_routes.is_docker_hub(image)
    return f"image {image!r}{DOCKER_HUB_TAIL}" if hub else None


@pod_rule(
    "TRAINFORGE_DEFAULT_SA",
    "Pods do not use the default ServiceAccount",
    "set serviceAccountName to a dedicated ServiceAccount (or automountServiceAccountToken: false)",
)
def pod_service_account(type_: str, inputs: dict, spec: dict) -> list[str]:
    sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    if sa == "default" and spec.get("automountServiceAccountToken") is not False:
        return ["runs as the namespace's `default` ServiceAccount with its token mounted"]
    return []


@container_rule(
    "CKV_K8S_16",
    "Only documented system daemonsets run privileged",
    f"drop privileged, or run it as a kube-system DaemonSet annotated {PRIVILEGED_REASON_ANNOTATION}",
)
def pod_privileged(type_: str, inputs: dict, spec: dict, c: dict) -> str | None:
    if get(c, "securityContext", "privileged") is not True:
        return None
    meta = inputs.get("metadata") or {}
    reason = (meta.get("annotations") or {}).get(PRIVILEGED_REASON_ANNOTATION)
    if (
        k8s_kind(type_) == "DaemonSet"
        and meta.get("namespace") in SYSTEM_NAMESPACES
        and isinstance(reason, str)
        and reason.strip()
    ):
        return None  # a documented system daemon (device plugin, CSI node driver)
    return "is privileged"


# --- Stack rules: every S3 bucket has its encryption, versioning, public access block and TLS policy


def _attached(res: list[StackResource], types: tuple[str, ...], bucket: StackResource) -> bool:
    """Whether a resource of `types` has a `bucket` input referring to `bucket` (by dependency
    or value)."""
    names = {bucket.inputs.get("bucket"), bucket.name} - {None}
    return any(
        r.type in types
        and (
            bucket.urn in (r.property_dependencies.get("bucket") or [])
            or r.inputs.get("bucket") in names
        )
        for r in res
    )


def _bucket_completeness(
    types: tuple[str, ...], inline_key: str | None, what: str
) -> Callable[[list[StackResource]], Iterable[tuple[str, str]]]:
    def check(res: list[StackResource]) -> Iterable[tuple[str, str]]:
        for b in res:
            inline = inline_key and b.inputs.get(inline_key)
            if b.type in T.S3_BUCKETS and not inline and not _attached(res, types, b):
                yield b.urn, f"bucket has no {what}"

    return check


# --- Stack rules: GPU capacity has health monitoring and automatic repair

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
MONITORING_ADDON = "eks-node-monitoring-agent"
_GPU_AMI = re.compile(r"NVIDIA|GPU", re.I)
_GPU_REQUIREMENT_KEYS = (
    KARPENTER_GPU_COUNT,
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
)
_EFFECTS = {eks: k8s for k8s, eks in EFFECTS.items()}  # EKS's enum -> the Kubernetes name


def _gpu_types(types: Any) -> bool:
    """Any of `types` is NVIDIA GPU capacity by the one GPU catalog (core/catalog: a family it
    does not list, such as g4ad or one newer than the catalog, is not)."""
    return any(isinstance(t, str) and catalog.nvidia_gpu_family(t) for t in as_list(types))


def gpu_capacity(res: StackResource) -> bool:
    """A managed node group or Karpenter NodePool that launches GPU instances."""
    if res.type == T.NODE_GROUP:
        ami = res.inputs.get("amiType")
        gpu_ami = isinstance(ami, str) and _GPU_AMI.search(ami)
        return bool(gpu_ami) or _gpu_types(res.inputs.get("instanceTypes"))
    if res.type != NODE_POOL:
        return False
    spec = get(res.inputs, "spec", "template", "spec") or {}
    return any(get(t, "key") == GPU for t in as_list(spec.get("taints"))) or any(
        (get(r, "key") in _GPU_REQUIREMENT_KEYS and get(r, "operator") != "DoesNotExist")
        or (
            get(r, "key") == INSTANCE_TYPE
            and get(r, "operator") == "In"
            and _gpu_types(get(r, "values"))
        )
        for r in as_list(spec.get("requirements"))
    )


def capacity_taints(res: StackResource) -> list[dict[str, Any]]:
    """The taints a group's/pool's nodes carry, with Kubernetes' effect names (a node group
    writes EKS's, NO_SCHEDULE; a NodePool Kubernetes' own, which the renaming leaves alone)."""
    taints = get(res.inputs, "spec", "template", "spec", "taints")
    if res.type == T.NODE_GROUP:
        taints = res.inputs.get("taints")
    return [
        {**t, "effect": _EFFECTS.get(str(t.get("effect")), t.get("effect"))}
        for t in ([] if is_unknown(taints) else as_list(taints))
        if isinstance(t, dict)
    ]


# The agent chart's defaults (github.com/aws/eks-node-monitoring-agent v1.7.0 values.yaml):
# the node agent tolerates everything, the dcgm-server DaemonSet nothing.
_AGENT_DEFAULT_TOLERATIONS = {"nodeAgent": [{"operator": "Exists"}], "dcgmAgent": []}
_AGENT_PARTS = {"nodeAgent": "node agent", "dcgmAgent": "dcgm-server (DCGM host engine)"}


NO_AGENT = (
    "GPU capacity without the EKS node monitoring agent add-on: no NodeCondition reports a "
    "failing GPU, NIC or kernel, so node repair never acts and jobs keep landing on a sick node"
)
NOT_TOLERATED = (
    "the node monitoring agent's {} does not tolerate this capacity's taint(s) {}: it never runs "
    "on these nodes, so their GPU health is not monitored"
)
NO_AUTO_REPAIR = (
    "GPU managed node group without node auto repair (nodeRepairConfig.enabled): a node whose "
    "GPU or network fails stays in the group until someone replaces it by hand"
)
NO_NODE_REPAIR = (
    "GPU NodePool while Karpenter's NodeRepair feature gate is off "
    "(values.settings.featureGates.nodeRepair): Karpenter never replaces its unhealthy nodes"
)


def gpu_health_monitoring(res: list[StackResource]) -> Iterable[tuple[str, str]]:
    gpu = [r for r in res if gpu_capacity(r)]
    if not gpu:
        return
    addons = [
        r for r in res if r.type == T.EKS_ADDON and r.inputs.get("addonName") == MONITORING_ADDON
    ]
    if not addons:
        yield from ((r.urn, NO_AGENT) for r in gpu)
        return
    raw = addons[0].inputs.get("configurationValues")
    if is_unknown(raw):
        return
    try:
        values = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        values = {}
    for r in gpu:
        for part, label in _AGENT_PARTS.items():
            tols = get(values, part, "tolerations")
            tols = _AGENT_DEFAULT_TOLERATIONS[part] if tols is None else as_list(tols)
            tols = [t for t in tols if isinstance(t, dict)]
            missing = [t for t in capacity_taints(r) if untolerated([t], tols, schedules)]
            shown = ", ".join(
                f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}" for t in missing
            )
            if missing:
                yield r.urn, NOT_TOLERATED.format(label, shown)


def gpu_node_repair(res: list[StackResource]) -> Iterable[tuple[str, str]]:
    pools = []
    for r in res:
        if not gpu_capacity(r):
            continue
        enabled = get(r.inputs, "nodeRepairConfig", "enabled")
        if r.type != T.NODE_GROUP:
            pools.append(r)
        elif enabled is not True and not is_unknown(enabled):
            yield r.urn, NO_AUTO_REPAIR
    gates = [
        get(rel.inputs, "values", "settings", "featureGates", "nodeRepair")
        for rel in res
        if pools and rel.type == T.HELM_RELEASE and chart_name(rel) == "karpenter"
    ]
    if any(g is True or is_unknown(g) for g in gates):
        return
    yield from ((r.urn, NO_NODE_REPAIR) for r in pools)


STACK_RULES: tuple[StackRule, ...] = (
    StackRule(
        "CKV_AWS_145",
        "Every S3 bucket has SSE-KMS default encryption",
        "declare a BucketServerSideEncryptionConfiguration with sseAlgorithm aws:kms",
        _bucket_completeness(S3_SSES, "serverSideEncryptionConfiguration", "default encryption"),
    ),
    StackRule(
        "CKV_AWS_21",
        "Every S3 bucket has versioning",
        "declare a BucketVersioning with status Enabled",
        _bucket_completeness(S3_VERSIONINGS, "versioning", "versioning configuration"),
    ),
    StackRule(
        "CKV2_AWS_6",
        "Every S3 bucket has a public access block",
        "declare a BucketPublicAccessBlock with all four flags true",
        _bucket_completeness((S3_PAB,), None, "public access block"),
    ),
    StackRule(
        "TRAINFORGE_S3_TLS",
        "Every S3 bucket denies non-TLS requests",
        "declare a BucketPolicy denying aws:SecureTransport=false",
        _bucket_completeness((T.S3_POLICY,), "policy", "TLS-only bucket policy"),
    ),
    StackRule(
        "TRAINFORGE_GPU_HEALTH_MONITORING",
        "GPU capacity runs the EKS node monitoring agent (node and DCGM parts) on its nodes",
        "set trainforge:nodeHealth.monitoringAgent: true (the eks-node-monitoring-agent add-on, "
        "tolerating the pool's taints), or waive it with the reason",
        gpu_health_monitoring,
    ),
    StackRule(
        "TRAINFORGE_GPU_NODE_REPAIR",
        "GPU capacity is repaired automatically when its nodes turn unhealthy",
        "set trainforge:nodeHealth.autoRepair: true (nodeRepairConfig on node groups, "
        "Karpenter's NodeRepair feature gate for NodePools), or waive it with the reason",
        gpu_node_repair,
    ),
)


def check_resource(
    type_: str, inputs: dict[str, Any], runtimes: Any = None
) -> list[tuple[Rule, str]]:
    """Every (rule, message) the resource violates (`runtimes`: see `pod_specs`)."""
    return [
        (rule, m)
        for rule in RESOURCE_RULES
        if rule.applies(type_)
        for m in rule.check(type_, inputs, runtimes)
    ]


def check_stack(resources: list[StackResource]) -> list[tuple[StackRule, str, str]]:
    """Every (rule, urn, message) the set of resources violates."""
    return [(rule, urn, msg) for rule in STACK_RULES for urn, msg in rule.check(resources)]


RULES = {r.id: r.fix for r in (*RESOURCE_RULES, *STACK_RULES)}


def check(ctx: PlanContext) -> CheckResult:
    """Every resource rule on every resource (a Kubernetes object judged as its manifest; any
    other named `type::name`), then every stack rule on the whole stack."""
    objects = {o.urn: o for o in ctx.objects}
    found: list[Finding] = []
    for rec in ctx.inventory.resources:
        obj = objects.get(rec.urn)
        where, names, inputs = f"{rec.type}::{rec.name}", frozenset({rec.name}), rec.inputs
        if obj is not None:
            where, names = obj.label, obj.names
            inputs = obj.doc
        for rule, msg in check_resource(rec.type, inputs, runtime_docs(ctx)):
            found.append(Finding(where, rule.id, msg, rule.fix, urn=rec.urn, names=names))
    stack = {
        r.urn: StackResource(r.urn, r.type, r.name, r.inputs, r.dependencies)
        for r in ctx.inventory.resources
    }
    for rule, urn, msg in check_stack(list(stack.values())):
        res = stack[urn]
        where = f"{res.type}::{res.name}"
        found.append(Finding(where, rule.id, msg, rule.fix, urn=urn, names=frozenset({res.name})))
    if ctx.rejudge and ctx.standin is not None:
        found += _standin_findings(ctx, {(f.urn, f.rule) for f in found})
    return CheckResult(findings=found)


STANDIN_NOTE = " (judged with stand-in values for ids/ARNs the cloud assigns)"
REJUDGED = "rules.rejudged"  # PlanContext.memo key: how many resources the stand-in run judged


def _standin_findings(ctx: PlanContext, seen: set[tuple[str, str]]) -> list[Finding]:
    """Cloud resources whose preview inputs hold unknowns, judged again in the stand-in run
    (docs/pr-review.md, "Stand-in pass"); only findings the preview could not make."""
    preview = {r.urn: r for r in ctx.inventory.resources}
    judged, found = 0, []
    for rec in ctx.standin_inventory().resources:
        before = preview.get(rec.urn)
        if before is None or rec.type.startswith("kubernetes:") or not has_unknown(before.inputs):
            continue
        judged += 1
        for rule, msg in check_resource(rec.type, rec.inputs):
            if (rec.urn, rule.id) not in seen:
                msg += STANDIN_NOTE
                where = f"{rec.type}::{rec.name}"
                found.append(Finding(where, rule.id, msg, rule.fix, urn=rec.urn, names=frozenset()))
    ctx.memo[REJUDGED] = judged
    return found


def rejudged(ctx: PlanContext) -> int:
    """How many cloud resources the rules judged again in the stand-in run (0: none)."""
    return ctx.memo.get(REJUDGED, 0)
