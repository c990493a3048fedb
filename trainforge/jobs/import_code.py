"""What `trainforge import` ships of the code the original ran: the files of each ConfigMap its
command names under a mount, read wherever the original mounts them, and what becomes of
every other mount.

Why: a TrainJob mounts volumes only through `spec.runtimePatches` (its pod patch), and an
indexed Job's `bash -c "... python /code/train.py"` names its script inside a string; the
import read neither, called the script "not mounted from a ConfigMap" and shipped nothing,
and the plan passed an entry whose pods could not find their code. The shipped files land
at USER_CODE_MOUNT (`/workspace`, jobs/codeship.py), so paths under another mount are
rewritten there. Where a TrainJob's patch sits: `trainjob.SHAPE` (Trainer v2.2.1).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainforge.core import pods
from trainforge.core.contract import TeamFacts
from trainforge.core.quantity import parse_quantity
from trainforge.jobs import shell_argv, trainjob
from trainforge.jobs.codeship import USER_CODE_MOUNT
from trainforge.jobs.import_read import ImportProblem, Workload, get, node_pod_patches
from trainforge.jobs.pod import TMP_SIZE


@dataclass(frozen=True)
class Mount:
    """One volumeMount of the pod's container, with the volume it mounts."""

    at: str  # the field path of the volumeMount
    name: str
    path: str  # mountPath, without a trailing '/'
    volume: Mapping[str, Any]
    volumes_at: str = ""  # the field path of the pod's volumes


def mounts(w: Workload, docs: list[dict[str, Any]]) -> list[Mount]:
    """The container's mounts: its own volumeMounts with the pod's volumes; for a TrainJob
    those of the `node` container in the pod patches of its `node` replicated job (the only
    place a TrainJob mounts a volume: its runtimePatches, or a v2.1 file's
    podTemplateOverrides; `import_read.node_pod_patches`), later patches last."""
    out = _mounts(w.container, w.pod, w.at, f"{w.pod_at}.volumes")
    if w.kind != trainjob.KIND:
        return out
    doc = next(
        (
            d
            for d in docs
            if d.get("kind") == trainjob.KIND and get(d, "metadata", "name") == w.name
        ),
        None,
    )
    for spec_at, spec in node_pod_patches(doc or {}):
        for i, c in enumerate(spec.get("containers") or []):
            if isinstance(c, dict) and c.get("name") == trainjob.CONTAINER:
                out += _mounts(c, spec, f"{spec_at}.containers[{i}]", f"{spec_at}.volumes")
    return out


def _mounts(
    container: Mapping[str, Any], pod: Mapping[str, Any], at: str, volumes_at: str
) -> list[Mount]:
    vols = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, dict)}
    return [
        Mount(f"{at}.volumeMounts[{i}]", str(m.get("name")),
              str(m.get("mountPath") or "").rstrip("/"), vols.get(m.get("name")) or {}, volumes_at)
        for i, m in enumerate(container.get("volumeMounts") or []) if isinstance(m, dict)
    ]  # fmt: skip


def named_under(mount: str, words: list[str]) -> list[str]:
    """The paths below `mount` the words name (`/code/train.py` inside `bash -c "..."`, the
    value of `--config=/code/c.yaml`), relative to it, in order, once each."""
    if not mount:
        return []
    found = re.compile(rf"(?<![\w./-]){re.escape(mount)}/([\w.-][\w./-]*)")
    seen: list[str] = []
    for word in words:
        for m in found.finditer(word):
            rel = posixpath.normpath(m.group(1))
            if not rel.startswith("..") and rel not in seen:
                seen.append(rel)
    return seen


