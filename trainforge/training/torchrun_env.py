"""The environment every torchrun that trainforge starts runs with: one place for the launch
config that the pods (``jobs.entrypoint.contract_env``) and ``trainforge.training.launch``
(run-local, and the pods that ship the runtime library) both apply.

Why ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: since pytorch#128096 ("Share
TCPStore by default when using c10d rdzv handler", June 2024: after 2.3, which the
report in pytorch#135712 says still worked) the c10d rendezvous, which an elastic job
and ``--standalone`` use, hands its workers the agent's own TCPStore as MASTER_ADDR:MASTER_PORT
and keeps that one store for every restart of the worker group
(torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, ``next_rendezvous``: the shared
server is built once, ``_bootstrap_store_info`` reused). A worker's plain
``dist.init_process_group()`` (``env://``) then prefixes its keys with ``default_pg`` only
(torch/distributed/distributed_c10d.py), the same keys in every attempt, so a restarted worker
reads the dead attempt's gloo/NCCL addresses: "Gloo connectFullMesh failed ... Connection
refused", or a wait that never ends. torch/distributed/rendezvous.py's ``_create_c10d_store``
says "We create a new TCPStore for every retry so no need to add prefix for each attempt",
which the shared store contradicts (pytorch#135712, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=0 is
not compatible with torchelastic restarts"; read 2026-12-01 in torch 2.13.0's installed source).
With the variable set, each rendezvous round publishes a fresh free port of the rank-0 node
(``RendezvousStoreInfo.build``) and worker rank 0 starts a new store there for that attempt:
every restart starts from empty keys, as before that change, whatever the code calls. Torch
releases before it ignore the variable and never shared the store. The static rendezvous (a
multi-pod job that is not elastic, ``--master-addr``) always shares its store, but that
launcher gets no in-pod restarts (a failure re-creates the pods: a fresh torchrun).

The bundled runtime used to prefix the store with TORCHELASTIC_RESTART_COUNT instead; that
count is each agent's own (pytorch#135712's root cause), so after one pod's restart the pods of
a multi-pod elastic job counted 1 and 0 (seen in a two-agent run at 2026-12-01: rank 1
"attempt 1", rank 0 "attempt 0", same round) and would have waited on different keys.
"""

from __future__ import annotations

import os

# name -> value; a job's `env` may not set these (stack.jobs.RESERVED_ENV)
TORCHRUN_ENV: dict[str, str] = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
# torchrun forwards SIGTERM to its workers and SIGKILLs them this many seconds later (30 by
# default, torch/distributed/elastic/agent/server/api.py `_shutdown_timeout`): the job's whole
# checkpoint grace period, so a save can finish. A variable rather than --shutdown-timeout,
# which torchrun releases before 2.12 refuse.
SHUTDOWN_TIMEOUT = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"


def torchrun_env(grace_period: float) -> dict[str, str]:
    """Everything a torchrun that trainforge starts is given, for a job whose checkpoint grace
    period is `grace_period` seconds: the pods (jobs.entrypoint.contract_env, wherever the pod
    runs torchrun) and run-local (jobs.local, trainforge.local) read this one table."""
    return {SHUTDOWN_TIMEOUT: str(max(1, round(grace_period))), **TORCHRUN_ENV}


def apply(env: dict[str, str] | os._Environ[str]) -> None:
    """Set the launch config into ``env`` (a pod's environment, or this process's before it
    runs torchrun in-process), over any value there: restarts depend on it."""
    for name, value in TORCHRUN_ENV.items():
        env[name] = value
