"""Read the runtime image's Dockerfile: its stages, base images, what they copy and install.

Why parse it instead of restating it: the image facts the plan shows (which mlflow, which
boto3, which base) and the offline proof that the image's Python layer works
(tests/images/test_runtime_image.py) must follow the Dockerfile as it is, so that an edit to
the Dockerfile changes what the plan says and what the test builds. Only the instructions the
runtime Dockerfile uses are understood (ARG, FROM, COPY, RUN, ENV, USER, LABEL); anything else
is kept as is.
"""

from __future__ import annotations

import hashlib
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


def content_digest(root: Path = ROOT, dockerfile: Path = DOCKERFILE) -> str:
    """A hash of everything the build reads: the Dockerfile, its ignore file and every file
    its COPY instructions take from the repository (directories walked, caches skipped), so the
    image tag changes exactly when the content does."""
    df = parse(root / dockerfile)
    h = hashlib.sha256()
    files = {dockerfile, dockerfile.with_name(dockerfile.name + ".dockerignore")}
    for stage in df.stages.values():
        for sources, _ in stage.copies:
            for src in sources:
                p = root / src
                if p.is_dir():
                    files.update(
                        f.relative_to(root)
                        for f in p.rglob("*")
                        if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc"
                    )
                else:
                    files.add(Path(src))
    for rel in sorted(files, key=str):
        p = root / rel
        if p.exists():
            h.update(str(rel).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()
