"""The training loop: build everything, restore, step, log, checkpoint, summarise.

Kept thin on purpose: each concern lives in its own module (config, distributed, data, models,
parallel, metrics, checkpoint). The loop's rules:

* no host sync per step: the loss is accumulated on the device and reduced across ranks and
  moved to the host (``.item()``) only every ``--log-every`` steps;
* the batch of optimizer step ``s`` is ``Batches.get(s, micro)``, a pure function of the step,
  so resuming at any step replays exactly the same data (see data.py);
* checkpoint hooks (marked "checkpoint hook") are the only places checkpointing touches;
* reliability hooks (marked "reliability hook": watchdog.py, ledger.py, goodput.py, exits.py)
  watch every step for a hang, keep the run's ledger across restarts and report goodput.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import random
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from trainforge.training import agreement, data_order, exits, fp8, resume_note, versions
from trainforge.training import checkpoint as ckpt_mod
from trainforge.training.config import (
    ADAMW_BETAS,
    ADAMW_EPS,
    TrainConfig,
    as_dict,
    check_world,
    lr_factor,
)
from trainforge.training.data import Batches, ShardedOrder, build_dataset
from trainforge.training.distributed import (
    DeviceContext,
    DistEnv,
    abort,
    cleanup,
    cuda_context,
    init_distributed,
)
from trainforge.training.faults import InStepFault, corrupt_hook
from trainforge.training.goodput import Goodput
from trainforge.training.hostmem import SetupMemory
from trainforge.training.ledger import NO_PROGRESS_LIMIT, RunLedger
from trainforge.training.metrics import Reporter, peak_flops
from trainforge.training.models import build_model
from trainforge.training.parallel import (
    accumulation,
    autocast,
    load_wrappers,
    parallelize,
    resolve_precision,
    unwrap,
)
from trainforge.training.preemption import PREEMPTED_EXIT_CODE, handlers_restored
from trainforge.training.timeouts import Timeouts, applied_env
from trainforge.training.watchdog import Fired, Watchdog

# Wall-clock start of this process, the start of this attempt for goodput (ledger.py).
PROCESS_STARTED_AT = time.time()
# The exit line's action for a non-finite loss: the run stops on the loss it logged (a
# RunFailure, no traceback), so user_error's "fix the error in the traceback" points at nothing.
NON_FINITE_LOSS_ACTION = (
    "lower --lr; the run stopped on its logged loss (rank 0's log), there is no traceback"
)


@dataclasses.dataclass
class TrainState:
    """Everything a checkpoint must capture (RNG is captured by checkpoint.py per rank).

    ``step`` counts completed optimizer steps: the next step to run, and the step a checkpoint
    taken now resumes at.
    """

    model: nn.Module  # the wrapped (DDP / FSDP2) module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    step: int = 0


def build_optimizer(
    model: nn.Module, cfg: TrainConfig, device: torch.device
) -> torch.optim.Optimizer:
    """AdamW. The GPT does not decay biases and norms (a second param group); the MLP decays
    everything, as the seed's optimizer did -- one group is also one foreach launch per step."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups: list[dict[str, Any]] = [{"params": params, "weight_decay": cfg.weight_decay}]
    if not getattr(unwrap(model), "decay_all_params", False):
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
    # fused (one kernel) on CUDA; foreach (one C++ loop over all tensors) on CPU, which beats
    # the per-parameter Python loop torch picks by default there.
    extra: dict[str, Any] = {"fused": True} if device.type == "cuda" else {"foreach": True}
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=ADAMW_BETAS, eps=ADAMW_EPS, **extra)


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: TrainConfig
) -> torch.optim.lr_scheduler.LRScheduler:
    """A torch LRScheduler so its state (last_epoch) goes into checkpoints."""

    def factor(step: int) -> float:
        return lr_factor(step, cfg.warmup_steps, cfg.steps)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def default_output_dir(cfg: TrainConfig) -> Path:
    if cfg.output_dir:
        return Path(cfg.output_dir)
    return Path("runs") / run_name(cfg)


