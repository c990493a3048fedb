"""Async checkpoints write in DCP's checkpoint process from staging buffers reused across
saves, and the runtime's start path imports no more of torch than it needs.

Each check runs in a fresh interpreter: DCP's checkpoint process and the process group live
as long as the process that started them, and the import checks need an empty module cache.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_ASYNC_SCRIPT = r"""
import os, sys
import torch, torch.distributed as dist
from torch.distributed.checkpoint import _async_process_executor as ape
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

cm = CheckpointManager(CheckpointConfig(directory=f"{root}/ckpt", async_save=True), log=print)
buffers = []
for s in (1, 2):
    step()
    cm.save(s, m, opt)
    cm.wait()
    cached = cm._stager._state_dict_stager._cached_storage_mapping
    buffers.append(sorted(v.data_ptr() for v in cached.values()))
writer = ape._CHECKPOINT_PROCESS._save_process
print("WRITER", writer.pid, "TRAINER", os.getpid(), "ALIVE", writer.is_alive())
print("BUFFERS", len(buffers[0]), "REUSED", buffers[0] == buffers[1])
expected = {k: v.clone() for k, v in m.state_dict().items()}
cm.close()

m2 = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8))
opt2 = torch.optim.AdamW(m2.parameters(), lr=1e-2)
assert CheckpointManager(CheckpointConfig(directory=f"{root}/ckpt"), log=print).restore(m2, opt2) == 2
print("IDENTICAL", all(torch.equal(expected[k], v) for k, v in m2.state_dict().items()))
dist.destroy_process_group()
"""


def _python(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_TEST_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_async_save_writes_in_dcps_process_from_reused_staging_buffers(tmp_path: Path) -> None:
    proc = _python("-c", _ASYNC_SCRIPT, str(tmp_path))
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
