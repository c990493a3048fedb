"""Rehearsal of an indexed-job backend failure, with the pods' own command and environment.

What the Job controller does is simulated; what the pods do is real: two processes run the
emitted container command with the emitted env contract (RANK from the completion index,
MASTER_ADDR standing for `<job>-0.<job>`), 2-rank gloo. When index 1 dies (SIGKILL after step
17, the runtime's fault hook), index 0 must not hang in its collective: it exits non-zero by
itself, so its index fails too and the Job re-creates both. The new generation meets at rank
0 again, resumes from the newest complete checkpoint (step 10) and ends with the same
parameters as an uninterrupted run. This is what docs/jobs.md ("indexed-job: when a pod
fails") relies on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.jobs.helpers import CPU_POOL, target
from tests.jobs.test_backends import build
from tests.ports import clashed, retry_on_clash
from tests.training.test_checkpoint_e2e import assert_same, final_params
from trainforge.jobs.pod import COMPLETION_INDEX_FIELD

ROOT = Path(__file__).resolve().parents[2]
STEPS = 30
JOB = dict(
    pool=CPU_POOL,
    workers=2,
    model="mlp",
    steps=STEPS,
    batchSize=8,
    datasetSize=512,
    seed=3,
    logEvery=10,
    metricsPort=0,
    # Synchronous saves: step 10's checkpoint is complete before step 11 starts, so the kill
    # after step 17 always finds it (an async save may still be in flight on a loaded machine;
    # async saves are covered by the checkpoint tests).
    checkpoint={"every": 10, "async": False},
)
# A surviving rank must notice its peer's death by itself; the process group's own timeout
# is 10 minutes, so anything near that means it hung.
NOTICE_WITHIN_S = 60


def pod_spec():
    _, out = build("indexed-job", tgt=target(CPU_POOL, mlflow_tracking_uri=None), **JOB)
    c = out.workload["spec"]["template"]["spec"]["containers"][0]
    return c["command"], c["env"]


def pod_process(index: int, workdir: Path, port: int, fault: str | None) -> subprocess.Popen:
    """One pod of the Job: its command and env, with local stand-ins for the cluster."""
    command, env_entries = pod_spec()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFORGE_TEST_")}
    for e in env_entries:
        if "valueFrom" in e:
            # the Job controller's completion index, as the pod's annotation gives it
            assert e["valueFrom"]["fieldRef"]["fieldPath"] == COMPLETION_INDEX_FIELD
            env[e["name"]] = str(index)
        else:
            env[e["name"]] = e["value"]
    assert env["MASTER_ADDR"] == "llm-0.llm" and env["MASTER_PORT"] == "29500"
    env.update(
        MASTER_ADDR="127.0.0.1",  # stands for index 0's stable name
        MASTER_PORT=str(port),
        PYTHONPATH=str(ROOT),  # the code ConfigMap's mount
        HOME=str(workdir / f"home{index}"),
        OMP_NUM_THREADS="1",
    )
    if fault:
        env["TRAINFORGE_TEST_FAULT"] = fault
    paths = {"--checkpoint-dir": workdir / "ckpt", "--output-dir": workdir / "out"}
    args = list(command)
    for flag, path in paths.items():
        args[args.index(flag) + 1] = str(path)
    assert args[:3] == ["python", "-m", "trainforge.training"]
    return subprocess.Popen(
        [sys.executable, *args[1:]],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def generation(workdir: Path, fault: str | None = None) -> list[tuple[int, float, str]]:
    """Start every index, wait for each to end; (exit code, end time, output) per index. The
    rendezvous port is retried when index 0 lost it to another process (EADDRINUSE)."""
    return retry_on_clash(
        lambda port: _generation_on(workdir, fault, port), lambda ended: [e[2] for e in ended]
    )


def _generation_on(workdir: Path, fault: str | None, port: int) -> list[tuple[int, float, str]]:
    procs = [pod_process(i, workdir, port, fault) for i in range(2)]
    ended: list[tuple[int, float, str] | None] = [None, None]
    deadline = time.monotonic() + 300
    try:
        while any(e is None for e in ended):
            for i, p in enumerate(procs):
                if ended[i] is None and p.poll() is not None:
                    ended[i] = (p.returncode, time.monotonic(), p.stdout.read())
                    if i == 0 and clashed([ended[0][2]]):
                        procs[1].kill()  # its rendezvous host never came up: retry
            if time.monotonic() > deadline:
                raise AssertionError(f"pods still running after 300 s: {ended}")
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return ended  # type: ignore[return-value]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("uninterrupted")
    for code, _, out in generation(work):
        assert code == 0, out[-3000:]
    return final_params(work / "ckpt" / f"step_{STEPS:06d}")


def test_one_index_dies_the_group_restarts_and_resumes(tmp_path: Path, reference) -> None:
    (code0, end0, out0), (code1, end1, out1) = generation(tmp_path, fault="1:17:KILL")
    assert code1 == -9, out1[-3000:]  # index 1's pod failed
    assert "sends itself SIGKILL after step 17" in out1
    # index 0 fails by itself, promptly: the Job re-creates it too (no index waits forever)
    assert code0 != 0, out0[-3000:]
    assert end0 - end1 < NOTICE_WITHIN_S, f"index 0 took {end0 - end1:.0f}s to notice"
    assert (tmp_path / "ckpt" / "step_000010" / ".metadata").is_file()

    # The replacements: every index again, same hostnames (MASTER_ADDR), same checkpoints.
    results = generation(tmp_path)
    for code, _, out in results:
        assert code == 0, out[-3000:]
    logs = "".join(out for _, _, out in results)
    assert "step_000010 at step 10" in logs  # resumed from the newest complete checkpoint
    assert_same(reference, final_params(tmp_path / "ckpt" / f"step_{STEPS:06d}"))


WORLD = """\
import os, pathlib, sys
import torch.distributed as dist

