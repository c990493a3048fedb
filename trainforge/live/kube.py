"""Raw GETs against the API server with the official client and the user's kubeconfig.

Why raw paths: the same few reads cover three job backends, Kueue's objects and a pod proxy,
and the client's typed models would drop fields of custom resources. The client still does
what matters: kubeconfig contexts, exec credential plugins (`aws eks get-token`), TLS.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class KubeError(Exception):
    """The API answered with an error other than 404 (forbidden, unauthorised, unreachable)."""

    def __init__(self, path: str, status: int | None, reason: str) -> None:
        self.path = path
        self.status = status
        self.reason = reason
        where = "" if path.startswith("(") else f"GET {path}: "
        super().__init__(f"{where}{status or ''} {reason}".strip())


def _context_names(kubeconfig: str | None) -> list[str]:
    """The context names of a kubeconfig, for an error message; [] when they cannot be read."""
    from kubernetes import config  # noqa: PLC0415

    try:
        return [c["name"] for c in config.list_kube_config_contexts(config_file=kubeconfig)[0]]
    except Exception:  # noqa: BLE001 - only a hint in a message
        return []


class LocalError(KubeError):
    """This side cannot ask the cluster: the Kubernetes client is not installed, the kubeconfig
    does not load, or `--context` names no context in it. The user's setup, not the
    cluster's answer: the live commands exit 2 for it (1 is kept for a refused read)."""


