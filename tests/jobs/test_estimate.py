"""The planner's estimate: shapes and FLOPs as the runtime counts them, refusal and warning
at preview, modelSize for user code, step time and duration, calibration."""

from __future__ import annotations

import dataclasses
import json

import pulumi
import pytest
import torch

from tests.jobs import pulumi_harness as harness
from tests.jobs.helpers import CODE, target
from trainforge.core.contract import PoolFacts
from trainforge.core.errors import JobConfigError
from trainforge.jobs.component import TrainingJob
from trainforge.jobs.estimate import (
    DoesNotFit,
    NoEstimate,
    check_fit,
    estimate,
    facts,
    fit_warnings,
    warnings,
)
from trainforge.jobs.estimate.memory import regime, states
from trainforge.jobs.estimate.shape import shape_of
from trainforge.jobs.spec import parse_job
from trainforge.jobs.wiring import resolve_job
from trainforge.training import gpus, metrics
from trainforge.training.config import CheckpointConfig, TrainConfig, periodic_saves_possible
from trainforge.training.models import build_model

# The prod stack's pools as contract_from_config publishes them (EC2 facts: A10G with 22,888
# MiB and 40 Gbps; H100 with 81,920 MiB and 3,200 Gbps of EFA).
A10G = PoolFacts(
    name="gpu-workloads",
    instance_types=("g5.12xlarge", "g5.48xlarge"),
    gpus_per_node=4,
    gpu_name="A10G",
    gpu_memory_mib=22888,
    gpu_models=("A10G",),
    gpu_archs=(86,),
    ami="al2023@v20260903",
    nvidia_driver=580,
    network_gbps=40.0,
    primary_network_gbps=40.0,
    vcpus_per_node=48,
    memory_mib_per_node=196608,
)
P5 = PoolFacts(
    name="efa-training",
    instance_types=("p5.48xlarge",),
    gpus_per_node=8,
    gpu_name="H100",
    gpu_memory_mib=81920,
    gpu_models=("H100",),
    gpu_archs=(90,),
    ami="al2023@v20260903",
    nvidia_driver=580,
    efa_interfaces=32,
    network_gbps=3200.0,
    primary_network_gbps=100.0,
    vcpus_per_node=192,
    memory_mib_per_node=2097152,
)
CPU = PoolFacts(
    name="training-workloads", gpus_per_node=0, vcpus_per_node=8, memory_mib_per_node=16384
)
GPT_350M = {
    "name": "gpt-350m-fsdp",
    "team": "vision",
    "pool": "gpu-workloads",
    "preset": "fsdp",
    "workers": 2,
    "model": "gpt",
    "layers": 24,
    "dModel": 1024,
    "heads": 16,
    "seqLen": 1024,
    "vocabSize": 32768,
    "steps": 20000,
    "batchSize": 8,
    "precision": "bf16",
}


def job(**kw):
    return parse_job({**GPT_350M, **kw})


# --- the same shapes and FLOPs as the runtime -------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        {},  # the runtime's defaults (the MLP)
        {"model": "gpt"},
        {"model": "gpt", "layers": 3, "dModel": 48, "heads": 3, "seqLen": 40, "vocabSize": 301},
    ],
)
def test_parameter_shapes_are_the_built_model_s(flags):
    j = parse_job({"name": "x", "team": "t", "pool": "p", **flags})
    shape = shape_of(j)
    t = j.training
    d = TrainConfig()
    cfg = TrainConfig(
        model=t.model or d.model,
        layers=t.layers or d.layers,
        d_model=t.d_model or d.d_model,
        heads=t.heads or d.heads,
        seq_len=t.seq_len or d.seq_len,
        vocab_size=t.vocab_size or d.vocab_size,
    )
    model = build_model(cfg)
    blocks = [tuple(tuple(p.shape) for p in b.parameters()) for b in model.blocks]
    assert blocks == [tuple(b) for b in shape.blocks]
    in_blocks = {id(p) for b in model.blocks for p in b.parameters()}
    root = sorted(tuple(p.shape) for p in model.parameters() if id(p) not in in_blocks)
    assert root == sorted(shape.root)
    assert shape.parameters == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "flags",
    [
        {"model": "mlp", "batchSize": 64},
        {"model": "gpt", "layers": 2, "dModel": 64, "heads": 4, "seqLen": 32, "vocabSize": 128},
        {"model": "gpt", "layers": 4, "dModel": 96, "heads": 2, "seqLen": 48, "gradAccum": 3},
    ],
)
def test_flops_per_step_are_the_runtime_s_mfu_accounting(flags):
    """The planner's FLOPs per step are what the runtime's MFU divides by time: the built
    model's flops_per_sample() x the global batch (loop.py hands both to the Reporter)."""
    j = parse_job(
        {"name": "x", "team": "t", "pool": "gpu-workloads", "workers": 2, "batchSize": 4, **flags}
    )
    e = estimate(j, A10G)
    shape = shape_of(j)
    model = build_model(
        TrainConfig(
            model=shape.kind,
            layers=shape.layers or 4,
            d_model=shape.d_model if shape.kind == "gpt" else 256,
            heads=shape.heads,
            seq_len=shape.seq_len if shape.kind == "gpt" else 128,
            vocab_size=shape.vocab_size if shape.kind == "gpt" else 512,
        )
    )
    global_batch = TrainConfig(
        batch_size=shape.batch_size, grad_accum=shape.grad_accum
    ).global_batch(e.world_size)
    assert e.flops_per_step == model.flops_per_sample() * global_batch
    if model.tokens_per_sample is None:  # a model without tokens (the MLP): samples only
        assert not e.has_tokens
    else:
        assert e.has_tokens and e.tokens_per_step == global_batch * model.tokens_per_sample


