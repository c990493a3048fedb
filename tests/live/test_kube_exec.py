"""A kubeconfig whose user runs an exec credential plugin (`aws eks get-token`), through the
official client, against the fake API server of test_status.

The client (kubernetes 36.0.1 config/kube_config.py _load_from_exec_plugin) catches a failed
plugin, `logging.error`s it and sends the request with no token: `status` printed
`ERROR:root:exec: process returned 255. ...` (and urllib3's "Retrying" warnings or an
InsecureRequestWarning), then "401 Unauthorized", exit 1, blaming credentials the plugin
never made.
"""

from __future__ import annotations

import json
import os
import pathlib
import stat
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT, cli_env
from tests.live import recorded
from tests.live.test_status import TOKEN, FakeApi, run
from trainforge.live import cli

CREDENTIALS = (
    'Unable to locate credentials. You can configure credentials by running "aws configure".'
)


def _plugin(tmp: pathlib.Path, body: str) -> pathlib.Path:
    path = tmp / "get-token"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _credential(token: str, expires: str | None = None) -> str:
    status = {"token": token} | ({"expirationTimestamp": expires} if expires else {})
    return json.dumps({
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": status,
    })  # fmt: skip


def _kubeconfig(tmp: pathlib.Path, api: FakeApi, plugin: pathlib.Path) -> str:
    port = api.httpd.server_address[1]
    exec_ = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": str(plugin),
        "args": ["eks", "get-token", "--cluster-name", "ml"],
    }
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "me", "user": {"exec": exec_}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}],
        "current-context": "fake",
    }
    path = tmp / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.fixture
def api():
    server = FakeApi(recorded.ROUTES, recorded.FORBIDDEN)
    yield server
    server.httpd.shutdown()


FAILS = f"echo 'Refreshing SSO token...' >&2\necho '{CREDENTIALS}' >&2\nexit 255"


def test_a_failed_plugin_is_one_line_naming_it_and_no_request_is_sent(tmp_path, api):
    """Run as a user runs it: no `ERROR:root:` line, no urllib3 warning, one line naming the
    plugin's command, its exit code and the last line of its stderr; exit 2 as for a
    kubeconfig that does not load (this side cannot ask; the cluster refused nothing)."""
    plugin = _plugin(tmp_path, FAILS)
    config = _kubeconfig(tmp_path, api, plugin)
    done = subprocess.run(
        [sys.executable, "-m", "trainforge", "status", "x", "-n", "llm", "--kubeconfig", config],
        cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        f"trainforge status: exec credential plugin `{plugin} eks get-token --cluster-name ml` "
        f"failed (exit 255: {CREDENTIALS}); no request sent\n",
    )
    assert api.seen == []


def test_a_plugin_that_cannot_be_run_is_named(capsys, tmp_path, api):
    config = _kubeconfig(tmp_path, api, tmp_path / "absent")
    code, _, err = run(capsys, cli.why_main, "x", "-n", "llm", "--kubeconfig", config)
    assert (code, err) == (
        2,
        f"trainforge why: exec credential plugin `{tmp_path / 'absent'} eks get-token "
        f"--cluster-name ml` failed ([Errno 2] No such file or directory: "
        f"'{tmp_path / 'absent'}'); no request sent\n",
    )
    assert api.seen == []


def test_the_plugin_s_token_is_what_the_requests_carry(capsys, tmp_path, api):
    config = _kubeconfig(tmp_path, api, _plugin(tmp_path, f"echo '{_credential(TOKEN)}'"))
    code, out, err = run(capsys, cli.status_main, recorded.RUN, "-n", recorded.RUN_NS,
                         "--kubeconfig", config, now=lambda: recorded.NOW)  # fmt: skip
    assert (code, err) == (0, "")
    assert out.startswith(f"job:        {recorded.RUN_NS}/{recorded.RUN} ")


def test_a_refresh_that_fails_is_the_same_line_not_a_401(capsys, tmp_path, api):
    """The client reruns the plugin when its token has expired (a `wait` outlives an EKS
    token's 15 minutes); a failed rerun kept the expired token and the read came back 401."""
    first = tmp_path / "ran-once"
    body = (
        f"if [ -e {first} ]; then\n{FAILS}\nfi\ntouch {first}\n"
        f"echo '{_credential('expired', '2000-01-01T00:00:00Z')}'"
    )
    plugin = _plugin(tmp_path, body)
    config = _kubeconfig(tmp_path, api, plugin)
    code, _, err = run(capsys, cli.status_main, recorded.RUN, "-n", recorded.RUN_NS,
                       "--kubeconfig", config, now=lambda: recorded.NOW)  # fmt: skip
    assert os.path.exists(first)
    assert (code, err) == (
        2,
        f"trainforge status: exec credential plugin `{plugin} eks get-token --cluster-name ml` "
        f"failed (exit 255: {CREDENTIALS}); no request sent\n",
    )
    assert api.seen == []


def test_troubleshooting_quotes_the_line_as_printed(capsys, tmp_path, api):
    """docs/troubleshooting.md quotes the failed plugin's line (... for the rest)."""
    text = " ".join((ROOT / "docs" / "troubleshooting.md").read_text().split())
    (quote,) = [q for q in text.split("``")[1::2] if q.startswith("exec credential plugin")]
    plugin = _plugin(tmp_path, FAILS)
    config = _kubeconfig(tmp_path, api, plugin)
    code, _, err = run(capsys, cli.status_main, "x", "-n", "llm", "--kubeconfig", config)
    assert code == 2
    pos = 0
    for piece in (p.strip() for p in quote.replace("aws", str(plugin)).split("...")):
        found = err.find(piece, pos)
        assert found >= 0, f"troubleshooting.md quotes {piece!r}; status prints {err!r}"
        pos = found + len(piece)
