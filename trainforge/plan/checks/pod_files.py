"""The files a container's shell script writes from its heredocs, as the pod's bash writes
them: the one reading of the file the Kubeflow SDK writes in the pod (`plan --sdk`'s name
check and the download reader read it; `checks/submitted.py` says where it differs).

The SDK writes the function through an UNQUOTED heredoc (kubeflow 0.4.1, the pinned SDK,
trainer/constants/constants.py EXEC_FUNC_SCRIPT, read 2026-11-30: `read -r -d '' SCRIPT << EOM
... EOM`, then `printf "%s" "$SCRIPT" > "FILE"`), so bash expands `$name`, `${...}`, `$(...)`,
backticks and `$((...))` and drops the backslash before `$`, backtick, `\\` and newline (bash
manual, "Here Documents"; GNU bash 5.2.15 where tests/plan/test_plan_sdk_heredoc.py compared
it with a plain bash run, 2026-11-30). So the script runs as its container's in the pod
sandbox (`pod_scripts.run_script`: a `$(...)` runs there, never on this machine). Without the
sandbox nothing runs: text with no `$`, backtick or backslash is the file as written, any
other is not read, never guessed.
"""

from __future__ import annotations

import functools
import itertools
import json
import pathlib
import posixpath
import re
import tempfile
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from trainforge.jobs import code_paths
from trainforge.jobs.fetches import heredoc_files
from trainforge.plan.checks import pod_sandbox as sandbox
from trainforge.plan.checks import pod_scripts as P

EXPANDED = ("$", "`", "\\")  # what bash changes in an unquoted heredoc (bash manual)
# Where bash reports an error it met running the script: `bash: line N: WORD: ERROR` on its
# stderr (GNU bash 5.2.15 here, 2026-12-01: a heredoc's `${os.environ['RANK']}` printed
# `/bin/bash: line 2: <the whole heredoc text>: bad substitution`, so WORD spans lines and
# ERROR is the text after the last `: ` of the diagnostic's last line).
_BASH_SAYS = re.compile(r"^(?:\S*/)?bash: line \d+: ", re.MULTILINE)


@dataclass(frozen=True)
class Written:
    """One heredoc the script saves to `file`: its text as the command carries it (what the
    user wrote), and the file the pod's bash writes (None: not computed, `why`)."""

    file: str
    source: str
    text: str | None
    why: str = ""
    # the run that wrote `text`: bash's own error (`bad substitution`; "": none), and the
    # script's exit status and what the image's stand-ins printed after it (the next command)
    error: str = ""
    rc: int | None = None
    then: str = ""

    @property
    def stopped(self) -> bool:
        """bash met an error writing the file and wrote less than the function: not an
        expansion (text changed) but bash refusing the heredoc (the file empty or cut)."""
        if not self.error or self.text is None:
            return False
        return len(self.text.strip().splitlines()) < len(self.source.strip().splitlines())

    @property
    def read(self) -> str | None:
        """What the checks read: the file as the pod writes it, or the source where bash
        changes none of it; None: unknown (not guessed)."""
        if self.text is not None:
            return self.text
        return None if any(ch in self.source for ch in EXPANDED) else self.source

    @property
    def substitutes(self) -> bool:
        """The source holds a command substitution bash would run (`$(`, a backtick)."""
        return "$(" in self.source or "`" in self.source

    def difference(self) -> tuple[int, str, str] | None:
        """(line, as written, as the pod writes it) of the first line that differs; None when
        none does or the file is unknown. `read -d ''` trims the text's leading and trailing
        blank space, which changes no line of the program."""
        if self.text is None:
            return None
        a, b = self.source.strip().splitlines(), self.text.strip().splitlines()
        pairs = enumerate(itertools.zip_longest(a, b, fillvalue=""), 1)
        return next(((i, x, y) for i, (x, y) in pairs if x != y), None)

    def source_line(self, line: int) -> int | None:
        """The line of the source (the function as sent) that line `line` of the pod's file
        is: lines bash left alone align (difflib); a changed run's first line is its source
        run's first, its others only where the run keeps its line count (a backslash-newline
        joins two); None where not known, never guessed."""
        if self.text is None:
            return line if self.read is not None else None
        a, b = self.source.strip().splitlines(), self.text.strip().splitlines()
        for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if j1 < line <= j2:
                same = tag == "equal" or i2 - i1 == j2 - j1 or line == j1 + 1
                return i1 + line - j1 if same else None
        return None