def test_one_peak_flops_table_for_mfu_and_the_planner(monkeypatch):
    assert metrics.PEAK_BF16_FLOPS is gpus.PEAK_BF16_FLOPS
    names = {"NVIDIA L40S": 362e12, "NVIDIA H100 80GB HBM3": 989e12, "NVIDIA A10G": 70e12}
    for name, peak in names.items():
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda _d, n=name: n)
        assert metrics.peak_flops(torch.device("cuda", 0)) == peak, name
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _d: "Tesla T4")
    assert metrics.peak_flops(torch.device("cuda", 0)) is None  # bf16 is emulated there
    assert gpus.match_gpu("L4").name == "L4" and gpus.match_gpu("NVIDIA H100 PCIe").name == (
        "H100 PCIe"
    )


# --- refusal and warning ----------------------------------------------------------------------


def test_the_prod_job_fits_and_passes_preview():
    resolved = resolve_job(job(), target(A10G), "trainforge:jobs[0]")
    e = estimate(resolved, A10G)
    assert e.fits and e.memory_fraction < facts.HIGH_WATER
    assert e.gpu == "A10G" and e.world_size == 8
    assert fit_warnings(resolved, A10G) == []


def test_a_job_that_cannot_fit_is_refused_with_the_numbers_and_what_would_fit():
    big = job(batchSize=32)
    with pytest.raises(JobConfigError) as err:
        resolve_job(big, target(A10G), "trainforge:jobs[0]")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("trainforge:jobs[0]: does not fit in GPU memory: est. ")
    assert "22.4 GiB per A10G GPU in pool 'gpu-workloads'" in msg
    assert "activations" in msg and "logits" in msg and "allowance" in msg
    assert "fits with activationCheckpointing: true (est. " in msg
    assert "batchSize: 8 with gradAccum: 4 (est. " in msg
    # and each suggestion does fit
    assert check_fit(job(batchSize=32, activationCheckpointing=True), A10G) is not None
    assert check_fit(job(batchSize=8, gradAccum=4), A10G) is not None


def test_ddp_too_big_suggests_fsdp_and_more_gpus_are_computed():
    wide = job(preset="ddp", strategy="ddp", dModel=2048, batchSize=4)
    with pytest.raises(DoesNotFit) as err:
        check_fit(wide, A10G, "job")
    assert "preset: fsdp" in str(err.value)
    sharded = job(dModel=4096, layers=48, workers=1, batchSize=1, activationCheckpointing=True)
    with pytest.raises(DoesNotFit) as err:
        check_fit(sharded, A10G, "job")
    assert "workers: " in str(err.value)


def test_check_jobs_refuses_a_job_that_cannot_fit_before_any_resource():
    from tests.jobs.test_preflight import _run

    # the dev stack's gpu-workloads pool: g4dn.xlarge (T4, 16 GiB) and g5.xlarge (A10G)
    mocks, err = _run([{**GPT_350M, "team": "research", "batchSize": 32}])
    assert err is not None and "does not fit in GPU memory" in str(err)
    assert "16.0 GiB per T4 GPU in pool 'gpu-workloads'" in str(err)
    assert "trainforge:jobs[0]" in str(err)
    assert mocks.resources == []


