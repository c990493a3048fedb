"""Async checkpoints write in DCP's checkpoint process from staging buffers reused across
saves, and the runtime's start path imports no more of torch than it needs.

Each check runs in a fresh interpreter: DCP's checkpoint process and the process group live
as long as the process that started them, and the import checks need an empty module cache.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_ASYNC_SCRIPT = r"""
import json, os, sys
import torch, torch.distributed as dist
from trainforge.training import checkpoint as ckpt
from trainforge.training.checkpoint import CheckpointConfig, CheckpointManager

root = sys.argv[1]
dist.init_process_group("gloo", init_method=f"file://{root}/store", rank=0, world_size=1)
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8))
opt = torch.optim.AdamW(m.parameters(), lr=1e-2)

def step():
    m(torch.randn(4, 64)).square().mean().backward()
    opt.step()
    opt.zero_grad()

def writer(when):
    ape = sys.modules.get("torch.distributed.checkpoint._async_process_executor")
    p = ape._CHECKPOINT_PROCESS._save_process if ape and ape._CHECKPOINT_PROCESS else None
    print(when, p.pid if p else None, p.is_alive() if p else None)

config = CheckpointConfig(directory=f"{root}/ckpt", async_save=True)
# what the runtime does once its process group exists, before it builds the model
ckpt.start_writer(config)
imported = set(sys.modules)
early = getattr(ckpt, "_early_start", None)
if early is not None:
    early.wait()
# what the start's thread imported (the main thread, which builds the model, imported nothing)
new = sorted(m for m in set(sys.modules) - imported if m.split(".")[0] in ("torch", "trainforge"))
print("THREAD-IMPORTED", new)
writer("BEFORE-MANAGER")
cm = CheckpointManager(config, log=print)
writer("BEFORE-FIRST-SAVE")
buffers = []
for s in (1, 2):
    step()
    cm.save(s, m, opt)
    cm.wait()
    cached = cm._stager._state_dict_stager._cached_storage_mapping
    buffers.append(sorted(v.data_ptr() for v in cached.values()))
ape = sys.modules["torch.distributed.checkpoint._async_process_executor"]  # DCP's, imported
writer = ape._CHECKPOINT_PROCESS._save_process
print("WRITER", writer.pid, "TRAINER", os.getpid(), "ALIVE", writer.is_alive())
print("BUFFERS", len(buffers[0]), "REUSED", buffers[0] == buffers[1])
print("PROCMEM", json.dumps(cm.writer_memory))
expected = {k: v.clone() for k, v in m.state_dict().items()}
cm.close()

m2 = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8))
opt2 = torch.optim.AdamW(m2.parameters(), lr=1e-2)
assert CheckpointManager(CheckpointConfig(directory=f"{root}/ckpt"), log=print).restore(m2, opt2) == 2
print("IDENTICAL", all(torch.equal(expected[k], v) for k, v in m2.state_dict().items()))
dist.destroy_process_group()
"""


def _python(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    extra = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_TEST_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    env.update(extra)
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def async_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One run of _ASYNC_SCRIPT (a fresh interpreter and DCP process cost seconds of CPU)."""
    tmp_path = tmp_path_factory.mktemp("async")
    return _python("-c", _ASYNC_SCRIPT, str(tmp_path)), tmp_path


def test_async_save_writes_in_dcps_process_from_reused_staging_buffers(async_run) -> None:
    proc, tmp_path = async_run
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    writer = next(line.split() for line in proc.stdout.splitlines() if line.startswith("WRITER"))
    assert writer[1] != writer[3] and writer[5] == "True", writer  # another, live process
    # one staging buffer per tensor storage (4 params + 4 + 4 AdamW moments + steps), the same
    # memory at the second save as at the first
    assert "REUSED True" in proc.stdout, out[-4000:]
    assert int(proc.stdout.split("BUFFERS ")[1].split()[0]) >= 12
    assert "IDENTICAL True" in proc.stdout, out[-4000:]
    # reported complete only with its .metadata in place
    assert (tmp_path / "ckpt" / "step_000002" / ".metadata").is_file()
    assert "checkpoint: saved" in proc.stdout


