"""Kubernetes' `$(VAR)` expansion: the one model of what a container's env, command and args
become in the pod, read by the job model (the order of a job's `env`), the offline plan (a
reference the pod would see as a literal), `trainforge import` and run-local (the values).

A port of kubernetes/kubernetes `third_party/forked/golang/expansion/expand.go` (the kubelet
expands with it: pkg/kubelet/kubelet_pods.go makeEnvironmentVariables for each env value in
the container's order, against the variables defined EARLIER in that list plus the service
variables; kubecontainer.ExpandContainerCommandAndArgs for command and args, against the
container's whole env). Rules, as upstream's expand_test.go pins them
(tests/core/test_expansion.py carries its cases as a table):
- `$(NAME)` with NAME defined becomes its value; undefined, it stays `$(NAME)` as written;
- `$$` is one literal `$` (so `$$(NAME)` is the literal `$(NAME)`);
- `$(` without a closing `)` stays as written; a `$` before any other character stays, with
  that character; a `$` at the end stays;
- the name is everything up to the first `)`, unchecked (`$(A$(B))` maps the name `A$(B`).
Source read 2026-12-01 with the code-search tools: expand_test.go at kubernetes/kubernetes
commit 490ffa43 and expand.go at 02604f7d (the stored versions; the v1.35 tag itself could
not be fetched, the repository is over the tools' size limit, so the tag is NOT pinned here).
That expand.go writes `$` + read for a non-variable, which contradicts its own tests
(`$$` -> `$`); this port writes `read`, as the tests require and as the copies of the file in
other projects do (code search, same day). The file has no Kubernetes-version switch.
Standard library only: run-local's per-pod wrapper (jobs/local_pod.py) imports it in each
worker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

OPERATOR = "$"
OPENER = "("
CLOSER = ")"


def _read_name(text: str) -> tuple[str, bool, int]:
    """(what was read, whether it is a variable name, characters consumed) for `text`, the
    input just after a `$` (tryReadVariableName)."""
    first = text[0]
    if first == OPERATOR:  # `$$`: an escaped operator
        return first, False, 1
    if first == OPENER:
        end = text.find(CLOSER, 1)
        if end >= 0:
            return text[1:end], True, end + 1
        return OPERATOR + OPENER, False, 1  # unterminated: `$(` stays, the rest is read on
    return OPERATOR + first, False, 1  # `$` before another character: both stay


def expand(text: str, mapping: Callable[[str], str | None] | Mapping[str, str]) -> str:
    """`text` with every `$(NAME)` replaced by `mapping`'s value (Expand): a mapping without
    NAME (or a function returning None) leaves `$(NAME)` as written."""
    look = mapping.get if isinstance(mapping, Mapping) else mapping
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == OPERATOR and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            read, is_var, advance = _read_name(text[cursor + 1 :])
            if is_var:
                value = look(read)
                out.append(f"$({read})" if value is None else value)
            else:
                out.append(read)  # `$$` -> `$`; `$(` unterminated, `$x`: as written
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


def references(text: str) -> list[str]:
    """The names `text` refers to, in order, each once: what `expand` would look up."""
    seen: list[str] = []

    def note(name: str) -> str:
        if name not in seen:
            seen.append(name)
        return ""

    expand(text, note)
    return seen


@dataclass(frozen=True)
class Unresolved:
    """A `$(ref)` in the value of env variable `name` that the pod sees as a literal: `ref` is
    defined only `later` in the container's env, or appended by the job's `controller` (after
    every variable of the pod template), or nowhere."""

    name: str
    ref: str
    where: str  # "later" | "controller" | "nowhere"

    def fix(self) -> str:
        """What to do, in words a user acts on."""
        if self.where == "later":
            return f"define {self.ref} before {self.name} (Kubernetes expands $(VAR) only from earlier variables)"
        if self.where == "controller":
            return (
                f"the controller appends {self.ref} after the pod's own variables, so no env "
                f"value can refer to it: use $({self.ref}) in command/args (expanded against "
                "the whole env) or read it in your code"
            )
        return f"define {self.ref} in the job's env, or write $$({self.ref}) for the literal text"


def env_values(
    entries: Iterable[tuple[str, str | None]], service: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The kubelet's walk of a container's env in order: each value expanded against the
    variables before it (then `service`); None (a valueFrom) stands for a value known only in
    the pod, kept as `$(NAME)`'s own text so later references resolve to something."""
    defined: dict[str, str] = {}
    service = service or {}
    for name, value in entries:
        if value is None:
            defined[name] = f"<{name}>"
            continue
        defined[name] = expand(value, lambda ref: defined.get(ref, service.get(ref)))
    return defined


def unresolved(
    entries: Iterable[tuple[str, str | None]], controller: Iterable[str] = ()
) -> list[Unresolved]:
    """Every `$(ref)` of the env values in `entries` (the container's order) that the pod sees
    as written: `ref` not defined earlier. `controller`: the names the job's controller appends
    after the template's env (training operator: RANK, MASTER_ADDR, ...)."""
    entries = list(entries)
    appended = set(controller)
    later_at: dict[str, int] = {}
    for i, (name, _) in enumerate(entries):
        later_at.setdefault(name, i)
    out: list[Unresolved] = []
    defined: set[str] = set()
    for i, (name, value) in enumerate(entries):
        for ref in references(value or ""):
            if ref in defined:
                continue
            if any(n == ref for n, _ in entries[i:]):
                out.append(Unresolved(name, ref, "later"))
            elif ref in appended:
                out.append(Unresolved(name, ref, "controller"))
            else:
                out.append(Unresolved(name, ref, "nowhere"))
        defined.add(name)
    return out


def dependency_order(pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """`pairs` (NAME, value) ordered so that each variable follows the variables of `pairs` it
    refers to, otherwise by name: the only order that survives `pulumi up`, whose engine hands
    a config mapping to the program with its keys sorted (pulumi/pulumi sdk/go/common/resource/
    config/object.go, commit 042b2553, read 2026-12-01: an object is a Go map[string]object,
    marshalled by encoding/json, which sorts map keys), and in which a reference to another
    of the job's variables resolves as its author meant. A cycle (A refers to B, B to A) has no
    such order: its members keep name order and `unresolved` names the reference that fails."""
    pending = dict(sorted(pairs))
    out: list[tuple[str, str]] = []
    placed: set[str] = set()
    while pending:
        ready = [
            n
            for n, v in pending.items()
            if all(r in placed or r not in pending or r == n for r in references(v))
        ]
        if not ready:  # a cycle: the rest in name order
            ready = list(pending)
        for n in ready:
            out.append((n, pending.pop(n)))
            placed.add(n)
    return tuple(out)


__all__ = [
    "Unresolved",
    "dependency_order",
    "env_values",
    "expand",
    "references",
    "unresolved",
]