def _host_path(s: P.Script, made: list[pathlib.Path], file: str) -> pathlib.Path | None:
    """Where `file` (relative to the script's working directory) is on this machine after the
    run: in the scratch directory (`_Run.made`) of the volume that holds it, else None (not on
    a volume, or a link out of it)."""
    path = posixpath.normpath(posixpath.join(s.cwd or "/", file))
    volumes = zip([vm.path for vm in s.mounts], made, strict=False)
    inside = [(p, d) for p, d in volumes if code_paths.under(path, p)]
    if not inside:
        return None
    mount, host = max(inside, key=lambda x: len(x[0]))
    found = (host / posixpath.relpath(path, mount)).resolve()
    # the script may have made it a link (to this machine's /etc/shadow): never read outside
    return found if found.is_relative_to(host.resolve()) else None


def bash_error(stderr: str) -> str:
    """The first error bash reports in `stderr` (`_BASH_SAYS`): the text after the last `: `
    of its diagnostic's last line (its WORD may hold newlines, a heredoc's whole text); ""
    when bash reported none."""
    m = _BASH_SAYS.search(stderr)
    if m is None:
        return ""
    rest = stderr[m.end() :]
    nxt = _BASH_SAYS.search(rest)
    lines = (rest[: nxt.start()] if nxt else rest).splitlines()
    last = next((x for x in lines if x.startswith(": ")), lines[0] if lines else "")
    return last.rpartition(": ")[2].strip()


Ran = tuple[dict[str, str], sandbox.RunResult]


def _run(pod: dict[str, Any], c: dict[str, Any], files: list[str]) -> Ran | str:
    """The script of container `c` run in the pod sandbox: ({file: its text} for each of
    `files` it wrote, the run), or why it was not run."""
    s = P.script_of(pod, c, image=True)
    why = sandbox.unavailable() or (P.unrunnable_alone(s) if s else "it runs no shell script")
    if why or s is None:
        return f"the pod sandbox cannot run it here: {why}"
    with tempfile.TemporaryDirectory(prefix="trainforge-heredoc-") as tmp:
        volumes = P._Run(pathlib.Path(tmp), {})
        result = P.run_script(s, volumes, "")
        out: dict[str, str] = {}
        for file in files:
            host = _host_path(s, volumes.made, file)
            if host is not None and host.is_file():
                out[file] = host.read_text(encoding="utf-8", errors="replace")
        wrote_none = f"its script wrote none of {', '.join(files)} (exit {result.rc}: "
        return (out, result) if out or not files else f"{wrote_none}{result.tail()})"


@functools.lru_cache(maxsize=256)
def _written(key: str) -> tuple[Written, ...]:
    pod, c = json.loads(key)
    where = f"container {c.get('name')}"
    found = [
        (f, t)
        for f, t in heredoc_files(P.shell_script(c) or "", where)
        if not f.startswith(f"{where} heredoc <<")  # saved to no file
    ]
    if not found:
        return ()
    ran = _run(pod, c, [f for f, _ in found])
    if isinstance(ran, str):
        return tuple(Written(f, t, None, ran) for f, t in found)
    texts, result = ran
    error, then = bash_error(result.stderr), result.stdout.strip()
    return tuple(
        Written(f, t, texts.get(f), "" if f in texts else "the script did not write it",
                error, result.rc, then)
        for f, t in found
    )  # fmt: skip


def written(pod: dict[str, Any], c: dict[str, Any]) -> list[Written]:
    """Each file container `c` of pod spec `pod` saves a heredoc to (the SDK's function),
    computed once per container and pod spec."""
    if "<<" not in (P.shell_script(c) or ""):
        return []
    # what the run depends on (`script_of`): the pod's user and volumes, the container
    what = {k: pod.get(k) for k in ("securityContext", "volumes")}
    return list(_written(json.dumps([what, c], sort_keys=True, default=str)))