def test_the_checkpoint_process_s_memory_is_recorded_after_its_saves(async_run) -> None:
    """summary.json's ``checkpoint_process_memory`` (the manager's ``writer_memory``): the
    process DCP wrote in, read after its save, with the anonymous memory the plan's memory
    model counts for it (jobs/estimate/facts.py CHECKPOINT_PROCESS_BYTES: an interpreter with
    torch, 190 MiB on this CPU build)."""
    proc, _ = async_run
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    writer = next(line.split() for line in proc.stdout.splitlines() if line.startswith("WRITER"))
    mem = json.loads(proc.stdout.split("PROCMEM ")[1].splitlines()[0])
    assert mem is not None, out[-4000:]
    assert mem["pid"] == int(writer[1])  # the writer, not this process
    assert 64 * 2**20 < mem["RssAnon"] <= mem["VmRSS"] <= mem["VmHWM"], mem


def test_dcps_checkpoint_process_starts_at_set_up_not_inside_the_first_save(async_run) -> None:
    """DCP spawns its checkpoint process lazily, inside the first async save's write: on an
    H200 that write then took 9.7 s instead of 2.4 s (a fresh interpreter importing torch) and
    the next save, 200 steps later, waited 3 s for it. It is started at set-up instead."""
    proc, _ = async_run
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    lines = proc.stdout.splitlines()
    writer = next(ln.split() for ln in lines if ln.startswith("WRITER"))
    # running once `start_writer` returned (the runtime calls it before the model's build),
    # still when the manager exists, before any save was requested, and the very process every
    # save wrote in: the saves spawned none of their own
    for when in ("BEFORE-MANAGER", "BEFORE-FIRST-SAVE"):
        early = next(ln.split() for ln in lines if ln.startswith(when))
        assert early[1:] == [writer[1], "True"], (early, writer)
    first = next(ln for ln in proc.stdout.splitlines() if "saved" in ln and "step_000001" in ln)
    assert "DCP's checkpoint process was started at set-up and ready" in first, first
    assert not [ln for ln in proc.stdout.splitlines() if "step_000002" in ln and "ready" in ln]


def test_the_start_s_thread_imports_nothing_the_model_s_build_may_be_importing(async_run) -> None:
    """DCP's import pulls in ~700 modules (FSDP, DTensor, ...) that the model's build, running
    meanwhile, imports too: two threads importing one graph from different ends can deadlock
    (CPython's _DeadlockError in one of them). `start_writer` imports them before its thread
    starts."""
    proc, _ = async_run
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "THREAD-IMPORTED []" in proc.stdout, proc.stdout[-4000:]


_START_FAILS_SCRIPT = r"""
import sys, torch, torch.distributed as dist
from trainforge.training.checkpoint import CheckpointConfig, CheckpointManager

root = sys.argv[1]
dist.init_process_group("gloo", init_method=f"file://{root}/store", rank=0, world_size=1)
m = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
cm = CheckpointManager(CheckpointConfig(directory=f"{root}/ckpt", async_save=True), log=print)
for s in (1, 2):
    m(torch.randn(2, 8)).sum().backward()
    opt.step()
    opt.zero_grad()
    cm.save(s, m, opt)
    print("PENDING", s, cm._pending is not None)
cm.close()
dist.destroy_process_group()
"""


