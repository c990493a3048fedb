"""`make gpu-check`'s script (bench/gpu_check.py) passes its own CPU dry run, and its table
says what each check found.

Why: the GPU benchmark once failed as documented (a CPU tensor broadcast under NCCL); the
GPU check must at least run end to end wherever CI runs, so that on a GPU machine the only
new thing is the GPU. The dry run proves the script, its parsing and its table, not a figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_check  # noqa: E402

NAMES = ["smoke", "gpt_1p3b", "gpt_1p3b_fp8", "fp8_profile", "loops", "checkpoint_stall",
         "kill_resume"]  # fmt: skip


def test_the_dry_run_passes_every_check_on_cpu(tmp_path) -> None:
    out = tmp_path / "gc"
    p = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--dry-run", "--out", str(out),
         "--budget-s", "900"],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["dry_run"] is True and report["device"] == "cpu"
    assert sorted(report["checks"]) == sorted(NAMES)
    assert all(c["ok"] for c in report["checks"].values()), report["checks"]
    k = report["checks"]["kill_resume"]
    assert (k["killed_after_step"], k["resumed_at_step"]) == (12, 10)
    assert k["bit_identical"] is True  # on CPU the resumed run is exact
    g = report["checks"]["gpt_1p3b"]
    assert g["memory_model_bytes"] > 0 and g["setup_seconds"] > 0
    phases = g["setup_phases"]  # the set-up split: the phases inside setup_seconds add up to it
    assert {"process_start_s", "process_group_s", "model_s"} <= set(phases)
    inside = ("imports_s", "dataset_s", "model_s", "weights_s", "restore_and_other_s",
              "loop_start_s")  # fmt: skip
    assert "imports_s" in phases and "cuda_init_s" not in phases  # no CUDA context on a CPU
    assert abs(sum(phases[k] for k in inside) - g["setup_seconds"]) < 0.05
    f = report["checks"]["gpt_1p3b_fp8"]  # FP8 (emulated on the CPU) beside bf16
    assert f["precision"] == "fp8" and f["tokens_per_second_vs_bf16"] > 0
    assert f["float8_all_gather"] is False  # one FSDP rank gathers bf16 (training/fp8.py)
    assert "fp8_check_s" in f["setup_phases"] and "fp8_check_s" not in phases
    inside_fp8 = ("fp8_check_s", *inside)
    assert abs(sum(f["setup_phases"][k] for k in inside_fp8) - f["setup_seconds"]) < 0.05
    prof = report["checks"]["fp8_profile"]["variants"]  # bf16, fp8 and fp8 + float8 all-gather
    assert list(prof) == ["bf16", "fp8", "fp8_ag"]
    assert [prof[v]["float8_all_gather"] for v in prof] == [False, False, True]
    assert [prof[v]["float8_layers"] for v in prof] == [0, 8, 8]
    assert all(x["step_ms"] > 0 and x["losses_finite"] for x in prof.values())
    ck = report["checks"]["checkpoint_stall"]
    assert ck["sync"]["saves"] >= 3 and ck["async"]["saves"] >= 3
    assert ck["async_vs_sync"] > 0 and ck["sync"]["every"] == 2
    assert ck["async"]["async_fell_back"] is False and ck["async"]["shm_too_small"] is False
    # the runtime (python -m trainforge.training) starts DCP's checkpoint process at set-up
    assert ck["async"]["writer_ready_s"] > 0 and ck["async"]["first_complete_s"] > 0
    assert ck["sync"]["setup_s"] > 0 and ck["async"]["setup_s"] > 0  # what the start costs it
    assert ck["sync"]["setup_checkpoint_start_s"] is None  # a phase of async runs only
    assert ck["async"]["setup_checkpoint_start_s"] > 0
    # DCP's checkpoint process's own memory, which the plan's memory model counts
    assert ck["sync"]["process_memory"] is None
    assert ck["async"]["process_memory"]["RssAnon"] > 64 * 2**20
    table = (out / "gpu_check.md").read_text()
    assert "the checkpoint process holds" in table
    assert "DRY RUN on CPU, tiny sizes" in table.splitlines()[0]
    assert [row.split(" | ")[0].lstrip("| ") for row in table.splitlines()[4:]] == NAMES


def test_a_cpu_machine_without_dry_run_is_told_to_use_it(capsys) -> None:
    import torch

    if torch.cuda.is_available():  # pragma: no cover - a GPU runner
        return
    assert gpu_check.main(["--out", "/nonexistent/never"]) == 2
    assert "no CUDA device here; run with --dry-run" in capsys.readouterr().err


def test_the_checkpoint_stall_reads_the_runtime_s_own_save_lines() -> None:
    log = (
        "[rank0] checkpoint: saved /x/ckpt/step_000005 (periodic) in 2.10s, training blocked 1.25s\n"
        "[rank0] checkpoint: saved /x/ckpt/step_000010 (periodic) in 2.00s, training blocked 0.15s\n"
        "[rank0] checkpoint: saved /x/ckpt/step_000015 (periodic) in 4.00s, training blocked 4.11s"
        " (3.90s of it waiting for the previous save to finish writing: checkpoint less often"
        " to stall less)\n"
        "[rank0] checkpoint: saved /x/ckpt/step_000040 (final) in 1.90s, training blocked 1.90s\n"
    )
    assert gpu_check._BLOCKED.findall(log) == [
        ("000005", "periodic", "1.25", ""), ("000010", "periodic", "0.15", ""),
        ("000015", "periodic", "4.11", "3.90"), ("000040", "final", "1.90", ""),
    ]  # fmt: skip


class _Replay(gpu_check.Check):
    """Every run prints `text` and exits 0: the check's reading of a log, without a run."""

    def __init__(self, out: Path, text: str) -> None:
        super().__init__(out, True, float("inf"))
        self.text = text

    def run(self, args, **kw):  # noqa: ANN001, ANN201 - Check.run's signature
        return 0, self.text


