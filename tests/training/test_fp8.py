"""`--precision fp8`: torchao's float8 Linear layers, refused where FP8 cannot run.

No GPU here. What runs on this CPU: the refusals (the GPU branches through `fp8.problem`'s
arguments), the conversion of the model's Linear layers (a module swap, which torchao does on
CPU and meta modules alike), and the whole loop through torchao's emulated float8 matmuls
(the test hook TRAINFORGE_TEST_FP8_ON_CPU): FSDP2's float8 all-gather and scale precompute,
an async checkpoint and its resume, the summary. The speed is the GPU check's
(bench/gpu_check.py, docs/performance.md).
"""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch
from torch import nn

from trainforge.training import fp8
from trainforge.training.config import TrainConfig, parse_args
from trainforge.training.models import build_model

pytest.importorskip("torchao", reason="the fp8 extra (requirements.lock pins torchao)")
from torchao.float8.float8_linear import Float8Linear  # noqa: E402


def test_fp8_is_refused_on_cpu_and_on_gpus_without_fp8_tensor_cores():
    cpu = fp8.problem("cpu", None)
    assert cpu is not None and "--precision fp8" in cpu and "this run is on cpu" in cpu
    for cc, name in (((7, 5), "Tesla T4"), ((8, 0), "NVIDIA A100-SXM4-40GB"), ((8, 6), "A10G")):
        why = fp8.problem("cuda", cc, name)
        assert why is not None and f"{name} (compute capability {cc[0]}.{cc[1]})" in why
        assert "\n" not in why and "--precision bf16" in why
    for cc in ((8, 9), (9, 0), (10, 0)):  # L4/L40S, H100/H200, B200
        assert fp8.problem("cuda", cc, "gpu") is None


def test_fp8_without_torchao_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchao.float8", None)  # import fails as if absent
    why = fp8.problem("cuda", (9, 0), "NVIDIA H100 80GB HBM3")
    assert why is not None and "needs torchao" in why and "trainforge[fp8]" in why


def test_the_runtime_refuses_fp8_on_cpu_in_one_line_before_building_anything(tmp_path, capsys):
    from trainforge.training import exits, loop

    cfg = parse_args(["--precision", "fp8", "--steps", "2", "--output-dir", str(tmp_path)])
    with pytest.raises(exits.RunFailure) as e:
        loop.train(cfg)
    assert e.value.reason == exits.CONFIG_ERROR
    assert "--precision fp8 needs an NVIDIA GPU" in e.value.detail
    assert not (tmp_path / "summary.json").exists()


@pytest.mark.parametrize(
    ("strategy", "world_size", "gather"),
    [("ddp", 1, False), ("ddp", 4, False), ("fsdp", 1, False), ("fsdp", 2, True)],
)
def test_gpt_linear_layers_become_float8_on_the_meta_model_the_head_stays_bf16(
    strategy, world_size, gather, monkeypatch
):
    """The float8 all-gather only where FSDP shards across ranks (torchtitan's
    ``dp_shard_enabled``): one FSDP rank gathers bf16 and casts inside the compiled block."""
    monkeypatch.delenv(fp8.FORCE_ALL_GATHER_ENV, raising=False)
    cfg = TrainConfig(model="gpt", layers=2, d_model=64, heads=4, seq_len=16, vocab_size=256)
    model = build_model(cfg, device="meta")
    converted = fp8.convert(model, strategy, world_size)
    blocks = {n for n, m in model.named_modules() if isinstance(m, Float8Linear)}
    assert blocks == set(converted)
    assert blocks == {f"blocks.{i}.{x}" for i in range(2) for x in ("attn.qkv", "attn.proj",
                                                                    "fc", "out")}  # fmt: skip
    assert type(model.head) is nn.Linear  # the output head keeps its precision
    fsdp_gather = {m.config.enable_fsdp_float8_all_gather for m in model.modules()
                   if isinstance(m, Float8Linear)}  # fmt: skip
    assert fsdp_gather == {gather} and model.float8_all_gather is gather
    # the test hook (bench/gpu_check.py's side-by-side row) forces it on one FSDP rank only
    monkeypatch.setenv(fp8.FORCE_ALL_GATHER_ENV, "1")
    assert fp8.float8_all_gather(strategy, world_size) is (strategy == "fsdp")


