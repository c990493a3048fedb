"""Read the runtime image's Dockerfile: its stages, base images, what they copy and install,
and which files of its build context a build of a target reads.

Why parse it instead of restating it: the image facts the plan shows (which mlflow, which
boto3, which base) and the offline proof that the image's Python layer works
(tests/images/test_runtime_image.py) must follow the Dockerfile as it is, so that an edit to
the Dockerfile changes what the plan says and what the test builds. Only the instructions the
runtime Dockerfile uses are understood (ARG, FROM, COPY, RUN, ENV, USER, LABEL); anything else
is kept as is. What a build reads (`build_reads`) is one model for the image's content tag
(`content_digest`) and the plan's build-context rehearsal (docs/rehearsals.md, "Build context").
"""

from __future__ import annotations

import fnmatch
import hashlib
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = Path("images/runtime/Dockerfile")
LOCK = Path("requirements.lock")


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case
    args: str  # continuation lines joined


@dataclass
class Stage:
    name: str
    base: str  # FROM reference, ARGs unexpanded (e.g. ${REGISTRY}/pytorch/pytorch:...)
    instructions: list[Instruction] = field(default_factory=list)

    def of(self, keyword: str) -> list[str]:
        return [i.args for i in self.instructions if i.keyword == keyword]

    @property
    def runs(self) -> list[str]:
        return self.of("RUN")

    @property
    def copies(self) -> list[tuple[list[str], str]]:
        """(sources, destination) of each COPY (flags like --chown dropped)."""
        out = []
        for args in self.of("COPY"):
            words = [w for w in shlex.split(args) if not w.startswith("--")]
            out.append((words[:-1], words[-1]))
        return out

    @property
    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for args in self.of("ENV"):
            for word in shlex.split(args):
                key, _, value = word.partition("=")
                out[key] = value
        return out

    def pip_files(self) -> tuple[list[str], list[str]]:
        """The requirement (-r) and constraint (-c) files of its `pip install` RUNs, as paths
        inside the image."""
        reqs: list[str] = []
        cons: list[str] = []
        for run in self.runs:
            words = shlex.split(run.replace("\\\n", " "))
            if "pip" not in words or "install" not in words:
                continue
            for flag, value in zip(words, words[1:], strict=False):
                if flag == "-r":
                    reqs.append(value)
                elif flag == "-c":
                    cons.append(value)
        return reqs, cons

    def source_of(self, image_path: str) -> str:
        """The repository file a COPY put at `image_path` (a file copied into a directory)."""
        for sources, dest in self.copies:
            for src in sources:
                if dest.endswith("/") and image_path == dest + Path(src).name:
                    return src
                if image_path == dest:
                    return src
        raise KeyError(f"no COPY in stage {self.name} puts a file at {image_path}")


@dataclass
class Dockerfile:
    path: Path
    args: dict[str, str]  # global ARG defaults
    stages: dict[str, Stage]

    def stage(self, name: str) -> Stage:
        if name not in self.stages:
            raise KeyError(f"{self.path}: no stage {name!r} (has {', '.join(self.stages)})")
        return self.stages[name]

    def base(self, name: str, args: dict[str, str] | None = None) -> str:
        """A stage's FROM reference with the ARGs (defaults, then `args`) filled in."""
        values = {**self.args, **(args or {})}
        return re.sub(
            r"\$\{(\w+)\}|\$(\w+)",
            lambda m: values[m.group(1) or m.group(2)],
            self.stage(name).base,
        )


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    buf = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        lines.append(buf + stripped)
        buf = ""
    if buf:
        lines.append(buf)
    return lines


def parse(path: Path | str = ROOT / DOCKERFILE) -> Dockerfile:
    path = Path(path)
    args: dict[str, str] = {}
    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for line in _logical_lines(path.read_text()):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword == "FROM":
            words = rest.split()
            words = [w for w in words if not w.startswith("--")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(stages))
            current = Stage(name=name, base=words[0])
            stages[name] = current
        elif current is None:
            if keyword == "ARG":
                key, _, value = rest.partition("=")
                args[key] = value
        else:
            current.instructions.append(Instruction(keyword, rest))
    return Dockerfile(path, args, stages)


