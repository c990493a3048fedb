"""MLflow refuses a request made with another team's credentials: a real
`mlflow server --app-name basic-auth` (the version of the pinned server image), configured
with the platform's own auth config, users made by the platform's own sync script, and the
runtime logging a run the way a training pod does (its env from the team's Secret).

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

import pytest

from trainforge.platform import mlflow_auth, mlflow_auth_sync, versions

ADMIN_PASSWORD = "Adm1nPasswordFromPulumiRandom0000000000"
TEAMS = {
    "vision": "VisionPassword0000000000000000000000000",
    "llm": "LlmPassword00000000000000000000000000000",
}


def test_the_server_under_test_is_the_pinned_image_version():
    import mlflow

    # ghcr.io/mlflow/mlflow:v3.17.0-full -> 3.17.0
    assert versions.MLFLOW_IMAGE.rsplit(":v", 1)[1].split("-")[0] == mlflow.__version__


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("mlflow")
    ini = base / "basic_auth.ini"
    ini.write_text(mlflow_auth.auth_ini(ADMIN_PASSWORD, str(base / "basic_auth.db")))
    port = _free_port()
    env = {
        **os.environ,
        "MLFLOW_AUTH_CONFIG_PATH": str(ini),
        "MLFLOW_FLASK_SERVER_SECRET_KEY": "flask-secret-from-pulumi-random",
        "HOME": str(base),
    }
    mlflow_bin = pathlib.Path(sys.executable).with_name("mlflow")
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
        stderr=open(base / "server.log", "w"),  # noqa: SIM115 - closed with the process
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        mlflow_auth_sync.wait_healthy(url, 400)
        teams = base / "teams"
        teams.mkdir()
        for team, pw in TEAMS.items():
            (teams / team).write_text(pw)
        yield url, teams
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def sync(url, teams, monkeypatch) -> int:
    monkeypatch.setenv("MLFLOW_ADMIN_PASSWORD", ADMIN_PASSWORD)
    return mlflow_auth_sync.main(
        ["--url", url, "--admin-user", mlflow_auth.ADMIN_USER, "--teams-dir", str(teams),
         "--once", "--wait", "30"]
    )  # fmt: skip


def test_another_teams_credentials_are_refused(server, monkeypatch):
    url, teams = server
    assert sync(url, teams, monkeypatch) == 0
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


def test_a_training_pod_logs_to_its_team_experiment(server, monkeypatch):
    """The runtime's own MLflow logger, with the env a pod of team llm gets."""
    url, teams = server
    assert sync(url, teams, monkeypatch) == 0
    from trainforge.training.metrics import MLflowLogger

    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "llm")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", TEAMS["llm"])
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "llm")
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


def test_a_team_cannot_claim_a_new_teams_experiment_first(server, monkeypatch):
    url, teams = server
    assert sync(url, teams, monkeypatch) == 0
    llm = Client(url, "llm", TEAMS["llm"])
    status, body = llm("POST", "/api/2.0/mlflow/experiments/create", {"name": "newteam"})
    assert status == 200
    squatted = json.loads(body)["experiment_id"]
    (teams / "newteam").write_text("NewTeamPassword0000000000000000000000000")
    try:
        assert sync(url, teams, monkeypatch) == 0
        newteam = Client(url, "newteam", "NewTeamPassword0000000000000000000000000")
        assert newteam("GET", "/api/2.0/mlflow/experiments/get",
                       query={"experiment_id": squatted})[0] == 200  # fmt: skip
        assert llm("GET", "/api/2.0/mlflow/experiments/get",
                   query={"experiment_id": squatted})[0] == 403  # fmt: skip
    finally:
        (teams / "newteam").unlink()


def test_a_rotated_password_replaces_the_old_one(server, monkeypatch):
    url, teams = server
    assert sync(url, teams, monkeypatch) == 0
    (teams / "vision").write_text("RotatedVisionPassword000000000000000000")
    try:
        assert sync(url, teams, monkeypatch) == 0
        old = Client(url, "vision", TEAMS["vision"])
        new = Client(url, "vision", "RotatedVisionPassword000000000000000000")
        assert old("GET", "/api/2.0/mlflow/users/current")[0] == 401
        assert new("GET", "/api/2.0/mlflow/users/current")[0] == 200
    finally:
        (teams / "vision").write_text(TEAMS["vision"])
        sync(url, teams, monkeypatch)
