"""The build-context rehearsal: is every file a Dockerfile copies in the context Docker is sent?

A COPY whose source the ignore file drops fails the build at `pulumi up`, after a CLEAN
preview; so the context is computed the way the builder does (the ignore file
pulumi-docker-build reads, Docker's own matcher) and each COPY/ADD source checked against it
(docs/rehearsals.md, "Build context", says which versions and rules).
"""

from __future__ import annotations

import fnmatch
import posixpath
import shlex
from dataclasses import dataclass
from pathlib import Path

from trainforge.jobs import dockerfile as dockerfile_mod

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


def _is_cache(rel: str) -> bool:
    parts = rel.split("/")
    return "__pycache__" in parts or rel.endswith(".pyc")


@dataclass(frozen=True)
class Source:
    stage: str
    instruction: str  # COPY or ADD
    path: str  # as written, relative to the context


@dataclass(frozen=True)
class Problem:
    source: Source
    missing: tuple[str, ...]  # files the build should carry that the context lacks
    absent: bool  # the checkout has nothing at the source path
    total: int = 0  # files under the source the build should carry

    def message(self, ignore: str) -> str:
        where = f"{self.source.instruction} {self.source.path} (stage {self.source.stage})"
        if self.absent:
            return f"{where}: nothing at that path in the build context's directory"
        if len(self.missing) == self.total:
            return (
                f'{where}: {ignore} keeps it out of the build context: the build fails with "'
                f'/{self.source.path.strip("/")}": not found'
            )
        shown = ", ".join(self.missing[:3]) + (" ..." if len(self.missing) > 3 else "")
        return (
            f"{where}: {ignore} keeps {len(self.missing)} of its files out of the build "
            f"context ({shown}): the image is built without them"
        )


def _stages_of(df: dockerfile_mod.Dockerfile, target: str) -> list[dockerfile_mod.Stage]:
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


def sources(df: dockerfile_mod.Dockerfile, target: str) -> list[Source]:
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


def _under(rel: str, src: str) -> bool:
    src = posixpath.normpath(src.lstrip("/")) if src.strip("/") else "."
    if src == ".":
        return True
    if WILDCARDS & set(src):
        parts = rel.split("/")
        depth = src.count("/") + 1
        return len(parts) >= depth and fnmatch.fnmatchcase("/".join(parts[:depth]), src)
    return rel == src or rel.startswith(src + "/")


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
    out = []
    for p in candidates:
        rel = p.relative_to(context).as_posix()
        if rel.split("/")[0] == ".git":
            continue
        if _under(rel, clean):
            out.append(rel)
    return sorted(out)


def judge(context: Path, dockerfile: Path, target: str) -> tuple[Path | None, list[Problem]]:
    """(the ignore file read, every source whose files are not all in the context)."""
    df = dockerfile_mod.parse(dockerfile)
    ignore = ignore_file(context, dockerfile)
    try:
        rel_df = dockerfile.resolve().relative_to(context.resolve()).as_posix()
    except ValueError:
        rel_df = "Dockerfile"
    sent = context_files(context, read_patterns(ignore), rel_df)
    problems = []
    for src in sources(df, target):
        wanted = [f for f in files_under(context, src.path) if not _is_cache(f)]
        if not wanted:
            problems.append(Problem(src, (), absent=True))
            continue
        missing = tuple(f for f in wanted if f not in sent)
        if missing:
            problems.append(Problem(src, missing, absent=False, total=len(wanted)))
    return ignore, problems
