"""Process-group setup from the environment torchrun and the Kubeflow training operator set.

torchrun (and the operator for one process per pod) sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE,
RANK, LOCAL_RANK, LOCAL_WORLD_SIZE; we initialise with ``env://``. With none of them set the
runtime is a single process, but it still gets a 1-rank process group (an in-memory store) so
DDP, FSDP2 and DCP checkpointing run the same code path everywhere.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import gc
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable

import torch
import torch.distributed as dist

# The operator's PET_* variables are torchrun's own flags (PET_NNODES, PET_NODE_RANK, ...) and
# are consumed by torchrun; when a pod runs the runtime directly they mirror the plain ones.
_FALLBACKS = {"WORLD_SIZE": "PET_NNODES", "RANK": "PET_NODE_RANK"}


@dataclasses.dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device: torch.device
    backend: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None and name in _FALLBACKS:
        raw = os.environ.get(_FALLBACKS[name])
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise RuntimeError(f"environment variable {name}={raw!r} is not an integer") from None


# The collective timeout the default group was created with; side groups (checkpointing,
# preemption agreement) use the same one, so every wait of a rank gives up together
# (timeouts.py). torch's new_group would otherwise default to 30 minutes for gloo.
_GROUP_TIMEOUT: datetime.timedelta | None = None
# What `init_distributed` set in the environment for its group (timeouts.applied_env), given
# back by `cleanup`/`abort`: a second init in the process (a notebook, a test) then derives
# its own NCCL heartbeat from its hang timeout instead of keeping the first one's.
_SET_FOR_THE_GROUP = contextlib.ExitStack()


def group_timeout() -> datetime.timedelta | None:
    """The timeout for ``dist.new_group``; None (torch's default) outside init_distributed."""
    return _GROUP_TIMEOUT


def init_distributed(timeout_s: float | None = None) -> DistEnv:
    """Initialise the default process group; NCCL when CUDA is present, gloo otherwise (but a
    pod given GPUs that CUDA cannot see fails instead: `_refuse_cpu_in_a_gpu_pod`).

    ``timeout_s`` bounds every collective and the process-group setup (the ``env://`` store
    connection). Default: derived from the job's hang timeout (the contract's
    TRAINFORGE_HANG_TIMEOUT, 300 s when unset: 960 s), which also sets NCCL's error handling,
    heartbeat and flight recorder variables this process has not set itself, so that every
    wait of the job gives up in the order docs/reliability.md describes (`cleanup` and
    `abort` remove them again)."""
    global _GROUP_TIMEOUT
    if timeout_s is None:
        from trainforge.training.contract import job_env  # noqa: PLC0415
        from trainforge.training.timeouts import Timeouts, applied_env  # noqa: PLC0415

        derived = Timeouts.from_hang_timeout(job_env().hang_timeout)
        _SET_FOR_THE_GROUP.enter_context(applied_env(derived))
        timeout_s = derived.collective
    world_size = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local_rank = _env_int("LOCAL_RANK", 0)
    local_world_size = _env_int("LOCAL_WORLD_SIZE", 1 if world_size == 1 else world_size)
    if torch.cuda.is_available():
        if local_rank >= torch.cuda.device_count():
            raise RuntimeError(
                f"LOCAL_RANK={local_rank} but only {torch.cuda.device_count()} GPU(s) are visible; "
                "run one process per GPU (torchrun --nproc-per-node = GPUs per node)"
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        # fp32 matmuls on tensor cores (TF32) for --precision fp32 runs; bf16 is unaffected
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        backend = "nccl"
    else:
        _refuse_cpu_in_a_gpu_pod()
        device = torch.device("cpu")
        backend = "gloo"
    timeout = datetime.timedelta(seconds=timeout_s)
    _GROUP_TIMEOUT = timeout
    if not dist.is_initialized():
        _bind_defaults_before_the_group()
        if "MASTER_ADDR" in os.environ:
            # as any code does: a torchrun restart regroups through the launch config, which
            # gives each attempt a store of its own (trainforge/training/torchrun_env.py)
            dist.init_process_group(
                backend, init_method="env://", rank=rank, world_size=world_size, timeout=timeout
            )
        elif world_size == 1:
            dist.init_process_group(
                backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout
            )
        else:
            raise RuntimeError(
                f"WORLD_SIZE={world_size} but MASTER_ADDR/RANK are not set; launch with torchrun "
                "or `trainforge run-local --workers N`"
            )
    return DistEnv(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=local_rank,
        local_world_size=local_world_size,
        device=device,
        backend=backend,
    )


def _first_allocation(device: torch.device) -> None:
    """One allocation on ``device``: creates this process's CUDA context on that GPU and
    starts the caching allocator. Only there: the index is explicit (a new thread's current
    device is 0), and the device guard's restore, ``CUDAGuardImpl::uncheckedSetDevice``, goes
    through ``c10::cuda::MaybeSetDevice``, which creates no context on a device that has none
    (c10/cuda/impl/CUDAGuardImpl.h, c10/cuda/CUDAFunctions.cpp; read 2026-11-29 in pytorch's
    source through the code search, a stored version, not pinned to v2.11.0)."""
    torch.empty(1, device=device)


class DeviceContext:
    """The GPU's CUDA context, created on a thread while set-up goes on.

    Why: on local rank 0 (every 1-GPU run) ``init_distributed`` leaves CUDA initialised but
    without a context: torch's ``set_device`` skips ``cudaSetDevice`` for the device already
    current (c10/cuda/CUDAFunctions.cpp ``SetDevice``) and the NCCL group connects lazily. The
    first allocation then creates it, in the middle of the model's set-up with nothing else
    running. Created here instead, beside the set-up work that needs no GPU (imports, the
    dataset, the meta-device model, sharding), its seconds overlap that work. (On other local
    ranks ``cudaSetDevice`` has created it already, and the thread only allocates.)

    Why a thread helps: the allocation runs in torch's generated binding, which releases the
    GIL around the ATen call (``pybind11::gil_scoped_release`` in every ``dispatch_*`` lambda
    tools/autograd/gen_python_functions.py emits); the context's creation is driver work in
    that call, so the main thread's Python keeps running. CUDA's runtime is thread-safe: a
    main-thread call that needs the context meanwhile waits for it inside CUDA.

    ``wait()`` is where the main thread first needs the device (before the weights are
    allocated); it re-raises the thread's error there, as the first allocation would have
    raised it. ``seconds`` is the thread's own time (the context and the first allocation);
    the loop reports it beside the set-up phases (`cuda_context_s`), never added to them, and
    the main thread's wait in them (`cuda_init_s`).
    """

    def __init__(
        self, device: torch.device, touch: Callable[[torch.device], None] | None = None
    ) -> None:
        self.device = device
        self.seconds: float | None = None
        self._touch = touch or _first_allocation
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name="trainforge-cuda-context", daemon=True
        )

    def start(self) -> DeviceContext:
        self._thread.start()
        return self

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            self._touch(self.device)
        except BaseException as e:  # re-raised on the main thread by wait()
            self._error = e
        finally:
            self.seconds = time.perf_counter() - t0

    def wait(self) -> None:
        """Block until the context exists; raise what creating it raised."""
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def join(self) -> None:
        """Let the thread end (a run that stops before `wait`); its error, if any, is dropped:
        the run is already failing for its own reason."""
        self._thread.join()


def cuda_context(device: torch.device) -> DeviceContext | None:
    """Start creating ``device``'s CUDA context on a thread (`DeviceContext`); None off CUDA."""
    if device.type != "cuda":
        return None
    return DeviceContext(device).start()


def _refuse_cpu_in_a_gpu_pod() -> None:
    """Raise `exits.RunFailure` where CUDA sees no GPU but this pod was given some (the
    /dev/nvidiaN nodes of `exits.gpu_devices`): training on CPU there would hold a GPU node
    for nothing. A CUDA build of torch: the node's driver or GPUs failed it (gpu_error,
    retried); a CPU build: the image's torch (config_error): `exits.without_gpu`, the reason
    and fix `exits.no_gpu` gives code that asks for cuda itself. A pod given no GPU, and `trainforge run-local`'s
    processes (contract.RUN_LOCAL: the job's pods on this machine's CPU), train on CPU."""
    from trainforge.training import exits  # noqa: PLC0415
    from trainforge.training.contract import RUN_LOCAL  # noqa: PLC0415

    given = exits.gpu_devices()
    if not given or os.environ.get(RUN_LOCAL):
        return
    cpu_build = exits.cpu_build()  # torch.version.cuda, as `exits.no_gpu` reads it
    reason, fix = exits.without_gpu(cpu_build, given)
    what = (
        f"this pod was given {given} GPU device(s) but torch {torch.__version__} is not "
        "compiled with CUDA"
        if cpu_build
        else "No CUDA GPUs are available (torch.cuda.is_available() is False)"
    )
    raise exits.RunFailure(reason, f"{what}; {fix}")


def _bind_defaults_before_the_group() -> None:
    """Import `torch.distributed.nn.functional` while no process group exists.

    Its ten collectives take `group=group.WORLD` as a default argument, evaluated once at
    import: imported after `init_process_group` (torch._dynamo imports it, at the first
    optimizer or DDP wrap), their defaults hold the default group for good, and
    `destroy_process_group` can never free it (gloo's threads keep running to the process's
    end). Imported first, the defaults are None.
    """
    import torch.distributed.nn.functional  # noqa: F401 - imported for the side effect above


def _clear_dtensor_caches() -> None:
    """Empty DTensor's process-wide caches, each of which keeps FSDP2's DeviceMesh alive.

    As torch 2.13.0's wheel has them (read 2026-11-29): the op-sharding caches (Python and
    C++; their output specs hold the mesh; torch's own DTensor tests clear them the same way,
    testing/_internal/distributed/_tensor/common_dtensor.py), the redistribute planners (held
    by a weak key, but each planner holds its mesh), the transform plans (their argument
    specs) and the mesh-topology cache (keyed by the mesh). A torch without one of them skips
    it; the group then lives to the process's exit, as before (core/process.py).
    """
    import importlib

    def module(name: str) -> object:
        # private modules: a torch that lacks one (or renamed it) skips its caches rather than
        # failing a run that has just finished
        try:
            return importlib.import_module(f"torch.distributed.tensor.{name}")
        except ImportError:
            return None

    debug, _redistribute, _collective_utils = map(
        module, ("debug", "_redistribute", "_collective_utils")
    )
    clears = (
        getattr(debug, "_clear_sharding_prop_cache", None),
        getattr(_redistribute, "clear_redistribute_planner_cache", None),
        getattr(getattr(_redistribute, "_gen_transform_infos", None), "cache_clear", None),
        getattr(
            getattr(getattr(_collective_utils, "MeshTopoInfo", None), "build_from_mesh", None),
            "cache_clear",
            None,
        ),
    )
    for clear in clears:
        if clear is not None:
            clear()


def cleanup() -> None:
    """Destroy the process group and free it: its backend's threads end here.

    `destroy_process_group` drops torch's own registry of groups; whatever else still refers
    to the group keeps it, and gloo's worker, TCP-loop and store-server threads, alive. The
    caller drops its wrapped model and optimizer first (DDP holds the group as an attribute,
    FSDP2 through its DeviceMesh; `loop.train` calls this after `_train` has returned);
    `init_distributed` kept `torch.distributed.nn.functional`'s defaults off the group; here
    DTensor's caches let go of FSDP2's mesh, and a collection, only where the group is still
    alive then, frees FSDP2's reference cycles (~0.14 CPU s per rank).
    tests/training/test_teardown.py counts the threads after `train`.
    """
    global _GROUP_TIMEOUT
    _GROUP_TIMEOUT = None
    _SET_FOR_THE_GROUP.close()
    if dist.is_initialized():
        group = weakref.ref(dist.group.WORLD)
        dist.destroy_process_group()
        if "torch.distributed.tensor" in sys.modules:
            _clear_dtensor_caches()
        if group() is not None:  # only reference cycles can hold it now (FSDP2's)
            gc.collect()


def abort() -> None:
    """A failing rank's teardown: unregister every process group without waiting for its work.

    Why not `cleanup`: freeing a gloo group runs ``~ProcessGroupGloo``, which waits until its
    work queue is empty and joins its worker threads, each of them inside a collective its peers
    may never join, for up to the group's timeout; and the peers, blocked in the collective
    this rank left, learn of the failure only when its connections close. torch 2.13's
    ``_abort_process_group`` calls each backend's ``abort`` (gloo: the base class's empty one,
    torch/csrc/distributed/c10d/Backend.hpp in the 2.13.0 wheel, read 2026-11-30; NCCL:
    ``ncclCommAbort``) and drops torch's registry, so a later group in this process starts
    clean. The group objects stay alive where the failure's traceback holds them: the
    entry point ends the process by `core.process.leave` before they are freed (__main__.py).
    """
    global _GROUP_TIMEOUT
    _GROUP_TIMEOUT = None
    _SET_FOR_THE_GROUP.close()
    if dist.is_initialized():
        dist.distributed_c10d._abort_process_group()