def test_a_checkpoint_process_that_cannot_start_makes_saves_synchronous_and_says_why(
    tmp_path: Path,
) -> None:
    # DCP's own precondition, met here by no MASTER_ADDR (a file:// store): the start fails
    proc = _python("-c", _START_FAILS_SCRIPT, str(tmp_path), env={"DCP_USE_PREFIX_STORE": "1"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "PENDING 1 False" in proc.stdout and "PENDING 2 False" in proc.stdout, out[-4000:]
    warning = next(ln for ln in proc.stdout.splitlines() if "WARNING" in ln)
    assert "async save of step 1 failed before writing" in warning, warning
    assert "DCP needs MASTER_ADDR to use prefix store" in warning, warning
    assert "saving step 1 synchronously instead" in warning, warning
    for step in (1, 2):
        assert (tmp_path / "ckpt" / f"step_00000{step}" / ".metadata").is_file()
    # the line of a save whose process never started says nothing about it being ready
    assert "started at set-up" not in proc.stdout, out[-4000:]


_START_FAILS_ON_RANK_1_SCRIPT = r"""
import sys, tempfile
import torch, torch.distributed as dist
from trainforge.training import checkpoint as ckpt
from trainforge.training.checkpoint import CheckpointConfig, CheckpointManager

root, rank = sys.argv[1], int(sys.argv[2])
dist.init_process_group("gloo", init_method=f"file://{root}/store", rank=rank, world_size=2)
if rank == 1:  # this rank's /tmp cannot take the start's throwaway checkpoint
    real = tempfile.mkdtemp

    def full(*args, **kwargs):
        if kwargs.get("prefix", "").startswith("trainforge-dcp-start"):
            raise OSError(28, "No space left on device", "/tmp")
        return real(*args, **kwargs)

    tempfile.mkdtemp = full
m = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
config = CheckpointConfig(directory=f"{root}/ckpt", async_save=True)
print("BEGAN", ckpt.start_writer(config), flush=True)
cm = CheckpointManager(config, log=lambda line: print(f"[rank{rank}] {line}", flush=True))
m(torch.randn(2, 8)).sum().backward()
opt.step()
cm.save(1, m, opt)
ape = sys.modules["torch.distributed.checkpoint._async_process_executor"]
print("PENDING", cm._pending is not None, "SPAWNED", ape._CHECKPOINT_PROCESS is not None, flush=True)
cm.close()
dist.barrier()  # neither rank's gloo pairs may see the other go first
dist.destroy_process_group()
# this probe does not free what holds its groups as the runtime's cleanup does
# (training.distributed.cleanup): the interpreter's finalization would destroy a live gloo
# group and abort the rank ("terminate called without an active exception", -6, seen once
# in CI; trainforge/core/process.py says why). Its checks are printed above.
import os
sys.stdout.flush()
os._exit(0)
"""


def test_a_start_that_fails_on_one_rank_leaves_no_rank_waiting_for_it(tmp_path: Path) -> None:
    """The start's local part (its temporary directory, the writer) failing on one rank only
    (a full /tmp on one node) must not strand the others in DCP's first collective (rank 0
    broadcasting its checkpoint process's port, group timeout: 960 s in a pod, where the
    hang watchdog ends the job first): before, both ranks waited at the first save, one in
    the start's broadcast, the other in the save's agreement. Now every rank agrees first,
    none spawns a process, and the first save is synchronous on both, said once with the
    cause."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_TEST_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _START_FAILS_ON_RANK_1_SCRIPT, str(tmp_path), str(rank)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for rank in (0, 1)
    ]
    outs = []
    try:
        for proc in procs:
            outs.append(proc.communicate(timeout=120)[0])
    finally:
        for proc in procs:
            proc.kill()  # a no-op for a process that ended
    out0, out1 = outs
    assert [p.returncode for p in procs] == [0, 0], (out0 + out1)[-4000:]
    for out in outs:  # synchronous at once, and no DCP process anywhere
        assert "BEGAN True" in out and "PENDING False SPAWNED False" in out, out[-4000:]
    assert (tmp_path / "ckpt" / "step_000001" / ".metadata").is_file()
    warning = next(ln for ln in out1.splitlines() if "WARNING" in ln)
    assert "async save of step 1 failed before writing" in warning, warning
    assert "No space left on device" in warning, warning
    warning = next(ln for ln in out0.splitlines() if "WARNING" in ln)
    assert "another rank's checkpoint process did not start" in warning, warning


_HEAVY = ("torch.distributed.checkpoint", "torch.distributed.tensor", "torch.distributed.fsdp")


def test_help_and_argument_parsing_import_no_torch() -> None:
    proc = _python("-X", "importtime", "-m", "trainforge.training", "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--async-checkpoint" in proc.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()]
    assert "trainforge.training.config" in imported
    assert not [m for m in imported if m == "torch" or m.startswith("torch.")]
    script = (
        "import sys\n"
        "from trainforge.training.config import parse_args\n"
        "parse_args(['--checkpoint-dir', '/tmp/x', '--async-checkpoint', '--steps', '3'])\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    proc = _python("-c", script)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_the_runtime_imports_dcp_fsdp_and_dtensor_only_when_used() -> None:
    script = (
        "import sys\n"
        "import trainforge.training.loop, trainforge.training.checkpoint\n"
        f"print(sorted(m for m in {_HEAVY!r} if m in sys.modules))\n"
    )
    proc = _python("-c", script)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_async_staging_that_does_not_fit_in_dev_shm_saves_synchronously_and_says_so(
    tmp_path: Path, monkeypatch
) -> None:
    import torch

    from trainforge.training import checkpoint as ckpt

    m = torch.nn.Linear(256, 256)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    logs: list[str] = []
    cfg = ckpt.CheckpointConfig(directory=str(tmp_path / "a"), async_save=True)
    cm = ckpt.CheckpointManager(cfg, log=logs.append)
    cm.save(1, m, opt)  # no process group: DCP's thread, the same reused staging buffers
    assert cm._pending is not None and cm._stager is not None
    cm.close()
    assert ckpt.inspect_checkpoint(tmp_path / "a" / "step_000001").complete
    assert not [line for line in logs if "saving synchronously" in line]

    real = os.statvfs
    monkeypatch.setattr(
        ckpt.os,
        "statvfs",
        lambda p: (
            os.statvfs_result((4096, 4096, 16, 1, 1, 0, 0, 0, 0, 255))
            if p == ckpt.SHM_DIR
            else real(p)
        ),
    )  # 4 KiB free: less than the 257 KiB of weights
    cfg = dataclasses.replace(cfg, directory=str(tmp_path / "b"))
    cm = ckpt.CheckpointManager(cfg, log=logs.append)
    cm.save(1, m, opt)
    assert cm._pending is None and cm._stager is None  # saved synchronously
    assert ckpt.inspect_checkpoint(tmp_path / "b" / "step_000001").complete
    line = next(line for line in logs if "saving synchronously" in line)
    assert "--async-checkpoint needs 0.00 GiB of /dev/shm" in line and "shmSize" in line
    cm.close()


def test_a_run_that_reaches_no_periodic_save_starts_no_checkpoint_process(tmp_path) -> None:
    """DCP's process writes only the async periodic saves (the final and SIGTERM saves are
    synchronous). A run whose --steps end before its first periodic save (the README's
    `run-local --stack dev gpt-small-fsdp --steps 5`: every 500) spawned it on every rank
    anyway, a fresh interpreter importing torch beside the training; it no longer does. The
    run that reaches one still starts it at set-up (tests/training/test_gpu_check.py's dry
    run: `setup_checkpoint_start_s` of its async run)."""
    from trainforge.training.checkpoint import CheckpointConfig, periodic_saves_possible

    every = CheckpointConfig(directory="d", every=5, async_save=True)
    assert periodic_saves_possible(every, 5) and periodic_saves_possible(every, None)
    assert not periodic_saves_possible(every, 4)
    assert not periodic_saves_possible(dataclasses.replace(every, every=0), 5)

    args = ["--model", "mlp", "--steps", "2", "--dataset-size", "64", "--batch-size", "8"]
    args += ["--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "4"]
    args += ["--async-checkpoint", "--output-dir", str(tmp_path / "out")]
    proc = _python("-m", "trainforge.training", *args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "saved" in out and "step_000002 (final)" in out, out[-4000:]
    assert "checkpoint background process" not in out, out[-4000:]  # DCP's own log line
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "checkpoint_start_s" not in summary["setup_phases"], summary["setup_phases"]
