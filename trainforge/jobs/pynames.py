"""Names a Python file uses and never binds: the NameError its first run of that line raises.

Why: the Kubeflow SDK sends a function's source alone (kubeflow 0.4.1,
trainer/backends/kubernetes/utils.py `get_command_using_train_func`: `inspect.getsource`,
dedented, then a call of it), written to a file the pod runs with `torchrun FILE` (whose workers
run `python -u FILE`, torch/distributed/run.py `config_from_args`); the globals of the module
that defined it are not there. A module the function uses without importing it inside fails
in every pod, and the runtime restarts them (docs/jobs.md, "The Kubeflow SDK").

The file is compiled by this Python and its bytecode read (`dis`), so what counts as a global
is the compiler's own scoping: a name loaded by LOAD_GLOBAL or LOAD_NAME in any code object
(the module, functions, lambdas, comprehensions, class bodies) that no code object stores,
deletes or imports as a global, and that neither builtins nor a script's globals hold.
"""

from __future__ import annotations

import builtins
import dis
import types

# The globals `python FILE` starts a script with (run here with Python 3.11.7, 2026-11-30:
# `print(sorted(globals()))` as a file printed exactly these)
SCRIPT_GLOBALS = frozenset(
    {"__annotations__", "__builtins__", "__cached__", "__doc__", "__file__", "__loader__",
     "__name__", "__package__", "__spec__"}
)  # fmt: skip
# A file that binds globals at run time (exec, globals()[...] =, builtins.x =) is not judged:
# a finding is never a guess
DYNAMIC = frozenset({"exec", "globals", "builtins", "__builtins__", "__import__"})
_LOAD = ("LOAD_GLOBAL", "LOAD_NAME")
_BIND = ("STORE_NAME", "STORE_GLOBAL", "DELETE_NAME", "DELETE_GLOBAL")  # `import` stores too


def _codes(code: types.CodeType) -> list[types.CodeType]:
    """`code` and every code object nested in it."""
    out, todo = [], [code]
    while todo:
        co = todo.pop()
        out.append(co)
        todo += [c for c in co.co_consts if isinstance(c, types.CodeType)]
    return out


def unbound(source: str, filename: str) -> list[tuple[str, int]]:
    """(name, first line that loads it) for each global `source` loads and never binds, in
    line order; [] for a file that does not compile (Python itself says why) or binds
    globals at run time (DYNAMIC)."""
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return []
    stored: set[str] = set()
    loads: dict[str, int] = {}
    for co in _codes(code):
        for ins in dis.get_instructions(co):
            if ins.opname in _BIND:
                stored.add(ins.argval)
            elif ins.opname in _LOAD:
                line = (ins.positions and ins.positions.lineno) or co.co_firstlineno
                loads[ins.argval] = min(line, loads.get(ins.argval, line))
    if DYNAMIC & (set(loads) | stored):
        return []
    bound = stored | set(dir(builtins)) | SCRIPT_GLOBALS
    return sorted(((n, ln) for n, ln in loads.items() if n not in bound), key=lambda x: x[1])
