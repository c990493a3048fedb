"""`make test`'s parallel runner: its pin is pyproject.toml's, and it stays out of the lock."""

import pathlib
import re
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _make_var(name: str) -> str:
    m = re.search(rf"^{name}\s*:?=\s*(.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert m, f"Makefile: no {name}"
    return m.group(1).strip()


def test_the_makefile_installs_the_xdist_pyproject_pins():
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pinned = {p for p in dev["dev"] if p.startswith("pytest-xdist==")}
    assert pinned and pinned <= set(_make_var("TEST_PINS").split())


def test_the_makefile_installs_the_coverage_pyproject_pins():
    """A coverage run's tool, and tests/plan/test_plan_standin_child.py's, is in `make venv`."""
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pinned = {p for p in dev["dev"] if p.startswith("coverage==")}
    assert pinned and pinned <= set(_make_var("TEST_PINS").split())


def test_the_runtime_images_constraints_do_not_carry_test_tools():
    """requirements.lock is the image's constraints file (its content digest names the image):
    a test tool pinned there would rebuild every job's image for nothing."""
    lock = (ROOT / "requirements.lock").read_text().lower()
    for pin in _make_var("TEST_PINS").split():
        assert pin.split("==")[0].lower() + "==" not in lock


def test_make_test_runs_the_suite_on_the_workers_a_module_per_worker():
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert "-m pytest -q -n $(TEST_WORKERS) --dist loadfile" in recipe.group(1)
    assert re.search(r"^TEST_WORKERS \?= 2$", (ROOT / "Makefile").read_text(), re.M)


def test_make_test_lints_first_the_formatting_included():
    """`make test` (what CI runs) runs `make lint`: an unformatted file fails it (one landed
    while `make test` ran `ruff check` only)."""
    makefile = (ROOT / "Makefile").read_text()
    assert "lint" in re.search(r"^test:(.*)$", makefile, re.M).group(1).split()
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "-m ruff check ." in lint and "-m ruff format --check ." in lint


def test_the_longest_files_run_first_and_every_file_keeps_its_order():
    """conftest.RUN_FIRST names files that exist (a renamed one would quietly run last again);
    the hook moves their tests to the front, in RUN_FIRST's order, and changes no other order."""
    from types import SimpleNamespace

    from tests.conftest import RUN_FIRST, pytest_collection_modifyitems

    assert all((ROOT / path).is_file() for path in RUN_FIRST), RUN_FIRST
    assert len(set(RUN_FIRST)) == len(RUN_FIRST)
    ids = [
        "tests/a.py::t1",
        f"{RUN_FIRST[1]}::x",
        "tests/b.py::t2",
        f"{RUN_FIRST[0]}::y",
        f"{RUN_FIRST[1]}::z",
        "tests/a.py::t3",
    ]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == [ids[3], ids[1], ids[4], ids[0], ids[2], ids[5]]


def test_xdist_sends_the_files_in_collection_order_not_by_test_count():
    """conftest's pytest_configure turns pytest-xdist's `loadscope-reorder` off: the file
    scheduler `make test` uses sends the files in the order collected (RUN_FIRST's first), not
    the files with the most tests first (xdist's default, which sent 1-test files last)."""
    from types import SimpleNamespace

    from xdist.scheduler import LoadFileScheduling

    from tests.conftest import pytest_configure

    collection = ["tests/long.py::t", *(f"tests/many.py::t{i}" for i in range(3))]
    collection += ["tests/mid.py::t1", "tests/mid.py::t2", "tests/last.py::t"]
    sent: list[str] = []

    class Node:
        shutting_down = False
        gateway = SimpleNamespace(id="gw")

        def send_runtest_some(self, indexes: list[int]) -> None:
            sent.extend(collection[i].split("::")[0] for i in indexes)

        def shutdown(self) -> None:
            self.shutting_down = True

    option = SimpleNamespace(loadscopereorder=True, tx=["2*popen"])
    config = SimpleNamespace(option=option, getvalue=lambda name: getattr(option, name))
    pytest_configure(config)
    assert option.loadscopereorder is False
    scheduler = LoadFileScheduling(config)
    nodes = [Node(), Node()]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    # the first file to each worker, then a second to the one left with <= 2 pending tests
    assert list(dict.fromkeys(sent)) == ["tests/long.py", "tests/many.py", "tests/mid.py"]
    assert list(scheduler.workqueue) == ["tests/last.py"]


def test_make_test_sends_each_document_s_commands_as_a_unit_and_every_other_file_whole():
    """`make test`'s scheduler (conftest's pytest_xdist_make_scheduler, xdist's own file
    scheduler with tests/test_docs_run.py in parts): each document's commands go to one worker,
    in document order, and the documents to either worker, so the file no longer holds one
    worker for all of them; every other file still goes whole, in collection order."""
    from types import SimpleNamespace

    from tests.conftest import pytest_configure, pytest_xdist_make_scheduler

    docs = "tests/test_docs_run.py"
    collection = [
        f"{docs}::test_most_doc_commands_run",
        f"{docs}::test_doc_command_runs[README.md:python -m trainforge plan --stack dev]",
        f"{docs}::test_doc_command_runs[README.md:python -m trainforge run-local --stack dev x]",
        f"{docs}::test_doc_command_runs[jobs.md:python -m trainforge import a.yaml --out j]",
        f"{docs}::test_doc_command_runs[jobs.md:python -m trainforge plan --program j/p.py]",
        "tests/long.py::t[a:b]",
        "tests/long.py::t[c:d]",
        "tests/last.py::t",
    ]
    sent: dict[str, list[str]] = {}

    class Node:
        shutting_down = False

        def __init__(self, name: str) -> None:
            self.gateway = SimpleNamespace(id=name)

        def send_runtest_some(self, indexes: list[int]) -> None:
            sent.setdefault(self.gateway.id, []).extend(collection[i] for i in indexes)

        def shutdown(self) -> None:
            self.shutting_down = True

    option = SimpleNamespace(loadscopereorder=True, tx=["2*popen"], dist="loadfile")
    config = SimpleNamespace(option=option, getvalue=lambda name: getattr(option, name))
    pytest_configure(config)

    class Log:
        def __getattr__(self, name: str):
            return self

        def __call__(self, *args: object) -> None:
            pass

    scheduler = pytest_xdist_make_scheduler(config, Log())
    gw0, gw1 = Node("gw0"), Node("gw1")
    for node in (gw0, gw1):
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    for index in range(len(collection)):  # each worker finishes what it has, in order
        node = gw0 if collection[index] in sent["gw0"] else gw1
        scheduler.mark_test_complete(node, index)
    # each part and each other file whole on one worker, in order, the parts first
    assert sent == {
        "gw0": [collection[0], *collection[3:5], collection[7]],
        "gw1": [*collection[1:3], *collection[5:7]],
    }
    option.dist = "load"
    assert pytest_xdist_make_scheduler(config, Log()) is None  # another --dist: xdist's


def test_the_schedule_replay_sends_what_make_test_sends_on_a_simulated_clock(tmp_path):
    """bench/suite_schedule.py (docs/performance.md, wave 21): a junit XML's seconds replayed
    through make test's scheduler. The documents of tests/test_docs_run.py go to both workers
    (12 s each way), where xdist's plain file scheduler keeps the file whole on one (24 s)."""
    from tests.conftest import load_script

    bench = load_script("bench/suite_schedule.py", "suite_schedule")
    docs = "tests/test_docs_run.py::test_doc_command_runs"
    ids = [f"{docs}[README.md:a]", f"{docs}[README.md:b]", f"{docs}[jobs.md:c]"]
    ids += [f"{docs}[jobs.md:d]", "tests/test_cli.py::t1", "tests/test_cli.py::t2"]
    cases = "".join(
        f'<testcase classname="{i.split("::")[0][:-3].replace("/", ".")}" '
        f'name="{i.split("::", 1)[1]}" time="{t}"/>'
        for i, t in zip(ids, [6, 6, 6, 6, 0.5, 0.5], strict=True)
    )
    (tmp_path / "d.xml").write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
    took = bench.durations(tmp_path / "d.xml")
    assert took[ids[0]] == 6 and took[ids[4]] == 0.5  # junit's names back to node ids
    ends, _ = bench.replay(ids, took, plain=False, workers=2)
    assert sorted(ends) == [12.0, 13.0]
    ends, _ = bench.replay(ids, took, plain=True, workers=2)
    assert sorted(ends) == [1.0, 24.0]