SAVES = "".join(
    f"[rank0] checkpoint: saved /x/ckpt/step_{s:06d} (periodic) in 1.00s, training blocked 0.50s\n"
    for s in (5, 10, 15)
)


def test_an_async_save_that_fell_back_to_sync_fails_the_checkpoint_check(tmp_path) -> None:
    """On an H200 (torch 2.11) every async save after the first fell back to a synchronous
    one and the check still said ok: a stall measured on sync saves is not an async figure."""
    assert gpu_check.check_checkpoint(_Replay(tmp_path, SAVES))["ok"] is True
    fell_back = SAVES + (
        "[rank0] checkpoint: WARNING: the async save of step 10 failed before writing "
        "(KeyError: <class 'type'>); saving step 10 synchronously instead\n"
    )
    result = gpu_check.check_checkpoint(_Replay(tmp_path, fell_back))
    assert result["ok"] is False and result["async"]["async_fell_back"] is True


def test_the_checkpoint_stall_reports_when_the_first_async_write_and_its_process_were_ready(
    tmp_path,
) -> None:
    """The H200 run's async saves: the first write complete 9.73 s after it began, because DCP
    started its checkpoint process inside it; the row says when that process was ready (the
    runtime starts it at set-up) and whether the first save waited for it."""
    log = (
        "[rank0] checkpoint: saved /x/ckpt/step_000200 (periodic) in 3.10s, training blocked "
        "1.40s (0.50s of it waiting for DCP's checkpoint process to start); DCP's checkpoint "
        "process was started at set-up and ready 6.20s later\n"
        "[rank0] checkpoint: saved /x/ckpt/step_000400 (periodic) in 2.50s, training blocked 0.06s\n"
        "[rank0] checkpoint: saved /x/ckpt/step_000410 (final) in 3.00s, training blocked 3.00s\n"
    )
    assert [b for _, _, b, _ in gpu_check._BLOCKED.findall(log)] == ["1.40", "0.06", "3.00"]
    result = gpu_check.check_checkpoint(_Replay(tmp_path, log))
    asy = result["async"]
    assert (asy["first_complete_s"], asy["writer_ready_s"], asy["writer_waited_s"]) == (
        3.10, 6.20, 0.50)  # fmt: skip
    assert result["async_vs_sync_after_first"] == 1.0  # the same log for both modes here
    row = next(r for r in gpu_check.markdown(_report(result)).splitlines() if "checkpoint" in r)
    assert "async: first 1.40 s, then median 0.06 s blocked (3 saves); the first complete " \
        "after 3.10 s, its checkpoint process started at set-up and ready 6.20 s later, " \
        "waited for 0.50 s" in row, row  # fmt: skip
    assert "async stall 100.0% of sync (saves every 2 steps), 100.0% after the first save" in row
    # a run whose process was not started at set-up (the old runtime) says so
    old = gpu_check.check_checkpoint(_Replay(tmp_path, SAVES))
    row = next(r for r in gpu_check.markdown(_report(old)).splitlines() if "checkpoint" in r)
    assert "its checkpoint process not started at set-up" in row, row


