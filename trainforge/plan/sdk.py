"""`trainforge plan --sdk PROGRAM.py`: the program runs unchanged with the real SDK against an
API stand-in answering from the stack's offline plan; every TrainJob it sends joins the plan's
objects (judged as a job by `checks/submitted.py`). Why: docs/jobs.md, "The Kubeflow SDK".
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import yaml

from trainforge.jobs import trainjob

TRAINER_API = f"/apis/{trainjob.API_VERSION}"
TRAINJOB_TYPE = f"kubernetes:{trainjob.API_VERSION}:{trainjob.KIND}"
SENT_URN = "urn:trainforge:sdk::"  # of an object a program sent: the checks find them by it
SDK_VENV = ".sdk-venv"
TIMEOUT_S = 300


class SdkError(Exception):
    """`--sdk` cannot run here (no program, no SDK venv): a setup problem, not a finding."""


@dataclass
class Submission:
    """What one run of the program asked the API for and sent."""

    program: str
    namespace: str
    created: list[dict[str, Any]] = field(default_factory=list)  # TrainJobs as stored
    missing: list[str] = field(default_factory=list)  # runtimes asked for and not found
    requests: list[tuple[str, str]] = field(default_factory=list)
    # asked for after it sent a TrainJob and answered 404 (its status, pods, logs: none here)
    after_sent: list[str] = field(default_factory=list)
    returncode: int = 0
    output: str = ""  # the program's stdout and stderr (tail)
    stdout: str = ""  # the program's own printout (a TrainJob's name, for one)

    @property
    def last_error(self) -> str:
        """The program's last output line (its exception), after the traceback's last `File
        "...", line N` naming the program (else its last one): a SyntaxError's says not where."""
        lines = [x.strip() for x in self.output.splitlines() if x.strip()]
        frames = [x for x in lines[:-1] if x.startswith('File "')]
        mine = [x for x in frames if x.startswith(f'File "{self.program}"')] or frames
        where = mine[-1].split(", in ")[0] + ": " if mine else ""
        return where + lines[-1] if lines else ""


NOT_FOUND = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
             "code": 404}  # fmt: skip


def _route(path: str) -> list[str]:
    """The parts of an API path under TRAINER_API (none for another API)."""
    path = path.split("?")[0]
    return path.removeprefix(TRAINER_API + "/").split("/") if path.startswith(TRAINER_API) else []


def _get(objects: list[dict[str, Any]], path: str, sub: Submission) -> tuple[int, dict[str, Any]]:
    """The API's answer to GET `path` from the plan's (Cluster)TrainingRuntimes."""
    cluster = [d for d in objects if d.get("kind") == trainjob.RUNTIME_KIND]
    found: list[dict[str, Any]] = []
    match _route(path):
        case ["clustertrainingruntimes"]:
            return 200, {"kind": "ClusterTrainingRuntimeList", "items": cluster}
        case ["clustertrainingruntimes", name]:
            found = [d for d in cluster if d["metadata"]["name"] == name]
            if not found:
                sub.missing.append(name)
        case ["namespaces", ns, "trainingruntimes", *name]:
            items = [
                d
                for d in objects
                if d.get("kind") == "TrainingRuntime" and d["metadata"].get("namespace") == ns
            ]
            if not name:
                return 200, {"kind": "TrainingRuntimeList", "items": items}
            # none found: the SDK then asks for the cluster's
            found = [d for d in items if [d["metadata"]["name"]] == name]
    return (200, found[0]) if found else (404, NOT_FOUND)


