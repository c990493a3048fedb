"""A PyTorchJob's Worker pods held to Master's, for `trainforge import` (trainforge.jobs.importer).

Why its own module: a trainforge job writes one pod for every replica, while the training
operator makes each replica's pods from its own template; comparing the two templates (what
differs, what the entry cannot carry, what is dropped and named) is one job, apart from
reading the kinds (trainforge.jobs.import_read). Pulumi-free.
"""

from __future__ import annotations

import json
from typing import Any

from trainforge.core.pods import stored_pod_spec
from trainforge.jobs.import_read import ImportProblem, Workload, owned_env, same_quantity

# The training container's fields the entry is made of: one value for every pod of a trainforge
# job (jobs/pytorchjob.replica_specs writes one template for Master and Worker), while the
# training operator makes each replica's pods from its own template (kubeflow/trainer v1.9.4
# pkg/controller.v1/common/pod.go createNewPod, `spec.Template.DeepCopy()`, read 2026-11-30).
_ONE_SPEC = ("image", "command", "args", "env", "resources", "volumeMounts", "workingDir")


def same_pods(w: Workload, file: str, changes: list[str]) -> None:
    """Hold each other replica's pod (a Worker) to `w`'s, Master's, after `check_shapes`: a
    difference the entry cannot carry is refused in one line (the Worker's field, both values);
    a Worker without resources gets Master's, and its own dropped fields are named."""
    for o in w.others:
        mine, theirs = w.container, o.container
        if _empty(theirs.get("resources")) and not _empty(mine.get("resources")):
            changes.append(
                f"{o.resources_at}: unset; the Worker pods get Master's "
                f"({_show(mine['resources'])}): every pod of a trainforge job has one size"
            )
        for k in (*_ONE_SPEC, "volumes"):
            at = f"{o.pod_at}.{k}" if k == "volumes" else f"{o.at}.{k}"
            if k == "volumes":
                found = _diff(o.pod.get(k), w.pod.get(k), at)
            elif k == "env":
                found = _env_diff(theirs.get(k) or [], mine.get(k) or [], at, changes)
            elif k == "resources":
                found = (
                    None
                    if _empty(theirs.get(k))
                    else _diff(_stored(theirs.get(k)), _stored(mine.get(k)), at, quantities=True)
                )
            else:
                found = _diff(theirs.get(k), mine.get(k), at)
            if found:
                where, got, masters = found
                raise ImportProblem(
                    file,
                    where,
                    f"got {_show(got)}; Master's is {_show(masters)}; every pod of a trainforge "
                    "job has one spec, so the Worker pods cannot differ from Master's: make "
                    "them equal and import again",
                )
        selector = o.pod.get("nodeSelector")
        if not _diff(selector, w.pod.get("nodeSelector"), ""):
            continue
        said = ", ".join(f"{k}: {v}" for k, v in (selector or {}).items()) or "unset"
        changes.append(
            f"{o.pod_at}.nodeSelector ({said}): dropped; it differs from Master's, and every "
            "pod of a trainforge job runs on one pool, the one Master's chose"
        )


def _env_diff(
    theirs: list[dict[str, Any]], mine: list[dict[str, Any]], at: str, changes: list[str]
) -> tuple[str, Any, Any] | None:
    """The first variable set otherwise on the Worker than on Master, by name; one the
    platform sets (`owned_env`) is dropped either way, and named."""
    by_name = {e["name"]: (i, e) for i, e in enumerate(theirs)}
    masters = {e["name"]: e for e in mine}
    for name in [*by_name, *(n for n in masters if n not in by_name)]:
        i, e = by_name.get(name, (None, None))
        if e == masters.get(name):
            continue
        if owned_env(name):
            if e is not None:
                changes.append(
                    f"{at} {name}: dropped; the platform or operator sets it on every pod"
                )
            continue
        return (f"{at}[{i}] ({name})" if i is not None else f"{at} ({name})"), e, masters.get(name)
    return None


def _diff(theirs: Any, mine: Any, at: str, quantities: bool = False) -> tuple[str, Any, Any] | None:
    """The first field below `at` where `theirs` differs from `mine`: (its path, both values).
    Unset and empty are alike; `quantities`: 4 and 4000m are alike."""
    if _empty(theirs) and _empty(mine):
        return None
    if isinstance(theirs, dict) and isinstance(mine, dict):
        for k in [*theirs, *(k for k in mine if k not in theirs)]:
            key = f"[{k}]" if "/" in str(k) or "." in str(k) else f".{k}"
            if found := _diff(theirs.get(k), mine.get(k), at + key, quantities):
                return found
        return None
    if isinstance(theirs, list) and isinstance(mine, list):
        for i in range(max(len(theirs), len(mine))):
            t = theirs[i] if i < len(theirs) else None
            m = mine[i] if i < len(mine) else None
            if found := _diff(t, m, f"{at}[{i}]", quantities):
                return found
        return None
    if theirs == mine or (quantities and same_quantity(theirs, mine)):
        return None
    return at, theirs, mine


def _stored(resources: Any) -> Any:
    """A container's resources as the API server stores them (a limit alone is also the
    request: core/pods.stored_pod_spec), so that `limits: {gpu: 1}` and `requests` and
    `limits` both `{gpu: 1}` are one pod."""
    return stored_pod_spec({"containers": [{"resources": resources}]})["containers"][0]["resources"]


def _empty(value: Any) -> bool:
    return value is None or value == {} or value == []


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return repr(value) if isinstance(value, str) else str(value)
