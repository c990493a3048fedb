"""SIGTERM reaches the user's process as its pod runs it (a rehearsal in a PID namespace).

Pod deletion, a spot interruption or a drain makes the kubelet send SIGTERM to the container's
main process. If that process is PID 1 of the pod's PID namespace, the kernel delivers only
signals it installed a handler for: a plain seed-style script (no handler) would keep running
until the SIGKILL at the end of terminationGracePeriodSeconds. The emitter therefore gives
user-code pods `shareProcessNamespace: true` (the pause container is PID 1). This test runs the
rendered container command the way that setting says, in a new PID namespace (`unshare`), and
sends SIGTERM from outside as the kubelet does.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.jobs.helpers import CODE, CPU_POOL, container, target
from trainforge.jobs import entrypoint
from trainforge.jobs.backends import emit
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job

SLEEPER = "import time\nprint('ready', flush=True)\ntime.sleep(120)\nprint('never')\n"
UNSHARE = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]


def _can_unshare() -> bool:
    if not shutil.which("unshare"):
        return False
    return subprocess.run([*UNSHARE, "true"], capture_output=True).returncode == 0


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


@pytest.mark.skipif(not _can_unshare(), reason="needs unprivileged user and PID namespaces")
def test_sigterm_stops_a_handler_less_script_at_once(tmp_path, monkeypatch):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "sleeper.py").write_text(SLEEPER)
    monkeypatch.chdir(tmp_path)
    raw = {"name": "sleeper", "team": "research", "pool": CPU_POOL.name}
    raw["entrypoint"] = {"script": "job/sleeper.py"}
    t = target(CPU_POOL)
    job = resolve_job(parse_job(raw, "job"), t, "job")
    bundle = entrypoint.user_code(job, ".", "job")
    out = emit(job, t, CODE, bundle)
    pod = out.pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    c = container(out.pytorchjob)
    bundle.write_to(tmp_path / "workspace")
    argv = [a.replace("/workspace", str(tmp_path / "workspace")) for a in c["command"]]
    assert argv[0] == "python"
    argv[0] = sys.executable
    shared = pod.get("shareProcessNamespace", False)
    # With a shared PID namespace the pause container is PID 1; a shell that never relays a
    # signal stands for it. Without, the container's own process is PID 1.
    inner = ["sh", "-c", '"$@" & wait $!', "pause", *argv] if shared else argv
    proc = subprocess.Popen([*UNSHARE, *inner], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        (init,) = _children(proc.pid)
        main = _children(init)[0] if shared else init
        os.kill(main, signal.SIGTERM)  # from outside the namespace, as the kubelet does
        try:
            code = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pytest.fail("SIGTERM did not stop the script: it is PID 1 without a handler")
        assert code == 128 + signal.SIGTERM  # terminated by the signal, not by the timeout
    finally:
        if proc.poll() is None:
            for pid in _children(proc.pid):
                os.kill(pid, signal.SIGKILL)
            proc.kill()
            proc.wait()