def test_above_the_high_water_mark_warns_in_preview(monkeypatch):
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: warned.append(msg))
    near = job(batchSize=16)
    e = estimate(near, A10G)
    assert facts.HIGH_WATER < e.memory_fraction <= 1.0
    (line,) = warnings(e, "job")
    assert "above the 90% high-water mark" in line and "of 22.4 GiB per GPU" in line
    args = {k: v for k, v in GPT_350M.items() if k != "name"} | {"batchSize": 16}
    harness.run(lambda: TrainingJob("near", args, target=target(A10G), code=CODE))
    assert any("high-water" in w for w in warned), warned


def test_host_memory_of_the_pod_is_checked():
    """Every process needs torch and CUDA on the host and async checkpoints stage the state
    in host memory: a small pod memory gets a warning."""
    small = job(memory="8Gi")
    e = estimate(resolve_job(small, target(A10G)), A10G)
    (line,) = warnings(e, "job")
    assert "host memory" in line and "8.0 GiB" in line


def test_host_memory_counts_dcp_s_checkpoint_process_of_every_async_rank():
    """With async checkpoints every rank runs DCP's checkpoint process (a second interpreter
    with torch, training/checkpoint.py `_WriterStart`) for the whole run, a single rank too
    (the runtime always has a process group): a pod sized to the rest of the model's count
    gets the warning. Synchronous saves do not count it."""
    jobs = {
        "async": job(),
        "sync": job(checkpoint={"async": False}),
        "one rank": job(workers=1, gpusPerWorker=1),
    }
    e = {k: estimate(resolve_job(j, target(A10G)), A10G) for k, j in jobs.items()}
    procs = e["async"].world_size // 2  # processes per pod (2 workers)
    shape = shape_of(jobs["async"])

    def staging(world: int) -> int:  # weights + AdamW's two moments of a rank's shard
        return 12 * states(shape, regime(shape, "fsdp", world, "cuda"))["parameters"] // 4

    rest = procs * (facts.HOST_PROCESS_BYTES + staging(2 * procs))
    sized = estimate(resolve_job(job(memory=str(rest)), target(A10G)), A10G)
    (line,) = warnings(sized, "job")
    assert "DCP's checkpoint process" in line and "set checkpoint.async: false" in line
    process = procs * facts.CHECKPOINT_PROCESS_BYTES
    assert e["async"].host_memory_per_pod == rest + process
    roomy = estimate(resolve_job(job(memory=str(rest + process)), target(A10G)), A10G)
    assert warnings(roomy, "job") == []
    assert e["sync"].host_memory_per_pod == procs * facts.HOST_PROCESS_BYTES
    one = e["one rank"].host_memory_per_pod
    assert e["one rank"].world_size == 1
    assert one == facts.HOST_PROCESS_BYTES + staging(1) + facts.CHECKPOINT_PROCESS_BYTES


def test_a_run_shorter_than_its_first_periodic_save_counts_no_checkpoint_process():
    """The runtime starts DCP's checkpoint process (and stages into host memory) only when a
    periodic save can come before its --steps end (training.config.periodic_saves_possible,
    training/checkpoint.py start_writer): the estimate asks the same rule with the job's
    steps, so an async job of 400 steps saving every 500 is sized as a synchronous one, and
    one of 500 steps still counts the process."""
    short = job(steps=400, checkpoint={"every": 500})
    sync = job(steps=400, checkpoint={"every": 500, "async": False})
    reach = job(steps=500, checkpoint={"every": 500})
    e = {n: estimate(resolve_job(j, target(A10G)), A10G) for n, j in
         {"short": short, "sync": sync, "reach": reach}.items()}  # fmt: skip
    procs = e["short"].world_size // 2
    assert e["short"].host_memory_per_pod == e["sync"].host_memory_per_pod
    assert e["short"].host_memory_per_pod == procs * facts.HOST_PROCESS_BYTES
    assert e["reach"].host_memory_per_pod > e["sync"].host_memory_per_pod + procs * (
        facts.CHECKPOINT_PROCESS_BYTES - 1
    )
    # the runtime's own answer for the same run
    cfg = CheckpointConfig(directory="/ckpt", every=500, async_save=True)
    assert not periodic_saves_possible(cfg, 400) and periodic_saves_possible(cfg, 500)


