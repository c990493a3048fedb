"""Keep MLflow's users and team experiments as the platform declares them (stdlib only).

Runs as the `auth-sync` container beside the MLflow server (`--app-name basic-auth`, default
permission NO_PERMISSIONS) and in the tests against a real server. For every team, from
one password file per team (the team name is the file name, the password its content):

1. the experiment named after the team exists (created by the admin, so no team can claim
   another team's experiment name first);
2. the team's user exists with exactly that password (created, or its password reset);
3. the team's user has MANAGE on its experiment, and no other team's user has any
   permission on it (a user who created an experiment with that name before it was
   declared loses access to it).

Idempotent, and repeated every `--interval` seconds, because the server's user store lives
beside its tracking store: on an ephemeral backend it is empty after every restart, and a
password rotated in the team's Secret must reach the server. The admin password is read from
a file (a mounted Secret, `--admin-password-file`) on every pass, never from the environment.

Liveness: the loop touches `--heartbeat-file` whenever it makes progress (each request
answered or timed out, each poll while waiting for the server, each pass, each sleep started),
and the container's probes run this script with `--check-heartbeat FILE --max-age SECONDS`,
which fails once the file is older than that (a loop stuck anywhere) or missing. A pass that
fails (server down, HTTP error) still beats: the loop is alive and retries; restarting it
would not help. Uses only the public REST API
of the MLflow auth app (`/api/2.0/mlflow/users/*`, `/api/3.0/mlflow/users/permissions/*`),
as served by the pinned server image (trainforge.core.versions.MLFLOW_IMAGE).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import pathlib
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

TEAM_PERMISSION = "MANAGE"


class SyncError(RuntimeError):
    pass


class Heartbeat:
    """A file whose modification time says when the loop last made progress."""

    def __init__(self, path: pathlib.Path | None) -> None:
        self.path = path

    def beat(self) -> None:
        if self.path is None:
            return
        # Write then rename: a probe never reads a half-written file.
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(f"{time.time():.0f}\n")
        os.replace(tmp, self.path)


def heartbeat_age(path: pathlib.Path, now: float | None = None) -> float | None:
    """Seconds since the last beat; None when there was none."""
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return None
    return (time.time() if now is None else now) - mtime


def check_heartbeat(path: pathlib.Path, max_age: float, now: float | None = None) -> str | None:
    """Why the loop is not alive (None: it is): what the container's probes run."""
    age = heartbeat_age(path, now)
    if age is None:
        return f"no heartbeat at {path}: the sync loop has not started"
    if age > max_age:
        return f"last heartbeat {age:.0f}s ago (more than {max_age:.0f}s): the sync loop is stuck"
    return None


NO_BEAT = Heartbeat(None)