@contextlib.contextmanager
def api_stand_in(objects: list[dict[str, Any]], sub: Submission) -> Iterator[str]:
    """An API server on 127.0.0.1 (its URL) answering the SDK's calls from the plan's objects:
    GET and list of (Cluster)TrainingRuntimes, POST of TrainJobs (recorded in `sub`, 201)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_a: Any) -> None:  # quiet
            return

        def _send(self, code: int, body: dict[str, Any]) -> None:
            if code == 404 and sub.created:
                sub.after_sent.append(self.path.split("?")[0])
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            sub.requests.append(("GET", self.path))
            self._send(*_get(objects, self.path, sub))

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            sub.requests.append(("POST", self.path))
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"]) or 0))
            match _route(self.path):
                case ["namespaces", ns, "trainjobs"]:
                    # what the API server stores: the namespace of the URL
                    body.setdefault("metadata", {})["namespace"] = ns
                    sub.created.append(body)
                    return self._send(201, body)
            return self._send(404, NOT_FOUND)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # poll every 20 ms: shutdown() waited one poll (0.5 s by default) after each program
    threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def sdk_python(root: pathlib.Path) -> pathlib.Path:
    """The SDK venv's interpreter: the project's `.sdk-venv`, else that of the trainforge
    checkout this module is in (where `make sdk-venv` made it); SdkError saying how to
    create it otherwise."""
    checkout = pathlib.Path(__file__).resolve().parents[2]
    for base in dict.fromkeys((root, checkout)):
        python = base / SDK_VENV / "bin" / "python"
        if python.exists():
            return python
    raise SdkError(
        f"--sdk: the Kubeflow SDK's venv {root / SDK_VENV} is absent; create it with "
        "`make sdk-venv` (tools/kubeflow-sdk/requirements.lock)"
    )


def run_program(
    program: pathlib.Path, objects: list[dict[str, Any]], namespace: str, python: pathlib.Path
) -> Submission:
    """Run `program` with the SDK's `python` and a kubeconfig whose context is `namespace`
    on the API stand-in over `objects`; return what it asked for and sent."""
    sub = Submission(str(program), namespace)
    with (
        tempfile.TemporaryDirectory(prefix="trainforge-sdk-") as tmp,
        api_stand_in(objects, sub) as url,
    ):
        home = pathlib.Path(tmp)
        kubeconfig = {
            "apiVersion": "v1", "kind": "Config", "current-context": "team",
            "clusters": [{"name": "plan", "cluster": {"server": url}}],
            "users": [{"name": "user", "user": {"token": "plan-stand-in"}}],
            "contexts": [{"name": "team", "context": {"cluster": "plan", "user": "user",
                                                      "namespace": namespace}}],
        }  # fmt: skip
        (home / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home),
               "KUBECONFIG": str(home / "kubeconfig")}  # fmt: skip
        try:
            proc = subprocess.run([str(python), str(program)], cwd=program.parent, env=env,
                                  capture_output=True, text=True, timeout=TIMEOUT_S)  # fmt: skip
        except subprocess.TimeoutExpired:
            sub.returncode = 124
            sub.output = f"the program did not finish within {TIMEOUT_S} s"
            return sub
        sub.returncode = proc.returncode
        sub.output = (proc.stdout + proc.stderr)[-4000:]
        sub.stdout = proc.stdout
    return sub


def add_sent(inv: Any, sub: Submission) -> None:
    """Add the TrainJobs the program sent to the plan's inventory, as Kubernetes objects the
    plan's checks judge (their URNs start with SENT_URN)."""
    from trainforge.plan.runner import Recorded  # noqa: PLC0415 - the plan's own record

    for i, doc in enumerate(sub.created):
        name = str((doc.get("metadata") or {}).get("name") or f"trainjob-{i}")
        inputs = {k: v for k, v in doc.items() if k != "status"}
        urn = f"{SENT_URN}{TRAINJOB_TYPE}::{name}"
        inv.resources.append(Recorded(urn, TRAINJOB_TYPE, name, None, True, inputs))
    inv.submitted = sub


def namespace_for(inv: Any, asked: str | None, stack: str) -> str:
    """The namespace the program's kubeconfig points at: `asked` (--namespace), which must be
    a team's, or the only team's; SdkError naming the flag and the valid values otherwise."""
    contracts = getattr(inv.declared, "contracts", None) or []
    teams = {t.namespace for c in contracts for t in c.teams.values()}  # of the stack's platform
    valid = ", ".join(sorted(teams)) or "(none declared)"
    if asked is not None:
        if asked not in teams:
            raise SdkError(
                f"--namespace {asked}: not a team namespace of stack {stack}; team "
                f"namespaces: {valid}"
            )
        return asked
    if len(teams) != 1:
        raise SdkError(
            f"--sdk: stack {stack} has {len(teams)} team namespaces ({valid}); say which one "
            "the program's kubeconfig uses with --namespace"
        )
    return next(iter(teams))
