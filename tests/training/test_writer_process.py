"""Where async checkpoint writes run for a script run by path: read from the script's source
(`checkpoint.spawn_safe_script`), so a guarded script (the bundled `resumable` example) uses
DCP's process and is not told to follow advice it already follows."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainforge.training.checkpoint import spawn_safe_script

ROOT = Path(__file__).resolve().parents[2]


def test_the_bundled_resumable_example_is_spawn_safe() -> None:
    assert spawn_safe_script(str(ROOT / "examples/resumable/train.py"))


@pytest.mark.parametrize(
    ("source", "safe"),
    [
        (
            '"""doc."""\nimport os\nX = 3\ndef main():\n    pass\nif __name__ == "__main__":\n    main()\n',
            True,
        ),
        ('if "__main__" == __name__:\n    main()\n', True),
        ("import os\nmain()\n", False),  # trains again in the spawned process
        ('def main():\n    pass\nmodel = build()\nif __name__ == "__main__":\n    main()\n', False),
        ("def main():\n    pass\n", False),  # no guard: nothing says where its work runs
        ("def (:\n", False),  # unparsable
    ],
)
def test_spawn_safe_reads_the_guard(tmp_path: Path, source: str, safe: bool) -> None:
    script = tmp_path / "train.py"
    script.write_text(source)
    assert spawn_safe_script(str(script)) is safe


def test_a_missing_script_is_not_safe(tmp_path: Path) -> None:
    assert not spawn_safe_script(str(tmp_path / "gone.py"))
