"""MLflow refuses a request made with another team's credentials: a real
`mlflow server --app-name basic-auth` (the version of the pinned server image), configured
with the platform's own auth config, users made by the platform's own sync script (its admin
password from the file the platform's Secret renders), and the runtime logging a run the way
a training pod does (its credentials the file the team's Secret renders, where the pod mounts
it under HOME; no credentials in the environment).

Slow-ish (the server imports for tens of seconds on a loaded machine): one server per module.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import pulumi
import pytest

from tests.ports import retry_on_clash
from trainforge.core import versions
from trainforge.plan.mocks import TrainforgeMocks, run_mocked
from trainforge.platform import mlflow_auth, mlflow_auth_sync

ADMIN_PASSWORD = "Adm1nPasswordFromPulumiRandom0000000000"
TEAMS = {
    "vision": "VisionPassword0000000000000000000000000",
    "llm": "LlmPassword00000000000000000000000000000",
}


def test_the_server_under_test_is_the_pinned_image_version():
    import mlflow

    # ghcr.io/mlflow/mlflow:v3.17.0-full -> 3.17.0
    assert versions.MLFLOW_IMAGE.rsplit(":v", 1)[1].split("-")[0] == mlflow.__version__


def test_the_heartbeat_says_whether_the_sync_loop_is_alive(tmp_path):
    beat = tmp_path / "heartbeat"
    probe = ["--check-heartbeat", str(beat), "--max-age", "900"]
    assert "has not started" in mlflow_auth_sync.check_heartbeat(beat, 900)
    assert mlflow_auth_sync.main(probe) == 1
    mlflow_auth_sync.Heartbeat(beat).beat()
    assert mlflow_auth_sync.check_heartbeat(beat, 900) is None
    assert mlflow_auth_sync.main(probe) == 0
    mtime = beat.stat().st_mtime
    assert mlflow_auth_sync.check_heartbeat(beat, 900, now=mtime + 899) is None
    assert "stuck" in mlflow_auth_sync.check_heartbeat(beat, 900, now=mtime + 901)
    os.utime(beat, (mtime - 901, mtime - 901))
    assert mlflow_auth_sync.main(probe) == 1


def test_a_failing_pass_still_beats(tmp_path):
    """Server down: the pass fails (and is retried), but the loop is alive; a restart would
    not help, so its probes must keep passing."""
    beat, password = tmp_path / "heartbeat", tmp_path / "admin-password"
    password.write_text("x\n")
    teams = tmp_path / "teams"
    teams.mkdir()
    with socket.socket() as held:  # bound, never listening: connections are refused, and
        held.bind(("127.0.0.1", 0))  # no other process can take the port meanwhile
        args = ["--url", f"http://127.0.0.1:{held.getsockname()[1]}", "--admin-user", "a",
                "--admin-password-file", str(password), "--teams-dir", str(teams),
                "--heartbeat-file", str(beat), "--once", "--wait", "0"]  # fmt: skip
        assert mlflow_auth_sync.main(args) == 1
    assert mlflow_auth_sync.check_heartbeat(beat, 5) is None


def test_the_admin_password_comes_from_its_file_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_ADMIN_PASSWORD", "from-the-environment")
    teams = tmp_path / "teams"
    teams.mkdir()
    args = ["--admin-user", "a", "--teams-dir", str(teams), "--once", "--wait", "0",
            "--admin-password-file", str(tmp_path / "missing")]  # fmt: skip
    assert mlflow_auth_sync.main(args) == 1
    assert "cannot read the admin password from" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mlflow_auth_sync.main(args[:-2])  # no --admin-password-file


class PasswordMocks(TrainforgeMocks):
    """The shared mocks, with pulumi-random's passwords set to the ones this test uses."""

    def new_resource(self, args):
        rid, outputs = super().new_resource(args)
        if args.typ == "random:index/randomPassword:RandomPassword":
            team = args.name.rsplit("-mlflow-team-", 1)[-1]
            outputs = {**outputs, "result": TEAMS.get(team, ADMIN_PASSWORD)}
            self.resources[-1].outputs = outputs
        return rid, outputs