def test_mlp_layers_whose_dims_are_not_multiples_of_16_stay_high_precision():
    model = build_model(TrainConfig(model="mlp"), device="meta")
    converted = fp8.convert(model, "ddp", 1)
    linears = {n: m for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    kept = {n for n, m in linears.items() if not isinstance(m, Float8Linear)}
    assert converted and all(isinstance(linears[n], Float8Linear) for n in converted)
    # 128 -> 10: the ten classes are not a multiple of 16 (torchao's hardware rule)
    assert kept == {n for n, m in linears.items() if m.out_features % 16 or m.in_features % 16}
    assert kept


def _run(tmp_path, name: str, steps: int, *extra: str) -> dict:
    from trainforge.training import loop

    args = ["--model", "gpt", "--layers", "2", "--d-model", "64", "--heads", "4",
            "--seq-len", "32", "--vocab-size", "256", "--batch-size", "8", "--steps",
            str(steps), "--log-every", "1", "--precision", "fp8", "--strategy", "fsdp",
            "--output-dir", str(tmp_path / name), *extra]  # fmt: skip
    assert loop.train(parse_args(args)) == 0
    return json.loads((tmp_path / name / "summary.json").read_text())


def test_fp8_fsdp_trains_resumes_from_an_async_checkpoint_and_says_fp8(tmp_path, monkeypatch):
    """The loop end to end in FP8 (emulated on the CPU) with FSDP2's float8 all-gather (what
    several ranks run; forced here on one by the test hook): the scales are precomputed after
    every optimizer step, an async checkpoint of the float8-all-gather weights resumes to the
    losses a synchronous checkpoint resumes to (NaN before checkpoint._unwrapped), and the
    summary says FP8."""
    from trainforge.training import loop

    monkeypatch.setenv(loop.FP8_ON_CPU_ENV, "1")
    monkeypatch.setenv(fp8.FORCE_ALL_GATHER_ENV, "1")
    calls: list[int] = []
    real = fp8.after_optimizer_step
    monkeypatch.setattr(fp8, "after_optimizer_step", lambda m: (calls.append(1), real(m)))
    resumed = {}
    for mode in ("sync", "async"):
        ckpt = ["--checkpoint-dir", str(tmp_path / mode / "ckpt"), "--checkpoint-every", "2"]
        ckpt += ["--async-checkpoint"] if mode == "async" else []
        _run(tmp_path, f"{mode}-first", 4, *ckpt)  # saves step 4 (the 4-step schedule's end)
        resumed[mode] = _run(tmp_path, f"{mode}-resumed", 6, *ckpt)
    assert len(calls) == 2 * (4 + 2)  # once per optimizer step, resumed runs included
    summary = resumed["async"]
    assert summary["precision"] == "fp8" and len(summary["float8_layers"]) == 8
    assert summary["float8_all_gather"] is True
    losses = [loss for _, loss in summary["losses"]]
    assert [s for s, _ in summary["losses"]] == [5, 6]
    assert torch.isfinite(torch.tensor(losses)).all()
    assert losses == pytest.approx([loss for _, loss in resumed["sync"]["losses"]], rel=1e-6)


def test_one_fsdp_rank_gathers_bf16_precomputes_nothing_and_resumes_either_way(
    tmp_path, monkeypatch, capsys
):
    """One FSDP rank (the 1.3B GPU check): no float8 all-gather and no per-step scale
    precompute (fp8.float8_all_gather), the first line and the summary say so, the losses stay
    finite, and a checkpoint saved with the float8 all-gather (a run of several ranks, forced
    here) resumes without it and the other way round, to the losses a same-mode resume gets."""
    from trainforge.training import loop

    monkeypatch.setenv(loop.FP8_ON_CPU_ENV, "1")
    monkeypatch.delenv(fp8.FORCE_ALL_GATHER_ENV, raising=False)
    calls: list[int] = []
    real = fp8.after_optimizer_step
    monkeypatch.setattr(fp8, "after_optimizer_step", lambda m: (calls.append(1), real(m)))

    def run(name: str, steps: int, gather: bool, ckpt: str) -> dict:
        if gather:
            monkeypatch.setenv(fp8.FORCE_ALL_GATHER_ENV, "1")
        else:
            monkeypatch.delenv(fp8.FORCE_ALL_GATHER_ENV, raising=False)
        extra = ["--checkpoint-dir", str(tmp_path / ckpt), "--checkpoint-every", "2"]
        return _run(tmp_path, name, steps, *extra)

    plain = run("plain", 4, False, "plain")
    assert calls == [] and plain["float8_all_gather"] is False
    assert "float8 all-gather" not in capsys.readouterr().out
    assert torch.isfinite(torch.tensor([loss for _, loss in plain["losses"]])).all()
    run("gathered", 4, True, "gathered")
    assert len(calls) == 4
    assert "Linear layers (torchao); FSDP float8 all-gather," in capsys.readouterr().out
    losses = {}
    for saved, resumed in ((False, False), (False, True), (True, True), (True, False)):
        ckpt = "gathered" if saved else "plain"
        copy = f"{ckpt}-{saved}-{resumed}"
        shutil.copytree(tmp_path / ckpt, tmp_path / copy)
        out = run(f"resumed-{saved}-{resumed}", 6, resumed, copy)
        assert [s for s, _ in out["losses"]] == [5, 6] and out["float8_all_gather"] is resumed
        losses[saved, resumed] = [loss for _, loss in out["losses"]]
    assert torch.isfinite(torch.tensor(list(losses.values()))).all()
    # each resume matches its twin resumed in the same mode from the other run's checkpoint:
    # the two first runs differ only by rounding (the float8 all-gather casts the fp32 weight
    # to float8 directly, the bf16 gather goes through bf16 first: 3e-5 relative here), while
    # a checkpoint that did not load (a fresh start: 5.54 at its first step, here 5.35) is 3.5% off
    assert losses[False, True] == pytest.approx(losses[True, True], rel=1e-3)
    assert losses[True, False] == pytest.approx(losses[False, False], rel=1e-3)


@pytest.mark.parametrize("gather", [False, True])
def test_compile_captures_each_fp8_block_whole_under_fsdp(gather, one_rank_group, monkeypatch):
    """torch.compile fuses FP8's amax and casts only where it sees them (torchtitan compiles
    each block with fullgraph=True): the runtime's per-block compile (parallel.py) of an FP8
    GPT under FSDP2 -- weights gathered in bf16 (one rank) or in float8 -- traces each block
    into one graph, shared by every block, with no graph break that would leave a cast to
    run eagerly. Dynamo's own counters, with its "eager" backend (no inductor on the CPU)."""

    from torch._dynamo.utils import counters

    from trainforge.training.distributed import DistEnv
    from trainforge.training.loop import build_optimizer, micro_step
    from trainforge.training.parallel import parallelize, resolve_precision

    compile_ = nn.Module.compile
    monkeypatch.setattr(nn.Module, "compile", lambda self, **kw: compile_(self, backend="eager"))
    if gather:
        monkeypatch.setenv(fp8.FORCE_ALL_GATHER_ENV, "1")
    else:
        monkeypatch.delenv(fp8.FORCE_ALL_GATHER_ENV, raising=False)
    cfg = TrainConfig(model="gpt", layers=2, d_model=64, heads=4, seq_len=32, vocab_size=256,
                      batch_size=8, strategy="fsdp", compile=True, precision="fp8")  # fmt: skip
    env = DistEnv(rank=0, world_size=1, local_rank=0, local_world_size=1,
                  device=torch.device("cpu"), backend="gloo")  # fmt: skip
    torch._dynamo.reset()
    counters.clear()
    dtype = resolve_precision(cfg, env.device)
    model = parallelize(build_model(cfg, device="meta"), cfg, env, dtype)
    assert model.float8_all_gather is gather and len(model.float8_layers) == 8
    optimizer = build_optimizer(model, cfg, env.device)
    x, y = torch.randint(0, 256, (8, 32)), torch.randint(0, 256, (8, 32))
    for _ in range(2):
        micro_step(model, (x, y), True, cfg, env.device, dtype)
        optimizer.step()
        if gather:
            fp8.after_optimizer_step(model)
        optimizer.zero_grad(set_to_none=True)
    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] == 1
    assert counters["frames"]["ok"] == counters["frames"]["total"] > 0
    torch._dynamo.reset()


