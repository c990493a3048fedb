"""A file of your code that shadows a module the pod's start-up imports (`random.py`,
`queue.py`, `typing.py`, `cuda.py`, `torch.py`, ...): one answer, before anything runs.

Why: your code's directory comes first on sys.path in every process of a pod (it is the
working directory and first on PYTHONPATH, as `python train.py` puts the script's folder
first), ahead of the standard library and site-packages. A shipped `random.py` is then what
`import random` finds: the launcher's `import tempfile` (which imports `random`) or torch's
own import fails with a traceback that names neither your file nor the fix, and the exit was
classified as a bug in your code (user_error). A file whose name nothing imports at start-up
(`utils.py`, `model.py`, `data.py`) shadows nothing and is fine.

Which names (`STARTUP_MODULES`): every top-level module the start-up asks the import
system for, read from the source rather than listed by hand. `derive()` runs a child Python
without `site` (so no virtualenv's `.pth` hooks), with a finder first on `sys.meta_path` that
records each top-level name requested, then imports what a pod imports before your code runs
(`START_UP`: the launcher, the wrapper your code runs under, torch and torchrun's agent).
That includes names tried and not found (torch tries `cuda.bindings`: a `cuda.py` of yours
would be imported, and run, in its place); it leaves out built-in and frozen modules (`os`,
`io`, `sys`, ...: found before any file) and what the interpreter had imported before the
finder. The result is pinned here because computing it costs an `import torch` (~2 CPU s);
tests/training/test_shadowing.py derives it again and fails when a new Python or torch
changes it (`python -m trainforge.training.shadowing` prints the names it derives). The
image's own Python or torch may import a few names more or fewer than this environment's.

Who reads it: the plan and run-local refuse a shipped file (trainforge.jobs.entrypoint.
user_code); the launcher and the wrapper (launch.py, usercode.py) call `refuse_at_start`
first, for code the plan could not read (a module baked into an image, your own command
running the wrapper): it exits 2 (config_error, permanent) with one line naming the file,
and rank 0 records the attempt with that cause in the run ledger (ledger.record_refusal).
`python -m trainforge` run from a folder that holds such a file (`refuse_in_cli`, called by
trainforge/__main__.py before the CLI's imports) says so in one line too. A file named like
another standard module (`statistics.py`) runs; when the code then fails on it, `behind`
links the error to the file and the wrapper exits config_error with the same fix.

Stdlib only, and at module level only `os` and `sys`, which every interpreter has imported
before it reads a path: this module runs before anything the launcher or the wrapper import.
Not before `site`: where an environment's `.pth` start-up hooks import a standard module (an
editable install's finder imports `types`, `enum`, `functools`, `re`), a file of yours on
PYTHONPATH shadowing one of those fails inside `site`, before any trainforge code runs; the
plan and run-local, which read the shipped files, still refuse it.
"""

import os
import sys

# Imported by a pod before your code runs: the launcher (`python -m trainforge.training.
# launch`, torchrun in-process), the wrapper (`python -m trainforge.training.usercode`) with
# what it imports when it starts, and torch with torchrun's agent and rendezvous.
START_UP = (
    "trainforge.training.launch",
    "trainforge.training.usercode",
    "trainforge.training.ledger",
    "trainforge.training.resume_note",
    "torch",
    "torch.distributed.run",
    "torch.distributed.launcher.api",
    "torch.distributed.elastic.agent.server.local_elastic_agent",
)