class _Summary(gpu_check.Check):
    """Every run writes `summary` as the run's summary.json, prints `printed` and exits 0."""

    def __init__(self, out: Path, summary: dict, printed: str = "") -> None:
        super().__init__(out, True, float("inf"))
        self.summary, self.printed = summary, printed

    def run(self, args, **kw):  # noqa: ANN001, ANN201 - Check.run's signature
        d = Path(args[args.index("--output-dir") + 1])
        d.mkdir(parents=True, exist_ok=True)
        (d / "summary.json").write_text(json.dumps(self.summary))
        return 0, self.printed


def test_the_checkpoint_stall_reports_the_checkpoint_process_s_memory(tmp_path) -> None:
    """summary.json's ``checkpoint_process_memory`` (DCP's checkpoint process after its last
    save) reaches the row: the figure the plan's memory model (facts.CHECKPOINT_PROCESS_BYTES,
    measured on CPU) needs from a GPU; a run without it says so."""
    mem = {"pid": 7, "VmRSS": 275 * 2**20, "VmHWM": 446 * 2**20, "RssAnon": 190 * 2**20}
    result = gpu_check.check_checkpoint(
        _Summary(tmp_path, {"checkpoint_process_memory": mem}, SAVES)
    )
    assert result["async"]["process_memory"] == mem
    row = next(r for r in gpu_check.markdown(_report(result)).splitlines() if "checkpoint" in r)
    assert "the checkpoint process holds 190 MiB of its own (RssAnon; VmRSS 275 MiB, peak " \
        "446 MiB)" in row, row  # fmt: skip
    assert row.count("holds") == 1  # async only
    bare = gpu_check.check_checkpoint(_Summary(tmp_path, {}, SAVES))
    row = next(r for r in gpu_check.markdown(_report(bare)).splitlines() if "checkpoint" in r)
    assert "the checkpoint process's memory NOT recorded" in row, row


def _report(checkpoint_stall: dict) -> dict:
    return {"device": "NVIDIA H200", "torch": "torch 2.11.0", "dry_run": False,
            "wall_seconds": 1.0, "checks": {"checkpoint_stall": checkpoint_stall}}  # fmt: skip


def test_a_machine_without_the_planner_s_deps_still_reports_the_run(tmp_path, monkeypatch):
    """On the H200 (2026-11-29) the 1.3B trained (55.5% steady MFU) and the row said FAILED
    "No module named 'pydantic'": the memory model's import, not the GPU, failed. The run's
    figures stand; the table says the model's figure is missing and why."""
    summary = {"steady": {"mfu": 0.555, "tokens_per_second": 61998.0, "from_step": 6,
                          "to_step": 40},
               "whole_run": {"mfu": 0.233, "tokens_per_second": 26000.0},
               "startup": {"seconds": 10.0, "windows": [[1, 5]]}, "setup_seconds": 6.9,
               "rates_basis": "steady", "precision": "bfloat16",
               "peak_memory_allocated_bytes": 49116206080}  # fmt: skip

    def no_pydantic(_summary):  # noqa: ANN001, ANN202
        raise ModuleNotFoundError("No module named 'pydantic'")

    monkeypatch.setattr(gpu_check, "memory_model_bytes", no_pydantic)
    r = gpu_check.check_gpt_1p3b(_Summary(tmp_path, summary))
    assert r["ok"] is True and r["steady_mfu"] == 0.555 and r["memory_model_bytes"] is None
    assert "pydantic" in r["memory_model_error"]