@dataclass
class Shipped:
    """The code the import ships: files (path below the code directory -> text), the mounts
    they came from, and the paths the command names that no shipped file holds."""

    files: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # "ConfigMap x" per mount
    missing: list[str] = field(default_factory=list)  # full paths in the original pod
    # file -> the mode the kubelet gave it (its item's `mode`, else the volume's
    # `defaultMode`, else Kubernetes' 0644), for the files it made executable
    executable: dict[str, int] = field(default_factory=dict)

    def rewrite(self, word: str) -> str:
        """`word` with each shipped mount's path replaced by USER_CODE_MOUNT, where the
        shipped files are."""
        for m in self.mounts:
            if m.path != USER_CODE_MOUNT:
                word = re.sub(rf"(?<![\w./-]){re.escape(m.path)}/", USER_CODE_MOUNT + "/", word)
        return word


def ship(
    found: list[Mount], words: list[str], docs: list[dict[str, Any]], yaml_dir: Path, file: str,
    script: str = "",
) -> Shipped:  # fmt: skip
    """The files of every ConfigMap mount the command's words name a path under: the
    ConfigMap's files as the kubelet projects them (its `items`, else every key) where it is
    a document of the file, else the named files beside the YAML (`kubectl create configmap
    --from-file`). `script`: the path the command runs, refused where it cannot be found."""
    out = Shipped()
    for m in found:
        cm = get(m.volume, "configMap", "name")
        named = named_under(m.path, words)
        if not cm or not named:
            continue
        items = {get(x, "path"): get(x, "key") for x in get(m.volume, "configMap", "items") or []}
        doc = next(
            (d for d in docs if d.get("kind") == "ConfigMap" and get(d, "metadata", "name") == cm),
            None,
        )
        if doc is not None:
            data = {str(k): str(v) for k, v in (get(doc, "data") or {}).items()}
            paths = items if items else {k: k for k in data}
            files = {p: data[k] for p, k in paths.items() if k in data}
            source = f"ConfigMap {cm}"
            if script.startswith(m.path + "/") and script[len(m.path) + 1 :] not in files:
                key = items.get(script[len(m.path) + 1 :], script[len(m.path) + 1 :])
                raise ImportProblem(
                    file,
                    f"ConfigMap {cm}.data",
                    f"has no key {key!r} (the script {script} the command runs); keys: "
                    f"{', '.join(sorted(data)) or 'none'}",
                )
        else:
            files = {}
            for rel in named:
                beside = yaml_dir / posixpath.basename(items.get(rel, rel))
                if beside.is_file():
                    files[rel] = beside.read_text("utf-8")
            source = f"ConfigMap {cm}, made from {', '.join(sorted(files))} beside the YAML"
            if script.startswith(m.path + "/") and script[len(m.path) + 1 :] not in files:
                key = posixpath.basename(items.get(script[len(m.path) + 1 :], script))
                raise ImportProblem(
                    file,
                    f"{m.volumes_at} ({m.name})",
                    f"the script {script} comes from ConfigMap {cm!r}, which is neither a "
                    f"document of this file nor made from {key} next to it; add the ConfigMap "
                    f"(kubectl create configmap {cm} --from-file={key} --dry-run=client -o yaml) "
                    "or put the file beside the YAML",
                )
        for rel, text in files.items():
            if (mode := pods.volume_file_mode(m.volume, rel)) & 0o111:
                out.executable[rel] = mode
            if out.files.get(rel, text) != text:
                raise ImportProblem(
                    file, m.at, f"{rel} comes from two ConfigMaps; a job ships one code directory"
                )
            out.files[rel] = text
        out.mounts.append(m)
        out.sources.append(source)
        out.missing += [f"{m.path}/{rel}" for rel in named if rel not in files]
    return out


def shm_size(volume: Mapping[str, Any]) -> str | None:
    """The size a memory-backed emptyDir mounted at /dev/shm asks (its sizeLimit), kept as
    the entry's `shmSize`; None where it sets none."""
    if get(volume, "emptyDir", "medium") != "Memory":
        return None
    size = get(volume, "emptyDir", "sizeLimit")
    try:
        return str(size) if size is not None and parse_quantity(str(size)) > 0 else None
    except ValueError:
        return None


