"""`trainforge status|logs|why|wait JOB`: ask the cluster about a live job.

Uses the user's kubeconfig (`--kubeconfig`, `$KUBECONFIG`, ~/.kube/config; `--context`) and
the namespace given with `-n` or the context's. Read-only. Exit codes: 0 ok, 1 the job failed
or Kueue never admits it or Pod Security refuses its pods (wait) or the cluster refused a read, 2 bad usage, no such job, or
this side cannot ask (a kubeconfig that is missing or does not load, an unknown --context, a
failed exec credential plugin, no Kubernetes client), 124 wait timed out.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from trainforge.jobs.pod import COMPLETION_INDEX_LABEL
from trainforge.live import admission, explain, spend, stack_fix, wait
from trainforge.live.gather import (
    Gathered,
    NotFound,
    cannot_read,
    gather,
    pod_refusals,
    poll,
    rank0_pod,
    read_jobset,
)
from trainforge.live.kube import Api, KubeError, LocalError
from trainforge.plan import kueue as K

EXIT_LINE = re.compile(r"trainforge exit: .*")


def _parser(cmd: str, about: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"trainforge {cmd}", description=about)
    p.add_argument("job", metavar="JOB", help="the job's name (any backend)")
    p.add_argument("-n", "--namespace", help="the team namespace (default: the context's)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: the current one)")
    return p


def _missing_kubeconfig(flag: str | None) -> str | None:
    """Why no kubeconfig can be read, naming where it was looked for; None when one exists.

    Why before the client: for a missing file it says "Invalid kube-config file. No
    configuration found.", naming neither the file nor the flag, and it is the user's typo,
    not the cluster's refusal (exit 2, not 1)."""
    if flag is not None:
        path = Path(flag).expanduser()
        if not path.exists():
            return f"--kubeconfig {flag}: no such file"
        if not path.is_file():
            return f"--kubeconfig {flag}: not a file"
        return None
    env = os.environ.get("KUBECONFIG")
    if env:  # the client merges the files of the list that exist
        paths = [p for p in env.split(os.pathsep) if p]
        if paths and not any(Path(p).expanduser().is_file() for p in paths):
            return f"$KUBECONFIG {env}: no such file (pass --kubeconfig FILE)"
        return None
    if not Path("~/.kube/config").expanduser().is_file():
        return "no kubeconfig: ~/.kube/config: no such file (pass --kubeconfig FILE or set $KUBECONFIG)"
    return None


def _connect(args: argparse.Namespace, cmd: str) -> tuple[Api, str]:
    missing = _missing_kubeconfig(args.kubeconfig)
    if missing:
        raise _Usage(f"trainforge {cmd}: {missing}")
    api = Api(args.kubeconfig, args.context)
    ns = args.namespace or api.namespace
    if not ns:
        raise _Usage(f"trainforge {cmd}: no namespace: pass -n TEAM (or set one in the context)")
    return api, ns


class _Usage(Exception):
    pass


def _run(cmd: str, body: Callable[[], int]) -> int:
    try:
        return body()
    except _Usage as e:
        print(e, file=sys.stderr)
        return 2
    except (NotFound, LocalError) as e:  # no such job; the user's config, not the cluster
        print(f"trainforge {cmd}: {e}", file=sys.stderr)
        return 2
    except KubeError as e:
        print(f"trainforge {cmd}: {e}", file=sys.stderr)
        return 1


def _now() -> datetime:
    return datetime.now(UTC)


def status_main(argv: list[str], now: Callable[[], datetime] = _now) -> int:
    args = _parser("status", "a live job: state, queue, pods, progress").parse_args(argv)

    def body() -> int:
        api, ns = _connect(args, "status")
        g = gather(api, ns, args.job)
        at = now()
        g.expected = wait.expected_start(api, g, at)
        g.spend = spend.job_spend(api, g, at).line()
        sys.stdout.write(explain.status(g, at))
        return 0

    return _run("status", body)