def test_a_rerun_into_the_same_folder_starts_fresh(tmp_path) -> None:
    c = gpu_check.Check(tmp_path, True, float("inf"))
    (tmp_path / "ckpt_sync" / "ckpt" / "step_000008").mkdir(parents=True)
    assert not c.fresh("ckpt_sync").exists()  # an old run's checkpoint would be resumed


def test_the_table_names_each_figure_and_a_failure_s_cause() -> None:
    report = {
        "device": "NVIDIA H100 80GB HBM3", "torch": "torch 2.13.0", "dry_run": False,
        "wall_seconds": 431.0,
        "checks": {
            "smoke": {"ok": True, "first_loss": 10.4, "final_loss": 7.9, "precision": "bfloat16"},
            "gpt_1p3b": {"ok": True, "steady_mfu": 0.541, "steady_tokens_per_second": 60700.0,
                         "steady_steps": [11, 40], "whole_run_mfu": 0.27, "setup_seconds": 26.7,
                         "startup_seconds": 61.0, "memory_model_bytes": 50.6 * 2**30,
                         "peak_allocated_bytes": 45.6 * 2**30, "peak_reserved_bytes": 51.8 * 2**30},
            "loops": {"ok": False, "gpt_124m": {"ok": False, "error": "exit 1: boom"}},
            "checkpoint_stall": {"ok": False, "skipped": "budget of 450 s spent"},
            "kill_resume": {"ok": True, "killed_after_step": 12, "resumed_at_step": 10,
                            "final_loss": 7.1, "uninterrupted_final_loss": 7.1,
                            "bit_identical": False},
        },
    }  # fmt: skip
    table = gpu_check.markdown(report)
    assert table.startswith("GPU check on NVIDIA H100 80GB HBM3 (torch 2.13.0), 431 s\n")
    assert "| gpt_1p3b | ok | steady MFU 54.1%, 60,700 tokens/s (steps [11, 40]); whole loop " \
        "MFU 27.0%; setup 26.70 s, start-up steps 61.00 s; memory model 50.6 GiB vs " \
        "allocated 45.6 GiB (reserved 51.8 GiB) |" in table  # fmt: skip
    assert "| gpt_1p3b_fp8 |" not in table  # not run: no row
    report["checks"]["gpt_1p3b_fp8"] = {
        "ok": True,
        "steady_mfu": 0.66,
        "steady_tokens_per_second": 74000.0,
        "tokens_per_second_vs_bf16": 74000 / 60700,
        "steady_steps": [11, 40],
        "whole_run_mfu": 0.3,
        "setup_seconds": 4.5,
        "startup_seconds": 20.0,
        "setup_phases": {
            "process_start_s": 3.0,
            "process_group_s": 0.5,
            "dataset_s": 0.1,
            "model_s": 4.0,
            "restore_and_other_s": 0.3,
            "loop_start_s": 0.1,
        },
    }
    assert "| gpt_1p3b_fp8 | ok | steady MFU 66.0% (bf16-equivalent), 74,000 tokens/s = " \
        "1.22x bf16 (steps [11, 40]); whole loop MFU 30.0%; setup 4.50 s (dataset 0.10 s, " \
        "model 4.00 s, rest 0.30 s, first barrier 0.10 s; before it: process start + " \
        "imports 3.00 s, process group 0.50 s), start-up steps 20.00 s;" \
        in gpu_check.markdown(report)  # fmt: skip
    report["checks"]["fp8_profile"] = {"ok": True, "variants": {
        "bf16": {"step_ms": 264.0, "float8_all_gather": False, "gpu_busy_ms_per_step": 250.0,
                 "gpu_busy_share": 0.95, "gpu_ms_per_step": {"bf16_matmul": 160.0,
                 "attention": 30.0}, "kernels_per_step": 2100, "speedup_vs_bf16": 1.0},
        "fp8_ag": {"step_ms": 240.0, "float8_all_gather": True, "gpu_busy_ms_per_step": 230.0,
                   "gpu_busy_share": 0.96, "gpu_ms_per_step": {"fp8_matmul": 90.0,
                   "eager": 20.0}, "kernels_per_step": 3400, "speedup_vs_bf16": 1.1},
        "fp8": {"error": "RuntimeError: boom"}}}  # fmt: skip
    assert "| fp8_profile | ok | bf16: 264 ms/step, GPU busy 250 ms (95%): bf16_matmul 160.0, " \
        "attention 30.0 ms; 2,100 kernels/step; fp8_ag: 240 ms/step = 1.10x bf16 (float8 " \
        "all-gather on), GPU busy 230 ms (96%): fp8_matmul 90.0, eager 20.0 ms; 3,400 " \
        "kernels/step; fp8: RuntimeError: boom |" in gpu_check.markdown(report)  # fmt: skip
    report["checks"]["gpt_1p3b_fp8"]["float8_all_gather"] = False  # the summary's own word
    assert "tokens/s = 1.22x bf16 (float8 all-gather off) (steps [11, 40]);" in \
        gpu_check.markdown(report)  # fmt: skip
    assert "| loops | FAILED | gpt_124m: exit 1: boom |" in table
    mlp = {"steps_per_second": {"floor": 640.0, "runtime": 600.0}, "runtime_vs_floor": 0.9375,
           "runtime_vs_seed": 2.2, "ops_per_step": {"floor": 92, "runtime": 96, "extra": {
               "add_": 1, "detach": 1, "index_select": 2}}}  # fmt: skip
    report["checks"]["loops"] = {"ok": True, "mlp": mlp}
    assert "| loops | ok | mlp: steps/s floor 640.0, runtime 600.0; runtime/floor 0.94x, " \
        "runtime/seed 2.20x; ops/step floor 92, runtime 96 (+1 add_, +1 detach, " \
        "+2 index_select) |" in gpu_check.markdown(report)  # fmt: skip
    mlp["ops_per_step"] = {"error": "RuntimeError: boom"}
    assert "runtime/seed 2.20x; ops/step not counted (RuntimeError: boom) |" in gpu_check.markdown(
        report
    )
    assert "| checkpoint_stall | skipped | budget of 450 s spent |" in table
    assert "bit-identical False" in table
    report["checks"]["checkpoint_stall"] = {"ok": True, "sync": {
        "saves": 6, "first_blocked_s": 2.1, "steady_blocked_s_median": 1.9},
        "async": {"saves": 6, "first_blocked_s": 2.0, "steady_blocked_s_median": 1.9,
                  "shm_too_small": True}}  # fmt: skip
    assert "async: first 2.00 s, then median 1.90 s blocked (6 saves) -- NOT async: /dev/shm " \
        "too small, saved synchronously |" in gpu_check.markdown(report)  # fmt: skip
    report["checks"]["checkpoint_stall"]["async_vs_sync"] = 0.05
    report["checks"]["checkpoint_stall"]["sync"]["every"] = 200
    assert "; async stall 5.0% of sync (saves every 200 steps) |" in gpu_check.markdown(report)
    del report["checks"]["loops"]  # --only: a check not run has no row
    assert "| loops |" not in gpu_check.markdown(report)