def test_host_memory_counts_the_model_only_for_code_that_builds_it_on_the_cpu():
    """The runtime builds on the meta device and draws each rank's shard on its GPU
    (training/models/init.py): its pods' host memory holds no copy of the model. Own code
    (modelSize) is assumed to build the fp32 model on the CPU first."""
    bundled = estimate(resolve_job(job(), target(A10G)), A10G)
    procs = bundled.host_memory_per_pod // facts.HOST_PROCESS_BYTES
    staging = bundled.host_memory_per_pod - procs * facts.HOST_PROCESS_BYTES
    assert procs >= 1 and 0 <= staging < facts.HOST_PROCESS_BYTES
    size = {"parameters": 0, "layers": 24, "dModel": 1024, "heads": 16, "seqLen": 1024,
            "vocabSize": 32768}  # fmt: skip
    size["parameters"] = shape_of(job()).parameters
    own_args = {k: v for k, v in GPT_350M.items() if k not in ("model", "layers", "dModel",
                "heads", "seqLen", "vocabSize")}  # fmt: skip
    own = parse_job({**own_args, "image": "registry/gpt:1.0", "modelSize": size})
    mine = estimate(resolve_job(own, target(A10G)), A10G)
    assert mine.host_memory_per_pod - bundled.host_memory_per_pod == procs * 4 * size["parameters"]


def test_cpu_jobs_are_checked_against_the_pod_s_memory():
    tight = parse_job(
        {
            "name": "m",
            "team": "t",
            "pool": "cpu",
            "model": "mlp",
            "procsPerWorker": 2,
            "memory": "700Mi",
        }
    )
    with pytest.raises(DoesNotFit) as err:
        check_fit(tight, CPU, "job")
    assert "per process of the pod's memory 700Mi" in str(err.value)
    assert str(err.value).endswith("fits with memory: 2Gi")
    roomy = tight.model_copy(update={"memory": "4Gi"})
    assert check_fit(roomy, CPU) is not None


def test_elastic_fsdp_must_fit_at_its_smallest_size():
    elastic = parse_job(
        {
            **GPT_350M,
            "preset": "elastic",
            "strategy": "fsdp",
            "elastic": {"minWorkers": 1, "maxWorkers": 4},
        }
    )
    fixed_one = job(workers=1)
    e, one = estimate(elastic, A10G), estimate(fixed_one, A10G)
    assert e.memory["parameters"] == one.memory["parameters"]  # sharded over 4, not 16 GPUs
    assert e.world_size == 16  # step time at full size


# --- modelSize: code of your own --------------------------------------------------------------


def test_model_size_sizes_user_code():
    llama = parse_job(
        {
            "name": "llama",
            "team": "llm",
            "pool": "efa-training",
            "preset": "fsdp",
            "workers": 2,
            "image": "registry/llm:1.0",
            "modelSize": {
                "parameters": 8_030_000_000,
                "layers": 32,
                "dModel": 4096,
                "heads": 32,
                "seqLen": 8192,
                "vocabSize": 128256,
                "batchSize": 1,
                "steps": 1000,
                "activationCheckpointing": True,
            },
        }
    )
    e = estimate(llama, P5)
    assert shape_of(llama).parameters == 8_030_000_000
    assert e.fits and e.gpu == "H100" and e.world_size == 16
    assert e.basis.startswith("anchored: torchtitan")
    # MFU at the anchor's width is the anchor's: tokens/s per GPU near torchtitan's ~5.7k
    per_gpu = e.tokens_per_second / e.world_size
    assert 3000 < per_gpu < 7000, per_gpu
    ddp = llama.model_copy(update={"strategy": "ddp", "preset": "ddp"})
    with pytest.raises(DoesNotFit) as err:
        check_fit(ddp, P5, "job")
    assert "preset: fsdp" in str(err.value)


def test_model_size_that_contradicts_its_blocks_gives_no_estimate():
    j = parse_job(
        {
            "name": "x",
            "team": "t",
            "pool": "p",
            "modelSize": {"parameters": 10, "layers": 2, "dModel": 64, "seqLen": 8, "vocabSize": 9},
        }
    )
    with pytest.raises(NoEstimate):
        estimate(j, A10G)
    assert check_fit(j, A10G) is None