class Api:
    def __init__(
        self, url: str, user: str, password: str, timeout: float = 30, beat: Heartbeat = NO_BEAT
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.heartbeat = beat
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self.auth = f"Basic {token}"

    def call(self, method: str, path: str, body: dict | None = None, query: dict | None = None):
        """(status, parsed JSON or text) of one request; never raises on an HTTP status."""
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", self.auth)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        finally:
            self.heartbeat.beat()
        try:
            return status, json.loads(raw or b"{}")
        except ValueError:
            return status, raw.decode(errors="replace")

    def ok(self, method: str, path: str, body: dict | None = None, query: dict | None = None):
        status, out = self.call(method, path, body, query)
        if status != 200:
            raise SyncError(f"{method} {path}: HTTP {status}: {str(out)[:300]}")
        return out


def read_teams(directory: pathlib.Path) -> dict[str, str]:
    """team -> password, one file per team (a mounted Secret: skip its `..data` links)."""
    out = {}
    for f in sorted(directory.iterdir()):
        if f.name.startswith(".") or not f.is_file():
            continue
        password = f.read_text().strip()
        if password:
            out[f.name] = password
    return out


def read_secret_file(path: pathlib.Path, what: str) -> str:
    """A mounted Secret's value (re-read every pass: the kubelet updates the file in place)."""
    try:
        value = path.read_text().strip()
    except OSError as e:
        raise SyncError(f"cannot read the {what} from {path}: {e.strerror}") from e
    if not value:
        raise SyncError(f"the {what} file {path} is empty")
    return value


def wait_healthy(url: str, timeout: float, beat: Heartbeat = NO_BEAT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        beat.beat()
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise SyncError(f"MLflow at {url} not healthy after {timeout:.0f}s")
        time.sleep(2)


def ensure_experiment(admin: Api, name: str) -> str:
    status, out = admin.call(
        "GET", "/api/2.0/mlflow/experiments/get-by-name", query={"experiment_name": name}
    )
    if status == 200:
        return str(out["experiment"]["experiment_id"])
    if status != 404:
        raise SyncError(f"looking up experiment {name!r}: HTTP {status}: {str(out)[:300]}")
    return str(
        admin.ok("POST", "/api/2.0/mlflow/experiments/create", {"name": name})["experiment_id"]
    )


def ensure_user(admin: Api, url: str, name: str, password: str) -> str:
    """'created', 'password reset' or 'unchanged'."""
    status, out = admin.call(
        "POST", "/api/2.0/mlflow/users/create", {"username": name, "password": password}
    )
    if status == 200:
        return "created"
    if not (isinstance(out, dict) and out.get("error_code") == "RESOURCE_ALREADY_EXISTS"):
        raise SyncError(f"creating user {name!r}: HTTP {status}: {str(out)[:300]}")
    as_user = Api(url, name, password, beat=admin.heartbeat)
    if as_user.call("GET", "/api/2.0/mlflow/users/current")[0] == 200:
        return "unchanged"
    admin.ok(
        "PATCH", "/api/2.0/mlflow/users/update-password", {"username": name, "password": password}
    )
    return "password reset"


def permission(admin: Api, user: str, experiment_id: str) -> str:
    out = admin.ok(
        "GET",
        "/api/3.0/mlflow/users/permissions/get",
        query={"username": user, "resource_type": "experiment", "resource_id": experiment_id},
    )
    return str(out.get("permission", "NO_PERMISSIONS"))


def sync(
    url: str,
    admin_user: str,
    admin_password: str,
    teams: dict[str, str],
    beat: Heartbeat = NO_BEAT,
) -> list[str]:
    """One pass; returns what it changed, one line per change."""
    admin = Api(url, admin_user, admin_password, beat=beat)
    changes: list[str] = []
    # Experiments first: no team user exists yet on a fresh server, so none can take a name.
    experiments = {team: ensure_experiment(admin, team) for team in teams}
    for team, password in teams.items():
        what = ensure_user(admin, url, team, password)
        if what != "unchanged":
            changes.append(f"user {team}: {what}")
    for team, exp in experiments.items():
        if permission(admin, team, exp) != TEAM_PERMISSION:
            admin.ok(
                "POST",
                "/api/3.0/mlflow/users/permissions/grant",
                {
                    "username": team,
                    "resource_type": "experiment",
                    "resource_id": exp,
                    "permission": TEAM_PERMISSION,
                },
            )
            changes.append(f"experiment {team} ({exp}): {team} granted {TEAM_PERMISSION}")
        for other in teams:
            if other != team and permission(admin, other, exp) != "NO_PERMISSIONS":
                admin.ok(
                    "POST",
                    "/api/3.0/mlflow/users/permissions/revoke",
                    {"username": other, "resource_type": "experiment", "resource_id": exp},
                )
                changes.append(f"experiment {team} ({exp}): access of {other} revoked")
    return changes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:5000")
    ap.add_argument("--admin-user")
    ap.add_argument(
        "--admin-password-file", type=pathlib.Path, help="the admin password (a mounted Secret)"
    )
    ap.add_argument("--teams-dir", type=pathlib.Path)
    ap.add_argument("--interval", type=float, default=300, help="seconds between passes")
    ap.add_argument("--once", action="store_true", help="one pass, then exit")
    ap.add_argument("--wait", type=float, default=600, help="seconds to wait for the server")
    ap.add_argument("--heartbeat-file", type=pathlib.Path, help="touched on every bit of progress")
    ap.add_argument(
        "--check-heartbeat",
        type=pathlib.Path,
        metavar="FILE",
        help="probe: exit 1 when FILE is missing or older than --max-age, else 0",
    )
    ap.add_argument("--max-age", type=float, default=900, help="seconds (--check-heartbeat)")
    args = ap.parse_args(argv)
    if args.check_heartbeat is not None:
        why = check_heartbeat(args.check_heartbeat, args.max_age)
        if why is not None:
            print(f"mlflow-auth-sync: {why}", file=sys.stderr)
            return 1
        return 0
    for flag in ("admin_user", "admin_password_file", "teams_dir"):
        if getattr(args, flag) is None:
            ap.error(f"--{flag.replace('_', '-')} is required")
    beat = Heartbeat(args.heartbeat_file)
    while True:
        beat.beat()
        try:
            admin_password = read_secret_file(args.admin_password_file, "admin password")
            wait_healthy(args.url, args.wait, beat)
            teams = read_teams(args.teams_dir)
            for line in sync(args.url, args.admin_user, admin_password, teams, beat):
                print(f"mlflow-auth-sync: {line}", flush=True)
        except (SyncError, OSError, KeyError) as e:
            print(f"mlflow-auth-sync: {e}", file=sys.stderr, flush=True)
            if args.once:
                return 1
        beat.beat()
        if args.once:
            return 0
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