def run_name(cfg: TrainConfig) -> str:
    return cfg.run_name or f"{cfg.model}-{cfg.strategy}-{time.strftime('%Y%m%d-%H%M%S')}"


def seed_rank_rng(seed: int, rank: int) -> None:
    """Per-rank streams for anything stochastic during training (dropout, sampling)."""
    torch.manual_seed(seed * 7919 + 1 + rank)
    random.seed(seed * 7919 + 1 + rank)


def param_stats(model: nn.Module) -> dict[str, list[float]]:
    """Per-parameter (sum, sum of squares) of the FULL tensors, in float64; collective for FSDP.

    Exact equality across ranks proves replicas agree; tolerance comparisons across runs
    (e.g. 1 vs 2 workers) use the values.
    """
    out: dict[str, list[float]] = {}
    for name, p in unwrap(model).named_parameters():
        t = p.detach()
        if hasattr(t, "full_tensor"):
            t = t.full_tensor()
        t = t.to("cpu", torch.float64)
        out[name] = [float(t.sum()), float((t * t).sum())]
    return out


def train(cfg: TrainConfig) -> int:
    """Entry point for one process of the job; returns the process exit code.

    What the run sets in its process for itself is undone on return, so that a second call in
    the same process (a notebook, a test) starts from the caller's state, not the first run's:
    the NCCL and flight-recorder variables (`timeouts.applied_env`), the ledger that
    checkpoint restores note their step in (`resume_note.scope`), a start of DCP's
    checkpoint process that no manager took (`checkpoint.writer_start_of_this_run`), and the
    SIGTERM/SIGINT handlers (`preemption.handlers_restored`: a failed run never closed its
    PreemptionHandler). `exits.context` is kept: the caller's exit line (`__main__`, `exits.report`) names the
    rank and step the run reached; the next call starts a fresh one."""
    with contextlib.ExitStack() as undo:
        undo.enter_context(resume_note.scope())
        undo.enter_context(ckpt_mod.writer_start_of_this_run())
        undo.enter_context(handlers_restored())
        return _run(cfg, undo)


def _run(cfg: TrainConfig, undo: contextlib.ExitStack) -> int:
    """`train`'s run; what it sets in the process for itself goes on `undo`."""
    # where this run is, for its exit line: never an earlier in-process run's rank and step
    exits.context = exits.Context()
    # An unsupported torch is refused here, before a process group or a step: on every rank
    # alike (one image), said once by rank 0 (exits.report prints config errors once).
    unsupported = versions.problem(versions.torch_version())
    if unsupported is not None:
        raise exits.RunFailure(exits.CONFIG_ERROR, unsupported)
    timeouts = Timeouts.from_hang_timeout(cfg.hang_timeout)
    # reliability hook: NCCL error handling, heartbeat and the flight recorder are read when
    # the process group is created; torch's own dump on a collective timeout lands next to
    # the watchdog's, under the output directory (shared storage in pods).
    recorder_dir = default_output_dir(cfg) / "flight-recorder"
    with contextlib.suppress(OSError):
        recorder_dir.mkdir(parents=True, exist_ok=True)
    undo.enter_context(applied_env(timeouts, str(recorder_dir / "nccl_trace_rank_")))
    t_pg = time.perf_counter()
    env = init_distributed(timeout_s=timeouts.collective)
    phases = {"process_group_s": time.perf_counter() - t_pg}
    if (started := _process_start_wall()) is not None:
        # interpreter start, imports and flag parsing, up to the process group's creation
        phases["process_start_s"] = max(0.0, t_pg - time.perf_counter() + time.time() - started)
    exits.context.rank = env.rank
    # the GPU's CUDA context, created on a thread while set-up goes on (DeviceContext)
    device_context = cuda_context(env.device)
    failed = True
    try:
        code = _train(cfg, env, timeouts, phases, device_context)
        failed = False
        return code
    except exits.RunFailure as e:
        exits.record(e.reason, e.detail)  # before the teardown below: see exits.record
        raise
    except Exception as e:
        exits.record(*exits.diagnose(e))
        raise
    finally:
        if device_context is not None:
            device_context.join()  # a run that stopped before needing the GPU
        # a failing rank waits for no collective its peers may never join (distributed.abort)
        if failed:
            abort()
        else:
            cleanup()