def test_a_declared_model_size_is_used_as_stated_not_as_a_gpt():
    """A model that is not a decoder states parameters, FLOPs and activation bytes; the
    estimate uses them as they are (no GPT shape, no per-token guess)."""
    size = {
        "parameters": 25_000_000,
        "flopsPerSample": 6 * 25_000_000 * 4.1,  # e.g. a ResNet: ~4.1 GFLOP forward per image
        "activationBytesPerSample": 100 * 2**20,
        "batchSize": 64,
        "steps": 1000,
    }
    j = parse_job({"name": "cnn", "team": "t", "pool": "p", "image": "r/i:1",
                   "entrypoint": {"module": "vision.train"}, "modelSize": size})  # fmt: skip
    shape = shape_of(j)
    assert (shape.kind, shape.parameters, shape.tokens_per_sample) == ("declared", 25_000_000, 1)
    e = estimate(j, A10G)
    world = e.world_size
    assert e.flops_per_step == pytest.approx(size["flopsPerSample"] * 64 * world)
    assert e.tokens_per_step == 64 * world  # one "token" per sample: nothing invented
    assert e.memory["activations"] == 64 * 100 * 2**20
    assert "logits" not in e.memory
    assert any("declared parameters, FLOPs and activation bytes" in n for n in e.notes)
    per_token = dict(size, flopsPerToken=size["flopsPerSample"] / 512, tokensPerSample=512)
    del per_token["flopsPerSample"]
    j2 = j.model_copy(update={"model_size": parse_job(
        {"name": "cnn", "team": "t", "pool": "p", "image": "r/i:1",
         "entrypoint": {"module": "vision.train"}, "modelSize": per_token}).model_size})  # fmt: skip
    assert estimate(j2, A10G).flops_per_step == pytest.approx(e.flops_per_step)
    assert estimate(j2, A10G).tokens_per_step == 512 * 64 * world


def test_own_code_without_model_size_has_no_estimate():
    j = parse_job({"name": "x", "team": "t", "pool": "p", "image": "r/i:1",
                   "entrypoint": {"module": "m"}})  # fmt: skip
    with pytest.raises(NoEstimate, match="states no modelSize"):
        estimate(j, A10G)


# --- step time and duration -------------------------------------------------------------------


def test_step_time_range_and_duration():
    e = estimate(job(), A10G)
    lo, hi = e.step_seconds_range
    assert lo <= e.step_seconds <= hi
    assert e.tokens_per_second == pytest.approx(e.tokens_per_step / e.step_seconds)
    dlo, dhi = e.duration_range
    assert dlo <= e.duration_seconds <= dhi
    assert e.duration_seconds > 20000 * e.step_seconds  # + start-up and checkpoints
    assert e.basis.startswith("extrapolated")


def test_collectives_follow_the_network_and_the_strategy():
    one_gpu = estimate(job(workers=1, gpusPerWorker=1), A10G).timing
    assert one_gpu.comm_seconds == 0
    tcp = estimate(job(), A10G).timing
    fast = estimate(
        job(), dataclasses.replace(A10G, network_gbps=400.0, primary_network_gbps=400.0)
    )
    assert fast.timing.comm_seconds < tcp.comm_seconds
    efa = estimate(job(pool="efa-training", image="registry/dlc:1"), P5).timing
    no_efa = estimate(job(pool="efa-training", efa=False), P5).timing
    assert efa.comm_seconds < no_efa.comm_seconds  # 3200 Gbps of EFA vs the 100 Gbps ENA card


def test_activation_checkpointing_costs_a_forward():
    plain = estimate(job(), A10G).timing
    ac = estimate(job(activationCheckpointing=True), A10G).timing
    assert ac.compute_seconds == pytest.approx(plain.compute_seconds * 8 / 6)
    assert ac.model_flops_per_step == plain.model_flops_per_step  # MFU counts model FLOPs


def test_calibration_replaces_the_guess(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"version": 1, "gpus": {"A10G": {"mfu": 0.2, "d_model": 1024}}}))
    calibrated = facts.load_calibration(path)
    before = estimate(job(), A10G)
    after = estimate(job(), A10G, calibration=calibrated)
    assert after.basis.startswith("calibrated")
    assert after.timing.mfu_used == pytest.approx(0.2)
    assert after.step_seconds != before.step_seconds


def test_the_repository_calibration_file_is_valid():
    data = json.loads(facts.CALIBRATION_FILE.read_text())
    assert data["version"] == 1
    for gpu, entry in data["gpus"].items():
        assert gpus.match_gpu(gpu) is not None
        assert 0 < entry["mfu"] < 1 and entry["run"] and entry["date"]