# derive() with Python 3.11.7 and torch 2.13.0 (CPU), 2026-11-29.
STARTUP_MODULES = frozenset(
    {
        "__future__",
        "_asyncio",
        "_bisect",
        "_blake2",
        "_bz2",
        "_compat_pickle",
        "_compression",
        "_contextvars",
        "_csv",
        "_ctypes",
        "_datetime",
        "_hashlib",
        "_heapq",
        "_json",
        "_lzma",
        "_multiprocessing",
        "_opcode",
        "_pickle",
        "_posixshmem",
        "_posixsubprocess",
        "_pyio",
        "_queue",
        "_random",
        "_sha512",
        "_socket",
        "_ssl",
        "_struct",
        "_typing",
        "_uuid",
        "_weakrefset",
        "_winapi",
        "argparse",
        "array",
        "ast",
        "asyncio",
        "base64",
        "binascii",
        "bisect",
        "bz2",
        "calendar",
        "cmath",
        "collections",
        "concurrent",
        "contextlib",
        "contextvars",
        "copy",
        "copyreg",
        "csv",
        "ctypes",
        "cuda",
        "dataclasses",
        "datetime",
        "difflib",
        "dill",
        "dis",
        "email",
        "enum",
        "fcntl",
        "fnmatch",
        "functools",
        "gettext",
        "glob",
        "grp",
        "gzip",
        "hashlib",
        "heapq",
        "http",
        "importlib",
        "inspect",
        "ipaddress",
        "json",
        "keyword",
        "linecache",
        "locale",
        "logging",
        "lzma",
        "math",
        "mmap",
        "monkeytype",
        "msvcrt",
        "multiprocessing",
        "nt",
        "numbers",
        "numpy",
        "opcode",
        "operator",
        "opt_einsum",
        "org",
        "pathlib",
        "pickle",
        "pickletools",
        "pkgutil",
        "platform",
        "pprint",
        "pydot",
        "pynvml",
        "queue",
        "quopri",
        "random",
        "re",
        "reprlib",
        "select",
        "selectors",
        "shutil",
        "signal",
        "socket",
        "ssl",
        "string",
        "struct",
        "subprocess",
        "tarfile",
        "tempfile",
        "textwrap",
        "threading",
        "timeit",
        "token",
        "tokenize",
        "torch",
        "torchcomms",
        "torchgen",
        "tqdm",
        "traceback",
        "trainforge",
        "types",
        "typing",
        "typing_extensions",
        "unittest",
        "urllib",
        "uuid",
        "warnings",
        "weakref",
        "winreg",
        "zipfile",
        "zlib",
    }
)


def module_of(path: str) -> str | None:
    """The top-level module a file provides when `path` (relative, `/`-separated) is in a
    directory on sys.path: `random.py` -> random, `queue/__init__.py` -> queue; None for
    anything else (a folder without `__init__.py` is a namespace portion, which a regular
    module later on the path wins over)."""
    parts = path.split("/")
    if len(parts) == 1 and parts[0].endswith(".py"):
        return parts[0][: -len(".py")]
    if len(parts) == 2 and parts[1] == "__init__.py":
        return parts[0]
    return None


def shadowing(paths: list[str]) -> list[tuple[str, str]]:
    """(path, module) for each of `paths` (relative to a directory on sys.path) that provides
    a module of STARTUP_MODULES, in the order given."""
    out = []
    for path in paths:
        module = module_of(path)
        if module is not None and module in STARTUP_MODULES:
            out.append((path, module))
    return out


STARTUP = "which Python, torch or the launcher import before your code runs"


def why(module: str, who: str = STARTUP) -> str:
    """What every refusal says after naming the file (`who`: who imports the module)."""
    found = "they would import your file" if who == STARTUP else "its import found your file"
    return (
        f"shadows the module {module!r}, {who} (your code's directory is first on sys.path, "
        f"so {found} instead); rename it, e.g. my_{module}.py, and your imports of it"
    )


def _found_in(directory: str) -> list[tuple[str, str]]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    paths = []
    for name in names:
        if name.endswith(".py"):
            paths.append(name)
        elif os.path.isfile(os.path.join(directory, name, "__init__.py")):
            paths.append(f"{name}/__init__.py")
    return shadowing(paths)


def user_directories(script: str | None = None) -> list[str]:
    """The directories ahead of the standard library on sys.path (the working directory or
    script folder, PYTHONPATH), and `script`'s folder, less the one this library is
    imported from (the pod's /opt/trainforge, or the repository)."""
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    library = os.path.realpath(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    out = []
    if script and os.path.isfile(script):
        out.append(os.path.realpath(os.path.dirname(os.path.abspath(script))))
    for entry in sys.path:
        where = os.path.realpath(entry or os.getcwd())
        if where == stdlib or where.endswith(".zip"):
            break
        if where != library and where not in out:
            out.append(where)
    return out


def first_shadow(script: str | None = None) -> tuple[str, str] | None:
    """(file, module) of the first file in a user directory that shadows a start-up module."""
    for directory in user_directories(script):
        for path, module in _found_in(directory):
            return os.path.join(directory, path), module
    return None


def refuse_at_start(
    script: str | None = None, *, rank: bool = False, argv: list[str] | None = None
) -> None:
    """Exit 2 (config_error: renaming the file is the fix, a restart changes nothing) with
    one exit line when a file shadows a start-up module; otherwise return at once. `rank`:
    the line names RANK (a worker's; the launcher's RANK is its pod's index, not a rank).

    The refused attempt goes into the run ledger like any other failed one (ledger.
    record_refusal; `trainforge report` lists it with its cause), in the checkpoint directory
    of `argv`'s --checkpoint-dir (the launcher's command line), else TRAINFORGE_CHECKPOINT_DIR.
    Written after the decision, once your directories are off sys.path: the ledger's imports
    (json, pathlib, dataclasses, ...) then come from the real standard library."""
    found = first_shadow(script)
    if found is None:
        return
    # import the exit line's and the ledger's modules from the real standard library, not
    # from your files
    users = set(user_directories(script))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.getcwd()) not in users]
    from trainforge.training import exits, ledger  # noqa: PLC0415

    given = os.environ.get("RANK", "")
    named = int(given) if rank and given.isdigit() else None
    print(exit_line(*found, rank=named), file=sys.stderr, flush=True)
    ledger.record_refusal(
        ledger.checkpoint_dir(argv or []),
        exits.CONFIG_ERROR,
        refusal(*found),
        rank=named,
        log=lambda msg: print(f"trainforge: {msg}", file=sys.stderr, flush=True),
    )
    raise SystemExit(exits.CONFIG_ERROR.code)