def requirement_names(path: Path) -> list[str]:
    """Package names of a requirements file (comments and blank lines dropped)."""
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(re.split(r"[=<>!~\[; ]", line, maxsplit=1)[0])
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(path: Path = ROOT / LOCK) -> dict[str, str]:
    """name (normalized) -> version of every `name==version` line of the lock file."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, _, version = line.partition("==")
            out[_norm(name)] = version.strip()
    return out


def installed_pins(stage: Stage, root: Path = ROOT) -> dict[str, str]:
    """What the stage's pip RUN installs, at the lock's versions: {name: version}."""
    reqs, cons = stage.pip_files()
    pins: dict[str, str] = {}
    for c in cons:
        pins.update(lock_pins(root / stage.source_of(c)))
    out = {}
    for r in reqs:
        for name in requirement_names(root / stage.source_of(r)):
            if _norm(name) not in pins:
                raise ValueError(
                    f"{r}: {name} has no pin in the constraint files {cons}; pin it in "
                    "requirements.lock so the image is reproducible"
                )
            out[name] = pins[_norm(name)]
    return out


WILDCARDS = set("*?[")


def ignore_file(context: Path, dockerfile: Path) -> Path | None:
    """The ignore file the builder reads for this Dockerfile and context (None: none)."""
    for candidate in (
        dockerfile.with_name(dockerfile.name + ".dockerignore"),
        context / ".dockerignore",
    ):
        if candidate.is_file():
            return candidate
    return None


def read_patterns(path: Path | None) -> list[str]:
    """The patterns of an ignore file, as moby's ignorefile.ReadAll returns them."""
    if path is None:
        return []
    out = []
    for raw in path.read_text().splitlines():
        if raw.startswith("#"):
            continue
        line = raw.strip()
        if not line:
            continue
        invert = line.startswith("!")
        if invert:
            line = line[1:].strip()
        if line:
            line = posixpath.normpath(line)
            if len(line) > 1 and line.startswith("/"):
                line = line[1:]
        out.append(f"!{line}" if invert else line)
    return out


def context_files(context: Path, patterns: list[str], dockerfile: str) -> set[str]:
    """Relative paths of the regular files the builder sends (Docker's matcher)."""
    from docker.utils.build import exclude_paths  # noqa: PLC0415 - only when a build is planned

    sent = exclude_paths(str(context), list(patterns), dockerfile=dockerfile)
    return {p.replace("\\", "/") for p in sent if (context / p).is_file()}


@dataclass(frozen=True)
class Source:
    stage: str
    instruction: str  # COPY or ADD
    path: str  # as written, relative to the context


def _stages_of(df: Dockerfile, target: str) -> list[Stage]:
    """The target's stage and every stage it builds on (FROM <stage>, COPY --from=<stage>)."""
    names = list(df.stages)
    if not target:
        target = names[-1]
    seen: list[str] = []
    todo = [target]
    while todo:
        name = todo.pop()
        if name in seen or name not in df.stages:
            continue
        seen.append(name)
        stage = df.stages[name]
        todo.append(stage.base)
        for ins in stage.instructions:
            if ins.keyword in ("COPY", "ADD"):
                for word in shlex.split(ins.args):
                    if word.startswith("--from="):
                        todo.append(word.split("=", 1)[1])
    return [df.stages[n] for n in seen]


def sources(df: Dockerfile, target: str) -> list[Source]:
    """Every COPY/ADD source a target's build takes from the context."""
    out = []
    for stage in _stages_of(df, target):
        for ins in stage.instructions:
            if ins.keyword not in ("COPY", "ADD"):
                continue
            words = shlex.split(ins.args)
            if any(w.startswith("--from=") for w in words):
                continue
            args = [w for w in words if not w.startswith("--")]
            for src in args[:-1]:
                if "://" in src or src.startswith("git@"):
                    continue
                out.append(Source(stage.name, ins.keyword, src))
    return out


def files_under(context: Path, src: str) -> list[str]:
    """Every regular file of the checkout a source names (itself, or below it; a wildcard
    source matched a path component at a time, as the builder does)."""
    clean = posixpath.normpath(src.lstrip("/")) if src.strip("/") else "."
    first_wild = next((i for i, c in enumerate(clean) if c in WILDCARDS), None)
    base = clean if first_wild is None else posixpath.dirname(clean[:first_wild])
    root = context / base if base not in ("", ".") else context
    if root.is_file():
        candidates = [root]
    elif root.is_dir():
        candidates = [p for p in root.rglob("*") if p.is_file()]
    else:
        candidates = []
    depth = clean.count("/") + 1  # a wildcard source's components
    out = []
    for p in candidates:
        parts = p.relative_to(context).parts
        if parts[0] == ".git":
            continue
        if first_wild is None or fnmatch.fnmatchcase("/".join(parts[:depth]), clean):
            out.append("/".join(parts))
    return sorted(out)


def build_reads(
    context: Path, dockerfile: Path, target: str
) -> list[tuple[Source, list[str], set[str]]]:
    """What a build of `target` (empty: the last stage) reads from its context, per COPY/ADD
    source: (the source, every file of the checkout it names, those of them in the context
    Docker is sent: the build's ignore file applied by Docker's own matcher)."""
    try:
        rel_df = dockerfile.resolve().relative_to(context.resolve()).as_posix()
    except ValueError:
        rel_df = "Dockerfile"
    sent = context_files(context, read_patterns(ignore_file(context, dockerfile)), rel_df)
    out = []
    for src in sources(parse(dockerfile), target):
        named = files_under(context, src.path)
        out.append((src, named, {f for f in named if f in sent}))
    return out


def content_digest(root: Path, target: str) -> str:
    """A hash of everything a build of `target` reads: the Dockerfile, its ignore file and
    every file its COPY sources take from the context Docker is sent (`build_reads`), so the
    image tag changes exactly when what the build reads does."""
    path = root / DOCKERFILE
    files = {DOCKERFILE.as_posix()}
    ignore = ignore_file(root, path)
    if ignore is not None:
        files.add(ignore.relative_to(root).as_posix())
    for _, _, sent in build_reads(root, path, target):
        files |= sent
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return h.hexdigest()
