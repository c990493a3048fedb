"""One worker of `trainforge run-local`, given what its pod's controller sets in that pod.

run-local starts every process of every pod of a job under one local torchrun, which sets
each process's RANK, WORLD_SIZE and MASTER_ADDR/PORT as torchrun does in a pod. What a
backend's controller adds to each pod (JOB_COMPLETION_INDEX, the PET_* variables: the table
`trainforge.jobs.local.CONTROLLER_ENV`) differs from pod to pod, so torchrun's one
environment cannot carry it: this wrapper, run by torchrun for each worker, sets the values
of the worker's own local pod (its global RANK // processes per pod) and then replaces itself
with the worker's real command (`os.execv`: same process, so torchrun's signals and exit
codes reach it unchanged).

    python -m trainforge.jobs.local_pod PROCS PODS N NAME=TEMPLATE... (N of them) ARGS...

runs `python ARGS...`; a TEMPLATE may name {pod}, {pods}, {procs}, {world} (pods x procs),
{master_addr} and {master_port} (the local torchrun's rendezvous, standing for rank 0's pod as
MASTER_ADDR does). Items for Kubernetes' `$(VAR)` expansion (core.expansion), as the kubelet
makes it in that pod: `+NAME=TEMPLATE` a variable the pod template has before the job's own
(an emitter's RANK), `$NAME=TEMPLATE` one the controller appends (the operator's RANK): both
for the expansion only, the process keeps torchrun's; `%NAME` a job variable, in the
template's order, whose value (unexpanded in the worker's environment) is expanded from the
variables before it. ARGS are expanded against the whole env, as a pod's command and args.
Standard library and trainforge.core only: it starts with every worker.
"""

from __future__ import annotations

import os
import sys

from trainforge.core.expansion import expand


def pod_env(argv: list[str], env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(the variables of this worker's local pod, the command's arguments expanded as in that
    pod) from the wrapper's `argv` and the worker's environment (torchrun's RANK,
    MASTER_ADDR, MASTER_PORT)."""
    procs, pods, count = int(argv[0]), int(argv[1]), int(argv[2])
    values = {
        "pod": int(env.get("RANK", "0")) // procs,
        "pods": pods,
        "procs": procs,
        "world": pods * procs,
        "master_addr": env.get("MASTER_ADDR", ""),
        "master_port": env.get("MASTER_PORT", ""),
    }
    out: dict[str, str] = {}  # the controller's, appended after the template's env
    before: dict[str, str] = {}  # `+NAME`: in the template, before the job's own variables
    after: dict[str, str] = {}  # `$NAME`: appended by the controller, seen by args only
    own: list[str] = []  # `%NAME`: the job's own variables, in the template's order
    for item in argv[3 : 3 + count]:
        name, _, template = item.partition("=")
        if name.startswith("%"):
            own.append(name[1:])
        elif name.startswith("+"):
            before[name[1:]] = template.format(**values)
        elif name.startswith("$"):
            after[name[1:]] = template.format(**values)
        else:
            out[name] = template.format(**values)
    # the job's own values, each from the variables before it (torchrun's and the
    # controller's own per-process values are not in the template's env)
    hidden = {*out, *after, *own} - set(before)
    seen = {k: v for k, v in env.items() if k not in hidden} | before
    for name in own:
        seen[name] = out[name] = expand(env.get(name, ""), seen)
    return out, [expand(a, {**env, **seen, **out, **after}) for a in argv[3 + count :]]


def main() -> None:
    values, args = pod_env(sys.argv[1:], dict(os.environ))
    os.environ.update(values)
    os.execv(sys.executable, [sys.executable, *args])


if __name__ == "__main__":
    main()
