"""Will a replaced job resume from its checkpoints? Decided at preview from the state layout
(the DCP keys, shapes and dtypes the runtime saves) and the flags a restore does not bring
back: docs/pr-review.md ("Will a replaced job resume?"); the torch-free layout:
training/state_shapes.py.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from trainforge.jobs import backends
from trainforge.jobs.entrypoint import RUNTIME_MODULE  # what the emitter runs: -m MODULE
from trainforge.plan.runner import UNKNOWN
from trainforge.training import data_order
from trainforge.training.state_layout import mismatches

RESUMES = "resumes"
LOST = "starts at step 0"  # the checkpoints it would resume from are not where it looks
UNSURE = "may start at step 0"  # ... unless its S3 mirror is the old one's, which is not known
RESETS = "resumes with a reset"
CANNOT = "cannot resume"
NOT_CHECKED = "resume not checked"
FRESH = "starts fresh"
MAX_NAMED = 3  # differing tensors named in a verdict


class LayoutError(ValueError):
    """The runtime flags of a job cannot be turned into a state layout."""


def runtime_args(command: list[str]) -> list[str] | None:
    """The bundled runtime's flags in a container command (`... -m trainforge.training ARGS`),
    or None when the command runs something else (own code)."""
    for i, tok in enumerate(command):
        if tok == RUNTIME_MODULE and i > 0 and command[i - 1] == "-m":
            return list(command[i + 1 :])
    return None


def argv_fields(argv: list[str]) -> dict[str, str | None]:
    """An argv by name, the plan's one reader of a command line: `--flag value`,
    `--flag=value`, `-m module` and bare switches (None) by the flag's name, a flag seen again
    as `--flag#2`, other tokens by position (`[N]`): a diff says `command --lr`, not
    `command[29]`, and one inserted flag does not shift every later position."""
    out: dict[str, str | None] = {}
    i = pos = 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("-") and len(tok) > 1 and not _number(tok):
            name, eq, value = tok.partition("=")
            val: str | None = value if eq else None
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if not eq and nxt is not None and (not nxt.startswith("-") or _number(nxt)):
                val, i = nxt, i + 1
            key, n = name, 1
            while key in out:
                n += 1
                key = f"{name}#{n}"
            out[key] = val
        else:
            out[f"[{pos}]"] = tok
            pos += 1
        i += 1
    return out


def all_values(fields: dict[str, str | None], *flags: str) -> list[str | None]:
    """Every occurrence's value of any of `flags` in `argv_fields` (`flag`, `flag#2`, ...), in
    argv order (None: no value)."""
    return [
        v
        for k, v in fields.items()
        if k in flags or ((n := k.rpartition("#"))[0] in flags and n[2].isdigit())
    ]


def last_value(fields: dict[str, str | None], flag: str, default: str | None = None) -> str | None:
    """A flag's value as the runtime's argparse reads it: its last occurrence wins."""
    return (all_values(fields, flag) or [default])[-1]


def _number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


@functools.cache
def _runtime_parser() -> Any:
    """The runtime's argument parser, built once per plan (~5 ms each); parsing leaves no state."""
    from trainforge.training.config import build_parser

    return build_parser()


def parse_runtime(args: list[str]) -> Any:
    """The runtime's TrainConfig for these flags (its own parser; no files are checked)."""
    from trainforge.training.config import ConfigError, check_values, config_from_namespace

    try:
        ns, _unknown = _runtime_parser().parse_known_args(args)
    except SystemExit:
        raise LayoutError(f"the runtime rejects its flags {' '.join(args)}") from None
    try:
        return check_values(config_from_namespace(ns))
    except ConfigError as e:
        raise LayoutError(str(e)) from None


class Layout(NamedTuple):
    """What a checkpoint holds: DCP key -> (shape, dtype) of every tensor saved, and the
    optimizer settings a restore brings back (JSON: `_asdict()`, `Layout(**data)`)."""

    tensors: dict[str, tuple[tuple[int, ...], str]]
    settings: dict[str, Any]


@functools.lru_cache(maxsize=64)
def state_layout(cfg: Any) -> Layout:
    """The state the runtime checkpoints for this TrainConfig: without torch for the bundled
    models (state_shapes, held equal to the torch build by its tests), else built with torch
    by the runtime's own builders (training/state_layout.py `built`)."""
    from trainforge.training import state_layout as runtime
    from trainforge.training import state_shapes

    try:
        return Layout(*state_shapes.layout(cfg))
    except state_shapes.UnknownModel:
        return Layout(*runtime.built(cfg))


