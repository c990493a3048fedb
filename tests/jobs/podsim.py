"""Run a rendered PyTorchJob's pods as local processes: the operator and kubelet, offline.

What it does, and nothing more:
* writes every ConfigMap volume of the pod template into a temp directory, as the kubelet
  projects it (items: key -> path, mode);
* gives each replica (Master 0, Worker 1..N-1) the variables the Kubeflow training operator
  v1.9 adds (pkg/controller.v1/pytorch/envvar.go: MASTER_ADDR, MASTER_PORT, WORLD_SIZE =
  replicas x nprocPerNode, RANK = pod index, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_NNODES)
  after the container's own env, as the operator appends them;
* expands `$(VAR)` in command and args as the kubelet does (trainforge.core.expansion);
* maps the pod's absolute mount paths into the temp directory (the only change made to the
  command and env), `python` to this interpreter and `torchrun` to `python -m
  torch.distributed.run`, and runs the container command in its workingDir.

The environment starts from PATH only: nothing of this checkout leaks in, so the code that runs
is the ConfigMaps' (the shipped runtime library included).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.ports import communicate_all, retry_on_clash
from trainforge.core.expansion import expand  # the kubelet's, one model


def write_configmaps(
    pod: dict[str, Any], configmaps: list[dict[str, Any]], root: Path
) -> dict[str, Path]:
    """Project every ConfigMap volume (once); returns mountPath -> local directory."""
    by_name = {cm["metadata"]["name"]: cm for cm in configmaps}
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mapping: dict[str, Path] = {}
    for mount in container["volumeMounts"]:
        local = root / mount["mountPath"].lstrip("/")
        mapping[mount["mountPath"]] = local
        source = volumes[mount["name"]]
        if local.exists() or "configMap" not in source:
            local.mkdir(parents=True, exist_ok=True)
            continue
        cm = by_name[source["configMap"]["name"]]
        blobs = {k: v.encode() for k, v in cm.get("data", {}).items()}
        blobs.update({k: base64.b64decode(v) for k, v in cm.get("binaryData", {}).items()})
        default_mode = source["configMap"].get("defaultMode", 0o644)
        for item in source["configMap"]["items"]:
            path = local / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(blobs[item["key"]])
            path.chmod(item.get("mode", default_mode))
    return mapping


def _localize(text: str, mapping: dict[str, Path]) -> str:
    """Pod mount paths -> local directories, in one pass (a local path may contain /tmp)."""
    alternatives = "|".join(re.escape(p) for p in sorted(mapping, key=len, reverse=True))
    pattern = rf"(?<![\w/])({alternatives})(?=/|$|:)"
    return re.sub(pattern, lambda m: str(mapping[m.group(1)]), text)


def operator_env(job: dict[str, Any], rtype: str, index: int, port: int) -> dict[str, str]:
    spec = job["spec"]
    replicas = sum(r["replicas"] for r in spec["pytorchReplicaSpecs"].values())
    nproc = spec.get("nprocPerNode", "1")
    rank = index + 1 if rtype == "Worker" else index
    return {
        "PYTHONUNBUFFERED": "1",  # appended by the operator (setPodEnv), as upstream
        "MASTER_PORT": str(port),
        "MASTER_ADDR": "127.0.0.1",  # stands for <job>-master-0
        "WORLD_SIZE": str(replicas * int(nproc)),
        "RANK": str(rank),
        "PET_NPROC_PER_NODE": nproc,
        "PET_NODE_RANK": str(rank),
        "PET_NNODES": str(replicas),
    }


def env_value(item: dict[str, Any]) -> str:
    """An env entry's value as the kubelet would give it: a literal, or a Secret key (a
    stand-in: the Secrets are the platform's, not the job's)."""
    if "value" in item:
        return str(item["value"])
    ref = item["valueFrom"]["secretKeyRef"]
    return f"<{ref['name']}/{ref['key']}>"


def afresh(root: Path, start: Any) -> Any:
    """`start(port)` for retry_on_clash, each try on the file system `root` as it was before
    the first: a try the clash made void leaves checkpoints, a ledger and outputs behind,
    which the next try's pods would resume from (a flake: worker-0's first process, told
    to kill itself at step 17, resumed from the void try's step 30 and exited 0)."""
    root.mkdir(parents=True, exist_ok=True)
    before = set(root.iterdir())

    def run(port: int) -> Any:
        for path in set(root.iterdir()) - before:
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        return start(port)

    return run


def run_pods(
    job: dict[str, Any], configmaps: list[dict[str, Any]], root: Path, timeout: float = 240
) -> list[tuple[int, str]]:
    """Start every pod of a Master/Worker PyTorchJob; (exit code, output) per pod. The
    rendezvous port is retried when the Master lost it to another process (EADDRINUSE)."""
    return retry_on_clash(
        afresh(root, lambda port: _run_pods_on(job, configmaps, root, timeout, port)),
        lambda results: [text for _, text in results],
    )


def _run_pods_on(
    job: dict[str, Any], configmaps: list[dict[str, Any]], root: Path, timeout: float, port: int
) -> list[tuple[int, str]]:
    # one shared "file system" (root) for all pods, as FSx is
    procs = [
        subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _, argv, env, cwd in pod_processes(job, configmaps, root, port)
    ]
    return communicate_all(procs, timeout)