def refuse_in_cli() -> None:
    """`python -m trainforge ...` puts the working directory first on sys.path: a `random.py`
    there broke the CLI's own imports with a traceback. One line and exit 2 instead."""
    found = first_shadow()
    if found is None:
        return
    path, module = found
    print(
        f"trainforge: error: {path} shadows the module {module!r}, which trainforge imports "
        "(`python -m` puts the working directory first on sys.path, and your job's pods put "
        f"its code directory first); rename it, e.g. my_{module}.py, and your imports of it",
        file=sys.stderr,
        flush=True,
    )
    raise SystemExit(2)


def behind(exc: BaseException, script: str | None = None) -> tuple[str, str] | None:
    """(file, module) when `exc` is about a module of the standard library (or one the
    start-up imports) that this process imported from a file of yours instead: an
    ImportError naming it (`cannot import name 'mean' from 'statistics'`), an AttributeError
    on it (`module 'statistics' has no attribute 'mean'`). For the wrapper, after your code
    raised: the names no start-up imports (`statistics.py`) that `refuse_at_start` leaves
    to run, where your code or a library it calls then expects the real module."""
    if isinstance(exc, ImportError):
        name = (exc.name or "").split(".")[0]
    elif isinstance(exc, AttributeError):
        obj = getattr(exc, "obj", None)
        name = getattr(obj, "__name__", "") if type(obj).__name__ == "module" else ""
    else:
        return None
    if not name or "." in name or name == "__main__":
        return None
    if name not in sys.stdlib_module_names and name not in STARTUP_MODULES:
        return None
    path = getattr(sys.modules.get(name), "__file__", None)
    if not path:
        return None
    folder = os.path.dirname(os.path.realpath(path))
    if os.path.basename(path) == "__init__.py":
        folder = os.path.dirname(folder)
    return (path, name) if folder in user_directories(script) else None


def exit_line(path: str, module: str, rank: int | None = None) -> str:
    """The line `refuse_at_start` prints for `path` shadowing `module`."""
    from trainforge.training import exits  # noqa: PLC0415

    return exits.exit_line(exits.CONFIG_ERROR, rank=rank, step=None, detail=refusal(path, module))


def refusal(path: str, module: str) -> str:
    """The cause `refuse_at_start` gives, in its exit line and in the run ledger."""
    return f"{path} {why(module)}"


_RECORDER = """
import sys
asked = []
class Recorder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if "." not in name and name not in asked:
            asked.append(name)
        return None
site_packages, modules = sys.argv[1].split(":"), sys.argv[2:]
sys.path.extend(site_packages)  # torch's, without the .pth files site would run
sys.meta_path.insert(0, Recorder)
for module in modules:
    __import__(module)
print(" ".join(asked))
"""


def derive() -> frozenset[str]:
    """STARTUP_MODULES computed again, in a child `python -S` that imports START_UP (this
    repository's trainforge first on its path, then this interpreter's site-packages)."""
    import site  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    library = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = library
    out = subprocess.run(
        [sys.executable, "-S", "-c", _RECORDER, ":".join(site.getsitepackages()), *START_UP],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    skip = set(sys.builtin_module_names) | {"__main__"}
    frozen = getattr(__import__("_imp"), "_frozen_module_names", lambda: ())()
    skip |= set(frozen)  # `importlib.util` is frozen, the `importlib` package is not
    return frozenset(name for name in out.split() if name not in skip)


if __name__ == "__main__":
    print(" ".join(sorted(derive())))
