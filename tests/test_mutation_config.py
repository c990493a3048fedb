"""mutation/modules.toml names modules, functions and test files that exist.

`make mutation` is not run in CI (hours on two cores), so a rename in the code would otherwise
be found only by the next person who runs it; this reads the file as mutation/run.py does."""

from __future__ import annotations

import tomllib

from tests.conftest import ROOT, load_script


def _run_module():
    return load_script("mutation/run.py", "mutation_run")


def test_every_module_function_and_test_file_of_the_mutation_config_exists():
    run = _run_module()
    modules = tomllib.loads((ROOT / "mutation" / "modules.toml").read_text())["modules"]
    problems = []
    for key, spec in modules.items():
        path = ROOT / spec["path"]
        if not path.is_file():
            problems.append(f"{key}: no {spec['path']}")
            continue
        try:
            run.function_lines(path, spec.get("functions") or [])
        except SystemExit as e:
            problems.append(f"{key}: {e}")
        problems += [
            f"{key}: no test file {t}"
            for t in spec["tests"]
            if t.startswith("tests/") and not (ROOT / t.split("::")[0]).exists()
        ]
    assert not problems, "\n".join(problems)
