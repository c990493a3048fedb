"""Each rank's output leaves in whole lines.

Why: several ranks write to one stdout and one stderr (every process of a `run-local` job,
and the `procsPerWorker` processes of one pod, whose container log is one stream), and
torchrun starts each rank with `python -u` (torch/distributed/run.py ``config_from_args``: ``cmd_args.append("-u")``,
torch 2.13.0). Under `-u` the text layer writes through:
``print("up", rank)`` makes one write() per piece ("up", " ", "0", "\\n"), so two ranks' lines
interleave mid-line ("upup 1  0"; seen 2026-12-01 in a run-local of two ranks, where a test
waiting for two lines beginning "up " never saw them). Line buffering in the text layer
writes each line with one write(), which a pipe keeps whole up to PIPE_BUF (4096 bytes,
POSIX), and still sends every line at once, as `-u` meant: output is as prompt as before.
"""

from __future__ import annotations

import sys


def whole_lines() -> None:
    """Line-buffer this process's stdout and stderr (each print: one write per line)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # a replaced stream may lack it
        if reconfigure is not None:
            reconfigure(line_buffering=True, write_through=False)