dist.init_process_group("gloo")
out = pathlib.Path(sys.argv[1])
(out / f"rank{dist.get_rank()}").write_text(f"{dist.get_world_size()}")
dist.destroy_process_group()
"""


def test_a_plain_torchrun_command_gets_one_world_across_the_indexes(tmp_path: Path) -> None:
    """`entrypoint.command: [torchrun, train.py]` (an imported job whose script is in its
    image) on indexed-job: torchrun reads its flags from PET_* variables, which the training
    operator and Trainer's torch plugin set and a plain Job does not. Each pod ran its own
    one-node world (rank 0 of 1, both writing the same checkpoints) while the plan said "2 pods
    x 1 process". Now the emitter sets them; two pods, with the emitted command and env and
    local stand-ins for index 0's name, make one world of 2."""
    script = tmp_path / "world.py"
    script.write_text(WORLD)
    out = tmp_path / "out"
    out.mkdir()
    command = [sys.executable, "-m", "torch.distributed.run", str(script), str(out)]
    _, emitted = build(
        "indexed-job",
        tgt=target(CPU_POOL, mlflow_tracking_uri=None),
        pool=CPU_POOL,
        workers=2,
        image="ghcr.io/acme/trainer:1.0",
        metricsPort=0,
        entrypoint={"command": command},
    )
    c = emitted.workload["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == command

    def pods(port: int) -> list[tuple[int, str]]:
        procs = []
        for index in range(2):
            env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TRAINFORGE_"))}
            for e in c["env"]:
                if "valueFrom" in e:  # the completion index, from the pod's annotation
                    assert e["valueFrom"]["fieldRef"]["fieldPath"] == COMPLETION_INDEX_FIELD
                    env[e["name"]] = str(index)
                else:
                    env[e["name"]] = e["value"]
            if "PET_MASTER_ADDR" in env:
                assert env["PET_MASTER_ADDR"] == "llm-0.llm"
                env.update(PET_MASTER_ADDR="127.0.0.1", PET_MASTER_PORT=str(port))
            env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", HOME=str(tmp_path))
            procs.append(subprocess.Popen(c["command"], env=env, cwd=tmp_path,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True))  # fmt: skip
        ended = []
        for p in procs:
            try:
                text, _ = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                text = "timed out"
            ended.append((p.returncode, text))
        return ended

    ended = retry_on_clash(pods, lambda e: [t for _, t in e])
    worlds = {p.name: p.read_text() for p in out.iterdir()}
    assert worlds == {"rank0": "2", "rank1": "2"}, (worlds, ended)
    assert [code for code, _ in ended] == [0, 0], ended
