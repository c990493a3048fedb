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