@pytest.mark.parametrize(
    ("size", "extra", "field", "hint"),
    [
        (
            {"layers": 2, "dModel": 64, "seqLen": 8},
            {},
            "modelSize.vocabSize",
            "expected layers, dModel, seqLen and vocabSize",
        ),
        (
            {"parameters": 5, "flopsPerSample": 30},
            {},
            "modelSize.activationBytesPerSample",
            "activationBytesPerSample",
        ),  # fmt: skip
        (
            {"parameters": 5, "activationBytesPerSample": 8},
            {},
            "modelSize.flopsPerSample",
            "flopsPerSample (or flopsPerToken",
        ),  # fmt: skip
        (
            {"parameters": 5, "flopsPerSample": -1, "activationBytesPerSample": 8},
            {},
            "modelSize.flopsPerSample",
            "expected a value > 0",
        ),  # fmt: skip
        (
            {"layers": 2, "dModel": 64, "seqLen": 8, "vocabSize": 9, "flopsPerSample": 3},
            {},
            "modelSize.flopsPerSample",
            "expected no declared-form key in the GPT form",
        ),  # fmt: skip
        (
            {"layers": 2, "dModel": 64, "seqLen": 8, "vocabSize": 9},
            {"layers": 3},
            "modelSize.layers",
            "expected modelSize or the bundled model's size (layers)",
        ),
        (
            {"layers": 2, "dModel": 64, "seqLen": 8, "vocabSize": 9, "heads": 5},
            {},
            "modelSize.heads",
            "expected a number that divides dModel (64)",
        ),
        (
            {"layers": 2, "dModel": 64, "seqLen": 8, "vocabSize": 9, "hidden": 5},
            {},
            "modelSize.hidden",
            "unknown key",
        ),
    ],
)
def test_bad_model_size_names_the_key(size, extra, field, hint):
    with pytest.raises(JobConfigError) as err:
        parse_job({"name": "x", "team": "t", "pool": "p", "modelSize": size, **extra}, "job")
    assert str(err.value).startswith(f"job.{field}: ") and hint in str(err.value)


