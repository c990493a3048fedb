"""Checkpoint manager unit tests: DCP round trips for DDP and FSDP2 in 2-process gloo groups,
directory completeness rules, keep-last, corrupt/foreign files, and the SIGTERM agreement.

The 2-process cases run this file as a script (``python test_checkpoint.py worker ...``) so the
workers need nothing from pytest; they train a tiny model with dropout (so RNG state matters)
and an LR schedule (so scheduler state matters) on data that is a pure function of the step.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ports import communicate_all, retry_on_clash

ROOT = Path(__file__).resolve().parents[2]


def _run_pair(*args: str, timeout: float = 120) -> list[str]:
    """Run the worker below as ranks 0 and 1; return their stdouts (fail with their output)."""
    procs = retry_on_clash(
        lambda port: _start_pair(str(port), args, timeout), lambda ps: [o for _, o in ps]
    )
    for code, out in procs:
        assert code == 0, out
    return [out for _, out in procs]


def _start_pair(port: str, args: tuple[str, ...], timeout: float) -> list[tuple[int, str]]:
    procs = []
    for rank in range(2):
        env = dict(
            os.environ,
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            RANK=str(rank),
            WORLD_SIZE="2",
            LOCAL_RANK=str(rank),
            PYTHONPATH=str(ROOT),
            OMP_NUM_THREADS="1",
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, __file__, "worker", *args],
                env=env,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    return communicate_all(procs, timeout)


# ------------------------------------------------------------------------ 2-process workers


def _worker(strategy: str, ckpt_dir: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    from trainforge.training import checkpoint
    from trainforge.training.checkpoint import CheckpointConfig, CheckpointManager

    # this file runs only under `if __name__ == "__main__"`: DCP's spawned writer may import it
    checkpoint.WRITER_PROCESS = True

    dist.init_process_group("gloo")
    rank = dist.get_rank()

    def build():
        torch.manual_seed(0)
        m = torch.nn.Sequential(
            torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 4)
        )
        if strategy == "ddp":
            m = torch.nn.parallel.DistributedDataParallel(m)
        else:
            from torch.distributed.fsdp import fully_shard

            fully_shard(m[0])
            fully_shard(m[3])
            fully_shard(m)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1)
        sch = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 5))
        return m, opt, sch

    def train(m, opt, sch, start, stop):
        for step in range(start, stop):
            g = torch.Generator().manual_seed(1000 * step + rank)
            x, y = torch.randn(4, 8, generator=g), torch.randn(4, 4, generator=g)
            ((m(x) - y) ** 2).mean().backward()
            opt.step()
            sch.step()
            opt.zero_grad()

    def full(m):
        sd = get_model_state_dict(m, options=StateDictOptions(full_state_dict=True))
        return {k: v.clone() for k, v in sd.items()}

    for async_save in (False, True):
        root = os.path.join(ckpt_dir, f"async{int(async_save)}")
        torch.manual_seed(rank)
        m, opt, sch = build()
        cfg = CheckpointConfig(directory=root, every=3, keep_last=2, async_save=async_save)
        cm = CheckpointManager(cfg, log=lambda s: print(f"[{rank}] {s}", flush=True))
        assert cm.restore(m, opt, sch) == 0
        for step in range(1, 11):
            train(m, opt, sch, step - 1, step)
            if cm.should_save(step):  # steps 3, 6, 9: keep-last 2 leaves 6 and 9
                cm.save(step, m, opt, sch)
        cm.close()
        reference = full(m)  # uninterrupted run: 10 steps
        # "crash" after step 10, resume from step 9 with a differently seeded fresh model
        torch.manual_seed(1234 + rank)
        m2, opt2, sch2 = build()
        cm2 = CheckpointManager(cfg, log=lambda s: print(f"[{rank}] {s}", flush=True))
        start = cm2.restore(m2, opt2, sch2)
        assert start == 9, start
        train(m2, opt2, sch2, start, 10)  # replay the step since the last checkpoint
        resumed = full(m2)
        assert reference.keys() == resumed.keys()
        for k in reference:
            assert torch.equal(reference[k], resumed[k]), (strategy, async_save, k)
        cm2.close()
        dist.barrier()
        if rank == 0:
            print("DIRS", async_save, sorted(os.listdir(root)), flush=True)
    print(f"WORKER-OK {strategy}", flush=True)
    dist.destroy_process_group()


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_resume_is_bit_identical_sync_and_async(strategy: str, tmp_path: Path) -> None:
    outs = _run_pair(strategy, str(tmp_path))
    assert all(f"WORKER-OK {strategy}" in o for o in outs)
    for async_save in (False, True):
        assert f"DIRS {async_save} ['step_000006', 'step_000009']" in outs[0], outs[0]
    shards = sorted(p.name for p in (tmp_path / "async1" / "step_000009").iterdir())
    assert shards == [
        ".metadata",
        "__0_0.distcp",
        "__1_0.distcp",
        "trainforge_rank00000.pt",
        "trainforge_rank00001.pt",
    ]


# --------------------------------------------------------------- single-process, no torch.dist


def _tiny():
    import torch

    torch.manual_seed(0)
    m = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    return m, opt


def _step(m, opt):
    import torch

    m(torch.ones(1, 4)).sum().backward()
    opt.step()
    opt.zero_grad()


def _manager(root: Path, **kw):
    from trainforge.training.checkpoint import CheckpointConfig, CheckpointManager

    logs: list[str] = []
    return CheckpointManager(CheckpointConfig(directory=str(root), **kw), log=logs.append), logs


def test_partial_and_corrupt_checkpoints_are_skipped_with_a_log_line(tmp_path: Path) -> None:
    m, opt = _tiny()
    cm, _ = _manager(tmp_path, keep_last=0)
    _step(m, opt)
    cm.save(1, m, opt)
    # newer partial save (killed before .metadata), a corrupt .metadata, and foreign files
    partial = tmp_path / "step_000002"
    partial.mkdir()
    (partial / "__0_0.distcp").write_bytes(b"half a shard")
    corrupt = tmp_path / "step_000003"
    corrupt.mkdir()
    (corrupt / ".metadata").write_bytes(b"not a pickle")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "step_abc").mkdir()
    m2, opt2 = _tiny()
    cm2, logs = _manager(tmp_path)
    assert cm2.restore(m2, opt2) == 1
    text = "\n".join(logs)
    assert "skipping" in text and "step_000003: .metadata is corrupt" in text
    assert "step_000002: no .metadata (save was interrupted; partial checkpoint)" in text
    assert "ignoring foreign entry" in text and "notes.txt" in text
    assert "resumed from" in text and "step_000001" in text
    for a, b in zip(m.parameters(), m2.parameters(), strict=True):
        assert a.equal(b)


def test_unloadable_checkpoint_gives_clear_error(tmp_path: Path) -> None:
    from trainforge.training.checkpoint import CheckpointError

    m, opt = _tiny()
    cm, _ = _manager(tmp_path)
    cm.save(5, m, opt)
    (tmp_path / "step_000005" / "__0_0.distcp").write_bytes(b"garbage")
    cm2, _ = _manager(tmp_path)
    with pytest.raises(CheckpointError, match=r"could not load checkpoint .*step_000005.*Delete"):
        cm2.restore(*_tiny())


def test_a_checkpoint_of_another_model_is_not_to_be_deleted(tmp_path: Path) -> None:
    """A shape flag changed: every older checkpoint has the old shapes too, so the message
    must not say to delete this one (it would lose it and the next restore fails the same
    way); it names the tensors, the flags that shape the state (config's table) and the
    remedies plan --diff gives (config.FRESH_BY_*)."""
    import torch

    from trainforge.training.checkpoint import CheckpointError
    from trainforge.training.config import FRESH_BY_RESUME, checkpointed

    m, opt = _tiny()
    _manager(tmp_path)[0].save(1, m, opt)
    bigger = torch.nn.Linear(8, 2)
    with pytest.raises(CheckpointError) as info:
        _manager(tmp_path)[0].restore(bigger, torch.optim.SGD(bigger.parameters(), lr=1))
    text = str(info.value)
    assert "holds another model (model.weight: saved [2, 4], this run [2, 8])" in text
    for flag in ("--seq-len", "--heads", "--vocab-size", "--d-model", "--layers", "--model"):
        assert flag in text
    assert [s.flag for s in checkpointed("shape")] == [
        "--model",
        "--layers",
        "--d-model",
        "--heads",
        "--seq-len",
        "--vocab-size",
    ]
    assert "Do not delete it" in text and "Delete " not in text
    assert "--resume never" in text and FRESH_BY_RESUME in text
    assert (tmp_path / "step_000001" / ".metadata").exists()


@pytest.mark.parametrize("damage", ["truncated", "zeros", "another pickle"])
def test_a_ctrl_c_before_the_restore_names_the_checkpoint_the_restore_takes(
    tmp_path: Path, damage: str
) -> None:
    """The newest checkpoint's `.metadata` is there but DCP cannot read it (cut short, a
    block of zeros, a pickle of something else): the Ctrl-C line before the restore named it
    (it read `.metadata`'s presence) while the restore skips it. Now both read one answer
    (layout.latest_complete): the line names step_000001, the one the real restore resumes
    from, in a process that has not imported torch."""
    import pickle

    m, opt = _tiny()
    cm, _ = _manager(tmp_path, keep_last=0)
    for step in (1, 2):
        _step(m, opt)
        cm.save(step, m, opt)
    meta = tmp_path / "step_000002" / ".metadata"
    whole = meta.read_bytes()
    meta.write_bytes(
        whole[: len(whole) // 2]
        if damage == "truncated"
        else bytes(len(whole))
        if damage == "zeros"
        else pickle.dumps({"state_dict_metadata": {}})
    )
    probe = (
        "import sys\n"
        "from trainforge.training.layout import ctrl_c_detail_before_steps\n"
        f"print(ctrl_c_detail_before_steps({str(tmp_path)!r}))\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert out[1] == "False", out  # no torch: it may come before torch is imported
    assert f"the next run resumes from {tmp_path / 'step_000001'}:" in out[0], out
    m2, opt2 = _tiny()
    cm2, logs = _manager(tmp_path)
    assert cm2.restore(m2, opt2) == 1  # the real restore's choice: the same checkpoint
    text = "\n".join(logs)
    assert "step_000002: .metadata is corrupt" in text and "step_000001" in text, text


def test_extras_file_corrupt_gives_clear_error(tmp_path: Path) -> None:
    from trainforge.training.checkpoint import CheckpointError

    m, opt = _tiny()
    cm, _ = _manager(tmp_path)
    cm.save(2, m, opt)
    (tmp_path / "step_000002" / "trainforge_rank00000.pt").write_bytes(b"\x00junk")
    with pytest.raises(CheckpointError, match="cannot read trainforge_rank00000.pt"):
        _manager(tmp_path)[0].restore(*_tiny())


def test_resume_modes(tmp_path: Path) -> None:
    from trainforge.training.checkpoint import CheckpointError

    m, opt = _tiny()
    cm, _ = _manager(tmp_path)
    for step in (1, 2):
        _step(m, opt)
        cm.save(step, m, opt)
    assert _manager(tmp_path, resume="never")[0].restore(*_tiny()) == 0
    assert _manager(tmp_path, resume=str(tmp_path / "step_000001"))[0].restore(*_tiny()) == 1
    with pytest.raises(CheckpointError, match=r"--resume .*missing.*not a complete checkpoint"):
        _manager(tmp_path, resume=str(tmp_path / "missing"))[0].restore(*_tiny())
    with pytest.raises(CheckpointError, match="--keep-last must be >= 0"):
        _manager(tmp_path, keep_last=-1)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(CheckpointError, match="afile exists and is not a directory"):
        _manager(tmp_path / "afile")


def test_keep_last_deletes_only_older_complete_and_partial(tmp_path: Path) -> None:
    m, opt = _tiny()
    cm, _ = _manager(tmp_path, keep_last=2)
    (tmp_path / "step_000000").mkdir(parents=True)  # stale partial, older than all kept
    for step in range(1, 5):
        _step(m, opt)
        cm.save(step, m, opt)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000003", "step_000004"]


def test_crash_during_save_leaves_previous_checkpoint_usable(tmp_path: Path) -> None:
    """SIGKILL between the shards and `.metadata` (test hook): resume uses the older one."""
    script = (
        "import torch\n"
        "from trainforge.training.checkpoint import CheckpointConfig, CheckpointManager\n"
        "m = torch.nn.Linear(4, 2); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        f"cm = CheckpointManager(CheckpointConfig(directory={str(tmp_path)!r}, keep_last=1))\n"
        "cm.save(1, m, o)\n"
        "cm.save(2, m, o)\n"
        "print('NOT REACHED')\n"
    )
    env = dict(os.environ, TRAINFORGE_TEST_CRASH_DURING_SAVE="2", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    assert "NOT REACHED" not in proc.stdout
    assert (tmp_path / "step_000002" / "__0_0.distcp").is_file()
    assert not (tmp_path / "step_000002" / ".metadata").exists()
    cm, logs = _manager(tmp_path)
    assert cm.restore(*_tiny()) == 1
    assert any("step_000002: no .metadata" in line for line in logs)


def test_sigterm_sets_flag_and_handler_is_restored() -> None:
    from trainforge.training.preemption import PREEMPTED_EXIT_CODE, PreemptionHandler

    logs: list[str] = []
    before = signal.getsignal(signal.SIGTERM)
    h = PreemptionHandler(30.0, log=logs.append)
    assert not h.should_stop()
    os.kill(os.getpid(), signal.SIGTERM)
    assert h.should_stop()
    h.begin_shutdown()
    assert 0 < h.deadline_left() <= 30.0
    h.finish_shutdown()
    h.close()
    assert signal.getsignal(signal.SIGTERM) is before
    assert "SIGTERM on this rank" in logs[0]
    assert f"exiting with code {PREEMPTED_EXIT_CODE}" in logs[1]
    assert PREEMPTED_EXIT_CODE == 143


def test_config_validation_names_the_flag() -> None:
    from trainforge.training.checkpoint import CheckpointConfig, CheckpointError

    with pytest.raises(CheckpointError, match="--checkpoint-every 10 needs --checkpoint-dir DIR"):
        CheckpointConfig(every=10).validate()
    with pytest.raises(CheckpointError, match=r"s3://bucket/prefix, got 'bucket'"):
        CheckpointConfig(directory="d", s3_uri="bucket").validate()
    with pytest.raises(CheckpointError, match="--grace-period must be > 0"):
        CheckpointConfig(directory="d", grace_period=0).validate()


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    _worker(*sys.argv[2:])


def test_loop_hooks_sigterm_saves_then_resume_continues(tmp_path: Path, monkeypatch) -> None:
    """Checkpointing facade in a 1-process loop: SIGTERM after step 3 -> step_000003, stop;
    the next start resumes at 3 and the final state equals an uninterrupted run."""
    from trainforge.training.checkpoint import CheckpointConfig, Checkpointing

    def run(root: Path, fault: str | None) -> tuple[int, list, list[str]]:
        if fault:
            monkeypatch.setenv("TRAINFORGE_TEST_FAULT", fault)
        else:
            monkeypatch.delenv("TRAINFORGE_TEST_FAULT", raising=False)
        logs: list[str] = []
        m, opt = _tiny()
        ck = Checkpointing(CheckpointConfig(directory=str(root), every=2), log=logs.append)
        start = ck.restore(m, opt)
        for step in range(start, 6):
            _step(m, opt)
            if ck.after_step(step + 1, m, opt):
                return step + 1, [p.detach().clone() for p in m.parameters()], logs
        ck.finish(6, m, opt)
        return 6, [p.detach().clone() for p in m.parameters()], logs

    stopped, _, logs = run(tmp_path / "a", "0:3:TERM")
    assert stopped == 3
    assert (tmp_path / "a" / "step_000003" / ".metadata").is_file()
    assert any("stop requested (SIGTERM on this rank)" in line for line in logs)
    assert any("step_000003 (preemption)" in line for line in logs)
    done, resumed, logs = run(tmp_path / "a", None)
    assert done == 6 and any("resumed from" in line and "step 3" in line for line in logs)
    assert (tmp_path / "a" / "step_000006" / ".metadata").is_file()  # final checkpoint
    _, straight, _ = run(tmp_path / "b", None)
    assert all(a.equal(b) for a, b in zip(straight, resumed, strict=True))


def test_the_kill_hook_lets_an_in_flight_save_commit_first(tmp_path: Path, monkeypatch) -> None:
    """TRAINFORGE_TEST_FAULT=RANK:STEP:KILL waits for the async save in flight before the
    signal: a kill -9 rehearsal resumes from the checkpoint its schedule made, however busy
    the machine (a rank-1 write starved past step 17 restarted one CI run from step 0)."""
    import concurrent.futures
    import threading

    from trainforge.training.checkpoint import CheckpointConfig, CheckpointManager

    monkeypatch.setenv("TRAINFORGE_TEST_FAULT", "0:17:KILL")
    manager = CheckpointManager(CheckpointConfig(directory=str(tmp_path), every=10))
    release = threading.Event()
    order: list[str] = []

    def slow_write() -> None:
        release.wait(5)
        order.append("committed")

    pool = concurrent.futures.ThreadPoolExecutor(1)
    manager._pending = pool.submit(slow_write)
    monkeypatch.setattr(os, "kill", lambda pid, sig: order.append(signal.Signals(sig).name))
    threading.Timer(0.2, release.set).start()
    manager.inject_fault(16)
    assert order == []  # not its step
    manager.inject_fault(17)
    pool.shutdown()
    assert order == ["committed", "SIGKILL"]
