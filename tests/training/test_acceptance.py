"""Acceptance-test verdicts: the parsers on recorded outputs (acceptance_samples/README.md says
where each comes from), the facts table the floors come from, the `trainforge acceptance`
command, and our all-reduce benchmark really run (2 gloo ranks under torchrun) and read back
by the same parser."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainforge.training.acceptance import facts
from trainforge.training.acceptance.allreduce import bus_bandwidth
from trainforge.training.acceptance.cli import main as cli_main
from trainforge.training.acceptance.parse import parse_allreduce, parse_dcgm, table_rows

SAMPLES = Path(__file__).parent / "acceptance_samples"
ROOT = Path(__file__).resolve().parents[2]


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


# ------------------------------------------------------------------------------ all-reduce


def test_two_p5_nodes_on_efa_pass_at_the_published_two_node_reference() -> None:
    floor = facts.allreduce_floor(["p5.48xlarge"], nodes=2)
    assert floor.gbps == pytest.approx(0.8 * 487.09, abs=0.01)
    v = parse_allreduce(sample("allreduce_2xp5_efa.log"), min_busbw_gbps=floor.gbps,
                        floor_why=floor.why)  # fmt: skip
    assert v.passed, v.render()
    assert v.numbers["peak_busbw_gbps"] == 487.26 and v.numbers["peak_at_bytes"] == 16 * 2**30
    assert v.numbers["rows"] == 32 and v.numbers["wrong"] == 0
    assert v.numbers["efa"]["providers"] == ["efa"] and v.numbers["efa"]["nics"] == [32]
    assert v.numbers["efa"]["networks"] == ["AWS Libfabric"]
    assert v.render().startswith("PASS allreduce: peak bus bandwidth 487.26 GB/s at 16 GiB")


def test_the_healthcheck_floor_would_fail_awss_own_healthy_two_node_run() -> None:
    """Why the facts table judges two nodes by the published two-node run, not the floor."""
    v = parse_allreduce(sample("allreduce_2xp5_efa.log"),
                        min_busbw_gbps=facts.HEALTHCHECK_FLOORS_GBPS["p5.48xlarge"])  # fmt: skip
    assert not v.passed
    assert "487.26 GB/s is below the 800 GB/s floor" in v.render()


def test_p4d_is_judged_by_the_p4de_run_with_the_same_efa() -> None:
    floor = facts.allreduce_floor(["p4d.24xlarge"], nodes=2)
    assert floor.gbps == pytest.approx(0.8 * 78.33, abs=0.01)
    assert "p4de.24xlarge run stands for p4d.24xlarge" in floor.why
    assert "AWS healthcheck floor 300 GB/s" in floor.why
    v = parse_allreduce(sample("allreduce_2xp4de_efa.log"), min_busbw_gbps=floor.gbps)
    assert v.passed, v.render()
    assert v.numbers["peak_busbw_gbps"] == 78.33 and v.numbers["efa"]["nics"] == [4]


def test_a_silent_fallback_to_tcp_sockets_fails_even_with_enough_bandwidth() -> None:
    v = parse_allreduce(sample("allreduce_2xp5_socket_fallback.log"), min_busbw_gbps=1.0)
    assert not v.passed
    text = v.render()
    assert "did not select the EFA provider" in text
    assert "NCCL used network Socket, not Libfabric" in text
    # without the EFA requirement (a non-EFA pool) the same run passes its floor
    assert parse_allreduce(sample("allreduce_2xp5_socket_fallback.log"), min_busbw_gbps=1.0,
                           require_efa=False).passed  # fmt: skip


def test_wrong_results_fail_whatever_the_bandwidth() -> None:
    v = parse_allreduce(sample("allreduce_2xp4de_wrong_results.log"), min_busbw_gbps=10.0)
    assert not v.passed
    assert v.numbers["wrong"] == 24
    assert "24 wrong result element(s) at size(s) 64 MiB" in v.render()


def test_no_table_is_a_failure_that_says_so() -> None:
    v = parse_allreduce("NCCL WARN NET/OFI Failed to initialize\nTraceback ...")
    assert not v.passed and "no results table" in v.summary


def test_other_node_counts_have_no_floor_unless_configured() -> None:
    f = facts.allreduce_floor(["p5en.48xlarge"], nodes=4)
    assert f.gbps is None and "minBusBandwidthGBps" in f.why
    mixed = facts.allreduce_floor(["p5.48xlarge", "p4d.24xlarge"], nodes=2)
    assert mixed.gbps == pytest.approx(0.8 * 78.33, abs=0.01)  # the slowest type decides


def test_bus_bandwidth_is_nccl_tests_definition() -> None:
    algbw, busbw = bus_bandwidth(2**30, 0.01, 16)
    assert algbw == pytest.approx(2**30 / 0.01 / 1e9)
    assert busbw == pytest.approx(algbw * 2 * 15 / 16)
    # and it reproduces a published row: 2 x p5, 1 GiB in 4607.6 us -> 233.04 / 436.95 GB/s
    algbw, busbw = bus_bandwidth(1073741824, 4607.6e-6, 16)
    assert algbw == pytest.approx(233.04, abs=0.01)  # the time is printed rounded to 0.1 us
    assert busbw == pytest.approx(436.95, abs=0.02)


# ------------------------------------------------------------------------------------ DCGM


def test_dcgm_level_2_pass() -> None:
    v = parse_dcgm(sample("dcgm_l2_pass.json"), level=2, node="ip-10-0-1-7")
    assert v.passed, v.render()
    assert v.numbers["gpus"] == 8 and v.numbers["Pass"] == 32 and v.numbers["Skip"] == 8
    assert v.summary == (
        "level 2 on ip-10-0-1-7: 32 passed, 0 failed, 0 warned, 8 skipped on 8 GPU(s) (DCGM 4.6.0)"
    )


def test_dcgm_failure_names_the_test_the_gpu_and_the_reason() -> None:
    v = parse_dcgm(sample("dcgm_l2_fail_memory.json"), level=2)
    assert not v.passed
    assert v.numbers["Fail"] == 1
    assert "memory failed on GPU 5: A memory mismatch was detected on GPU 5" in v.render()


def test_dcgm_without_a_host_engine_fails_and_points_at_the_agent() -> None:
    v = parse_dcgm(sample("dcgmi_no_hostengine.txt"), level=1)
    assert not v.passed
    assert "unable to establish a connection" in v.summary
    assert "dcgm-server" in v.render()


# ------------------------------------------------------------------------------- the CLI


def test_cli_exit_codes(capsys) -> None:
    p5 = str(SAMPLES / "allreduce_2xp5_efa.log")
    assert cli_main(["parse", "allreduce", p5, "--instance-type", "p5.48xlarge"]) == 0
    assert "PASS allreduce" in capsys.readouterr().out
    sock = str(SAMPLES / "allreduce_2xp5_socket_fallback.log")
    assert cli_main(["parse", "allreduce", sock, "--instance-type", "p5.48xlarge"]) == 1
    assert cli_main(["parse", "dcgm", str(SAMPLES / "dcgm_l2_pass.json"), "--level", "2"]) == 0
    assert cli_main(["parse", "dcgm", str(SAMPLES / "nope.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_cli_says_when_the_instance_type_and_node_count_have_no_floor(capsys) -> None:
    """--instance-type asks for the facts table's floor; where it has none (another node
    count, an unknown type) the PASS says so and why, rather than reading like a floor held."""
    p5 = str(SAMPLES / "allreduce_2xp5_efa.log")
    args = ["parse", "allreduce", p5, "--instance-type", "p5.48xlarge"]
    assert cli_main([*args, "--nodes", "4"]) == 0
    why = facts.allreduce_floor(["p5.48xlarge"], 4).why
    assert f"(no floor: {why})" in capsys.readouterr().out
    assert cli_main(["parse", "allreduce", p5, "--instance-type", "nope.xlarge"]) == 0
    assert "(no floor: no published 2-node reference for nope.xlarge" in capsys.readouterr().out
    assert cli_main(["parse", "allreduce", p5]) == 0  # no floor asked for: none mentioned
    assert "floor" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flag", "value", "error"),
    [
        ("--nodes", "0", "--nodes must be >= 1, got 0"),
        ("--nodes", "-2", "--nodes must be >= 1, got -2"),
        ("--min-busbw", "-5", "--min-busbw must be a positive number of GB/s, got -5"),
        ("--min-busbw", "0", "--min-busbw must be a positive number of GB/s, got 0"),
        ("--min-busbw", "nan", "--min-busbw must be a positive number of GB/s, got nan"),
        ("--min-busbw", "inf", "--min-busbw must be a positive number of GB/s, got inf"),
    ],
)
def test_cli_refuses_a_floor_that_cannot_fail_a_run(capsys, flag, value, error) -> None:
    """A negative, zero or NaN floor passed every run (`floor -5 GB/s`)."""
    p5 = str(SAMPLES / "allreduce_2xp5_efa.log")
    with pytest.raises(SystemExit) as e:
        cli_main(["parse", "allreduce", p5, "--instance-type", "p5.48xlarge", flag, value])
    assert e.value.code == 2
    assert capsys.readouterr().err.rstrip().endswith(f"error: {error}")


@pytest.mark.parametrize(
    ("test", "sample", "extra", "error"),
    [
        ("dcgm", "dcgm_l2_pass.json", ["--instance-type", "p5.48xlarge"],
         "--instance-type: only for parse allreduce, not parse dcgm"),
        ("dcgm", "dcgm_l2_pass.json", ["--nodes", "4", "--min-busbw", "100"],
         "--nodes, --min-busbw: only for parse allreduce, not parse dcgm"),
        ("dcgm", "dcgm_l2_pass.json", ["--no-require-efa"],
         "--no-require-efa: only for parse allreduce, not parse dcgm"),
        ("allreduce", "allreduce_2xp5_efa.log", ["--level", "2", "--node", "n1"],
         "--level, --node: only for parse dcgm, not parse allreduce"),
    ],
)  # fmt: skip
def test_cli_refuses_the_other_tests_flags_instead_of_ignoring_them(
    capsys, test, sample, extra, error
) -> None:
    """`parse dcgm --instance-type ...` or `parse allreduce --level 2` ran and passed with
    the flag read by nothing (a floor or level the user believed was applied)."""
    path = str(SAMPLES / sample)
    assert cli_main(["parse", test, path]) == 0  # without the stray flag: judged, passes
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        cli_main(["parse", test, path, *extra])
    assert e.value.code == 2
    assert capsys.readouterr().err.rstrip().endswith(f"error: {error}")


def test_cli_judges_a_log_with_a_stray_non_utf8_byte(tmp_path, capsys) -> None:
    """kubectl logs are bytes; one that is not UTF-8 was a UnicodeDecodeError traceback."""
    log = tmp_path / "log.txt"
    log.write_bytes(b"\xff\xfe progress bar\n" + (SAMPLES / "allreduce_2xp5_efa.log").read_bytes())
    assert cli_main(["parse", "allreduce", str(log), "--instance-type", "p5.48xlarge"]) == 0
    assert "PASS allreduce" in capsys.readouterr().out


# -------------------------------------------------------------------- our benchmark, run


def _bench(*extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "trainforge.training.launch", "--standalone", "--nnodes", "1",
           "--nproc-per-node", "2", "-m", "trainforge.training.acceptance.allreduce",
           "--min-bytes", "1024", "--max-bytes", "65536", "--warmup", "1", "--iters", "3",
           "--timeout", "60", *extra]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_our_benchmark_prints_a_table_the_parser_reads_and_judges_itself() -> None:
    proc = _bench("--min-busbw", "0.000001")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = table_rows(proc.stdout)
    assert [r.size for r in rows] == [1024 * 2**i for i in range(7)]
    assert all(r.wrong == 0 for r in rows) and max(r.busbw for r in rows) > 0
    assert "PASS allreduce: peak bus bandwidth" in proc.stdout
    # the same output judged offline gives the same verdict
    assert parse_allreduce(proc.stdout, min_busbw_gbps=0.000001, require_efa=False).passed


def test_our_benchmark_fails_the_job_when_efa_is_required_but_absent() -> None:
    proc = _bench("--require-efa")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "FAIL allreduce" in proc.stdout and "did not select the EFA provider" in proc.stdout
