"""run-local's local "pods" get what the cluster gives them (review of 1eea5a9f):

* each process the variables its pod's controller sets in that pod (JOB_COMPLETION_INDEX,
  PET_*: jobs/local.py CONTROLLER_ENV, set per process by jobs/local_pod.py);
* a PyTorchJob under ExitCode is re-created as its operator does, with no count of its own,
  so the job's ledger stops it where the plan's retry bound says (jobs/restarts.py LOCAL_CAP);
* a CPU pool's job that needs a GPU is told what its pods' exit line says (jobs/local.py
  cpu_pool_no_gpu), not this machine's CPU build of torch.

The end-to-end runs are real `trainforge run-local --stack dev JOB` runs of a copy of the
project (conftest's trainforge_here: in this process; the launcher and the ranks are
processes), with the review's jobs (Pulumi.rv.yaml idx-hand, Pulumi.rvb6.yaml retry2,
Pulumi.rvb7.yaml ncclcpu) and their scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jobs.helpers import CODE, CPU_POOL, script_job, target
from trainforge.core.contract import BACKENDS
from trainforge.jobs import indexed_job, trainjob
from trainforge.jobs.backends import emit
from trainforge.jobs.local import CONTROLLER_ENV, controller_env, pod_wrapper
from trainforge.jobs.local_pod import pod_env
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.training import exits

ROOT = Path(__file__).resolve().parents[2]

# the review's mine/jobs/idx-hand/main.py (as `trainforge import mine/my-indexed.yaml` shipped
# it), each rank waiting for the other's line before its exit 3 (the first exit stops the other)
IDX_HAND = """\
import os, pathlib, sys, time
print('index', os.environ['JOB_COMPLETION_INDEX'], flush=True)
out = pathlib.Path(os.environ["TRAINFORGE_OUTPUT_DIR"])
(out / f"index_{os.environ['RANK']}").write_text(os.environ['JOB_COMPLETION_INDEX'])
for _ in range(600):
    if len(list(out.glob("index_*"))) == 2:
        break
    time.sleep(0.1)