def layout_key(cfg: Any) -> Any:
    """`cfg` with only the fields the saved state depends on (config.checkpointed: model
    shape, the optimizer settings its param groups carry); the rest stays at its default so
    jobs of one shape share one layout."""
    from trainforge.training.config import TrainConfig, checkpointed

    return TrainConfig(**{s.dest: getattr(cfg, s.dest) for s in checkpointed()})


def layout_for_args(args: list[str]) -> Layout:
    return state_layout(layout_key(parse_runtime(args)))


class Store(NamedTuple):
    """Where a job's checkpoint directory lives: the volume behind the path (in the emitted pod
    spec) and the S3 mirror (`--checkpoint-s3`), which the runtime downloads the newest
    checkpoint from when the directory has none (training/checkpoint.py `resolve_resume`)."""

    volume: tuple[str, ...]  # (kind, claim, subPath, path under the mount): equal = same data
    what: str  # how a reader is told it: "PersistentVolumeClaim fsx-vision", ...
    durable: bool  # outlives the job's pods (a claim); an emptyDir goes with them
    s3: str | None = None


def store(
    doc: Any,
    checkpoint_dir: str | None,
    s3: str | None,
    runtimes: Mapping[str, Mapping[str, Any]] | None = None,
) -> Store | None:
    """The Store of a job's workload object: the job's container's mount holding
    `checkpoint_dir` (the longest mountPath above it) and the pod volume behind it, in the pod
    its shape names the job's (`Shape.main_pod`: a TrainJob's, the pod Trainer builds from the
    runtime it names among `runtimes`, `trainjob.runtimes_in`; None: the platform's own);
    None when the object, its pod or the directory is unknown."""
    if not isinstance(doc, dict) or not checkpoint_dir or not checkpoint_dir.startswith("/"):
        return None
    shape = backends.shape(doc)
    pod = shape.main_pod(doc, runtimes) if shape is not None else None
    if pod is None:
        return None
    tmpl, container = pod
    mounts = [
        m
        for m in container.get("volumeMounts") or []
        if f"{checkpoint_dir.rstrip('/')}/".startswith(f"{str(m.get('mountPath')).rstrip('/')}/")
    ]
    if not mounts:
        return Store(("container",), "the container's own filesystem", False, s3)
    mount = max(mounts, key=lambda m: len(str(m.get("mountPath"))))
    rel = checkpoint_dir[len(str(mount["mountPath"]).rstrip("/")) :]
    vols = {v.get("name"): v for v in tmpl.spec.get("volumes") or []}
    vol = vols.get(mount.get("name")) or {}
    sub = str(mount.get("subPath") or "")
    if claim := (vol.get("persistentVolumeClaim") or {}).get("claimName"):
        where = f"PersistentVolumeClaim {claim}" + (f" (subPath {sub})" if sub else "")
        return Store(("claim", claim, sub, rel), where, True, s3)
    kind = next((k for k in vol if k != "name"), "volume")
    what = "a pod-local emptyDir" if kind == "emptyDir" else f"a {kind} volume"
    return Store((kind, str(vol.get(kind)), sub, rel), what, False, s3)


def _mirror(uri: str) -> str:
    """`the S3 mirror s3://b/p`; a bucket named only at deploy (an unknown at preview) is said."""
    if UNKNOWN in uri:
        return "the S3 mirror (its bucket is named at deploy)"
    return f"the S3 mirror {uri}"


def _path(uri: str) -> str:
    """The key prefix of `s3://bucket/prefix` (what the runtime lists under in the bucket)."""
    return uri.removeprefix("s3://").partition("/")[2]


def _same_mirror(old: str, new: str, stacks: tuple[str, str] | None) -> bool | str:
    """Whether the new job's S3 mirror is the old one's: True for the same known URI, or the
    same prefix in the stack's one bucket (entrypoint.s3_uri; named at deploy, so unknown in a
    plan folder; a bucket replaced is TF_DATA_REPLACE's); False for another known bucket or
    prefix; else why the plan cannot tell (`stacks`: the base's and head's, when they differ)."""
    if UNKNOWN not in old + new:
        return old == new
    if UNKNOWN in _path(old) + _path(new):
        return "a mirror's prefix is named at deploy"
    if _path(old) != _path(new):
        return False  # another prefix: the runtime lists only its own
    if UNKNOWN not in old or UNKNOWN not in new:
        known = old if UNKNOWN not in old else new
        side = "base" if known is old else "head"
        bucket = known.removeprefix("s3://").partition("/")[0]
        return f"the {side}'s bucket is {bucket} and the other's is named at deploy"
    if stacks:
        return (
            f"the base is stack {stacks[0]} and the head stack {stacks[1]}, each with its own "
            "bucket, named at deploy"
        )
    return True


