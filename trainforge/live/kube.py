"""Raw GETs against the API server with the official client and the user's kubeconfig.

Why raw paths: the same few reads cover three job backends, Kueue's objects and a pod proxy,
and the client's typed models would drop fields of custom resources. The client still does
what matters: kubeconfig contexts, exec credential plugins (`aws eks get-token`), TLS.
"""

from __future__ import annotations

import json
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
            config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=cfg
            )
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
        self.client = client.ApiClient(cfg)
        self.errors = client.ApiException
        self.namespace = self._context_namespace(kubeconfig, context)

    @staticmethod
    def _context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
        from kubernetes import config  # noqa: PLC0415

        try:
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        except Exception:  # noqa: BLE001 - the namespace is only a default
            return None
        ctx = next((c for c in contexts if c["name"] == context), active) if context else active
        return (ctx or {}).get("context", {}).get("namespace")

    def _call(self, path: str, query: dict[str, Any] | None, accept: str) -> Any:
        try:
            resp = self.client.call_api(
                path,
                "GET",
                query_params=list((query or {}).items()),
                header_params={"Accept": accept},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=20,
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

    def text(self, path: str, **query: Any) -> str | None:
        data = self._call(path, query, "text/plain")
        return None if data is None else data.decode("utf-8", "replace")
