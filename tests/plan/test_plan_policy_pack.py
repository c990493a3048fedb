"""policy/__main__.py, loaded with PolicyPack replaced by a recorder (a real PolicyPack starts a
gRPC server and blocks), so that the pack's wiring of the rules is tested for real."""

from __future__ import annotations

import pathlib
import runpy

import pulumi_policy
import pytest
from pulumi_policy.proxy import unknown_checking_proxy

from trainforge.plan import resource_types as T
from trainforge.plan.checks import rules as R

PACK = pathlib.Path(__file__).resolve().parents[2] / "policy" / "__main__.py"


@pytest.fixture
def pack(monkeypatch):
    made = []

    class RecordingPack:
        def __init__(self, name, policies, enforcement_level=None, **_):
            made.append(self)
            self.name, self.policies = name, list(policies)

    monkeypatch.setattr(pulumi_policy, "PolicyPack", RecordingPack)
    monkeypatch.delenv("TRAINFORGE_STACK_CONFIG", raising=False)
    runpy.run_path(str(PACK), run_name="__main__")
    assert len(made) == 1
    return made[0]


class Args:
    def __init__(self, type_, props, name="r"):
        self.resource_type, self.props, self.name = type_, unknown_checking_proxy(props), name
        self.urn = f"urn:pulumi:s::p::{type_}::{name}"


def test_pack_has_one_mandatory_policy_per_rule(pack):
    names = [p.name for p in pack.policies]
    assert pack.name == "trainforge" and len(names) == len(set(names))
    assert len(names) == len(R.RESOURCE_RULES) + len(R.STACK_RULES) + 1
    assert "ckv-aws-341" in names and "ckv-aws-145-stack" in names
    assert "kubernetes-validation" in names


def test_pack_policies_report_what_the_rules_find(pack):
    by_name = {p.name: p for p in pack.policies}
    reports = []
    lt = Args(
        R.LAUNCH_TEMPLATE,
        {"metadataOptions": {"httpTokens": "optional", "httpPutResponseHopLimit": 1}},
    )
    by_name["ckv-aws-79"].validate(lt, lambda msg, urn=None: reports.append(msg))
    by_name["ckv-aws-341"].validate(lt, lambda msg, urn=None: reports.append(msg))
    assert reports == [
        "instance metadata allows IMDSv1 (httpTokens='optional'). "
        "Fix: set metadataOptions.httpTokens: required"
    ]
    reports.clear()
    job = Args(
        "kubernetes:kubeflow.org/v1:PyTorchJob",
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "j", "namespace": "a"},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {
                        "replicas": 2,
                        "template": {"spec": {"containers": [{"name": "pytorch", "image": "x:1"}]}},
                    }
                }
            },
        },
    )
    by_name["kubernetes-validation"].validate(job, lambda msg, urn=None: reports.append(msg))
    assert reports == [
        "[PYTORCHJOB_WEBHOOK] spec.pytorchReplicaSpecs.Master.replicas must be exactly 1"
    ]


def test_stack_policy_finds_a_bucket_without_versioning(pack):
    class Res:
        def __init__(self, type_, name, props, deps=None):
            self.resource_type, self.name, self.props = type_, name, unknown_checking_proxy(props)
            self.urn = f"urn:pulumi:s::p::{type_}::{name}"
            self.property_dependencies = deps or {}

    bucket = Res(T.S3_BUCKET, "ckpt", {})
    sse = Res(T.S3_SSE, "sse", {"bucket": "x"}, {"bucket": [bucket]})

    class StackArgs:
        resources = [bucket, sse]

    by_name = {p.name: p for p in pack.policies}
    reports = []
    by_name["ckv-aws-21-stack"].validate(StackArgs(), lambda m, urn=None: reports.append((m, urn)))
    by_name["ckv-aws-145-stack"].validate(StackArgs(), lambda m, urn=None: reports.append((m, urn)))
    assert reports == [
        (
            "bucket has no versioning configuration. Fix: declare a BucketVersioning "
            "with status Enabled",
            bucket.urn,
        )
    ]


# Run in a fresh interpreter: the pack's own virtualenv (Pulumi makes it from
# policy/requirements.txt) has only those packages and what they depend on; any other
# third-party import is refused, as it would be there.
_OWN_VENV = r"""
import importlib.metadata as md, re, runpy, sys

def norm(n):
    return re.sub(r"[-_.]+", "-", n).lower()

def name_of(req):
    return norm(re.split(r"[=<>!~\[ ;(]", req.strip(), maxsplit=1)[0])

lines = open("requirements.txt").read().splitlines()
todo = [name_of(l) for l in lines if l.strip() and not l.lstrip().startswith("#")]
closure = set()
while todo:
    n = todo.pop()
    if n in closure:
        continue
    closure.add(n)
    try:
        todo += [name_of(r) for r in md.distribution(n).requires or [] if "extra ==" not in r]
    except md.PackageNotFoundError:
        pass
tops = md.packages_distributions()
allowed = {t for t, ds in tops.items() if any(norm(d) in closure for d in ds)}

class NotInPack:
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in tops and top not in allowed and top != "trainforge":
            raise ModuleNotFoundError(f"No module named {top!r} in the pack's virtualenv")

sys.meta_path.insert(0, NotInPack())
import pulumi_policy
pulumi_policy.PolicyPack = lambda *a, **k: print("pack built")
runpy.run_path("__main__.py", run_name="__main__")
"""


def test_the_pack_starts_with_only_its_own_requirements():
    """`pulumi preview --policy-pack policy` installs policy/requirements.txt into the pack's
    own virtualenv: every module the pack imports from trainforge must be served by it."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", _OWN_VENV],
        cwd=PACK.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and "pack built" in run.stdout, run.stderr[-2000:]


def test_the_pack_evaluates_the_crds_cel_rules_with_only_its_own_requirements():
    """The pack's kubernetes-validation policy validates custom resources, CEL rules included
    (trainforge.plan.crd_cel imports cel-expr-python only then): its virtualenv serves that."""
    import subprocess
    import sys

    check = """
from trainforge.plan import crds
cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
      "spec": {"preemption": {"borrowWithinCohort": {"policy": "LowerPriority"}}}}
print(crds.crd_errors(cq))
"""
    run = subprocess.run(
        [sys.executable, "-c", _OWN_VENV + check],
        cwd=PACK.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never" in run.stdout


def test_a_bad_waiver_stops_the_pack_with_one_line_not_a_traceback(monkeypatch, tmp_path):
    """The pack loads the stack file's waivers as it starts: a placeholder reason left in a
    pasted entry is the stack file's error, said in one line naming the key (SystemExit with
    the message, which Pulumi prints), as `trainforge plan` says it."""
    stack = tmp_path / "Pulumi.x.yaml"
    stack.write_text(
        "config:\n"
        "  trainforge-policy:waivers:\n"
        "    - rule: TF_COST_PRICE_MISSING\n"
        "      resource: job/x\n"
        '      reason: "<who watches the budget instead>"\n'
    )
    monkeypatch.setattr(pulumi_policy, "PolicyPack", lambda *a, **k: None)
    monkeypatch.setenv("TRAINFORGE_STACK_CONFIG", str(stack))
    with pytest.raises(SystemExit) as stopped:
        runpy.run_path(str(PACK), run_name="__main__")
    said = str(stopped.value.code)
    assert said.startswith("trainforge policy pack: ") and "\n" not in said, said
    assert "waivers[0].reason" in said and "<who watches the budget instead>" in said, said