def last_exit_lines(api: Api, g: Gathered, tail: int = 50) -> tuple[dict[str, str], str]:
    """The `trainforge exit: ...` line of each restarted or failed pod's previous run, and the
    note for the logs that could not be read (the live commands' one failed-read rule,
    `gather.cannot_read`: one note, the pods whose reads failed alike named together; "" when
    every log was read)."""
    out: dict[str, str] = {}
    # the reads that failed alike (status, reason) -> (one of their errors, their pods)
    failed_reads: dict[tuple, tuple[KubeError, list[str]]] = {}
    for p in g.pods:
        statuses = p.get("status", {}).get("containerStatuses", []) or []
        restarted = any((c.get("lastState") or {}).get("terminated") for c in statuses)
        failed = p.get("status", {}).get("phase") == "Failed"
        if not (restarted or failed):
            continue
        name = p["metadata"]["name"]
        path = f"/api/v1/namespaces/{g.namespace}/pods/{name}/log"
        query = {"container": g.container, "tailLines": tail}
        if restarted and not failed:
            query["previous"] = "true"
        try:
            text = api.text(path, **query) or ""
        except KubeError as e:
            failed_reads.setdefault((e.status, e.reason), (e, []))[1].append(name)
            continue
        found = EXIT_LINE.findall(text)
        if found:
            out[name] = found[-1]
    if not failed_reads:
        return out, ""
    unread = [
        cannot_read(f"the {'logs of pods' if len(pods) > 1 else 'log of pod'} {', '.join(pods)}", e)
        for e, pods in failed_reads.values()
    ]
    n = sum(len(pods) for _, pods in failed_reads.values())
    means = "its last exit line is not shown" if n == 1 else "their last exit lines are not shown"
    return out, f"{'; '.join(unread)}: {means}"


def why_main(argv: list[str], now: Callable[[], datetime] = _now) -> int:
    p = _parser("why", "why a job waits, restarts or failed, in a few lines")
    p.add_argument(
        "--stack",
        help="the stack the cluster runs (Pulumi.<stack>.yaml): a job Kueue never admits gets "
        "the sized fix the plan prints, in the stack's keys",
    )
    p.add_argument("--project-dir", default=".", help="where Pulumi.<stack>.yaml is (default: .)")
    args = p.parse_args(argv)

    def body() -> int:
        api, ns = _connect(args, "why")
        g = gather(api, ns, args.job)
        at = now()
        g.expected = wait.expected_start(api, g, at)
        if args.stack:
            root = Path(args.project_dir)
            try:
                # over only beside its other pod sets: the stack's queue model decides never
                if K.over_beside(g.workload):
                    g.never_fits = stack_fix.never_fits(g, root, args.stack)
                if K.outlook(g.workload, bool(g.never_fits))[0] == K.NEVER:
                    g.quota_fix = stack_fix.never_fix(g, root, args.stack)
            except stack_fix.StackUnread as e:
                raise _Usage(f"trainforge why: {e}") from None
        sys.stdout.write(explain.why(g, at, *last_exit_lines(api, g)))
        return 0

    return _run("why", body)


def pod_for_index(g: Gathered, index: int) -> dict | None:
    if index == 0:
        return rank0_pod(g)
    names = {p["metadata"]["name"]: p for p in g.pods}
    if g.backend == "pytorchjob":
        master = f"{g.name}-master-0" in names
        return names.get(f"{g.name}-worker-{index - 1 if master else index}")
    return next(
        (p for p in g.pods if p["metadata"].get("labels", {}).get(COMPLETION_INDEX_LABEL) == str(index)),
        None,
    )  # fmt: skip


