"""Runtime facts the docs state, read from their source (each was pinned by nothing).

Every exit reason the docs name with its code (`hang` 201, `exit 205 (user_retryable)`,
`peer_lost code=202`) is the code trainforge/training/exits.py gives it; the grace classes
of a pod's terminationGracePeriodSeconds are trainforge/jobs/pod.py's."""

from __future__ import annotations

import inspect
import re

from tests.conftest import ROOT
from trainforge.training.exits import REASONS

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PATTERNS = (
    re.compile(r"`(?P<name>[a-z_]+)`,? (?:code |exit )?(?P<code>\d{1,3})\b"),
    re.compile(r"\bexits? (?P<code>\d{1,3}) \(`?(?P<name>[a-z_]+)`?"),
    re.compile(r"\b(?P<name>[a-z_]+) code=(?P<code>\d{1,3})\b"),
)


def test_the_docs_exit_codes_are_the_runtimes():
    named = [
        (doc.name, m["name"], int(m["code"]))
        for doc in DOCS
        for pattern in PATTERNS
        for m in pattern.finditer(doc.read_text(encoding="utf-8"))
        if m["name"] in REASONS
    ]
    assert len({name for _, name, _ in named}) >= 8  # the reliability table was read
    wrong = [(doc, name, code) for doc, name, code in named if REASONS[name].code != code]
    assert not wrong, {name: REASONS[name].code for _, name, _ in wrong}


def test_the_docs_grace_classes_are_the_pods():
    """jobs.md and checkpointing.md said `terminationGracePeriodSeconds = gracePeriod + 30`;
    the pods get that rounded up to a class (a gracePeriod of 100 s gets 330 s, not 130)."""
    from trainforge.jobs.pod import GRACE_CLASSES, TERMINATION_MARGIN, termination_grace
    from trainforge.jobs.spec import parse_job

    classes = ", ".join(map(str, GRACE_CLASSES[:-1])) + f" or {GRACE_CLASSES[-1]} s"
    for name in ("jobs.md", "checkpointing.md"):
        text = " ".join((ROOT / "docs" / name).read_text(encoding="utf-8").split())
        assert classes in text, name
        assert f"+ {TERMINATION_MARGIN}`" not in text, name  # a bare "+ 30" equation
    job = {"name": "j", "team": "t", "pool": "p", "checkpoint": {"gracePeriod": 100}}
    assert termination_grace(parse_job(job)) == GRACE_CLASSES[1] > 100 + TERMINATION_MARGIN


def test_the_job_defaults_jobs_md_states_are_the_codes():
    """jobs.md's hand-written defaults and limits (shmSize, the code ConfigMap, the PodMonitor
    interval, elastic restarts) against the constants the emitters use."""
    from trainforge.jobs import codeship, wiring
    from trainforge.stack.jobs import ElasticSpec

    text = " ".join((ROOT / "docs" / "jobs.md").read_text(encoding="utf-8").split())
    shm = f"| a {'quarter' if wiring._SHM_FRACTION == 1 / 4 else '?'} of `memory`, at most "
    assert shm + f"{wiring._SHM_MAX // 2**30}Gi |" in text
    assert codeship.CONFIGMAP_LIMIT == 2**20 and "ConfigMap (1 MiB at most)" in text
    headroom = (codeship.CONFIGMAP_LIMIT - codeship.CONFIGMAP_BUDGET) // 1024
    assert f"the 1 MiB object limit with {headroom} KiB headroom" in text
    restarts = ElasticSpec.model_fields["max_restarts"].default
    assert f"`maxRestarts` ({restarts})" in text
    source = (ROOT / "trainforge" / "jobs" / "pod.py").read_text(encoding="utf-8")
    interval = re.search(r'"path": "/metrics", "interval": "(\d+)s"', source)
    assert interval and f"port `metrics`, every {interval[1]} s" in text


def _flag_rows(doc: str) -> list[tuple[list[str], list[str]]]:
    """(flags, defaults) of each `| --flag ... | default | ... |` row of a doc's flags table."""
    rows = []
    for line in (ROOT / "docs" / doc).read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.replace("\\|", "/").strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`--"):
            continue
        flags = re.findall(r"--[a-z][a-z0-9-]*", cells[0].split("`")[1])
        default = cells[1].split(" (")[0]  # "0 (off)"
        values = [v.strip().strip("`") for v in default.split(",")] if default else []
        rows.append((flags, values))
    return rows


def _same(doc_value: str, value: object) -> bool:
    if doc_value == "off":
        return value in (None, False, 0)
    try:
        return float(doc_value) == float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return doc_value == str(value)