def _plain(value):
    """A recorded input without Pulumi's secret wrapper."""
    if isinstance(value, dict) and "value" in value and len(value) == 2:
        return value["value"]
    return value


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict[str, str]]:
    """The Secrets `mlflow_auth.declare` renders (name -> stringData), with known passwords."""

    def program():
        mlflow_auth.declare(
            "t", "mlflow", {t: t for t in TEAMS}, versions.MLFLOW_IMAGE, 5000,
            pulumi.ResourceOptions(), None,
        )  # fmt: skip

    run = run_mocked(program, mocks=PasswordMocks())
    return {
        r.inputs["metadata"]["namespace"] + "/" + r.inputs["metadata"]["name"]: _plain(
            r.inputs["stringData"]
        )
        for r in run.of_type("kubernetes:core/v1:Secret")
    }


class Client:
    def __init__(self, url: str, user: str | None, password: str | None) -> None:
        self.url, self.user, self.password = url, user, password

    def __call__(self, method: str, path: str, body=None, query=None, raw: bytes | None = None):
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(url, data=data, method=method)
        if self.user is not None:
            token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        if body is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


@pytest.fixture(scope="module")
def server_process(tmp_path_factory):
    """The server's process (its own session), URL and teams directory."""
    base = tmp_path_factory.mktemp("mlflow")
    ini = base / "basic_auth.ini"
    ini.write_text(mlflow_auth.auth_ini(ADMIN_PASSWORD, str(base / "basic_auth.db")))
    env = {
        **os.environ,
        "MLFLOW_AUTH_CONFIG_PATH": str(ini),
        "MLFLOW_FLASK_SERVER_SECRET_KEY": "flask-secret-from-pulumi-random",
        "HOME": str(base),
        # the product's own settings (its job runner off: most of the start's CPU otherwise)
        **mlflow_auth.SERVER_SETTINGS,
    }
    mlflow_bin = pathlib.Path(sys.executable).with_name("mlflow")

    def start(port: int) -> tuple[subprocess.Popen, str, str]:
        """The server on `port`, healthy; or, when it exited first, its log (a lost port)."""
        log = base / "server.log"
        proc = subprocess.Popen(
            [
                str(mlflow_bin),
                "server",
                "--app-name=basic-auth",
                "--workers=1",
                "--host=127.0.0.1",
                f"--port={port}",
                f"--backend-store-uri=sqlite:///{base / 'mlflow.db'}",
                "--serve-artifacts",
                f"--artifacts-destination={base / 'artifacts'}",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(log, "w"),  # noqa: SIM115 - closed with the process
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        for _ in range(80):  # 80 x 5 s: the 400 s it may take on a loaded machine
            try:
                mlflow_auth_sync.wait_healthy(url, 5)
                return proc, url, ""
            except mlflow_auth_sync.SyncError:
                if proc.poll() is not None:
                    return proc, url, log.read_text()
        return proc, url, log.read_text()

    proc, url, failed = retry_on_clash(start, lambda r: [r[2]])
    try:
        assert not failed, failed[-3000:]
        teams = base / "teams"
        teams.mkdir()
        for team, pw in TEAMS.items():
            (teams / team).write_text(pw)
        yield proc, url, teams
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def server(server_process):
    """The healthy server's URL and the teams directory its sync reads."""
    return server_process[1:]


def _session_commands(sid: int) -> list[str]:
    """The command lines of every process in session `sid` (Linux /proc)."""
    out = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            # pid (comm) state ppid pgrp session ...: comm may hold spaces, so split after it
            session = int(stat.read_text().rsplit(")", 1)[1].split()[3])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
        if session == sid:
            out.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return out


@pytest.mark.skipif(not pathlib.Path("/proc/self/stat").exists(), reason="reads Linux /proc")
def test_the_server_runs_without_mlflows_job_runner(server_process):
    """The settings the platform deploys (SERVER_SETTINGS) turn off MLflow's job runner and its
    huey consumers in the pinned server: once healthy, the server's session holds no process
    of mlflow.server.jobs (without the setting, `mlflow server` starts the runner right after
    the web server, before it answers)."""
    from mlflow.environment_variables import MLFLOW_SERVER_ENABLE_JOB_EXECUTION

    proc = server_process[0]
    assert mlflow_auth.SERVER_SETTINGS[MLFLOW_SERVER_ENABLE_JOB_EXECUTION.name] == "false"
    commands = _session_commands(proc.pid)
    assert any("mlflow" in c and "server" in c for c in commands), commands
    assert not [c for c in commands if "mlflow.server.jobs" in c or "huey" in c], commands


def sync(url, teams, rendered, tmp_path, *extra) -> int:
    """One pass of the platform's sync, its admin password the file the Secret renders."""
    secret = rendered[f"mlflow/{mlflow_auth.AUTH_SECRET}"]
    password_file = tmp_path / mlflow_auth.ADMIN_PASSWORD_KEY
    password_file.write_text(secret[mlflow_auth.ADMIN_PASSWORD_KEY])
    return mlflow_auth_sync.main(
        ["--url", url, "--admin-user", mlflow_auth.ADMIN_USER, "--teams-dir", str(teams),
         "--admin-password-file", str(password_file), "--once", "--wait", "30", *extra]
    )  # fmt: skip


def test_another_teams_credentials_are_refused(server, rendered, tmp_path):
    url, teams = server
    beat = tmp_path / "heartbeat"
    assert sync(url, teams, rendered, tmp_path, "--heartbeat-file", str(beat)) == 0
    assert mlflow_auth_sync.check_heartbeat(beat, 60) is None
    vision = Client(url, "vision", TEAMS["vision"])
    llm = Client(url, "llm", TEAMS["llm"])
    status, body = vision("GET", "/api/2.0/mlflow/experiments/get-by-name",
                          query={"experiment_name": "vision"})  # fmt: skip
    assert status == 200
    exp = json.loads(body)["experiment"]["experiment_id"]
    status, body = vision("POST", "/api/2.0/mlflow/runs/create", {"experiment_id": exp})
    assert status == 200
    run = json.loads(body)["run"]["info"]["run_id"]
    art = f"/api/2.0/mlflow-artifacts/artifacts/{exp}/{run}/artifacts/model.pt"
    assert vision("PUT", art, raw=b"weights")[0] == 200
    assert vision("GET", art) == (200, b"weights")
    # the other team: no read, no write, no delete, on runs, metrics or artifacts
    refused = [
        llm("GET", "/api/2.0/mlflow/experiments/get", query={"experiment_id": exp}),
        llm("GET", "/api/2.0/mlflow/runs/get", query={"run_id": run}),
        llm("POST", "/api/2.0/mlflow/runs/log-metric",
            {"run_id": run, "key": "loss", "value": 0.0, "timestamp": 1, "step": 1}),
        llm("POST", "/api/2.0/mlflow/runs/delete", {"run_id": run}),
        llm("GET", art),
        llm("PUT", art, raw=b"poisoned"),
    ]  # fmt: skip
    assert [s for s, _ in refused] == [403] * len(refused), refused
    assert vision("GET", art) == (200, b"weights")
    # searches show it nothing of the other team's
    status, body = llm("POST", "/api/2.0/mlflow/runs/search", {"experiment_ids": [exp]})
    assert status != 200 or not json.loads(body).get("runs")
    # wrong or missing credentials
    assert Client(url, "vision", "wrong")("GET", "/api/2.0/mlflow/runs/get",
                                          query={"run_id": run})[0] == 401  # fmt: skip
    assert (
        Client(url, None, None)("GET", "/api/2.0/mlflow/runs/get", query={"run_id": run})[0] == 401
    )
    # the platform admin sees everything
    admin = Client(url, mlflow_auth.ADMIN_USER, ADMIN_PASSWORD)
    assert admin("GET", "/api/2.0/mlflow/runs/get", query={"run_id": run})[0] == 200


def _pod_of_team(team: str) -> dict:
    """The pod template a job of `team` gets from the pod builder, with the team's facts as
    the platform publishes them (trainforge.platform.published.team_facts)."""
    from tests.jobs.helpers import CODE, CPU_POOL  # noqa: PLC0415
    from trainforge.core.contract import JobTarget  # noqa: PLC0415
    from trainforge.jobs.backends import emit  # noqa: PLC0415
    from trainforge.jobs.spec import parse_job  # noqa: PLC0415
    from trainforge.jobs.wiring import resolve_job  # noqa: PLC0415
    from trainforge.platform.published import team_facts  # noqa: PLC0415
    from trainforge.platform.services_config import parse_services_config  # noqa: PLC0415

    errors: list[str] = []
    services = parse_services_config({"mlflow": {"enabled": True}, "teams": [{"name": team}]},
                                     errors)  # fmt: skip
    assert errors == []
    tgt = JobTarget(
        team=team_facts(services)[team],
        pool=CPU_POOL,
        checkpoint_bucket="b",
        mlflow_tracking_uri="http://mlflow.mlflow.svc.cluster.local:5000",
    )
    raw = {"name": "j", "team": team, "pool": CPU_POOL.name}
    return emit(resolve_job(parse_job(raw, "job"), tgt, "job"), tgt, CODE).pod


def credentials_home(pod: dict, rendered: dict, home: pathlib.Path) -> dict[str, str]:
    """Lay out under `home` what the pod's container finds under its HOME: the team's Secret
    key at the path the pod mounts it. Returns the container's literal environment."""
    (c,) = pod["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    for m in c["volumeMounts"]:
        secret = volumes[m["name"]].get("secret")
        if secret is None:
            continue
        assert m["mountPath"].startswith(env["HOME"] + "/"), (m, env["HOME"])
        data = rendered[f"{pod['metadata']['labels']['trainforge.io/team']}/"
                        f"{secret['secretName']}"]  # fmt: skip
        for item in secret["items"]:
            where = home / m["mountPath"][len(env["HOME"]) + 1 :] / item["path"]
            where.parent.mkdir(parents=True, exist_ok=True)
            where.write_text(data[item["key"]])
    return env


def test_a_training_pod_logs_to_its_team_experiment(server, rendered, tmp_path, monkeypatch):
    """The runtime's own MLflow logger in the environment a pod of team llm gets: its
    credentials only from the file the team's Secret renders, where the pod mounts it."""
    url, teams = server
    assert sync(url, teams, rendered, tmp_path) == 0
    from trainforge.training.metrics import MLflowLogger

    home = tmp_path / "home"
    env = credentials_home(_pod_of_team("llm"), rendered, home)
    assert (home / ".mlflow" / "credentials").is_file()
    assert not {"MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"} & set(env)
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", env["MLFLOW_EXPERIMENT_NAME"])
    said: list[str] = []
    logger = MLflowLogger("run-1", {"lr": 0.1}, said.append)
    assert logger.mlflow is not None, said
    logger.log({"loss": 1.5}, 1)
    logger.close()
    llm = Client(url, "llm", TEAMS["llm"])
    status, body = llm("GET", "/api/2.0/mlflow/experiments/get-by-name",
                       query={"experiment_name": "llm"})  # fmt: skip
    exp = json.loads(body)["experiment"]["experiment_id"]
    status, body = llm("POST", "/api/2.0/mlflow/runs/search", {"experiment_ids": [exp]})
    (run,) = json.loads(body)["runs"]
    assert run["info"]["run_name"] == "run-1"
    vision = Client(url, "vision", TEAMS["vision"])
    assert (
        vision("GET", "/api/2.0/mlflow/runs/get", query={"run_id": run["info"]["run_id"]})[0] == 403
    )


def test_a_team_cannot_claim_a_new_teams_experiment_first(server, rendered, tmp_path):
    url, teams = server
    assert sync(url, teams, rendered, tmp_path) == 0
    llm = Client(url, "llm", TEAMS["llm"])
    status, body = llm("POST", "/api/2.0/mlflow/experiments/create", {"name": "newteam"})
    assert status == 200
    squatted = json.loads(body)["experiment_id"]
    (teams / "newteam").write_text("NewTeamPassword0000000000000000000000000")
    try:
        assert sync(url, teams, rendered, tmp_path) == 0
        newteam = Client(url, "newteam", "NewTeamPassword0000000000000000000000000")
        assert newteam("GET", "/api/2.0/mlflow/experiments/get",
                       query={"experiment_id": squatted})[0] == 200  # fmt: skip
        assert llm("GET", "/api/2.0/mlflow/experiments/get",
                   query={"experiment_id": squatted})[0] == 403  # fmt: skip
    finally:
        (teams / "newteam").unlink()


def test_a_rotated_password_replaces_the_old_one(server, rendered, tmp_path):
    url, teams = server
    assert sync(url, teams, rendered, tmp_path) == 0
    (teams / "vision").write_text("RotatedVisionPassword000000000000000000")
    try:
        assert sync(url, teams, rendered, tmp_path) == 0
        old = Client(url, "vision", TEAMS["vision"])
        new = Client(url, "vision", "RotatedVisionPassword000000000000000000")
        assert old("GET", "/api/2.0/mlflow/users/current")[0] == 401
        assert new("GET", "/api/2.0/mlflow/users/current")[0] == 200
    finally:
        (teams / "vision").write_text(TEAMS["vision"])
        sync(url, teams, rendered, tmp_path)