class _Logged(logging.Handler):
    """Keeps the kubernetes client's `logging.error` lines off the user's screen."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


# kubernetes 36.0.1 config/exec_provider.py ExecProvider.run: "exec: process returned %d"
# then ". " and the plugin's stripped stderr (absent when stdout is a terminal: the plugin
# then writes to it directly)
_EXIT = re.compile(r"exec: process returned (-?\d+)(?:\. (.*))?", re.DOTALL)


def _exec_command(kubeconfig: str | None, context: str | None) -> str:
    """The exec credential plugin's command line of the context's user, for an error message."""
    from kubernetes.config import kube_config  # noqa: PLC0415

    try:
        contexts, active = kube_config.list_kube_config_contexts(config_file=kubeconfig)
        ctx = next(c for c in contexts if c["name"] == context) if context else active
        merged = kube_config.KubeConfigMerger(
            kubeconfig or kube_config.KUBE_CONFIG_DEFAULT_LOCATION
        ).config  # the client's own merge of $KUBECONFIG's files
        plugin = merged["users"].get_with_name(ctx["context"]["user"])["user"]["exec"].value
        return shlex.join([plugin["command"], *(plugin.get("args") or [])])
    except Exception:  # noqa: BLE001 - only a name in a message
        return "of the context's user"


@contextmanager
def _plugin_failure(kubeconfig: str | None, context: str | None) -> Iterator[None]:
    """Raise LocalError when the client's exec credential plugin failed in the block.

    Why: the client (kubernetes 36.0.1 config/kube_config.py _load_from_exec_plugin) catches
    the plugin's failure, `logging.error`s it (the root logger's first record sets up
    `ERROR:root:` output, and with it urllib3's "Retrying" warnings) and carries on with no
    token: the request went out and came back 401, blaming the credentials the plugin never
    made. Here it is one line naming the plugin, raised before any request."""
    root = logging.getLogger()
    caught = _Logged()
    root.addHandler(caught)  # a handler on root: logging.error no longer calls basicConfig
    try:
        yield
    finally:
        root.removeHandler(caught)
    if not caught.messages:
        return
    why = " ".join(caught.messages[-1].split())
    found = _EXIT.fullmatch(caught.messages[-1].strip())
    if found:
        lines = [x.strip() for x in (found[2] or "").splitlines() if x.strip()]
        why = f"exit {found[1]}" + (f": {lines[-1]}" if lines else "")
    command = _exec_command(kubeconfig, context)
    raise LocalError(
        "(kubeconfig)", None, f"exec credential plugin `{command}` failed ({why}); no request sent"
    )


class Api:
    """GET JSON or text from the cluster of a kubeconfig context."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        try:
            from kubernetes import client, config  # noqa: PLC0415 - only the live commands need it
        except ImportError:  # an optional extra: say which, not a ModuleNotFoundError traceback
            raise LocalError(
                "(client)",
                None,
                "the live commands need the Kubernetes client: pip install 'trainforge[status]'",
            ) from None

        cfg = client.Configuration()
        try:
            with _plugin_failure(kubeconfig, context):
                config.load_kube_config(
                    config_file=kubeconfig, context=context, client_configuration=cfg
                )
        except LocalError:
            raise
        except Exception as e:  # noqa: BLE001 - the client raises what its YAML walk meets
            # ConfigException, OSError; a file that is not YAML, not UTF-8 or not a mapping
            # surfaced as yaml.ParserError, UnicodeDecodeError, TypeError tracebacks
            where = kubeconfig or "$KUBECONFIG / ~/.kube/config"
            mark = getattr(e, "problem_mark", None)  # yaml's errors span lines: one of them
            why = " ".join(f"{e}".split())
            if context is not None and f"Expected object with name {context} in" in why:
                # the client's words for an unknown context: name the flag and the choices
                known = ", ".join(_context_names(kubeconfig)) or "none readable"
                raise LocalError(
                    "(kubeconfig)",
                    None,
                    f"--context {context}: no such context in {where} (contexts: {known})",
                ) from None
            if mark is not None:
                why = f"not YAML (line {mark.line + 1}: {e.problem})"
            elif isinstance(e, UnicodeDecodeError):
                why = "not UTF-8 text"
            elif isinstance(e, TypeError | AttributeError):  # a list or a scalar at the top
                why = "not a kubeconfig (expected a mapping with clusters, contexts, users)"
            raise LocalError(
                "(kubeconfig)", None, f"cannot load kubeconfig {where}: {why}"
            ) from None
        if cfg.refresh_api_key_hook is not None:  # reruns the plugin when its token expires
            cfg.refresh_api_key_hook = self._checked(cfg.refresh_api_key_hook, kubeconfig, context)
        self.client = client.ApiClient(cfg)
        self.errors = client.ApiException
        from urllib3.exceptions import InsecureRequestWarning  # noqa: PLC0415 - the client's

        self.insecure = InsecureRequestWarning
        self.namespace = self._context_namespace(kubeconfig, context)

    @staticmethod
    def _checked(
        hook: Callable[[Any], None], kubeconfig: str | None, context: str | None
    ) -> Callable[[Any], None]:
        """The client's token refresh, failing as the first run of the plugin does (a `wait`
        outlives an EKS token's 15 minutes)."""

        def refresh(cfg: Any) -> None:
            with _plugin_failure(kubeconfig, context):
                hook(cfg)

        return refresh

    @staticmethod
    def _context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
        from kubernetes import config  # noqa: PLC0415

        try:
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        except Exception:  # noqa: BLE001 - the namespace is only a default
            return None
        ctx = next((c for c in contexts if c["name"] == context), active) if context else active
        return (ctx or {}).get("context", {}).get("namespace")

    def _call(
        self, path: str, query: dict[str, Any] | None, accept: str, timeout: float = 20
    ) -> Any:
        try:
            with warnings.catch_warnings():  # insecure-skip-tls-verify is the kubeconfig's
                warnings.simplefilter("ignore", self.insecure)  # choice; kubectl is silent
                resp = self.client.call_api(
                    path,
                    "GET",
                    query_params=list((query or {}).items()),
                    header_params={"Accept": accept},
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _return_http_data_only=True,
                    _request_timeout=timeout,
                )
        except self.errors as e:
            if e.status == 404:
                return None
            raise KubeError(path, e.status, e.reason or "") from None
        except OSError as e:  # connection refused, DNS, TLS
            raise KubeError(path, None, f"cannot reach the API server ({e})") from None
        except Exception as e:  # urllib3 wraps connection failures in its own errors
            if type(e).__module__.startswith("urllib3"):
                raise KubeError(path, None, f"cannot reach the API server ({e})") from None
            raise
        return resp.data

    def get(self, path: str, **query: Any) -> dict[str, Any] | None:
        """The object at `path`, or None when it does not exist (404)."""
        data = self._call(path, query, "application/json")
        return None if data is None else json.loads(data)

    def text(self, path: str, timeout: float = 20, **query: Any) -> str | None:
        """The text at `path`, or None when it does not exist (404). `timeout`: seconds to
        wait for the answer (a read the API server proxies may hang on a pod that cannot be
        reached: `gather.METRICS_TIMEOUT_S`)."""
        data = self._call(path, query, "text/plain", timeout)
        return None if data is None else data.decode("utf-8", "replace")
