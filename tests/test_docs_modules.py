"""docs/jobs.md's Modules table names files that exist (it listed a `contract.py` under
trainforge/jobs/ that lives in trainforge/core/), and the names it says they define."""

from __future__ import annotations

import re

from tests.conftest import ROOT

JOBS_MD = (ROOT / "docs" / "jobs.md").read_text(encoding="utf-8")


def _rows() -> list[tuple[str, str]]:
    table = JOBS_MD.split("## Modules", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+\.py)` \| (.*) \|$", table, re.M)


def test_every_module_the_table_names_exists():
    rows = _rows()
    assert len(rows) >= 15  # the table was found
    for name, _ in rows:
        path = ROOT / name if "/" in name else ROOT / "trainforge" / "jobs" / name
        assert path.is_file(), f"docs/jobs.md Modules: {name}: no {path.relative_to(ROOT)}"


def test_the_functions_the_table_names_are_defined_in_their_module():
    """`resolve_job`, `pod_templates`, `local_argv_for_job`, ...: each backticked snake_case
    name of a row (a function's; `volumes` is a stack key) is defined in its module."""
    for name, what in _rows():
        path = ROOT / name if "/" in name else ROOT / "trainforge" / "jobs" / name
        source = path.read_text(encoding="utf-8")
        for ident in re.findall(r"`([a-z_][a-z0-9_]+)(?:\([^`]*\))?`", what):
            if ident.startswith("__") or "_" not in ident:  # `__main__`, a key like `volumes`
                continue
            defined = re.search(rf"^(?:def|class) {ident}\b|^{ident}\b", source, re.M)
            assert defined, f"docs/jobs.md Modules: {name} says `{ident}`; not defined there"


def test_the_gpu_catalogs_readers_exist_and_define_what_the_table_names():
    """docs/gpu-catalog.md's "Read by" column: each module it names (under trainforge/, or
    tools/) exists and reads the catalog, and each Python name it gives after a module
    (`RDMA_FAMILIES`, `fp8_capable`: upper case, or snake_case) is defined in that module;
    camelCase names are the catalog's keys (`fp8Flops`)."""
    doc = (ROOT / "docs" / "gpu-catalog.md").read_text(encoding="utf-8")
    table = doc.split("| Section | Key | Read by |", 1)[1].split("\n\n", 1)[0]
    cells = [row.strip().strip("|").rsplit("|", 1)[-1] for row in table.splitlines()[1:]]
    assert len(cells) >= 8, cells  # the table was found
    modules, names = set(), 0
    for cell in cells:
        parts = re.split(r"`([a-z_/]+\.py)`", cell)  # text, module, text after it, ...
        for module, after in zip(parts[1::2], parts[2::2], strict=True):
            path = ROOT / module if module.startswith("tools/") else ROOT / "trainforge" / module
            assert path.is_file(), f"docs/gpu-catalog.md names {module}: no {path}"
            source = path.read_text(encoding="utf-8")
            assert "catalog" in source, f"docs/gpu-catalog.md: {module} does not read the catalog"
            modules.add(module)
            for name in re.findall(r"`([a-z][a-z0-9]*_[a-z0-9_]+|[A-Z][A-Z0-9_]+)`", after):
                defined = re.search(rf"^(?:def {name}\b|{name}\b)", source, re.M)
                assert defined, f"docs/gpu-catalog.md: {module} defines no `{name}`"
                names += 1
    assert len(modules) >= 10 and names >= 5, (modules, names)


def test_architecture_md_component_tree_is_the_plans():
    """docs/architecture.md's tree of components: what TrainingPlatform holds and what sits
    beside it is what the prod and fleet plans record (it lacked ImageCache and Budgets), and
    each names its module."""
    from tests.conftest import shipped_plan

    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    tree = doc.split("```\nTrainingPlatform ", 1)[1].split("```", 1)[0]
    inside, beside = set(), set()
    for line in tree.splitlines():
        m = re.match(r"^(?:[├└]── )?([A-Z][A-Za-z]+) .*?\b([a-z_]+\.py)\b", line)
        if m and m[1] != "TrainingPlatform":
            (inside if line.startswith(("├", "└")) else beside).add(m[1])
            assert (ROOT / "trainforge" / "platform" / m[2]).is_file(), line
    recorded_inside, recorded_beside = set(), set()
    for stack in ("prod", "fleet"):
        resources = shipped_plan(stack).inventory.resources
        (tp,) = [r for r in resources if r.type == "trainforge:index:TrainingPlatform"]
        platform, top = tp.urn, {None, tp.parent}  # its parent: the stack itself
        for r in resources:
            kind = r.type.rsplit(":", 1)[1]
            if not r.type.startswith("trainforge:index:"):
                continue
            if r.parent == platform:
                recorded_inside.add(kind)
            elif r.parent in top and kind not in ("TrainingPlatform", "TrainingJob"):
                recorded_beside.add(kind)
    assert inside == recorded_inside, (inside, recorded_inside)
    assert beside == recorded_beside, (beside, recorded_beside)


def test_the_readmes_platform_components_are_where_the_plans_put_them():
    """README.md's `trainforge/platform/` entry: the components it names outside the
    parentheses are TrainingPlatform's children or beside it, those inside PlatformServices'
    (it put node health and the acceptance tests inside PlatformServices, and named no
    ImageCache or Budgets)."""
    from tests.conftest import shipped_plan

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    entry = " ".join(
        readme.split("\ntrainforge/platform/ ", 1)[1].split("\ntrainforge/", 1)[0].split()
    )
    entry = entry.split("; published.py", 1)[0]  # then the contract, not a component
    services = entry.split("PlatformServices (", 1)[1].split(")", 1)[0]
    outside = entry.replace(f"PlatformServices ({services})", "PlatformServices")
    top: set[str] = set()
    children: dict[str, set[str]] = {"TrainingPlatform": set(), "PlatformServices": set()}
    for stack in ("prod", "fleet"):
        resources = shipped_plan(stack).inventory.resources
        by_urn = {r.urn: r.type.rsplit(":", 1)[1] for r in resources}
        (tp,) = [r for r in resources if r.type == "trainforge:index:TrainingPlatform"]
        for r in resources:
            kind = r.type.rsplit(":", 1)[1]
            if not r.type.startswith("trainforge:index:") or kind == "TrainingJob":
                continue
            if r.parent in (None, tp.parent):
                top.add(kind)
            elif by_urn.get(r.parent) in children:
                children[by_urn[r.parent]].add(kind)
    named_outside = set(
        re.findall(
            r"\b([A-Z][a-z]+(?:[A-Z][a-z]+)+|Network|Cluster|Karpenter|Fleet|Budgets)\b", outside
        )
    )
    assert named_outside == top | children["TrainingPlatform"], named_outside
    named_inside = set(re.findall(r"\b([A-Z][a-z]+(?:[A-Z][a-z]+)+)\b", services))
    assert named_inside <= children["PlatformServices"], (named_inside, children)
