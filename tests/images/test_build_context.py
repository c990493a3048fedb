"""The build-context rehearsal: every COPY/ADD source is in the context Docker is sent.

The context is computed with Docker's own matcher (docker-py's `exclude_paths`, a port of
moby's patternmatcher), after the ignore file pulumi-docker-build reads; the plan turns a
source it drops into TRAINFORGE_BUILD_CONTEXT. Broken on purpose here: the trainforge/core
exception dropped from the runtime image's ignore file (the bug a CLEAN plan once hid: both
builds failed with `"/trainforge/core": not found` at `pulumi up`).
"""

from __future__ import annotations

import pathlib
import shutil

import pytest

from trainforge.jobs import dockerfile, runtime_images
from trainforge.plan.checks import images as image_check
from trainforge.plan.core import plan_project

ROOT = pathlib.Path(__file__).resolve().parents[2]
DF = ROOT / dockerfile.DOCKERFILE
IGNORE = DF.with_name(DF.name + ".dockerignore")


def _tree(root: pathlib.Path, files: list[str]) -> None:
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text(f)


def test_docker_matcher_semantics(tmp_path):
    """docker-py's matcher on cases whose outcome Docker documents (docs.docker.com/build/
    concepts/context/#dockerignore-files: the last matching line wins; `!` re-includes;
    `**` matches any number of directories)."""
    _tree(tmp_path, ["README.md", "README-secret.md", "other.md", "a/b/__pycache__/x.pyc"])
    _tree(tmp_path, ["a/b/c.py", "keep/one.py", "keep/sub/two.py", "drop/three.py"])
    sent = dockerfile.context_files(
        tmp_path, ["*.md", "!README*.md", "README-secret.md"], "Dockerfile"
    )
    assert {"README.md"} == {p for p in sent if p.endswith(".md")}
    sent = dockerfile.context_files(
        tmp_path, ["*.md", "README-secret.md", "!README*.md"], "Dockerfile"
    )
    assert {"README.md", "README-secret.md"} == {p for p in sent if p.endswith(".md")}
    # `*` then an exception for a directory: everything below it comes back, nothing else
    sent = dockerfile.context_files(tmp_path, ["*", "!keep/", "**/__pycache__"], "Dockerfile")
    assert sent == {"keep/one.py", "keep/sub/two.py"}
    sent = dockerfile.context_files(tmp_path, ["**/__pycache__"], "Dockerfile")
    assert "a/b/c.py" in sent and "a/b/__pycache__/x.pyc" not in sent


def test_ignore_lines_are_read_as_moby_reads_them(tmp_path):
    f = tmp_path / "x.dockerignore"
    f.write_text("# comment\n\n  /a/../b/  \n!/c/./d\n! e\n")
    assert dockerfile.read_patterns(f) == ["b", "!c/d", "!e"]


def test_the_dockerfile_specific_ignore_file_wins(tmp_path):
    """pulumi-docker-build v0.0.22 (`getIgnorePatterns`): `<Dockerfile>.dockerignore` first,
    then the context root's `.dockerignore`."""
    df = tmp_path / "sub" / "Dockerfile"
    _tree(tmp_path, ["sub/Dockerfile", ".dockerignore"])
    assert dockerfile.ignore_file(tmp_path, df) == tmp_path / ".dockerignore"
    _tree(tmp_path, ["sub/Dockerfile.dockerignore"])
    assert dockerfile.ignore_file(tmp_path, df) == tmp_path / "sub/Dockerfile.dockerignore"


@pytest.mark.parametrize("target", [runtime_images.STANDARD, runtime_images.EFA])
def test_every_runtime_copy_source_is_in_the_context(target):
    ignore, problems = image_check.judge(ROOT, DF, target)
    assert ignore == IGNORE
    assert problems == []
    paths = {s.path for s in dockerfile.sources(dockerfile.parse(DF), target)}
    assert {"trainforge/core", "trainforge/training", "requirements.lock"} <= paths