def _train(
    cfg: TrainConfig,
    env: DistEnv,
    timeouts: Timeouts | None = None,
    phases: dict[str, float] | None = None,
    device_context: DeviceContext | None = None,
) -> int:
    t_setup = time.perf_counter()
    # set-up split for the summary (bench/gpu_check.py's set-up row): where the seconds before
    # the first step go; compile's warm-up is the start-up windows' (metrics.Reporter.rates)
    phases = dict(phases or {})
    mark = [t_setup]

    def lap(name: str) -> None:
        now = time.perf_counter()
        phases[name] = phases.get(name, 0.0) + now - mark[0]
        mark[0] = now

    host = SetupMemory.start()  # this rank's host memory from here to the first step
    timeouts = timeouts or Timeouts.from_hang_timeout(cfg.hang_timeout)
    if cfg.precision == "fp8" and (why := _fp8_problem(env.device)) is not None:
        raise exits.RunFailure(exits.CONFIG_ERROR, why)  # one line, before any model exists
    if cfg.precision == "fp8":
        lap("fp8_check_s")  # the device's FP8 check
    if (why := load_wrappers(cfg)) is not None:  # torchao missing: one line, still no model
        raise exits.RunFailure(exits.CONFIG_ERROR, why)
    lap("imports_s")  # torchao (fp8), torch._dynamo, torch.compile's compiler, FSDP2
    dataset = build_dataset(cfg)
    cfg = check_world(cfg, env.world_size, len(dataset))
    lap("dataset_s")
    # --async-checkpoint: DCP's checkpoint process starts in the background while the model
    # builds (a fresh interpreter importing torch: seconds), not inside the first save's write
    if ckpt_mod.start_writer(cfg.checkpoint, last_step=cfg.steps):
        lap("checkpoint_start_s")  # DCP's import (here, not at the first save) and the thread

    def device_ready() -> None:  # parallelize's first allocation on the device comes next
        lap("model_s")  # build on meta, (fp8 conversion,) compile wrappers, shard
        if device_context is not None:
            device_context.wait()
            lap("cuda_init_s")  # waiting for the CUDA context: what the overlap did not hide
            phases["cuda_context_s"] = device_context.seconds or 0.0

    # on the meta device: parallelize shards (or replicates) it, then each rank allocates and
    # draws only its own part, from --seed (models/init.py): the same weights for any world
    model = build_model(cfg, device="meta")
    raw = model
    dtype = resolve_precision(cfg, env.device)
    model = parallelize(model, cfg, env, dtype, device_ready)
    lap("weights_s")  # allocate this rank's weights on the device and draw them (DDP: wrap)
    optimizer = build_optimizer(model, cfg, env.device)
    scheduler = build_scheduler(optimizer, cfg)
    state = TrainState(model=model, optimizer=optimizer, scheduler=scheduler)

    order = ShardedOrder(
        len(dataset),
        seed=cfg.seed,
        rank=env.rank,
        world_size=env.world_size,
        batch_size=cfg.batch_size,
        grad_accum=cfg.grad_accum,
    )
    batches = Batches(dataset, order, env.device)
    seed_rank_rng(cfg.seed, env.rank)

    name = run_name(cfg)
    out_dir = default_output_dir(cfg)
    global_batch = cfg.global_batch(env.world_size)
    reporter = Reporter(
        enabled=env.is_main,
        total_steps=cfg.steps,
        samples_per_step=global_batch,
        tokens_per_sample=raw.tokens_per_sample,
        flops_per_sample=raw.flops_per_sample(),
        world_size=env.world_size,
        peak=peak_flops(env.device),
        output_dir=out_dir,
        metrics_port=cfg.metrics_port,
        run_name=name,
        params=as_dict(cfg),
    )

    def log_all(msg: str) -> None:  # checkpoint/preemption messages: every rank, tagged
        print(f"[rank{env.rank}] {msg}", flush=True)

    reporter.log(
        f"trainforge: {cfg.strategy} {cfg.model} on {env.world_size} x {env.device.type} "
        f"({env.backend}, {_precision_words(cfg, dtype, raw)}), global batch {global_batch} = "
        f"{cfg.batch_size} x {env.world_size} ranks x {cfg.grad_accum} accum, "
        f"{len(dataset)} samples, {cfg.steps} steps, output {out_dir}"
    )

    # reliability hook: the run ledger (attempts, exits, goodput across restarts)
    ledger = RunLedger(
        cfg.checkpoint.directory,
        rank=env.rank,
        world_size=env.world_size,
        log=log_all,
        process_started_at=PROCESS_STARTED_AT,
    )
    _begin_attempt(ledger, env, reporter)
    # Before anything that may die (model build, restore): attempts that keep dying there
    # never reach the check after the restore below.
    _check_progress(ledger, env, None, reporter)
    exits.context.ledger = ledger
    goodput = Goodput(ledger)
    watchdog = _watchdog(cfg, env, timeouts, out_dir, ledger, log_all)

    # checkpoint hook (before the loop): resume model, optimizer, scheduler, RNG and step from
    # the newest complete checkpoint; the data position follows from the step.
    order_inputs = {f: getattr(cfg, f) for f in data_order.DATA_FIELDS}  # saved, compared
    checkpointing = ckpt_mod.Checkpointing(
        cfg.checkpoint,
        log=log_all,
        global_batch=global_batch,
        data=order_inputs,
        last_step=cfg.steps,
    )
    try:
        with _watched(watchdog, "restore"):
            state.step = checkpointing.restore(state.model, state.optimizer, state.scheduler)
        exits.context.step = state.step
        if state.step >= cfg.steps:
            # A reused --checkpoint-dir: training zero steps silently looks like success.
            reporter.log(
                f"resumed at step {state.step}, which is already at --steps {cfg.steps}: nothing "
                "left to train. Raise --steps to continue this run, or use a new --checkpoint-dir "
                "(or --resume never) to start over"
            )
        _check_progress(ledger, env, state.step, reporter)
        goodput.begin(state.step)
        host.stop(raw)
        lap("restore_and_other_s")  # optimizer, reporter, ledger, watchdog, checkpoint restore
        code = _loop(cfg, env, state, batches, reporter, checkpointing, dtype, watchdog,
                     goodput)  # fmt: skip
        if code != 0:
            return code
        # checkpoint hook (after the loop): final checkpoint + drain async saves
        with _watched(watchdog, "final checkpoint"):
            t0 = time.perf_counter()
            before = checkpointing.manager.last_started_step
            checkpointing.finish(state.step, state.model, state.optimizer, state.scheduler)
            if checkpointing.manager.last_started_step != before:
                goodput.checkpoint_started(state.step)
                goodput.checkpoint_blocked(time.perf_counter() - t0)
            reporter.gauges.update(checkpointing.metrics())
            verdict = _finish(cfg, env, state, reporter, global_batch, raw, t_setup, name,
                              checkpointing, goodput, host, phases)  # fmt: skip
        if not verdict.agree:
            raise exits.RunFailure(exits.RANKS_DISAGREE, verdict.detail)
        return 0
    except KeyboardInterrupt:
        # checkpoint hook (Ctrl-C, in the restore, the loop or the final checkpoint): no new
        # save; the exit line says what the next run resumes from and the steps lost
        # (Checkpointing.interrupted; before the restore returned, context.step is None and
        # the line reads the disk). Earlier, __main__ says the same from the disk.
        resumed = exits.context.step is not None
        detail = checkpointing.interrupted(state.step if resumed else None)
        raise exits.RunFailure(exits.INTERRUPTED, detail) from None
    finally:
        if watchdog is not None:
            watchdog.close()
        reporter.close()


