"""A pod given GPUs whose CUDA sees none fails as the node's fault; it never trains on CPU.

`init_distributed` used to take cpu and gloo whenever `torch.cuda.is_available()` was False,
so a GPU pod on a node whose driver had failed trained on CPU for hours at a GPU node's
price. The pod's GPUs are the /dev/nvidiaN nodes the NVIDIA toolkit mounts
(`exits.gpu_devices`); here a directory stands for the pod's /dev.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from trainforge import local
from trainforge.training import distributed, exits
from trainforge.training.contract import RUN_LOCAL

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pod(tmp_path, monkeypatch):
    """A pod whose /dev holds `nvidia0`, `nvidia1` (2 GPUs allocated) and whose CUDA sees none."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / name).write_text("")
    monkeypatch.setattr(exits, "DEV_DIR", str(dev))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv(RUN_LOCAL, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for name in ("MASTER_ADDR", "WORLD_SIZE", "RANK", "LOCAL_RANK", "PET_NNODES"):
        monkeypatch.delenv(name, raising=False)
    return dev


def test_a_gpu_pod_whose_cuda_build_sees_no_gpu_exits_gpu_error(pod, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.8")  # a CUDA build of torch
    with pytest.raises(exits.RunFailure) as e:
        distributed.init_distributed(timeout_s=60)
    assert e.value.reason is exits.GPU_ERROR and e.value.reason.retryable
    assert e.value.detail == (
        "No CUDA GPUs are available (torch.cuda.is_available() is False); this pod was given 2 "
        "GPU device(s) but CUDA sees none: the node's driver or GPUs failed it, not your code"
    )
    assert not dist.is_initialized()  # no gloo group: nothing trained on CPU


def test_a_gpu_pod_whose_torch_is_a_cpu_build_exits_config_error(pod, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)  # the image's torch: no CUDA at all
    with pytest.raises(exits.RunFailure) as e:
        distributed.init_distributed(timeout_s=60)
    assert e.value.reason is exits.CONFIG_ERROR
    assert e.value.detail.endswith(f"; {exits.CPU_TORCH_FIX}")
    assert "this pod was given 2 GPU device(s)" in e.value.detail
    assert not dist.is_initialized()


@pytest.mark.parametrize(
    ("cuda", "torch_says"),
    [
        ("12.8", "RuntimeError: No CUDA GPUs are available"),
        (None, "AssertionError: Torch not compiled with CUDA enabled"),
    ],
)
def test_the_refusal_gives_the_reason_and_fix_torchs_own_error_gets(
    pod, monkeypatch, cuda, torch_says
):
    """One answer for a GPU pod without a usable GPU (`exits.without_gpu`): the runtime's
    refusal to train on CPU and the reading of torch's own error (`exits.no_gpu`, for code
    that asks for cuda itself) give the same reason and fix in the same pod. The refusal
    chose its reason and fix text itself."""
    monkeypatch.setattr(torch.version, "cuda", cuda)
    with pytest.raises(exits.RunFailure) as e:
        distributed.init_distributed(timeout_s=60)
    reason, fix = exits.no_gpu(torch_says)
    assert e.value.reason is reason and e.value.detail.endswith(f"; {fix}")
    assert exits.without_gpu(cuda is None, exits.gpu_devices()) == (reason, fix)
    # a pod given no GPU: the job's configuration, never the node's
    assert exits.without_gpu(False, 0) == (exits.CONFIG_ERROR, exits.NO_GPU_FIX)
    assert exits.without_gpu(True, 0) == (exits.CONFIG_ERROR, exits.CPU_TORCH_FIX)


@pytest.mark.parametrize("case", ["no GPU given", "run-local", "hidden: ''", "hidden: -1"])
def test_a_pod_given_no_gpu_and_run_locals_stand_in_train_on_cpu(pod, monkeypatch, case):
    """A CPU pool's pod (no /dev/nvidiaN), run-local's processes (which stand in for GPU
    pods on this machine's CPU, even on a box with NVIDIA devices) and a process whose GPUs
    were hidden on purpose (CUDA_VISIBLE_DEVICES empty, or a first index CUDA rejects) keep cpu
    and gloo: none of them is a node whose GPUs failed."""
    if case == "no GPU given":
        for name in ("nvidia0", "nvidia1"):
            (pod / name).unlink()
    elif case == "run-local":
        monkeypatch.setenv(RUN_LOCAL, "1")
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", case.split(": ")[1].strip("'"))
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    env = distributed.init_distributed(timeout_s=60)
    try:
        assert (env.device, env.backend) == (torch.device("cpu"), "gloo")
    finally:
        distributed.cleanup()


def test_run_local_marks_its_processes_as_the_stand_in(tmp_path):
    """Both of run-local's launches (the bundled runtime's torchrun, and a job's own code,
    through trainforge.jobs.local.user_code_run) set RUN_LOCAL; a pod never does."""
    from trainforge.jobs.local import adhoc_job, user_code_run
    from trainforge.training import contract

    assert local.child_env(1)[RUN_LOCAL] == "1"
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    job, project = adhoc_job(str(script), project_dir=tmp_path)
    assert user_code_run(job, project, prepare=False).env[RUN_LOCAL] == "1"
    assert RUN_LOCAL not in contract.CONTRACT_VARIABLES


def test_the_runtime_exits_203_with_the_nodes_line(tmp_path):
    """End to end: `python -m trainforge.training` in a GPU pod whose CUDA sees none prints
    the exit line and exits with the reason's code (this venv's torch is a CPU build, so
    CUDA is faked as built to reach the node's case)."""
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvidia0").write_text("")
    script = textwrap.dedent(f"""\
        import sys, torch
        from trainforge.training import exits
        from trainforge.training.__main__ import main
        exits.DEV_DIR = {str(dev)!r}  # this pod's /dev
        torch.version.cuda = "12.8"
        sys.exit(main(["--steps", "1", "--output-dir", {str(tmp_path / "out")!r}]))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINFORGE_", "RANK"))}
    env.pop("MASTER_ADDR", None)
    env.update(PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 203, proc.stderr[-2000:]
    assert (
        "trainforge exit: gpu_error code=203: No CUDA GPUs are available "
        "(torch.cuda.is_available() is False); this pod was given 1 GPU device(s) but CUDA "
        "sees none: the node's driver or GPUs failed it, not your code"
    ) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_exit_line_says_what_this_process_knows_of_its_torch(tmp_path, monkeypatch):
    """run-local on a CPU pool: this machine's CPU build of torch made the worker's line say
    "this image's torch is a CPU build ... use an image with a CUDA build", of an image whose
    torch is a CUDA build (run-local then had to say so; jobs.local.cpu_pool_no_gpu). The
    process knows its own torch (`torch.version.cuda`) and its GPUs (`gpu_devices`), not an
    image: the line says that, and picks by `torch.version.cuda`, not by torch's words."""
    monkeypatch.setattr(exits, "DEV_DIR", str(tmp_path))  # no /dev/nvidiaN: no GPU given
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nccl = "RuntimeError: Distributed package doesn't have NCCL built in"
    monkeypatch.setattr(torch.version, "cuda", None)
    assert exits.no_gpu(nccl) == (exits.CONFIG_ERROR, exits.CPU_TORCH_FIX)
    assert "torch.version.cuda is None" in exits.CPU_TORCH_FIX
    assert "image's torch is" not in exits.CPU_TORCH_FIX
    # a CUDA build without NCCL (torch's Windows wheels: is_nccl_available() is False) in a
    # process given no GPU: torch is not a CPU build, the process has no GPU
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    assert exits.no_gpu(nccl) == (exits.CONFIG_ERROR, exits.NO_GPU_FIX)