def test_the_flag_defaults_training_md_and_checkpointing_md_state_are_the_parsers():
    from trainforge.training.config import build_parser

    defaults = {flag: a.default for a in build_parser()._actions for flag in a.option_strings}
    checked = 0
    for doc in ("training.md", "checkpointing.md"):
        for flags, values in _flag_rows(doc):
            if not values or any("<" in v for v in values) or len(values) != len(flags):
                continue  # no default stated, or a computed one (`./runs/<run-name>`)
            for flag, value in zip(flags, values, strict=True):
                assert _same(value, defaults[flag]), f"{doc}: {flag} default {value!r}"
                checked += 1
    assert checked >= 25


def test_troubleshooting_md_states_kueues_pods_ready_timeout_and_requeue_backoff():
    """ "`kueue.podsReadyTimeout` (30 min by default) ... `Requeued` after a backoff (60 s
    doubling to an hour" against the Configuration the platform renders for the default."""
    from trainforge.platform.kueue import manager_config
    from trainforge.stack.services import KueueConfig

    wait = manager_config(KueueConfig())["waitForPodsReady"]
    text = " ".join((ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8").split())
    minutes = re.fullmatch(r"(\d+)m", wait["timeout"])
    assert minutes and f"`kueue.podsReadyTimeout` ({minutes[1]} min by default)" in text
    backoff = wait["requeuingStrategy"]
    hour = {3600: "an hour"}[backoff["backoffMaxSeconds"]]
    assert f"after a backoff ({backoff['backoffBaseSeconds']} s doubling to {hour}" in text


def test_the_docs_count_checkpoint_save_attempts_as_the_runtime_does():
    """reliability.md said a sync save "is retried 3 times": it is tried 3 times (2 retries),
    `RETRY_DELAY_S` x attempt apart; checkpointing.md says the same in its words."""
    from trainforge.training.checkpoint import RETRY_DELAY_S, SYNC_SAVE_ATTEMPTS

    gaps = [f"{RETRY_DELAY_S * n:g} s" for n in range(1, SYNC_SAVE_ATTEMPTS)]
    apart = " and ".join([", ".join(gaps[:-1]), gaps[-1]] if len(gaps) > 1 else gaps)
    reliability = " ".join((ROOT / "docs" / "reliability.md").read_text().split())
    assert f"a sync save is tried {SYNC_SAVE_ATTEMPTS} times, {apart} apart" in reliability
    checkpointing = " ".join((ROOT / "docs" / "checkpointing.md").read_text().split())
    assert f"retried, {SYNC_SAVE_ATTEMPTS} attempts {apart} apart" in checkpointing


def test_reliability_md_timeouts_table_is_what_the_runtime_derives():
    """docs/reliability.md, "Timeouts": the waits it lists for the default `--hang-timeout`,
    each derived from it (trainforge/training/timeouts.py), and the NCCL environment."""
    from trainforge.training.timeouts import DEFAULT_HANG_TIMEOUT_S, Timeouts
    from trainforge.training.watchdog import Watchdog

    text = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    table = text.split("| wait | value | where |", 1)[1].split("\n\n", 1)[0]
    rows = {r.split("|")[1].strip(): r.split("|")[2].strip() for r in table.splitlines()[2:]}
    t = Timeouts.from_hang_timeout(DEFAULT_HANG_TIMEOUT_S)
    h = f"{t.hang_timeout:g}"
    assert f"`--hang-timeout {h}`" in text
    assert rows["watchdog, a step"] == f"max(10 x mean step, **{h} s**)"
    warmup = inspect.signature(Watchdog).parameters["warmup_steps"].default
    startup = rows[f"watchdog, first {warmup} steps / restore / checkpoint"]
    assert (
        startup == f"{t.watchdog_startup / t.hang_timeout:g} x {h} = **{t.watchdog_startup:g} s**"
    )
    collective = next(v for k, v in rows.items() if k.startswith("every collective"))
    margin = t.collective - t.watchdog_startup
    assert collective == f"{t.watchdog_startup:g} + {margin:g} = **{t.collective:g} s**"
    heartbeat = next(v for k, v in rows.items() if k.startswith("NCCL heartbeat"))
    assert heartbeat == f"**{t.nccl_heartbeat:g} s**"
    assert "(`TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC`)" in table
    env = t.nccl_env()
    assert env["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] == f"{t.nccl_heartbeat:g}"
    errors = next(v for k, v in rows.items() if k.startswith("NCCL error handling"))
    named = dict(re.findall(r"`(TORCH_[A-Z_]+)=(\d+)`", errors))
    assert named and all(env[k] == v for k, v in named.items()), (named, env)
    assert set(env) == {*named, "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"}
    rendezvous = next(v for k, v in rows.items() if k.startswith("rendezvous"))
    assert rendezvous.endswith(f"= **{t.rendezvous:g} s**"), rendezvous


EXIT_LINE = re.compile(
    r"^(?:\[rank\d+\] )?(?P<line>trainforge exit: (?P<name>[a-z_]+) code=(?P<code>\d+)"
    r"(?: \(rank (?P<rank>\d+)(?:, step (?P<step>\d+))?\))?: (?P<detail>.*?) \[(?P<tail>.*)\])$"
)


def test_the_exit_lines_the_docs_quote_are_what_exits_prints():
    """Every whole `trainforge exit: ...` line of a doc (its `...` standing for text left out)
    is exits.exit_line for its reason, rank, step and detail: the code, and the bracket that
    says whether the job restarts and what to do, as a process prints it outside a platform pod
    (run-local, the library) or as the default backend's pod does (a PyTorchJob under
    restartPolicy ExitCode, whose emitter tells it what the operator then does:
    TRAINFORGE_ON_EXIT)."""
    import os

    from trainforge.core import failures
    from trainforge.training import exits
    from trainforge.training.contract import ON_EXIT

    in_pod = failures.on_exit_value(
        *(failures.pytorchjob_outcome("ExitCode", code) for code in (2, failures.KILLED))
    )

    def printed_lines(reason, **where) -> list[str]:
        lines = []
        for told in (None, in_pod):
            saved = os.environ.pop(ON_EXIT, None)
            if told is not None:
                os.environ[ON_EXIT] = told
            try:
                lines.append(exits.exit_line(reason, **where))
            finally:
                os.environ.pop(ON_EXIT, None)
                if saved is not None:
                    os.environ[ON_EXIT] = saved
        return lines

    def quotes(line: str, printed: str) -> bool:
        pos = 0
        for piece in line.split("..."):
            found = printed.find(piece.strip(), pos)
            if found < 0:
                return False
            pos = found + len(piece.strip())
        return True

    quoted = [
        (doc.name, m)
        for doc in DOCS
        for line in doc.read_text(encoding="utf-8").splitlines()
        if (m := EXIT_LINE.match(line.strip()))
    ]
    assert len(quoted) >= 6, quoted  # hang, oom, user_error, config_error (2), success
    for doc, m in quoted:
        reason = exits.REASONS[m["name"]]
        rank = int(m["rank"]) if m["rank"] else None
        step = int(m["step"]) if m["step"] else None
        detail = m["detail"].split("...")[0].rstrip()
        printed = printed_lines(reason, rank=rank, step=step, detail=detail)
        unsupported = re.match(r"torch (\S+) is not supported: ", detail)
        if unsupported:  # training.md's refusal of an old torch: the runtime's own sentence
            from trainforge.training import versions

            assert detail == versions.problem(unsupported[1]), (doc, detail)
        assert any(quotes(m["line"], one) for one in printed), (
            f"{doc} quotes {m['line']!r}; exits prints one of {printed!r}"
        )


def test_the_job_keys_defaults_jobs_md_lists_are_the_job_models():
    """docs/jobs.md, "Fields and defaults": the grouped defaults it writes out
    (`every: 500, keepLast: 3, ...` of `checkpoint.*`, `runPolicy.*`) and the single ones
    (`ncclDebug`, `metricsPort`, `workers`, `codeSource`, `priority`) are what a job that sets
    none of them gets (a `None` default is the `auto` or unset the doc names)."""
    from trainforge.jobs.spec import parse_job

    got = parse_job({"name": "a", "team": "t", "pool": "p"}).model_dump(by_alias=True)
    rows = {}
    for line in (ROOT / "docs" / "jobs.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            rows[cells[0]] = cells[1]
    checked = 0
    for keys, default in rows.items():
        group = re.fullmatch(r"`(\w+)\.\w+`(?:, `\1\.\w+`)*", keys)
        if group and re.fullmatch(r"`(\w+: [^,`]+)(, \w+: [^,`]+)*`", default):
            for key, value in re.findall(r"(\w+): ([^,`]+)", default):
                have = got[group[1]][key]
                same = str(have) == value or (isinstance(have, bool) and str(have).lower() == value)
                assert same or (have is None and value == "auto"), (
                    keys,
                    key,
                    value,
                    have,
                )
                checked += 1
    for key in ("ncclDebug", "metricsPort", "workers", "codeSource", "priority"):
        stated = re.match(r"`?([\w-]+)`?", rows[f"`{key}`"])[1]
        assert stated == str(got[key]), (key, stated, got[key])
        checked += 1
    assert checked >= 14


def test_jobs_md_says_the_runtime_images_mirror_default_as_the_plan_renders_it():
    """docs/jobs.md named the S3 mirror's default for your own image (on) and the stock PyTorch
    image (off) but not for the trainforge runtime image every job without an `image` runs:
    on, as the prod plan renders gpt-350m-fsdp (no `image`, no `s3Mirror`)."""
    from tests.conftest import shipped_plan

    text = " ".join((ROOT / "docs" / "jobs.md").read_text(encoding="utf-8").split())
    assert "by default it is on for the trainforge runtime image (it has boto3)" in text
    lines = [ln for s in shipped_plan("prod").sections for ln in s.lines]
    assert any("S3 mirror: on (boto3 in image: yes)" in ln for ln in lines), lines