def _copy_of_the_build(tmp_path: pathlib.Path) -> pathlib.Path:
    """The runtime build's files (Dockerfile, ignore file and every COPY source) in a tree."""
    for src in ("images/runtime", "requirements.lock", "trainforge/__init__.py"):
        s, d = ROOT / src, tmp_path / src
        d.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if s.is_dir() else shutil.copy)(s, d)
    for src in ("trainforge/core", "trainforge/training"):
        shutil.copytree(ROOT / src, tmp_path / src, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_a_dropped_ignore_exception_is_caught(tmp_path):
    """Break it: the trainforge/core exception removed from the ignore file."""
    root = _copy_of_the_build(tmp_path)
    ignore = root / "images/runtime/Dockerfile.dockerignore"
    assert image_check.judge(root, root / dockerfile.DOCKERFILE, "runtime")[1] == []
    ignore.write_text(ignore.read_text().replace("!trainforge/core/\n", ""))
    _, problems = image_check.judge(root, root / dockerfile.DOCKERFILE, "runtime")
    (p,) = problems
    assert p.source.path == "trainforge/core" and not p.absent
    assert p.message("x") == (
        "COPY trainforge/core (stage runtime): x keeps it out of the build context: the build "
        'fails with "/trainforge/core": not found'
    )


def test_a_partly_dropped_source_and_a_missing_one_are_caught(tmp_path):
    root = _copy_of_the_build(tmp_path)
    ignore = root / "images/runtime/Dockerfile.dockerignore"
    ignore.write_text(ignore.read_text() + "trainforge/core/data\n")
    (p,) = image_check.judge(root, root / dockerfile.DOCKERFILE, "runtime")[1]
    data = sorted(
        f.relative_to(root).as_posix() for f in (root / "trainforge/core/data").rglob("*")
    )
    assert data and p.missing == tuple(data)  # every file of the dropped folder, no other
    assert f"keeps {len(data)} of its files out" in p.message("x")
    # a Python cache the ignore file drops is not a loss (the content tag skips it too)
    (root / "trainforge/core/__pycache__").mkdir()
    (root / "trainforge/core/__pycache__/x.pyc").write_bytes(b"")
    ignore.write_text(ignore.read_text().replace("trainforge/core/data\n", ""))
    assert image_check.judge(root, root / dockerfile.DOCKERFILE, "runtime")[1] == []
    shutil.rmtree(root / "trainforge/training")
    (p,) = image_check.judge(root, root / dockerfile.DOCKERFILE, "runtime")[1]
    assert p.absent and p.source.path == "trainforge/training"


def test_the_content_tag_hashes_what_the_build_reads(tmp_path):
    """The image tag's hash follows `build_reads`: a file a COPY takes into the context changes
    it; a file the ignore file keeps out (a cache, a dropped folder) or no COPY names does not."""
    root = _copy_of_the_build(tmp_path)
    before = dockerfile.content_digest(root, "runtime")
    assert dockerfile.content_digest(root, "runtime-efa") == before  # the same files copied
    (root / "trainforge/core/__pycache__").mkdir()
    (root / "trainforge/core/__pycache__/x.pyc").write_bytes(b"x")
    (root / "README.md").write_text("no COPY names it")
    assert dockerfile.content_digest(root, "runtime") == before
    (root / "trainforge/training/__init__.py").write_text("# edited\n", "utf-8")
    assert dockerfile.content_digest(root, "runtime") != before
    ignore = root / "images/runtime/Dockerfile.dockerignore"
    ignore.write_text(ignore.read_text() + "trainforge/core/data\n")
    dropped = dockerfile.content_digest(root, "runtime")
    data = next(f for f in (root / "trainforge/core/data").rglob("*") if f.is_file())
    data.write_text("not sent to Docker")
    assert dockerfile.content_digest(root, "runtime") == dropped


def test_from_stage_and_url_sources_are_not_context_sources(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text(
        "FROM a AS build\nCOPY src/ /src/\n"
        "FROM b AS other\nCOPY never.txt /x\n"
        "FROM build AS final\nCOPY --from=build /src /src\n"
        "ADD https://example.com/x.tgz /x\nADD --chown=1:1 conf/*.ini /etc/\n"
    )
    paths = [s.path for s in dockerfile.sources(dockerfile.parse(df), "final")]
    assert sorted(paths) == ["conf/*.ini", "src/"]
    _tree(tmp_path, ["src/a.py", "conf/a.ini", "conf/b.txt"])
    (tmp_path / "Dockerfile.dockerignore").write_text("*.txt\nconf/b*\n")
    assert image_check.judge(tmp_path, df, "final")[1] == []
    (tmp_path / "Dockerfile.dockerignore").write_text("conf/a*\n")
    (p,) = image_check.judge(tmp_path, df, "final")[1]
    assert p.source.path == "conf/*.ini" and p.missing == ("conf/a.ini",)


def test_the_plan_reports_a_dropped_source(tmp_path, monkeypatch):
    """The plan, on a copy of the project whose ignore file drops trainforge/core: a finding
    per build (and CLEAN on the shipped tree, which test_image_plan's plans show). The copy's
    files are what the builds read (`dockerfile.ROOT`, the build's context)."""
    root = tmp_path / "proj"
    shutil.copytree(
        ROOT,
        root,
        ignore=shutil.ignore_patterns(".git", ".venv", "build", "__pycache__", ".*cache*", "runs"),
        symlinks=True,
    )
    ignore = root / "images/runtime/Dockerfile.dockerignore"
    ignore.write_text(ignore.read_text().replace("!trainforge/core/\n", ""))
    monkeypatch.setattr(dockerfile, "ROOT", root)
    result = plan_project(root, "dev", standins=False)
    found = [v for v in result.failing if v.rule == "TRAINFORGE_BUILD_CONTEXT"]
    assert found, [v.rule for v in result.failing]
    assert all('"/trainforge/core": not found' in v.message for v in found)
    section = next(s for s in result.sections if s.title.startswith("Images"))
    assert any("1 NOT in the context" in line for line in section.lines)
