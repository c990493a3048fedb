"""The plan's lazy SDK packages (`trainforge.plan.lazy_sdk`) bind every name to the object the
eager `__init__`'s star-imports bind, read in any order and after any direct submodule import."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]

CHECK = textwrap.dedent(
    """
    import importlib, pathlib, re, sys, types
    from trainforge.plan import lazy_sdk
    lazy_sdk.install()
    import pulumi_aws as aws
    # read through the package first, as the program does (pulumi's lazy_import of ec2)
    assert aws.ec2.get_instance_type.__module__ == "pulumi_aws.ec2.get_instance_type"
    bad = []
    for name in sys.argv[1:]:
        pkg = importlib.import_module(name)
        pkg._utilities  # noqa: B018 - loads a package pulumi imports lazily
        init = pathlib.Path(pkg.__spec__.origin).read_text()
        stars = re.findall(r"^from \\.(\\w+) import \\*$", init, re.M)
        assert type(pkg).__name__ == "_Package" and len(stars) > 10, (name, type(pkg))
        lazy = {m for m in stars if f"{name}.{m}" not in sys.modules}
        for m in reversed(stars):  # each submodule imported directly, then its names read,
            sub = importlib.import_module(f"{name}.{m}")  # the one named as it is first
            names = sorted(sub.__all__, key=lambda n: n != m)
            bad += [f"{name}.{n} after import {m}" for n in names if getattr(pkg, n) is not getattr(sub, n)]
        expected = {}
        for m in stars:  # the eager star-imports, in order, by each module's real __all__
            expected.update((n, getattr(sys.modules[f"{name}.{m}"], n)) for n in sys.modules[f"{name}.{m}"].__all__)
        bad += [f"{name}.{n}: {getattr(pkg, n)!r}" for n, value in expected.items() if getattr(pkg, n) is not value]
        try:
            getattr(pkg, "NoSuchName")
            bad.append(f"{name}.NoSuchName resolved")
        except AttributeError:
            pass
        print(name, len(stars), "modules", len(lazy), "not imported before", len(expected), "names")
    assert not bad, bad[:5]
    """
)


def test_lazy_packages_bind_what_the_eager_star_imports_bind() -> None:
    """ec2 (functions named as their modules: `get_vpc`), s3, and Kubernetes core/v1 (classes
    named as their modules: `ConfigMap`), each submodule imported directly before its names
    are read: every exported name is the eager one, and a name no module exports is absent."""
    pkgs = ["pulumi_aws.ec2", "pulumi_aws.s3", "pulumi_kubernetes.core.v1"]
    out = subprocess.run(
        [sys.executable, "-c", CHECK, *pkgs],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert [line.split()[0] for line in out.stdout.splitlines()] == pkgs