# Test hook: lets `--precision fp8` run on the CPU through torchao's emulated float8 matmuls,
# so that CI proves the loop's FP8 wiring end to end (tests/training/test_fp8.py,
# bench/gpu_check.py --dry-run). Never set in a pod: the refusal below is what users get.
FP8_ON_CPU_ENV = "TRAINFORGE_TEST_FP8_ON_CPU"


def _fp8_problem(device: torch.device) -> str | None:
    """The device's FP8 check; torchao's import is the imports phase's (load_wrappers)."""
    if device.type == "cpu" and os.environ.get(FP8_ON_CPU_ENV) == "1":
        return fp8.problem("cuda", fp8.MIN_CAPABILITY, torchao=False)  # torchao: still needed
    return fp8.device_problem(device, torchao=False)


def _precision_words(cfg: TrainConfig, dtype: torch.dtype, raw: nn.Module) -> str:
    """The dtype for the first log line; FP8 runs name what runs in float8."""
    words = str(dtype).removeprefix("torch.")
    if cfg.precision != "fp8":
        return words
    n = len(getattr(raw, "float8_layers", ()))
    gather = "; FSDP float8 all-gather" if getattr(raw, "float8_all_gather", False) else ""
    return (
        f"fp8: float8 matmuls in {n} Linear layers (torchao){gather}, {words} elsewhere; "
        "MFU vs bf16 peak"
    )


