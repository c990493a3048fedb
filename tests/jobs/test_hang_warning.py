"""`hangTimeout` on own code that never imports trainforge: nothing starts the watchdog, so
nothing ends a hung step (a review found a rank hung 5.5 minutes with hangTimeout 60, and the
job was accepted without a word). The plan warns as it does for `s3Mirror` ("mirrors
nothing"), from the same reading of the shipped code; code that runs the Watchdog is quiet."""

from __future__ import annotations

from pathlib import Path

from trainforge.jobs.codeship import CodeBundle
from trainforge.jobs.entrypoint import hang_warnings
from trainforge.jobs.spec import parse_job
from trainforge.plan.core import plan_project

ROOT = Path(__file__).resolve().parents[2]
PLAIN = "import time\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
WATCHED = "from trainforge.training import Watchdog\nwatchdog = Watchdog.from_env().start()\n"


def _job(hang: int | None):
    raw = {"name": "j", "team": "research", "pool": "training-workloads",
           "entrypoint": {"script": "mine/hang/train.py"}}  # fmt: skip
    if hang is not None:
        raw["hangTimeout"] = hang
    return parse_job(raw, "j")


def test_hang_timeout_on_code_without_the_watchdog_is_a_warning():
    plain = CodeBundle(files=(("train.py", PLAIN),))
    (said,) = hang_warnings(_job(60), plain, "W")
    assert said.startswith("W.hangTimeout: 60 watches nothing: no file your entry runs imports")
    assert "Watchdog.from_env()" in said and "TRAINFORGE_HANG_TIMEOUT" in said
    assert "or remove hangTimeout" in said


def test_no_warning_where_the_watchdog_runs_or_nothing_was_set():
    plain = CodeBundle(files=(("train.py", PLAIN),))
    watched = CodeBundle(files=(("train.py", f"import loop\n{PLAIN}"), ("loop.py", WATCHED)))
    assert hang_warnings(_job(60), watched, "W") == []  # uses Watchdog
    assert hang_warnings(_job(None), plain, "W") == []  # not set: the default, not a choice
    assert hang_warnings(_job(0), plain, "W") == []  # off, and off it is
    assert hang_warnings(_job(60), None, "W") == []  # code in the image: not read


def test_the_plan_warns_only_for_the_job_whose_code_never_imports_trainforge():
    own = {"team": "research", "pool": "training-workloads", "hangTimeout": 60}
    jobs = [
        {"name": "plain-hang", **own, "entrypoint": {"script": "examples/mnist/train.py"}},
        {"name": "watched-hang", **own, "entrypoint": {"script": "examples/resumable/train.py"}},
    ]
    result = plan_project(ROOT, "dev", standins=False, config_overrides={"trainforge:jobs": jobs})
    warned = next(s for s in result.sections if s.title.startswith("Program warnings")).data
    said = [w for w in warned if ".hangTimeout: " in w]
    assert len(said) == 1, said
    assert said[0].startswith("TrainingJob job-research-plain-hang")
    assert "hangTimeout: 60 watches nothing" in said[0]


# A review's layout (wave 20): hang.py sleeps and imports nothing of trainforge; prog.py, the
# Pulumi program in the same folder, imports trainforge.jobs. Both are shipped; only hang.py
# runs in the pods, so the warnings must still be said.
MLE = ROOT / "tests" / "fixtures" / "mle_mycode"


def _mle(extra: dict) -> tuple:
    from trainforge.jobs.codeship import collect_dir

    raw = {"name": "my-hang", "team": "research", "pool": "training-workloads",
           "entrypoint": {"script": "mycode/hang.py"}, **extra}  # fmt: skip
    return parse_job(raw, "j"), collect_dir(MLE, "x", ())


def test_a_program_beside_the_script_that_imports_trainforge_does_not_silence_the_warning():
    job, bundle = _mle({"hangTimeout": 60})
    assert "prog.py" in bundle.paths  # shipped, and it imports trainforge
    (said,) = hang_warnings(job, bundle, "W")
    assert said.startswith("W.hangTimeout: 60 watches nothing: no file your entry runs imports")


def test_the_entry_reaches_trainforge_through_its_own_imports():
    loop = "from trainforge.training import Watchdog\nWatchdog.from_env().start()\n"
    job, _ = _mle({"hangTimeout": 60})
    for files in (
        (("hang.py", "import helpers.loop\n"), ("helpers/__init__.py", ""),
         ("helpers/loop.py", loop)),
        (("hang.py", "from helpers import loop\n"), ("helpers/__init__.py", ""),
         ("helpers/loop.py", loop)),
        (("hang.py", "import helpers\n"), ("helpers/__init__.py", "from . import loop\n"),
         ("helpers/loop.py", loop)),
        (("hang.py", "import mine\n"), ("mine.py", loop)),
    ):  # fmt: skip
        assert hang_warnings(job, CodeBundle(files=files), "W") == [], files
    unused = (("hang.py", "import time\n"), ("helpers/loop.py", loop))
    assert len(hang_warnings(job, CodeBundle(files=unused), "W")) == 1


def test_s3_mirror_is_judged_by_what_the_entry_runs_too():
    from trainforge.jobs.entrypoint import runs_s3_mirror

    job, bundle = _mle({})
    assert not runs_s3_mirror(job, bundle.files)
    assert runs_s3_mirror(job, (("hang.py", "import trainforge.training\n"),))