def _no_process(*args, **kwargs):
    raise AssertionError(f"started a process: {args[0]}")


def test_an_installed_torchao_is_found_without_a_process_or_an_import(monkeypatch) -> None:
    """torchao (with float8) is in this venv: found on the path, no process, nothing imported
    (a subprocess only to import it cost ~4 CPU s; its import is proved by the fp8 run)."""
    monkeypatch.setattr(gpu_check.subprocess, "run", _no_process)
    imported = set(sys.modules)
    assert gpu_check.torchao_ready(None) is None
    assert not {m for m in set(sys.modules) - imported if m.startswith("torchao")}


def _torchao_at(monkeypatch, where: Path | None) -> None:
    """Make this Python's torchao the package folder `where` (None: no torchao)."""
    from importlib.machinery import ModuleSpec

    def find_spec(name: str, *a):
        assert name == "torchao"
        if where is None:
            return None
        spec = ModuleSpec("torchao", None, is_package=True)
        spec.submodule_search_locations = [str(where)]
        return spec

    monkeypatch.setattr(gpu_check.importlib.util, "find_spec", find_spec)


def test_a_missing_torchao_or_its_float8_installs_the_wheel_or_says_why(monkeypatch, tmp_path):
    pkg = tmp_path / "torchao"
    pkg.mkdir()  # a torchao without float8: not ready
    _torchao_at(monkeypatch, pkg)
    monkeypatch.setattr(gpu_check, "WHEELS", tmp_path / "wheels")
    monkeypatch.setattr(gpu_check.subprocess, "run", _no_process)
    assert gpu_check.torchao_ready(None) == (
        f"torchao is not installed and {tmp_path / 'wheels'} has no wheel: run `make fp8-wheel` first"
    )
    (tmp_path / "wheels").mkdir()
    wheel = tmp_path / "wheels" / "torchao-0.18.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    installs: list[list[str]] = []

    def pip(cmd, **kwargs):  # installs float8, as the wheel does, and succeeds
        installs.append(cmd)
        (pkg / "float8").mkdir()
        (pkg / "float8" / "__init__.py").write_text("")
        return subprocess.CompletedProcess(cmd, 0, "Successfully installed torchao", "")

    monkeypatch.setattr(gpu_check.subprocess, "run", pip)
    assert gpu_check.torchao_ready(None) is None  # found after the install
    assert installs == [[sys.executable, "-m", "pip", "install", "--no-index", "--no-deps",
                         str(wheel)]]  # fmt: skip
    _torchao_at(monkeypatch, None)  # no torchao, and a pip that fails

    def failing(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: not a valid wheel\n")

    monkeypatch.setattr(gpu_check.subprocess, "run", failing)
    assert gpu_check.torchao_ready(None) == (
        f"installing {wheel.name} failed: ERROR: not a valid wheel"
    )


def test_the_fp8_profile_sorts_each_kernel_by_what_launched_it() -> None:
    """bench/fp8_profile.py's categories, from a profile's events (the launching op and its
    kernels, as torch.profiler links them): FP8 matmuls by aten::_scaled_mm, bf16 ones by
    aten::mm or a GEMM kernel's name, inductor's fused kernels, and the eager rest."""
    from types import SimpleNamespace as NS

    import fp8_profile

    def evt(op, *kernels):
        return NS(name=op, kernels=[NS(name=k, duration=d) for k, d in kernels])

    events = [
        evt("aten::_scaled_mm", ("sm90_xmma_gemm_e4m3e4m3_bf16", 900.0)),
        evt("aten::mm", ("nvjet_tst_128x256", 400.0)),
        evt("aten::linear"),  # no kernel of its own: its aten::mm has it
        evt("triton_red_fused_abs_amax_0", ("triton_red_fused_abs_amax_0", 50.0)),
        evt("aten::_scaled_dot_product_flash_attention", ("flash_fwd_kernel", 300.0)),
        evt("aten::_fused_adamw_", ("multi_tensor_apply_kernel", 80.0)),
        evt("nccl:_all_gather_base", ("ncclDevKernel_AllGather_RING_LL", 10.0)),
        evt("aten::clamp", ("vectorized_elementwise_kernel", 30.0)),
        evt("aten::copy_", ("vectorized_elementwise_kernel", 20.0)),
    ]
    by_cat, by_name, n = fp8_profile.kernel_times(events)
    assert by_cat == {"fp8_matmul": 900.0, "bf16_matmul": 400.0, "triton": 50.0,
                      "attention": 300.0, "optimizer": 80.0, "nccl": 10.0, "eager": 50.0}  # fmt: skip
    assert n == 8 and by_name["vectorized_elementwise_kernel"] == 50.0


def test_the_set_up_words_name_every_phase_the_runtime_adds_up():
    """The gpt rows print the set-up split from gpu_check's own labels (IN_SETUP): a phase the
    runtime adds to `setup_seconds` (training/loop.SETUP_PHASES) without a label here would
    be left out of the row while still counted in its total."""
    from trainforge.training import loop

    assert tuple(gpu_check.IN_SETUP) == loop.SETUP_PHASES
    assert not set(gpu_check.BESIDE_SETUP) & set(loop.SETUP_PHASES)
