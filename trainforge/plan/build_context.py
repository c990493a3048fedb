"""The build-context rehearsal: is every file a Dockerfile copies in the context Docker is sent?

A COPY whose source the ignore file drops fails the build at `pulumi up`, after a CLEAN
preview; what the build reads is `trainforge.jobs.dockerfile.build_reads` (the model the
image's content tag hashes too), judged here (docs/rehearsals.md, "Build context").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainforge.jobs import dockerfile as dockerfile_mod
from trainforge.jobs.dockerfile import Source


def _is_cache(rel: str) -> bool:
    parts = rel.split("/")
    return "__pycache__" in parts or rel.endswith(".pyc")


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


def judge(context: Path, dockerfile: Path, target: str) -> tuple[Path | None, list[Problem]]:
    """(the ignore file read, every source whose files are not all in the context)."""
    problems = []
    for src, named, sent in dockerfile_mod.build_reads(context, dockerfile, target):
        wanted = [f for f in named if not _is_cache(f)]
        if not wanted:
            problems.append(Problem(src, (), absent=True))
            continue
        missing = tuple(f for f in wanted if f not in sent)
        if missing:
            problems.append(Problem(src, missing, absent=False, total=len(wanted)))
    return dockerfile_mod.ignore_file(context, dockerfile), problems