def dropped_why(
    m: Mount, team: TeamFacts | None = None, teams: Mapping[str, TeamFacts] | None = None
) -> str:
    """Why the mount `m`, which the entry does not carry, is dropped: by what it mounts. A
    claim is said by whose it is, as the stack's storage check (jobs.storage.check_storage)
    will judge a `volumes` entry naming it (`team`: the job's, `teams`: the stack's; None:
    not known, and the line says what to declare if it is the team's)."""
    v = m.volume
    if claim := get(v, "persistentVolumeClaim", "claimName"):
        from trainforge.jobs.storage import claims_words  # noqa: PLC0415 - the check's words

        declare = f"`volumes: [{{claim: {claim}, mountPath: {m.path}}}]`"
        if team is None:
            return f"declare {declare} if the claim is the team's (docs/jobs.md, Storage)"
        if claim == team.claim_name:
            return (
                f"{claim} is team {team.name}'s FSx claim, which every pod of its jobs mounts "
                f"at {team.fsx_mount_path}: point the code's {m.path} paths there"
            )
        if claim in team.claims:
            return f"declare {declare} (team {team.name}'s claims list it)"
        owner = next(
            (t for t in (teams or {}).values() if claim in (t.claim_name, *t.claims)), None
        )
        if owner is not None:
            return (
                f"{claim} is a claim of team {owner.name} (namespace {owner.namespace}), and "
                f"a job of team {team.name} mounts its own team's claims only ("
                f"{claims_words(team)})"
            )
        return (
            f"team {team.name} lists no claim {claim} ({claims_words(team)}): a "
            f"platform admin adds it under trainforge:teams[].claims, then declare {declare}"
        )
    if cm := get(v, "configMap", "name"):
        return (
            f"ConfigMap {cm}: the command names no file under {m.path}, so none of it is "
            "shipped; a job ships one code directory (entrypoint.codeDir), mounted at "
            f"{USER_CODE_MOUNT}"
        )
    if "secret" in v:
        return (
            "a job entry mounts no Secret: a ConfigMap-shipped file or env value is readable by "
            "every member of the team; put what it holds on the team's FSx or S3 prefix"
        )
    if "emptyDir" in v:
        if m.path == "/dev/shm":
            return "the platform mounts /dev/shm itself, sized by shmSize"
        asked = ", ".join(
            f"{k} {get(v, 'emptyDir', k)}"
            for k in ("medium", "sizeLimit")
            if get(v, "emptyDir", k) is not None
        )
        return (
            "a job entry mounts no emptyDir of its own (its `volumes` are the team's claims), "
            f"so this scratch dir{f' ({asked})' if asked else ''} is not carried; the pod's "
            f"writable scratch is /tmp (an emptyDir, sizeLimit {TMP_SIZE}, the platform "
            f"mounts): point the code's {m.path} paths at /tmp{m.path}, or declare a claim "
            f"of the team there (`volumes: [{{claim: CLAIM, mountPath: {m.path}}}]`)"
        )
    return "not supported (a job entry mounts the team's claims only: `volumes`)"


# A word of a command that names a file: a path with a directory or a file name with a
# suffix (`train.py`, `conf/c.yaml`, `./run.sh`), not a flag, a URL, a variable or a number.
_PATH_WORD = re.compile(
    r"(?:\./)?(?:[\w.-]+/)*[A-Za-z_][\w-]*\.[A-Za-z]\w*|(?:\.{1,2}/|[\w-]+/)[\w./-]*"
)
# a relative path inside a shell script: bounded by what cannot be part of a path
_IN_SCRIPT = re.compile(r"(?<![\w./$=-])(?:\./)?[\w-][\w./-]*(?![\w./-])")
# a script that changes directory: its later relative paths are not read from workingDir
_CHANGES_DIR = re.compile(r"(?:^|[;&|(\s])(?:cd|pushd)(?:\s|$)")