def _moved(old: Store, new: Store, stacks: tuple[str, str] | None = None) -> Compat | None:
    """LOST when the replacement cannot find the old job's checkpoints: its directory is on
    another volume (or an emptyDir, which goes with the old pods) and no S3 mirror the old
    job wrote remains; UNSURE when the mirror may be another bucket; None when they are where
    it looks (the same claim, or the mirror)."""
    if old.durable and old.volume == new.volume:
        return None
    same = _same_mirror(old.s3, new.s3, stacks) if old.s3 and new.s3 else False
    if same is True:
        return Compat(RESUMES, source=_mirror(old.s3))
    why = "which goes with the old pods"
    if old.durable:
        same_claim = old.volume[:2] == new.volume[:2]
        why = (
            f"which the new pods mount elsewhere ({new.what})"
            if same_claim
            else (f"which this change removes (the new pods' directory is on {new.what})")
        )
    if same is False:
        on = old.what + (f" and {_mirror(old.s3)}" if old.s3 else "")
        return Compat(LOST, f"its checkpoints were on {on}, {why}")
    return Compat(
        UNSURE,
        f"its checkpoints were on {old.what}, {why}, and on {_mirror(old.s3)}; the plan cannot "
        f"tell whether the new pods' mirror is the same bucket: {same}",
    )


@dataclass
class JobState:
    """What decides a resume, for one side of the diff."""

    args: list[str] | None  # bundled runtime flags; None for own code
    world_size: int | None = None
    checkpoint_dir: str | None = None
    resume: str = "auto"
    fingerprint: Any = None  # own code: its declared fingerprint's value (None = none)
    fingerprint_source: str | None = None  # e.g. "layout:state_layout"
    layout: Layout | None = None  # precomputed (from a plan's section)
    store: Store | None = None  # where its checkpoints live (None: not known)


@dataclass
class Compat:
    verdict: str
    detail: str = ""
    resets: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    differ: list[str] = field(default_factory=list)
    source: str = ""  # where it resumes from when not its own directory (the S3 mirror)

    @property
    def blocking(self) -> bool:
        return self.verdict == CANNOT

    def line(self) -> str:
        resets = f" ({'; '.join(self.resets)})" if self.resets else ""
        detail = f": {self.detail}" if self.detail else ""
        source = f" from {self.source}" if self.source else ""
        return self.verdict + source + resets + detail + "".join(f"; {c}" for c in self.caveats)

    def short(self) -> str:
        what = self.verdict + (f" from {self.source}" if self.source else "")
        if self.resets:
            what += " (" + ", ".join(r.split(":", 1)[0] for r in self.resets) + ")"
        if self.blocking:
            what += f": {self.differ[0] if self.differ else self.detail}"
        elif self.detail and self.verdict in (NOT_CHECKED, FRESH, LOST, UNSURE):
            what += f": {self.detail}"
        caveats = (c.split(" is NOT applied")[0] for c in self.caveats)
        return what + "".join(f"; {c} NOT applied" for c in caveats)


def _named(diffs: list[str]) -> str:
    """The first differing model tensors by name (optimizer state, which follows its
    parameter, only counted)."""
    model = [d for d in diffs if d.startswith("model.")] or diffs
    head = ", ".join(model[:MAX_NAMED])
    more = len(model) - MAX_NAMED
    rest = len(diffs) - len(model)
    tail = f" (+{more} more)" if more > 0 else ""
    if rest and model is not diffs:
        tail += f" and {rest} optimizer-state tensors"
    return head + tail


def _changed(old_cfg: Any, new_cfg: Any, *fields: str) -> list[str]:
    """`--flag old -> new` for each TrainConfig field that differs (the runtime's flag names)."""
    from trainforge.training.config import TrainConfig, settings

    flags = {s.path: s.flag for s in settings(TrainConfig)}
    return [
        f"{flags[f]} {getattr(old_cfg, f)} -> {getattr(new_cfg, f)}"
        for f in fields
        if getattr(old_cfg, f) != getattr(new_cfg, f)
    ]


