"""What a resume does to the data order, in one wording for the runtime's resume line
(training/checkpoint.py) and the plan's resume check (plan/ckpt_compat.py), so that what the
plan predicts is what the run prints. Torch-free: the plan imports it.

The order is a function of (seed, data, global batch) (training/data.py, ShardedOrder):
step s reads block s of global-batch indices, so a resume with another global batch -- the
same --batch-size on another world size, or another --batch-size -- reads other samples at
the same step; another world size with the same global batch reads the same ones.
"""

from __future__ import annotations

EFFECT = "step s now reads other samples (the order is a function of seed, data and global batch)"


def global_batch_change(old: int | None, new: int | None) -> str:
    """`global batch OLD -> NEW`, `?` where a side is unknown."""
    return f"global batch {old or '?'} -> {new or '?'}"


def reset(why: list[str]) -> str:
    """The data-order reset for these causes (`global batch 16 -> 8`, `--seed 1 -> 2`)."""
    return "data order: " + ", ".join(why) + "; " + EFFECT


# The data the order is a function of, besides the global batch: the TrainConfig fields whose
# change resets it. One list: the checkpoint's extras keep their values (checkpoint.py), the
# runtime's resume line and the plan's resume check (plan/ckpt_compat.py) compare them.
DATA_FIELDS = ("seed", "dataset", "data_path", "dataset_size")


def data_changes(old: dict | None, new: dict | None) -> list[str]:
    """`--flag old -> new` for each DATA_FIELDS value the checkpoint kept (`old`) that differs
    from this run's (`new`); none where the checkpoint kept none (saved before it did)."""
    if not isinstance(old, dict) or not new:
        return []
    return [
        f"--{f.replace('_', '-')} {old[f]} -> {new.get(f)}"
        for f in DATA_FIELDS
        if f in old and old[f] != new.get(f)
    ]


def resume_note(
    old_world: int | None,
    new_world: int,
    old_batch: int | None,
    new_batch: int,
    old_data: dict | None = None,
    new_data: dict | None = None,
) -> str | None:
    """What the resume line adds when the checkpoint was saved with another world size, global
    batch or data (`data_changes`: a seed or dataset of its own; None: nothing changed, or the
    checkpoint does not say)."""
    world = f"world size {old_world} -> {new_world}" if old_world and old_world != new_world else ""
    why = (
        [global_batch_change(old_batch, new_batch)] if old_batch and old_batch != new_batch else []
    )
    why += data_changes(old_data, new_data)
    if why:
        return "; ".join(p for p in (world, reset(why)) if p)
    if not world:
        return None
    if old_batch:
        return f"{world}, global batch {new_batch} kept: step s reads the same samples"
    return (
        f"{world}; the checkpoint does not record its global batch: if it was not "
        f"{new_batch}, {EFFECT}"
    )