def test_checkpoints_keep_dtensors_and_unwrap_only_torchaos_weight_inside(one_rank_group):
    """`checkpoint._unwrapped`: a bf16 FSDP2 weight (a DTensor of a plain shard) is saved as
    it is -- unwrapping the DTensor itself saved a 2-rank run's shard as the whole tensor --
    and an FP8 one (a DTensor of torchao's wrapper) becomes a DTensor of the plain shard."""
    from torch.distributed.fsdp import fully_shard

    from trainforge.training.checkpoint import _unwrapped

    plain = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 16))
    fully_shard(plain)
    sd = plain.state_dict()
    assert all(_unwrapped(sd)[k] is v for k, v in sd.items())
    f8 = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 16))
    fp8.convert(f8, "fsdp", 2)  # torchao's wrapper: the float8 all-gather of several ranks
    fully_shard(f8)
    sd = f8.state_dict()
    wrapped = [k for k, v in sd.items() if type(v._local_tensor) is not torch.Tensor]
    assert wrapped == ["0.weight", "1.weight"]
    out = _unwrapped(sd)
    for k in wrapped:
        assert type(out[k]._local_tensor) is torch.Tensor and out[k].shape == sd[k].shape
        assert torch.equal(out[k].full_tensor(), sd[k]._local_tensor._tensor)