def _begin_attempt(ledger: RunLedger, env: DistEnv, reporter: Reporter) -> None:
    """Rank 0 registers this attempt and names why the previous one ended; all ranks learn
    the attempt number (their exit records are filed under it)."""
    box: list[Any] = [None]
    if env.is_main:
        attempt = ledger.begin_attempt()
        box = [(attempt, ledger.previous_exit())]
    dist.broadcast_object_list(box, src=0)
    attempt, previous = box[0]
    ledger.attempt_no = attempt
    if previous:
        reporter.log(
            f"restart: attempt {attempt}; attempt {attempt - 1} ended with "
            f"{exits.describe_exit(previous)}"
        )
    reporter.gauges.update(_attempt_gauges(ledger))


def _attempt_gauges(ledger: RunLedger) -> dict[str, float]:
    out: dict[str, float] = {"restarts": float(ledger.restarts)}
    counts = {r: 0 for r in exits.REASONS if r != exits.SUCCESS.name}
    for a in ledger.attempts:
        if a.exit and a.exit.get("reason") in counts:
            counts[a.exit["reason"]] += 1
    for reason, n in counts.items():
        out[f'attempt_exits{{reason="{reason}"}}'] = float(n)
    return out


def _check_progress(ledger: RunLedger, env: DistEnv, step: int | None, reporter: Reporter) -> None:
    """Stop a job that keeps failing from the same checkpoint (the training operator's
    ExitCode policy re-creates pods for retryable codes without a limit)."""
    box = [ledger.attempts_without_progress(step) if env.is_main else 0]
    dist.broadcast_object_list(box, src=0)
    failed = int(box[0])
    if failed >= NO_PROGRESS_LIMIT:
        raise exits.RunFailure(
            exits.NO_PROGRESS,
            f"{failed} attempts in a row failed "
            + (f"after resuming from step {step} " if step is not None else "before resuming ")
            + f"(limit {NO_PROGRESS_LIMIT}); the last one: "
            + exits.describe_exit(ledger.previous_exit()),
        )


def _watchdog(
    cfg: TrainConfig,
    env: DistEnv,
    timeouts: Timeouts,
    out_dir: Path,
    ledger: RunLedger,
    log: Any,
) -> Watchdog | None:
    """The hang watchdog (watchdog.py), or None with --hang-timeout 0."""
    if not timeouts.watchdog_enabled:
        return None

    def record(fired: Fired) -> None:
        ledger.record_exit(
            exits.HANG,
            step=fired.activity.step,
            detail=fired.detail,
            extra={"collectives": fired.collectives},
        )

    return Watchdog(
        timeouts.hang_timeout,
        startup_s=timeouts.watchdog_startup,
        rank=env.rank,
        world_size=env.world_size,
        log=log,
        dump_dir=out_dir / "flight-recorder" / f"attempt_{ledger.attempt_no:04d}",
        on_fire=record,
    ).start()