def _resets(old_cfg: Any, new_cfg: Any, old: JobState, new: JobState) -> list[str]:
    out = []
    lrs = _changed(old_cfg, new_cfg, "steps", "warmup_steps")
    if lrs:
        text = f"lr schedule: {lrs[0]}; warmup and cosine decay are recomputed at the resumed step"
        if new_cfg.steps < old_cfg.steps:
            text += f", and a run already past step {new_cfg.steps} stops at once"
        out.append(text)

    def global_batch(cfg: Any, world: int | None) -> int | None:
        return cfg.global_batch_size or (cfg.global_batch(world) if world else None)

    gb_old, gb_new = global_batch(old_cfg, old.world_size), global_batch(new_cfg, new.world_size)
    data_why = [data_order.global_batch_change(gb_old, gb_new)] if gb_old != gb_new else []
    data_why += _changed(old_cfg, new_cfg, *data_order.DATA_FIELDS)
    if data_why:
        out.append(data_order.reset(data_why))  # the runtime's resume line says the same
    if old.world_size and new.world_size and new.world_size > old.world_size:
        out.append(
            f"RNG: ranks {old.world_size}-{new.world_size - 1} have no saved stream and start "
            "from their seed"
        )
    return out


def _caveats(old_layout: Layout, new_layout: Layout, old_cfg: Any, new_cfg: Any) -> list[str]:
    old_s, new_s = old_layout.settings, new_layout.settings
    changed = {k.rsplit(".", 1)[-1] for k in new_s if k in old_s and old_s[k] != new_s[k]}
    out = []
    if {"lr", "initial_lr"} & changed:
        out.append(
            f"--lr {old_cfg.lr:g} -> {new_cfg.lr:g} is NOT applied to the resumed run: the "
            f"restored optimizer and LR scheduler keep peak lr {old_cfg.lr:g} (a fresh run uses it)"
        )
    if "weight_decay" in changed:
        out.append(
            f"--weight-decay {old_cfg.weight_decay:g} -> {new_cfg.weight_decay:g} is NOT applied "
            "to the resumed run (the optimizer's param groups come from the checkpoint)"
        )
    return out


def classify(old: JobState, new: JobState, stacks: tuple[str, str] | None = None) -> Compat:
    """What happens when `new` replaces `old` and starts in the same checkpoint directory
    (`stacks`: the base's and head's stack when they differ: each has its own bucket)."""
    if new.resume == "never":
        return Compat(FRESH, "--resume never: every start, restarts included, begins at step 0")
    if old.checkpoint_dir and new.checkpoint_dir and old.checkpoint_dir != new.checkpoint_dir:
        return Compat(FRESH, f"new checkpoint directory {new.checkpoint_dir}")
    moved = _moved(old.store, new.store, stacks) if old.store and new.store else None
    if moved is not None and moved.verdict in (LOST, UNSURE):
        return moved
    found = _classify(old, new)
    if moved is not None and found.verdict != NOT_CHECKED:
        found.source = moved.source
    return found


def _classify(old: JobState, new: JobState) -> Compat:
    """The state comparison, once the checkpoints are where the new job looks."""
    if new.args is None or old.args is None:
        if new.fingerprint is None:
            return Compat(
                NOT_CHECKED,
                "own code with no state fingerprint (declare checkpoint.fingerprint: "
                "module:function, docs/checkpointing.md)",
            )
        if old.fingerprint is None:
            return Compat(NOT_CHECKED, "the base has no state fingerprint to compare with")
        return _compare_fingerprints(old.fingerprint, new.fingerprint, new.fingerprint_source)
    try:
        old_cfg, new_cfg = parse_runtime(old.args), parse_runtime(new.args)
        old_layout = old.layout or state_layout(layout_key(old_cfg))
        new_layout = new.layout or state_layout(layout_key(new_cfg))
    except LayoutError as e:
        return Compat(NOT_CHECKED, f"no state layout: {e}")
    diffs = mismatches(old_layout.tensors, new_layout.tensors)
    if diffs:
        return Compat(
            CANNOT,
            f"{_named(diffs)}; the restore fails (a size mismatch or missing key in dcp.load, "
            "or optimizer param groups that no longer match) and the job stops at once",
            differ=diffs,
        )
    resets = _resets(old_cfg, new_cfg, old, new)
    return Compat(
        RESETS if resets else RESUMES,
        resets=resets,
        caveats=_caveats(old_layout, new_layout, old_cfg, new_cfg),
    )


def _compare_fingerprints(old: Any, new: Any, source: str | None) -> Compat:
    by = f" (fingerprint {source})" if source else ""
    if old == new:
        return Compat(RESUMES, f"same state fingerprint{by}")
    if isinstance(old, dict) and isinstance(new, dict):
        diffs = [f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in new if old.get(k) != new.get(k)]
        diffs += [f"{k} is in the checkpoint but not in the new state" for k in old if k not in new]
        return Compat(CANNOT, f"state fingerprint differs{by}: {_named(diffs)}", differ=diffs)
    return Compat(CANNOT, f"state fingerprint differs{by}: {old!r} -> {new!r}", differ=[str(new)])
