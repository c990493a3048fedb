"""A cosmic-ray filter: skip the mutants that only change a type annotation or the bare `*`
that makes the following parameters keyword-only.

Why: in a module with `from __future__ import annotations` annotations are never evaluated,
so `str | None` as `str - None` (12 operators per `|`) changes nothing a test could see, and
`def f(a, *, b)` as `def f(a, /, b)` only matters to a caller passing `b` positionally, which
the keyword-only marker already forbids. Such mutants are equivalent by construction; running
them cost a whole test run each (a fifth of a typed module's mutants) and their survival
said nothing. In a module without that import, annotations are evaluated at import and a
mutant there fails to import: it is left to run (and is counted as incompetent).

Runs on a session database after `cosmic-ray init`, with cosmic-ray's own Python:
`.mutation-venv/bin/python mutation/filter_annotations.py SESSION.sqlite`. Applied to a
database that already has results, it re-marks those mutants as skipped.
"""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

from cosmic_ray.tools.filters.filter_app import FilterApp
from cosmic_ray.work_item import WorkerOutcome, WorkResult

OUTPUT = "Filtered: annotation or keyword-only marker (equivalent)"

Pos = tuple[int, int]  # (line 1-based, column 0-based), as cosmic-ray stores positions


def _span(node: ast.AST) -> tuple[Pos, Pos]:
    return (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]


@cache
def equivalent_spans(path: Path) -> tuple[list[tuple[Pos, Pos]], set[Pos]]:
    """The source spans of every annotation, and the positions of every bare `*` marker."""
    source = path.read_text()
    tree = ast.parse(source)
    postponed = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    spans: list[tuple[Pos, Pos]] = []
    markers: set[Pos] = set()
    lines = source.splitlines()
    for node in ast.walk(tree):
        if postponed:
            if isinstance(node, ast.arg) and node.annotation is not None:
                spans.append(_span(node.annotation))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
                spans.append(_span(node.returns))
            elif isinstance(node, ast.AnnAssign):
                spans.append(_span(node.annotation))
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.args.kwonlyargs
            and node.args.vararg is None
        ):
            # the bare `*` sits just before the first keyword-only parameter
            first = node.args.kwonlyargs[0]
            line, col = first.lineno, first.col_offset
            while True:
                text = lines[line - 1][:col]
                star = text.rfind("*")
                if star >= 0:
                    markers.add((line, star))
                    break
                line, col = line - 1, len(lines[line - 2])
    return spans, markers


def _inside(start: Pos, end: Pos, spans: list[tuple[Pos, Pos]]) -> bool:
    return any(s <= start and end <= e for s, e in spans)


class AnnotationFilter(FilterApp):
    def description(self) -> str:
        return __doc__ or ""

    def filter(self, work_db, args) -> None:  # noqa: ANN001 (cosmic-ray's interface)
        skip = []
        already = {
            item.job_id
            for item, result in work_db.completed_work_items
            if result.worker_outcome == WorkerOutcome.SKIPPED and result.output != OUTPUT
        }  # skipped by another filter (lines, operators): left as they are
        for item in work_db.work_items:
            if item.job_id in already:
                continue
            for m in item.mutations:
                spans, markers = equivalent_spans(Path(m.module_path))
                start, end = tuple(m.start_pos), tuple(m.end_pos)
                if _inside(start, end, spans) or start in markers:
                    skip.append(item.job_id)
        if skip:
            work_db.set_multiple_results(
                skip, WorkResult(output=OUTPUT, worker_outcome=WorkerOutcome.SKIPPED)
            )
        print(f"filter_annotations: {len(skip)} mutants skipped as equivalent")


if __name__ == "__main__":
    sys.exit(AnnotationFilter().main())
