"""Own code that saves a checkpoint every --save-every steps and resumes from its newest one,
and dies (os._exit, as the kernel's OOM killer or a lost node ends it: no exit record) after
--crash-after steps of each attempt (or at step --crash-at, every time). No torch: a checkpoint is a small JSON file."""

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
p.add_argument("--save-every", type=int, default=2)
p.add_argument("--crash-after", type=int, default=-1)
p.add_argument("--crash-at", type=int, default=-1, help="die at this step on every attempt")
p.add_argument("--exit-code", type=int, default=137)
p.add_argument("--name", default="step_{step}.pt", help="the checkpoint's file name")
args = p.parse_args()

ckpt = Path(os.environ["TRAINFORGE_CHECKPOINT_DIR"])
ckpt.mkdir(parents=True, exist_ok=True)
pattern = re.compile("^" + re.escape(args.name).replace(r"\{step\}", r"(\d+)") + "$")
saved = [
    (int(m.group(1)) if m.groups() else -1, f)
    for f in ckpt.iterdir()
    if (m := pattern.match(f.name))
]
start = 0
if saved:
    state = json.loads(max(saved)[1].read_text())
    start = state["step"]
    print(f"resumed from step {start}", flush=True)
for step in range(start + 1, args.steps + 1):
    time.sleep(0.01)
    if step % args.save_every == 0:
        tmp = ckpt / f".{step}.tmp"
        tmp.write_text(json.dumps({"step": step}))
        os.replace(tmp, ckpt / args.name.format(step=step))
    if step == args.crash_at or (args.crash_after > 0 and step == start + args.crash_after):
        print(f"dying at step {step}", flush=True)
        sys.stdout.flush()
        os._exit(args.exit_code)
print(f"done at step {args.steps}", flush=True)
