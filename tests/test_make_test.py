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