def pod_processes(
    job: dict[str, Any], configmaps: list[dict[str, Any]], root: Path, port: int
) -> list[tuple[str, list[str], dict[str, str], str]]:
    """(pod name, argv, env, cwd) of every pod of a Master/Worker PyTorchJob, as `run_pods`
    starts them: the rendered command and env, the operator's variables, local paths."""
    out = []
    for rtype, rspec in job["spec"]["pytorchReplicaSpecs"].items():
        pod = rspec["template"]["spec"]
        for index in range(rspec["replicas"]):
            mapping = write_configmaps(pod, configmaps, root)
            (container,) = pod["containers"]
            env = {"PATH": os.environ["PATH"], "OMP_NUM_THREADS": "1"}
            for item in container["env"]:
                env[item["name"]] = _localize(env_value(item), mapping)
            env.update(operator_env(job, rtype, index, port))
            argv = [_localize(expand(a, env), mapping) for a in container["command"]]
            if argv[0] == "python":
                argv = [sys.executable, *argv[1:]]
            elif argv[0] == "torchrun":
                argv = [sys.executable, "-m", "torch.distributed.run", *argv[1:]]
            wd = container.get("workingDir")
            cwd = _localize(wd, mapping) if wd else str(root)
            out.append((f"{rtype.lower()}-{index}", argv, env, cwd))
    return out


def run_exitcode_policy(
    job: dict[str, Any],
    configmaps: list[dict[str, Any]],
    root: Path,
    *,
    kill: tuple[str, Any] | None = None,
    first_env: dict[str, dict[str, str]] | None = None,
    recreate_after: float = 1.0,
    max_recreations: int = 4,
    timeout: float = 150,
) -> dict[str, list[tuple[int, str]]]:
    """Run the job's pods under the training operator's `restartPolicy: ExitCode` (release
    1.9): a pod that exits 0 is done, one that exits 1-127 fails the job (the others are
    killed, cleanPodPolicy), one that exits >= 128 or dies by a signal is deleted and
    re-created (after `recreate_after` seconds, as a new pod takes a moment) with the same
    command and env. `kill = (pod name, ready)`: SIGKILL that pod's first process once
    `ready()` is true (kill -9 from outside). `first_env`: extra variables for a pod's first
    process only. Returns {pod: [(exit code, output) per process]}."""
    return retry_on_clash(
        afresh(
            root,
            lambda port: _run_exitcode_policy_on(
                job,
                configmaps,
                root,
                port,
                kill,
                first_env,
                recreate_after,
                max_recreations,
                timeout,
            ),
        ),
        lambda history: [text for runs in history.values() for _, text in runs],
    )


def _run_exitcode_policy_on(
    job: dict[str, Any],
    configmaps: list[dict[str, Any]],
    root: Path,
    port: int,
    kill: tuple[str, Any] | None,
    first_env: dict[str, dict[str, str]] | None,
    recreate_after: float,
    max_recreations: int,
    timeout: float,
) -> dict[str, list[tuple[int, str]]]:
    """One run of run_exitcode_policy on a given rendezvous port."""
    import signal
    import tempfile
    import time

    pods = {
        name: (argv, env, cwd)
        for name, argv, env, cwd in pod_processes(job, configmaps, root, port)
    }
    history: dict[str, list[tuple[int, str]]] = {name: [] for name in pods}
    running: dict[str, tuple[subprocess.Popen, Any]] = {}
    pending: dict[str, float] = {name: 0.0 for name in pods}
    done: set[str] = set()
    killed = kill is None
    deadline = time.monotonic() + timeout

    def start(name: str) -> None:
        argv, env, cwd = pods[name]
        env = dict(env)
        if not history[name]:
            env.update((first_env or {}).get(name, {}))
        log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed when the pod ends
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True
        )
        running[name] = (proc, log)

    try:
        while len(done) < len(pods):
            now = time.monotonic()
            if now > deadline:
                raise AssertionError(f"pods still running after {timeout:.0f}s: {history}")
            for name, at in list(pending.items()):
                if now >= at:
                    del pending[name]
                    start(name)
            if not killed and kill is not None and kill[1]():
                running[kill[0]][0].send_signal(signal.SIGKILL)
                killed = True
            for name, (proc, log) in list(running.items()):
                rc = proc.poll()
                if rc is None:
                    continue
                log.seek(0)
                history[name].append((rc, log.read()))
                log.close()
                del running[name]
                code = 128 - rc if rc < 0 else rc
                if code == 0:
                    done.add(name)
                elif code < 128:
                    return history  # permanent: the job failed
                elif len(history[name]) > max_recreations:
                    raise AssertionError(f"{name} re-created {max_recreations} times: {history}")
                else:
                    pending[name] = now + recreate_after
            time.sleep(0.05)
    finally:
        for name, (proc, log) in running.items():
            if proc.poll() is None:
                proc.kill()  # the job failed or timed out: its other pods are deleted
            proc.wait()
            log.seek(0)
            history[name].append((proc.returncode, log.read()))
            log.close()
    return history