def _watched(watchdog: Watchdog | None, name: str, step: int | None = None) -> Any:
    return watchdog.section(name, step=step) if watchdog is not None else contextlib.nullcontext()


def micro_step(
    model: nn.Module,
    batch: tuple[torch.Tensor, torch.Tensor],
    last: bool,
    cfg: TrainConfig,
    device: torch.device,
    dtype: torch.dtype,
    amp: contextlib.AbstractContextManager | None = None,
) -> torch.Tensor:
    """Forward and backward of one micro-batch; returns the detached loss.

    One function so that what the planner's memory model is measured against
    (tests/jobs/memory_probe.py) is exactly what the loop runs.

    Autocast covers the forward and the loss only, as PyTorch's AMP guide says ("Backward
    passes under autocast are not recommended") and as the bare loop of bench/throughput.py
    does: autograd runs the backward pass with the thread-local state ``backward()`` was
    called in, so inside the region every backward op went through autocast too
    (tests/training/test_loop_overhead.py). On CUDA that is not free: ``sum`` is on CUDA's
    fp32_set_opt_dtype list (aten/src/ATen/autocast_mode.h, read 2026-11-29), so each bias
    gradient's reduction comes out fp32 where the bare loop's is bf16. Losses and weights on
    the CPU are bit-identical either way (fp32 and bf16, with and without accumulation).
    ``amp``: the loop's autocast context, built once per run (torch.autocast's constructor
    asks CUDA whether the device has bf16 units, every time); None builds one.
    """
    amp = amp if amp is not None else autocast(device, dtype, cfg.strategy)
    with accumulation(model, last):
        x, y = batch
        with amp:
            loss = unwrap(model).loss_from_logits(model(x), y)  # through the wrapper's hooks
        (loss / cfg.grad_accum if cfg.grad_accum > 1 else loss).backward()
    return loss.detach()