sys.exit(3)
"""
# each rank writes what its pod's controller gave it
PET = """\
import json, os, pathlib
names = ("RANK", "MASTER_ADDR", "MASTER_PORT", "JOB_COMPLETION_INDEX", "PET_NNODES",
         "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
out = pathlib.Path(os.environ["TRAINFORGE_OUTPUT_DIR"]) / f"env_{os.environ['RANK']}.json"
out.write_text(json.dumps({n: os.environ.get(n) for n in names}))
"""
# the review's rv/pj2.yaml train.py: what its args and env became in its pod
ARGS = """\
import json, os, pathlib, sys
out = pathlib.Path(os.environ["TRAINFORGE_OUTPUT_DIR"]) / f"args_{os.environ['RANK']}.json"
out.write_text(json.dumps({"argv": sys.argv[1:], "OUT_DIR": os.environ.get("OUT_DIR"),
                          "MYRANK": os.environ.get("MYRANK")}))
"""
RV_ARGS = ["--out", "/tmp/run-$(RUN_ID)", "--rank", "$(RANK)", "--of", "$(WORLD_SIZE)",
           "--lit", "$$(RANK)"]  # fmt: skip
RV_ENV = {"RUN_ID": "exp7", "OUT_DIR": "/tmp/$(RUN_ID)", "MYRANK": "r$(RANK)"}
# the review's mine/retry/train.py: killed (137) on every attempt
RETRY = (
    "import sys, os\n"
    'print("attempt, restart count", os.environ.get("TORCHELASTIC_RESTART_COUNT"), flush=True)\n'
    "sys.exit(137)\n"
)
# the review's mine/nccl/train.py
NCCL = 'import torch.distributed as dist\ndist.init_process_group("nccl")\nprint("ok")\n'


@pytest.fixture(scope="module")
def project(dev_project) -> Path:
    jobs = [
        script_job("idx-hand", "idx_hand.py", workers=2, cpu="2", memory="8Gi",
                   runPolicy={"backoffLimit": 2}, backend="indexed-job"),
        *(script_job(f"pet-{b}", "pet.py", workers=2, backend=b) for b in BACKENDS),
        script_job("retry2", "retry.py", workers=1, runPolicy={"backoffLimit": 2},
                   backend="pytorchjob"),
        script_job("ncclcpu", "nccl.py", workers=1, backend="pytorchjob"),
        *(script_job(f"args-{b}", "args.py", workers=2, backend=b, env=RV_ENV,
                     entrypoint={"script": "code/args.py", "args": RV_ARGS}) for b in BACKENDS),
    ]  # fmt: skip
    code = {"idx_hand.py": IDX_HAND, "pet.py": PET, "retry.py": RETRY, "nccl.py": NCCL,
            "args.py": ARGS}  # fmt: skip
    return dev_project("run_local_pods", jobs, code, jobBackends=list(BACKENDS))


def test_an_indexed_jobs_pods_get_their_completion_index(project, run_local):
    """The review's idx-hand (an Indexed Job imported by `trainforge import`, its code reads
    JOB_COMPLETION_INDEX, which the Job controller sets): KeyError, then "exit 1 (user_error)
    is permanent" (watched fail). Now each local pod has its own index and the script's own
    exit 3 ends the job."""
    proc = run_local(project, "idx-hand")
    assert "KeyError" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = project / "runs" / "idx-hand"
    assert {p.name: p.read_text() for p in out.glob("index_*")} == {"index_0": "0", "index_1": "1"}
    assert "run-local: exit 3 (user_exit) is permanent" in proc.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_local_pod_gets_what_its_controller_sets_in_it(project, run_local, backend):
    """2 pods of 1 process: rank r is pod r, and sees its controller's variables with its own
    index (the table CONTROLLER_ENV), the rendezvous PET_MASTER_* the local torchrun's."""
    import json

    proc = run_local(project, f"pet-{backend}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    runs = project / "runs" / f"pet-{backend}"
    for rank in (0, 1):
        env = json.loads((runs / f"env_{rank}.json").read_text())
        want = {
            name: value.format(
                pod=rank, pods=2, procs=1, master_addr=env["MASTER_ADDR"],
                master_port=env["MASTER_PORT"],
            )
            for name, value in CONTROLLER_ENV[backend].items()
        }  # fmt: skip
        assert {n: env[n] for n in want} == want, env
        assert want.get("JOB_COMPLETION_INDEX", str(rank)) == want.get("PET_NODE_RANK", str(rank))
        unset = {n for n in env if n not in want and n.startswith(("PET_", "JOB_"))}
        assert all(env[n] is None for n in unset), env  # nothing the controller does not set


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_local_pods_args_expand_as_the_kubelet_expands_them_in_that_pod(
    project, run_local, backend
):
    """The review's rv/pj2.yaml (args `--rank $(RANK)`, env OUT_DIR=/tmp/$(RUN_ID)): run-local
    passed the literal `$(RANK)` and OUT_DIR `/tmp/$(RUN_ID)`. Now each pod's args get its own
    RANK (the pod's index, which the operator or the emitter puts in its env) and WORLD_SIZE,
    `$$` stays the literal, and OUT_DIR resolves (RUN_ID comes first)."""
    import json

    proc = run_local(project, f"args-{backend}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    for rank in (0, 1):
        got = json.loads((project / "runs" / f"args-{backend}" / f"args_{rank}.json").read_text())
        assert got["argv"] == [
            "--out", "/tmp/run-exp7", "--rank", str(rank), "--of", "2", "--lit", "$(RANK)",
        ], got  # fmt: skip
        assert got["OUT_DIR"] == "/tmp/exp7"
        # an env value sees RANK where the emitter writes it before the job's env; the
        # operator appends its own after, so a PyTorchJob's pod keeps the literal
        want = "r$(RANK)" if backend == "pytorchjob" else f"r{rank}"
        assert got["MYRANK"] == want, got


def test_the_pods_rendezvous_names_are_the_emitters():
    """POD_RENDEZVOUS (what a pod's args expand $(RANK) ... to) names what the TrainJob and
    indexed Job emitters write (pod.static_rendezvous_env) and the training operator sets."""
    from trainforge.jobs import pod
    from trainforge.jobs.local import POD_RENDEZVOUS

    job = parse_job(script_job("j", "x.py", workers=2), "t")
    assert {e["name"] for e in pod.static_rendezvous_env(job, "m", 1)} == set(POD_RENDEZVOUS)
    # per pod, once: pod 1's RANK in the args; `$$` kept literal; the process env untouched
    argv = ["1", "2", "2", "PET_NODE_RANK={pod}", "$RANK={pod}", "-c", "$(RANK)/$$(RANK)"]
    env, args = pod_env(argv, {"RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "9"})
    assert env == {"PET_NODE_RANK": "1"} and args == ["-c", "1/$(RANK)"]
    # the job's variables, in order, each from those before it: `+` ones (the emitter's) and
    # earlier job variables, not `$` ones or the controller's (appended after)
    argv = ["1", "2", "5", "PET_NODE_RANK={pod}", "+WORLD_SIZE={world}", "$RANK={pod}",
            "%A", "%B", "x"]  # fmt: skip
    worker = {"RANK": "1", "A": "$(WORLD_SIZE)-$(RANK)-$(PET_NODE_RANK)-$(B)", "B": "$(A)"}
    env, _ = pod_env(argv, worker)
    assert env == {
        "PET_NODE_RANK": "1", "A": "2-$(RANK)-$(PET_NODE_RANK)-$(B)",
        "B": "2-$(RANK)-$(PET_NODE_RANK)-$(B)",
    }  # fmt: skip


def test_the_table_names_what_the_emitters_rehearse_of_the_controllers():
    """CONTROLLER_ENV against our own rehearsals of the controllers: the PET_* of a TrainJob's
    pod as the Trainer v2.2.1 torch plugin builds it (trainjob.built_pod), the operator's
    PET_* our indexed Job writes itself for a `command` (indexed_job.torchrun_env), and the
    pod index they take (the completion index field the Job controller fills)."""
    t = target(CPU_POOL, backends=BACKENDS)
    raw = {**script_job("j", "x.py", workers=2), "pool": CPU_POOL.name, "backend": "trainjob"}
    raw["image"], raw["entrypoint"] = "registry.example/team/train:1.0", {"module": "team.m"}
    job = resolve_job(parse_job(raw, "t"), t, "t")
    pod = trainjob.built_pod(emit(job, t, CODE).workload)
    assert pod is not None
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    pet = {n for n in env if n.startswith("PET_")}
    assert pet == {n for n in CONTROLLER_ENV["trainjob"] if n.startswith("PET_")}
    assert pet == {n for n in CONTROLLER_ENV["pytorchjob"]}
    assert {e["name"] for e in indexed_job.torchrun_env(job)} == pet
    index = env["PET_NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert "job-completion-index" in index  # what JOB_COMPLETION_INDEX holds
    assert CONTROLLER_ENV["trainjob"]["PET_NODE_RANK"] == "{pod}"
    assert CONTROLLER_ENV["trainjob"]["JOB_COMPLETION_INDEX"] == "{pod}"
    # an elastic PyTorchJob's pods meet by PET_RDZV_*, which the local torchrun replaces
    elastic = parse_job(
        {**script_job("e", "x.py"), "preset": "elastic",
         "elastic": {"minWorkers": 1, "maxWorkers": 3, "maxRestarts": 4}}, "t",
    )  # fmt: skip
    assert controller_env(elastic) == {} and pod_wrapper(elastic, 3) == []


def test_the_wrapper_gives_each_process_its_own_pods_values():
    """2 pods x 2 processes: ranks 0-1 are pod 0, ranks 2-3 pod 1; --workers 3 (not a whole
    number of pods): one process per pod."""
    job = parse_job({**script_job("j", "x.py", workers=2, backend="indexed-job")}, "t")
    job = job.model_copy(update={"gpus_per_worker": 2})
    assert job.procs == 2
    args = pod_wrapper(job, 4)[2:]
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    for rank, pod in ((0, 0), (1, 0), (2, 1), (3, 1)):
        values, rest = pod_env([*args, "-m", "x"], {**env, "RANK": str(rank)})
        assert values == {"JOB_COMPLETION_INDEX": str(pod)} and rest == ["-m", "x"]
    args = pod_wrapper(job, 3)[2:]
    assert pod_env(args, {**env, "RANK": "2"})[0] == {"JOB_COMPLETION_INDEX": "2"}


def test_an_exitcode_pytorchjob_is_re_created_until_the_plans_bound(project, run_local):
    """The review's retry2 (1 worker, backoffLimit 2, exit 137 every time): run-local said the
    cluster has no count limit, then stopped after 3 attempts with 137 (its --pod-restarts
    was backoffLimit; watched fail). The operator re-creates it each time, and your code's
    wrapper stops attempt 6 with no_progress (exit 4): the plan's retry bound (ledger_bound,
    the real ledger). run-local now does the same: the same attempts, the same exit."""
    from trainforge.plan.checks.retry_bounds import ledger_bound

    attempts = ledger_bound(user_code=True)
    assert attempts == 6
    proc = run_local(project, "retry2")
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stderr.count("trainforge launch: workers failed") == attempts
    # the wrapper stops the last attempt before your code starts
    assert proc.stdout.count("attempt, restart count") == attempts - 1
    assert proc.stderr.count("run-local: the job's pod exited 137 (retryable); re-creating") == (
        attempts - 1
    )
    assert "run-local: the same, with a safety cap of its own at 20 re-creations" in proc.stdout
    assert "trainforge exit: no_progress code=4" in proc.stderr
    assert "run-local: exit 4 (no_progress) is permanent" in proc.stderr


def test_a_cpu_pools_nccl_failure_says_what_its_pods_say(project, run_local):
    """The review's ncclcpu: init_process_group("nccl") on a CPU pool. Its pods' image has a
    CUDA build of torch, so their exit line says "this pod has no GPU (its pool gives none)
    ... run the job on a GPU pool"; run-local said only this machine's "this image's torch is
    a CPU build ... use an image with a CUDA build" (watched fail). Now it says the pods'."""
    from trainforge.jobs.local import _local_cuda_build

    if _local_cuda_build():
        pytest.skip("this machine's torch is a CUDA build: its exit line is the pods' own")
    proc = run_local(project, "ncclcpu")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "run-local: exit 2 (config_error): the job's pods fail the same way (pool " \
        "training-workloads gives them no GPU), but their image (" in proc.stderr  # fmt: skip
    assert f"so their exit line says instead: {exits.NO_GPU_FIX}" in proc.stderr
    assert "run-local: exit 2 (config_error) is permanent (1-127)" in proc.stderr


def test_the_pods_words_follow_the_images_torch(monkeypatch):
    """What a CPU pool's pods say of a failure for want of a GPU follows their image's torch
    (exits.without_gpu): a CUDA build says NO_GPU_FIX; a CPU build says what this machine's
    CPU build says (nothing to add); a build not known here is said to be unknown. A GPU job
    has its own line (stand_in_line), and a CUDA build here says the pods' words itself."""
    from trainforge.jobs import local
    from trainforge.jobs.image_facts import ImageFacts

    monkeypatch.setattr(local, "_local_cuda_build", lambda: False)
    base = {**script_job("j", "x.py"), "pool": "cpu"}
    cuda = parse_job({**base, "image": "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"}, "t")
    said = local.cpu_pool_no_gpu(cuda)
    assert said is not None and "torch with CUDA 13.0" in said
    assert said.endswith(f"so their exit line says instead: {exits.NO_GPU_FIX}")
    unknown = parse_job({**base, "image": "registry.example/team/train:1.0"}, "t")
    said = local.cpu_pool_no_gpu(unknown)
    assert said is not None and "a torch build not known here" in said
    cpu = unknown.model_copy(update={"image_facts": ImageFacts(torch="2.13.0", cuda=None)})
    assert local.cpu_pool_no_gpu(cpu) is None
    assert local.cpu_pool_no_gpu(cuda.model_copy(update={"gpus_per_worker": 1})) is None
    monkeypatch.setattr(local, "_local_cuda_build", lambda: True)
    assert local.cpu_pool_no_gpu(cuda) is None