def _files_of(m: Mount, docs: list[dict[str, Any]], yaml_dir: Path) -> set[str]:
    """The paths below `m`'s mount the kubelet projects from its ConfigMap (empty: not a
    ConfigMap): a document of the file's items or keys, else the files beside the YAML that
    `kubectl create configmap --from-file` would make (as `ship` reads them)."""
    cm = get(m.volume, "configMap", "name")
    if not cm:
        return set()
    items = {get(x, "path"): get(x, "key") for x in get(m.volume, "configMap", "items") or []}
    doc = next(
        (d for d in docs if d.get("kind") == "ConfigMap" and get(d, "metadata", "name") == cm),
        None,
    )
    if doc is not None:
        keys = {str(k) for k in get(doc, "data") or {}}
        return {str(p) for p, k in items.items() if k in keys} if items else keys
    beside = {p.name for p in yaml_dir.iterdir() if p.is_file()} if yaml_dir.is_dir() else set()
    if items:
        return {str(p) for p, k in items.items() if posixpath.basename(str(k)) in beside}
    return beside


@dataclass
class Resolved:
    """The command's words with the relative paths the container's workingDir gives read as
    the pod reads them (`resolve`): those that name a file of a ConfigMap mount made absolute
    (so that `ship` ships it and `Shipped.rewrite` moves it under USER_CODE_MOUNT), and which
    they were: the absolute path -> the word as written."""

    words: list[str]
    made_absolute: dict[str, str] = field(default_factory=dict)


def resolve(
    words: list[str], working_dir: str, found: list[Mount], docs: list[dict[str, Any]],
    yaml_dir: Path, script: str = "",
) -> Resolved:  # fmt: skip
    """`words` with each relative path that names a file of a ConfigMap mount, read from
    `working_dir` as the kubelet starts the container there and the shell or python resolves
    it (`python train.py` with workingDir /opt/app: /opt/app/train.py), made absolute.
    `script`: the path the command runs, made absolute wherever it lands under a ConfigMap
    mount, so that a missing key is refused by `ship` rather than run from the image."""
    files = {m.path: _files_of(m, docs, yaml_dir) for m in found}

    def absolute(rel: str, always: bool = False) -> str | None:
        full = posixpath.normpath(posixpath.join(working_dir, rel))
        for m in found:
            inside = full.startswith(m.path + "/") and files[m.path]
            if inside and (always or full[len(m.path) + 1 :] in files[m.path]):
                return full
        return None

    out = Resolved(list(words))
    script_text = shell_argv.shell_script(words)
    for i, word in enumerate(words):
        if word.startswith("/"):
            continue
        flag, eq, value = word.partition("=") if word.startswith("--") else ("", "", word)
        if _PATH_WORD.fullmatch(value):
            full = absolute(value, always=value == script and not flag)
            if full is not None:
                out.words[i] = f"{flag}{eq}{full}"
                out.made_absolute[full] = value
        elif word == script_text and not _CHANGES_DIR.search(word):
            # a shell script (`sh -c`): its relative paths are read from workingDir

            def sub(m: re.Match[str]) -> str:
                tok = m.group(0)
                full = absolute(tok) if _PATH_WORD.fullmatch(tok) else None
                if full is None:
                    return tok
                out.made_absolute[full] = tok
                return full

            out.words[i] = _IN_SCRIPT.sub(sub, word)
    return out


def relative_left(words: list[str]) -> list[str]:
    """The relative file paths `words` still name (plain words, `--flag=value` values and the
    words of a `sh -c` script that does not change directory; a `python -c` program is code): read from the container's
    workingDir in the original, from USER_CODE_MOUNT once the platform ships code."""
    left: list[str] = []
    script = shell_argv.shell_script(words)
    for word in words:
        flag, _, value = word.partition("=") if word.startswith("--") else ("", "", word)
        if not value.startswith("/") and _PATH_WORD.fullmatch(value):
            left.append(value)
        elif word == script and not _CHANGES_DIR.search(word):
            left += [t for t in _IN_SCRIPT.findall(word) if _PATH_WORD.fullmatch(t)]
    return list(dict.fromkeys(left))