def _loop(
    cfg: TrainConfig,
    env: DistEnv,
    state: TrainState,
    batches: Batches,
    reporter: Reporter,
    checkpointing: ckpt_mod.Checkpointing,
    dtype: torch.dtype,
    watchdog: Watchdog | None = None,
    goodput: Goodput | None = None,
) -> int:
    model, optimizer, scheduler = state.model, state.optimizer, state.scheduler
    loss_acc = torch.zeros((), device=env.device, dtype=torch.float32)  # stays on device
    window = 0
    fault = InStepFault(env.rank)  # test hook (faults.py); inert unless TRAINFORGE_TEST_FAULT
    fault_log = reporter.log if env.is_main else print
    ckpt_may_block = checkpointing.may_block  # fixed for the run: its config does not change
    # FSDP2's float8 all-gather (several ranks: fp8.float8_all_gather) precomputes scales
    fp8_scales = getattr(unwrap(model), "float8_all_gather", False)
    amp = autocast(env.device, dtype, cfg.strategy)  # entered by every micro-step
    dist.barrier()  # ranks start the clock together (throughput numbers exclude setup skew)
    reporter.start_loop(state.step)
    while state.step < cfg.steps:
        # reliability hook: the watchdog times this step (forward to the log step's sync)
        t_step = time.perf_counter()
        exits.context.step = state.step + 1  # the step in progress (1-based)
        if watchdog is not None:
            watchdog.step_started(state.step + 1)
        fault(state.step + 1, fault_log)
        for micro in range(cfg.grad_accum):
            batch = batches.get(state.step, micro)
            last = micro == cfg.grad_accum - 1
            loss = micro_step(model, batch, last, cfg, env.device, dtype, amp)
            loss_acc.add_(loss)  # summed over micro-steps; averaged when logged
        optimizer.step()
        if fp8_scales:
            fp8.after_optimizer_step(model)  # FSDP2's float8 all-gather: next scales, at once
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        state.step += 1
        window += 1
        reporter.stepped(state.step)  # the stall alert's gauges: every step (a float store)

        logged = state.step % cfg.log_every == 0 or state.step == cfg.steps
        if logged:
            dist.all_reduce(loss_acc, op=dist.ReduceOp.SUM)  # every rank, same steps
            # the only host sync: mean over ranks, steps and micro-steps of the window
            mean = loss_acc.item() / (window * env.world_size * cfg.grad_accum)
        if watchdog is not None:
            watchdog.step_finished()
        if goodput is not None:
            goodput.step(state.step, time.perf_counter() - t_step)
        if logged:
            extra = checkpointing.metrics()
            if goodput is not None:
                extra.update(goodput.gauges())
                goodput.flush()
            if watchdog is not None:
                extra["watchdog_bound_seconds"] = watchdog.bound()[0]
            reporter.record(state.step, mean, scheduler.get_last_lr()[0], extra)
            loss_acc.zero_()
            window = 0
            if not math.isfinite(mean):
                reporter.log(f"error: loss is {mean} at step {state.step}; lower --lr")
                raise exits.RunFailure(
                    exits.USER_ERROR,
                    f"loss is {mean} at step {state.step}; lower --lr",
                    action=NON_FINITE_LOSS_ACTION,
                )

        # checkpoint hook (after each optimizer step): periodic save, and the stop flag --
        # True once every rank agreed on a SIGTERM and a checkpoint of this step is saved.
        # Watched and timed only where it can block (may_block); else it runs the test hook.
        if not ckpt_may_block:
            checkpointing.after_step(state.step, model, optimizer, scheduler)
            continue
        before = checkpointing.manager.last_started_step
        t_ckpt = time.perf_counter()
        with _watched(watchdog, "checkpoint", state.step):
            stop = checkpointing.after_step(state.step, model, optimizer, scheduler)
        if goodput is not None and checkpointing.manager.last_started_step != before:
            goodput.checkpoint_started(state.step)
            goodput.checkpoint_blocked(time.perf_counter() - t_ckpt)
        if stop:
            return PREEMPTED_EXIT_CODE
    return 0


