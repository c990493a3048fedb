"""reach.entry_files: the shipped files the entry runs, resolved as Python finds them in the
pod (the script's folder is sys.path[0], the shipped root the working directory and first on
PYTHONPATH; packages through __init__.py; relative imports from the file's package)."""

from __future__ import annotations

from trainforge.jobs.reach import entry_files
from trainforge.jobs.spec import parse_job


def _entry(image: str | None = None, **ep):
    raw = {"name": "j", "team": "research", "pool": "p", "entrypoint": ep}
    if image:
        raw["image"] = image
    return parse_job(raw, "j").entrypoint


def _reached(entry, files) -> list[str]:
    return [p for p, _ in entry_files(entry, files)]


def test_a_module_entry_reaches_its_packages_and_relative_imports():
    entry = _entry(module="pkg.train", codeDir="src")
    files = [
        ("pkg/__init__.py", ""),
        ("pkg/train.py", "from .loop import run\nfrom . import util\n"),
        ("pkg/loop.py", "import trainforge.training\n"),
        ("pkg/util.py", ""),
        ("pkg/unused.py", "import mlflow\n"),
        ("prog.py", "import pulumi\nimport trainforge.jobs\n"),
    ]
    assert _reached(entry, files) == ["pkg/__init__.py", "pkg/loop.py", "pkg/train.py",
                                      "pkg/util.py"]  # fmt: skip


def test_a_script_in_a_folder_imports_beside_itself_first_then_from_the_root():
    entry = _entry(script="repo/jobs/train.py", codeDir="repo")
    assert entry.entry_file == "jobs/train.py"
    files = [
        ("jobs/train.py", "import helper\nimport common.io\n"),
        ("jobs/helper.py", ""),
        ("helper.py", "import trainforge\n"),  # shadowed by jobs/helper.py (sys.path[0])
        ("common/__init__.py", ""),
        ("common/io.py", ""),
    ]
    assert _reached(entry, files) == [
        "common/__init__.py", "common/io.py", "jobs/helper.py", "jobs/train.py"]  # fmt: skip


def test_what_cannot_be_named_is_all_of_it():
    files = [("a.py", "import trainforge\n"), ("b.py", "")]
    assert _reached(_entry(image="my/img:1", command=["python", "a.py"], codeDir="x"), files) == [
        "a.py",
        "b.py",
    ]
    assert _reached(None, files) == ["a.py", "b.py"]
    assert _reached(_entry(script="x/train.py"), files) == ["a.py", "b.py"]  # not shipped here
