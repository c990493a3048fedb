"""The one reader of "does this argv run a shell script, and which": `sh -c SCRIPT`.

Why one: the plan's pod script rehearsal (plan/checks/pod_scripts) and the fetch finder
(jobs/fetches) each parsed a container's command and args their own way and disagreed
(`ash` vs `zsh`, `env X=1 sh -c`, `sh -c -e SCRIPT`, `sh FILE -c x`). The rule is the shells'
own: options (`-x`, `+x`, clusters such as `-ec`/`-lc`, `-o NAME`, bash's `--login`) come first,
`--` or `-` ends them, and with `c` among them the first operand is the script; the words
after it are $0 and the positional parameters (POSIX sh(1) "-c"; bash(1) "OPTIONS";
dash(1)), never the script. Pulumi-free, stdlib only.
"""

from __future__ import annotations

import posixpath
import re

SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh"})
# Words that run the rest as a command: shell keywords in a script's line, wrappers in an argv.
WRAPPERS = frozenset(
    {"if", "then", "elif", "else", "do", "while", "until", "!", "exec", "time", "sudo", "env",
     "nohup", "{"}
)  # fmt: skip
# bash's long options that take the next word (bash(1): --rcfile file, --init-file file)
_LONG_WITH_ARG = frozenset({"--rcfile", "--init-file"})


def program(words: list[str]) -> list[str]:
    """`words` from the program they run: leading wrappers and NAME=value assignments off."""
    i = 0
    while i < len(words) and (words[i] in WRAPPERS or re.match(r"^\w+=", words[i])):
        i += 1
    return words[i:]


def shell_script(words: list[str]) -> str | None:
    """SCRIPT when `words` (a container's command then args, or one shell command) run a
    shell with `-c`; None otherwise (a shell running a file, or no shell)."""
    words = program(words)
    if not words or posixpath.basename(words[0]) not in SHELLS:
        return None
    has_c, i = False, 1
    while i < len(words):
        w = words[i]
        if w in ("--", "-"):
            i += 1
            break
        if w.startswith("--"):
            i += 2 if w in _LONG_WITH_ARG else 1
            continue
        if len(w) < 2 or w[0] not in "-+":
            break  # the first operand
        has_c = has_c or (w[0] == "-" and "c" in w[1:])
        i += 2 if "o" in w[1:] else 1  # -o NAME (also in a cluster: -eo pipefail)
    return words[i] if has_c and i < len(words) else None