def test_the_planner_needs_neither_torch_nor_pulumi(tmp_path):
    """resolve_job runs inside `pulumi preview`, where torch is not installed, and `calibrate`
    runs on a laptop: the estimate imports neither at module level."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'pulumi'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import trainforge.jobs.estimate, trainforge.jobs.estimate.calibrate\n"
        "import trainforge.jobs.wiring, trainforge.plan.checks.estimates\n"
    )
    from tests.conftest import ROOT

    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_auto_precision_plans_what_the_pod_picks_on_a_gpu_without_bf16_units():
    """parallel.resolve_precision's auto is bf16 only with bf16 units (tests/training/
    test_precision.py): the plan plans fp32 on a T4 and bf16 on an A10G, and the T4's
    emulation note is left for a job that states bf16."""
    t4 = dataclasses.replace(
        A10G,
        instance_types=("g4dn.12xlarge",),
        gpu_name="T4",
        gpu_models=("T4",),
        gpu_archs=(75,),
        gpu_memory_mib=15360,
    )
    small = {"layers": 4, "dModel": 256, "heads": 4, "workers": 1, "precision": "auto"}
    auto_t4 = estimate(job(**small), t4)
    assert "T4's FP32 peak" in auto_t4.method and not any("bf16" in n for n in auto_t4.notes)
    assert "bf16 peak" in estimate(job(**small), A10G).method
    stated = estimate(job(**{**small, "precision": "bf16"}), t4)
    assert "bf16 peak" in stated.method
    assert any("T4 has no bf16 units" in n for n in stated.notes)
    # a GPU with no peak figures but a catalog capability: V100 (7.0) plans fp32's memory
    v100 = dataclasses.replace(t4, gpu_name="V100", gpu_models=("V100",), gpu_archs=(70,))
    mem = {
        p: estimate(job(**{**small, "precision": p}), v100).memory_total
        for p in ("auto", "fp32", "bf16")
    }
    assert mem["auto"] == mem["fp32"] != mem["bf16"]


def test_fp8_plans_the_anchored_speed_up_on_a_gpu_with_an_fp8_peak_and_says_its_basis():
    """H100 (the catalog's FP8 peak): compute 1.28x faster than the same job in bf16, the
    memory planned as bf16 (not fp32), the MFU basis said. A GPU without an FP8 peak in the
    catalog (A10G has no FP8 at all; the preview refuses it there) gets no speed-up."""
    bf16 = estimate(job(pool="efa-training", dModel=4096, heads=32, layers=4), P5)
    fp8 = estimate(job(pool="efa-training", dModel=4096, heads=32, layers=4, precision="fp8"), P5)
    assert fp8.timing.compute_seconds == pytest.approx(bf16.timing.compute_seconds / 1.28)
    assert fp8.step_seconds < bf16.step_seconds
    assert fp8.memory == bf16.memory  # bf16 compute bytes, not fp32's
    assert fp8.timing.peak_flops_per_gpu == gpus.GPUS["H100"].bf16_flops  # the MFU basis
    note = next(n for n in fp8.notes if n.startswith("precision fp8"))
    assert "1.28x" in note and "1,979 TFLOP/s" in note and "against the bf16 peak" in note
    plain = estimate(job(precision="fp8"), A10G)
    assert plain.timing.fp8_speedup is None
    assert any("no FP8 peak" in n for n in plain.notes)


def test_fp8_below_the_anchor_s_width_is_planned_at_bf16_speed_and_says_why():
    """The 1.28x is torchtitan's Llama 3.1 8B (dim 4096): a narrower model (the 1.3B GPU
    check's d_model 2048 gained well under it on an H200) is planned at bf16 speed, with the
    anchor as its best case only; at the anchor's width the anchor applies."""
    narrow = {"pool": "efa-training", "dModel": 2048, "heads": 16, "layers": 4}
    bf16 = estimate(job(**narrow), P5)
    fp8 = estimate(job(**narrow, precision="fp8"), P5)
    assert fp8.timing.fp8_speedup == 1.0
    assert fp8.timing.compute_seconds == pytest.approx(bf16.timing.compute_seconds)
    assert fp8.step_seconds == pytest.approx(bf16.step_seconds)
    assert fp8.step_seconds_range[0] < bf16.step_seconds_range[0]  # the best case: 1.29x
    assert fp8.step_seconds_range[1] == pytest.approx(bf16.step_seconds_range[1])
    note = next(n for n in fp8.notes if n.startswith("precision fp8"))
    assert "planned at bf16 speed: dModel 2048 is narrower than the 4096" in note
    assert "1.29x at best" in note and "against the bf16 peak" in note
    wide = estimate(job(**{**narrow, "dModel": 4096, "heads": 32}, precision="fp8"), P5)
    assert wide.timing.fp8_speedup == 1.28


def test_calibrate_refuses_an_fp8_run(tmp_path):
    from trainforge.jobs.estimate.calibrate import CalibrationError, calibrate

    run = tmp_path / "run"
    run.mkdir()
    summary = {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "precision": "fp8"}
    (run / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(CalibrationError, match="an fp8 run; its MFU against the bf16 peak"):
        calibrate(run)


def test_a_gpu_without_an_intra_node_fact_is_unknown_not_pcie(monkeypatch):
    """A GPU the catalog gives neither an intra-node bus figure nor a PCIe mark (an NVLink GPU
    such as the B200 would be one, once it has peak figures) gets no step time for a pod of
    several GPUs: the old fallback planned its collectives at the PCIe figure."""
    # ZX1: the A10G's peak figures, but no intra-node fact in the catalog
    monkeypatch.setitem(gpus.GPUS, "ZX1", dataclasses.replace(gpus.GPUS["A10G"], name="ZX1"))
    zx1 = dataclasses.replace(A10G, gpu_name="ZX1", gpu_models=("ZX1",))
    pcie = estimate(job(), A10G)  # 4 processes per pod; the A10G is marked PCIe
    assert pcie.timing is not None
    unknown = estimate(job(), zx1)
    assert unknown.step_seconds is None and unknown.timing is None
    assert unknown.duration_seconds is None
    assert unknown.basis == (
        "no step time: the GPU catalog has no intra-node bus figure for GPU ZX1 "
        "(gpus.*.intraNodeBusBps, or intraNodeLink 'pcie'), which the collectives of 4 "
        "processes per pod run over"
    )
    assert unknown.memory_total == pcie.memory_total  # the memory estimate needs no bus
    # one GPU per pod runs no intra-node collective: its step time stands
    one = estimate(job(gpusPerWorker=1), zx1)
    assert one.timing is not None and one.step_seconds is not None


def test_every_gpu_with_peak_figures_has_its_intra_node_fact_in_the_catalog():
    """The shipped GPUs the estimate times all have an intra-node fact, so no shipped estimate
    moved when the PCIe fallback went: NVLink figures for A100, H100, H200, the PCIe mark for
    the rest (the catalog's source "intra-node-bus"); the GPUs with no peak figures (V100,
    B200, B300, T4g, the RTX PROs) have none and stay unknown."""
    assert set(gpus.GPUS) <= set(facts.INTRA_NODE_BUS)
    assert facts.INTRA_NODE_BUS["A10G"] == facts.PCIE_INTRA_NODE_BUS == (6e9, 16e9)
    pcie = {g for g, b in facts.INTRA_NODE_BUS.items() if b == facts.PCIE_INTRA_NODE_BUS}
    assert pcie == {"T4", "A10G", "L4", "L40S", "H100 PCIe"}
    assert "B200" not in facts.INTRA_NODE_BUS and "V100" not in facts.INTRA_NODE_BUS


def test_every_shipped_calibration_is_its_committed_run_s_measurement(tmp_path, monkeypatch):
    """The shipped calibration.json is a fact only while its run backs it: each entry names a
    run folder committed in this repository, and calibrating from that run's summary gives
    the same MFU (2026-11-29: the H200 at 55.5%, bench/results/h200-2026-11-29/gpt_1p3b)."""
    import json
    from pathlib import Path

    from trainforge.jobs.estimate import calibrate, facts

    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no user file in the way
    shipped = json.loads(facts.CALIBRATION_FILE.read_text())["gpus"]
    assert "H200" in shipped  # the one GPU measured so far
    for gpu, entry in shipped.items():
        run = root / entry["run_dir"]
        again = calibrate.calibrate(run)
        assert (again["gpu"], again["entry"]["mfu"], again["entry"]["run"]) == (
            gpu,
            entry["mfu"],
            entry["run"],
        )
        m = facts.mfu_for(gpu)
        assert (m.basis, m.mid, m.reference_d_model) == ("calibrated", entry["mfu"], 2048)


# dev's gpt-small-fsdp (Pulumi.dev.yaml) on a g5.xlarge, as `PoolFacts.only` gives it: one A10G
# per node, so its 2 pods run on 2 nodes; EC2's baseline 2.5 Gbps (moto 5.2.5's catalog)
G5_XLARGE = dataclasses.replace(
    A10G, instance_types=("g5.xlarge",), gpus_per_node=1, network_gbps=2.5,
    primary_network_gbps=2.5, vcpus_per_node=4, memory_mib_per_node=16384,
)  # fmt: skip
DEV_FSDP = {
    **GPT_350M,
    "name": "gpt-small-fsdp",
    "layers": 6,
    "dModel": 384,
    "heads": 6,
    "seqLen": 256,
    "vocabSize": 8192,
    "steps": 5000,
    "batchSize": 16,
    "precision": "auto",
}


def test_a_multi_node_job_of_one_gpu_pods_pays_the_nic_once_and_a_one_rank_job_none():
    """Traced 2026-11-30: the dev job's A10G step was 0.488 s against the T4's 0.477 s (1% of
    the A10G's bf16 peak). Not a 1-node job charged for a network: its 2 pods are on 2 nodes
    and FSDP2 moves ~60 MB per pod per step over a 2.5 Gbps NIC at TCP's 30-60% (0.43 s,
    9x the 0.046 s of compute). The mis-model was the overlap: network-bound, the step added
    a first all-gather on top of the collectives that already include it."""
    e = estimate(parse_job(DEV_FSDP), G5_XLARGE)
    t = e.timing
    groups = 6 + 1  # the blocks and the root: FSDP2's groups
    assert t.comm_seconds > 5 * t.compute_seconds  # network-bound
    # the network never waits but for the last group's compute: each byte crosses it once
    want = t.comm_seconds + t.compute_seconds / groups + t.optimizer_seconds
    assert e.step_seconds == pytest.approx(want)
    # the NIC is what it pays: twice the bandwidth, half the network time
    fast = estimate(
        parse_job(DEV_FSDP), dataclasses.replace(G5_XLARGE, network_gbps=5.0,
                                                 primary_network_gbps=5.0)
    ).timing  # fmt: skip
    assert fast.comm_seconds == pytest.approx(t.comm_seconds / 2, rel=0.01)
    # compute-bound (a fast network): the first all-gather before any compute is exposed
    wide = dataclasses.replace(G5_XLARGE, network_gbps=400.0, primary_network_gbps=400.0)
    w = estimate(parse_job(DEV_FSDP), wide)
    assert w.timing.comm_seconds < w.timing.compute_seconds
    assert w.step_seconds == pytest.approx(
        w.timing.compute_seconds + w.timing.comm_seconds / groups + w.timing.optimizer_seconds
    )
    # one pod of one GPU: one rank, no collectives, the step is its compute at the bf16 peak
    one = estimate(parse_job({**DEV_FSDP, "workers": 1}), G5_XLARGE)
    assert one.timing.comm_seconds == 0
    assert one.timing.peak_flops_per_gpu == gpus.GPUS["A10G"].bf16_flops
    assert one.step_seconds == pytest.approx(
        one.timing.compute_seconds + one.timing.optimizer_seconds
    )