def _finish(
    cfg: TrainConfig,
    env: DistEnv,
    state: TrainState,
    reporter: Reporter,
    global_batch: int,
    raw: nn.Module,
    t_setup: float,
    name: str,
    checkpointing: ckpt_mod.Checkpointing,
    goodput: Goodput | None = None,
    host: SetupMemory | None = None,
    phases: dict[str, float] | None = None,
) -> agreement.Agreement:
    # each rank vouches for its own memory: its replica (DDP) or its local shard (FSDP)
    verdict = agreement.check(unwrap(state.model), env.rank, env.world_size, corrupt_hook(env.rank))
    agree = verdict.agree
    if not agree:
        reporter.log(f"error: {verdict.detail}")
    stats = param_stats(state.model)
    memory = _peak_memory(env)  # the largest rank's: what has to fit (a collective)
    setup_host = [None] * env.world_size  # every rank's host memory during setup
    dist.all_gather_object(setup_host, host.as_dict(env.rank) if host is not None else None)
    if not env.is_main:
        return verdict
    now = time.perf_counter()
    steps_run = state.step - reporter.first_step
    if steps_run == 0:  # resumed at --steps: no loss, no rate of its own
        reporter.nothing_trained(state.step)
        return verdict
    elapsed = now - reporter.loop_start
    # the headline rates are the steady state's (start-up windows left out, and named)
    rates = reporter.rates(elapsed, steps_run)
    rates["startup"]["setup_seconds"] = reporter.loop_start - t_setup
    hist = reporter.history
    summary: dict[str, Any] = {
        "run_name": name,
        "steps": state.step,
        "steps_this_run": steps_run,
        "world_size": env.world_size,
        "device": env.device.type,
        "global_batch": global_batch,
        "final_loss": reporter.last_loss,
        "losses": [[int(h["step"]), h["loss"]] for h in hist],
        "elapsed_seconds": elapsed,
        "setup_seconds": reporter.loop_start - t_setup,
        # the seconds before the first step, by phase: process_start_s (interpreter, imports)
        # and process_group_s come before `setup_seconds`; fp8_check_s, imports_s, dataset_s,
        # checkpoint_start_s, model_s, cuda_init_s, weights_s, restore_and_other_s and
        # loop_start_s (the ranks' first barrier) add up to it; cuda_context_s ran on a
        # thread beside them (not added)
        "setup_phases": _setup_phases(phases, reporter.loop_start - t_setup),
        "setup_host_memory": setup_host,
        **rates,
        "ranks_agree": agree,
        "param_stats": stats,
        "checkpoint": checkpointing.metrics(),
        # rank 0's DCP checkpoint process (async saves): what it holds of the pod's memory
        "checkpoint_process_memory": checkpointing.process_memory(),
        "config": as_dict(cfg),
        "pid": os.getpid(),
        # for `trainforge calibrate` (the planner's facts): what ran, on what, and its peak
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device_name": torch.cuda.get_device_name(env.device)
        if env.device.type == "cuda"
        else "cpu",
        "precision": "fp8"
        if cfg.precision == "fp8"
        else str(resolve_precision(cfg, env.device)).removeprefix("torch."),
        # MFU (rates above) is against the bf16 peak in every precision: FP8 runs say so here
        "mfu_basis": "bf16 peak" if reporter.peak else None,
        "float8_layers": list(getattr(raw, "float8_layers", ())),
        # FSDP2 gathered the float8 weights (several ranks, or the test hook): fp8.py
        "float8_all_gather": bool(getattr(raw, "float8_all_gather", False)),
        "parameters": sum(p.numel() for p in raw.parameters()),
        "flops_per_sample": raw.flops_per_sample(),
        "peak_flops_per_gpu": reporter.peak,
        **memory,
    }
    if goodput is not None:
        # reliability hook: goodput across every attempt, and why each earlier attempt ended
        gp = goodput.snapshot()
        summary["goodput"] = gp
        summary["restarts"] = gp["restarts"]
        summary["attempts"] = [
            {
                "attempt": a.attempt,
                "resumed_step": a.resumed_step,
                "last_step": a.last_step,
                "exit": a.exit,
            }  # fmt: skip
            for a in goodput.ledger.attempts
        ]
        reporter.gauges.update(goodput.gauges())
    reporter.summary(summary)
    return verdict


def _process_start_wall() -> float | None:
    """This process's start as wall-clock time, from Linux's /proc (None elsewhere):
    /proc/self/stat field 22 is the start in clock ticks after boot, /proc/uptime the seconds
    since boot (proc(5))."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22; fields 1-2 end at ")"
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


# The phases inside `setup_seconds`, in order (each present when it ran; they add up to it).
SETUP_PHASES = ("fp8_check_s", "imports_s", "dataset_s", "checkpoint_start_s", "model_s",
                "cuda_init_s", "weights_s", "restore_and_other_s", "loop_start_s")  # fmt: skip


def _setup_phases(phases: dict[str, float] | None, setup_seconds: float) -> dict[str, float]:
    inside = SETUP_PHASES[:-1]
    out = dict(phases or {})
    out["loop_start_s"] = max(0.0, setup_seconds - sum(out.get(k, 0.0) for k in inside))
    return out


def _peak_memory(env: DistEnv) -> dict[str, int | None]:
    """Peak GPU memory PyTorch allocated and reserved, the maximum over ranks (None on CPU,
    where torch keeps no such counter)."""
    if env.device.type != "cuda":
        return {"peak_memory_allocated_bytes": None, "peak_memory_reserved_bytes": None}
    mine = torch.tensor(
        [torch.cuda.max_memory_allocated(env.device), torch.cuda.max_memory_reserved(env.device)],
        device=env.device,
        dtype=torch.int64,
    )
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    allocated, reserved = (int(v) for v in mine.tolist())
    return {"peak_memory_allocated_bytes": allocated, "peak_memory_reserved_bytes": reserved}