def logs_main(argv: list[str]) -> int:
    p = _parser("logs", "a job's pod log (rank 0's pod by default)")
    p.add_argument("--index", type=int, default=0, help="pod index: 0 = rank 0's pod (default)")
    p.add_argument("--previous", action="store_true", help="the run before the last restart")
    p.add_argument("--tail", type=int, default=200, help="last N lines (default 200)")
    args = p.parse_args(argv)
    for flag, value in (("--index", args.index), ("--tail", args.tail)):
        if value < 0:
            p.error(f"{flag} must be >= 0, got {value}")

    def body() -> int:
        api, ns = _connect(args, "logs")
        g = gather(api, ns, args.job, metrics=False)
        pod = pod_for_index(g, args.index)
        if pod is None:
            have = ", ".join(x["metadata"]["name"] for x in g.pods) or "none"
            raise _Usage(
                f"trainforge logs: {args.job} has no pod with index {args.index} (pods: {have})"
            )
        query = {"container": g.container, "tailLines": args.tail}
        if args.previous:
            query["previous"] = "true"
        text = api.text(f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/log", **query)
        sys.stdout.write(text or "")
        return 0

    return _run("logs", body)


WAIT_FOR = ("admitted", "running", "finished")


def wait_main(
    argv: list[str],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    p = _parser("wait", "wait until a job is admitted, running or finished")
    p.add_argument(
        "--for",
        dest="until",
        choices=WAIT_FOR,
        default="finished",
        help="admitted: Kueue admitted its workload (no queue: not suspended); running: its "
        "pods run; finished: it succeeded (default). A failed job, or one Kueue never admits, "
        "ends any wait with exit 1; so does, for running and finished, a started job whose "
        "pod creates Pod Security refuses, all or one replica type's (a PyTorchJob's Workers "
        "while its Master runs: it never reaches its world size), in trainforge why's words",
    )
    p.add_argument("--timeout", type=float, default=0, help="seconds; 0 = no limit (default)")
    p.add_argument("--interval", type=float, default=10, help="seconds between polls (10)")
    args = p.parse_args(argv)
    if not (args.timeout >= 0 and args.timeout < float("inf")):  # nan fails both
        p.error(f"--timeout must be >= 0 seconds (0 = no limit), got {args.timeout:g}")
    if not (args.interval > 0 and args.interval < float("inf")):
        p.error(f"--interval must be > 0 seconds, got {args.interval:g}")

    def body() -> int:
        api, ns = _connect(args, "wait")
        end = clock() + args.timeout if args.timeout else None
        last = ""
        backend = None  # found on the first poll; later polls read only its kind
        jobset: dict | None = None  # a running TrainJob's JobSet, read once (`short`)
        noted: set[str] = set()  # a failed read's note, once, not on every poll
        bare = 0  # polls in a row that found the job suspended with no Workload
        while True:
            g = poll(api, ns, args.job, backend, args.until == "admitted", jobset)
            backend = g.backend
            state, cond = explain.job_state(g)
            if state == "Running" and g.backend == "trainjob" and args.until != "admitted":
                if jobset is None:  # its replicated jobs, read once: what `short` counts
                    read_jobset(api, g)
                jobset = g.jobset or {}
            # started, short of its world (no pod runs, or a replica type has fewer running
            # than it declares: a PyTorchJob is Running once its Master runs): a Pod Security
            # refusal of a replica type's pod creates (why's first line, admission.lines)
            # means it never runs whole, as things stand (status's `refused:` line); admitted it is
            refused_pods = ""
            if args.until != "admitted" and admission.may_refuse(g, state):
                pod_refusals(api, g)
                refused_pods = admission.first_line(g)
            for note in g.notes:
                if note not in noted:
                    print(f"note: {note}", flush=True)
                    noted.add(note)
            if state != last:
                print(f"{args.job}: {state}", flush=True)
                last = state
            if state == "Failed":
                print(f"{args.job} failed: {(cond or {}).get('message', '')}".rstrip(": "))
                return 1
            # what Kueue says of a Workload it does not admit (status's words): never, as
            # things stand, ends the wait; held by an inactive queue is said once. The
            # LimitRanges are not read here: the model then misses only what they add
            never, held = K.refused(g.workload), K.held(g.workload)
            if never and state == "Suspended":
                print(f"trainforge wait: {args.job}: {never}", file=sys.stderr)
                return 1
            if refused_pods:
                print(f"trainforge wait: {args.job}: {refused_pods}", file=sys.stderr)
                return 1
            if held and held not in noted:
                print(f"note: {held}", flush=True)
                noted.add(held)
            # Kueue makes a job's Workload as it reconciles the job, at once: still none on a
            # second poll is said once (why's first line), and the wait goes on (Kueue may be
            # starting); a Workload read that failed is already a note of its own
            nothing = args.until == "admitted" and state == "Suspended" and g.workload is None
            bare = bare + 1 if nothing and not g.workload_unread else 0
            if bare == 2:
                print(f"note: {explain.no_workload(g)[0]} (trainforge why)", flush=True)
            if state == "Succeeded" or (args.until == "running" and state == "Running"):
                return 0
            if args.until == "admitted" and (
                g.workload is None
                and state != "Suspended"
                or explain.is_true(g.workload, "Admitted")
            ):
                return 0
            if end is not None and clock() >= end:
                print(
                    f"trainforge wait: {args.job} still {state} after {args.timeout:g}s",
                    file=sys.stderr,
                )
                return 124
            sleep(args.interval)

    return _run("wait", body)
