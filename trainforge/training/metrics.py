"""Rank-0 progress logs, a Prometheus text endpoint, summary.json and optional MLflow.

The endpoint is a standard-library HTTP server on a daemon thread; the loop (and the checkpoint
code, through ``Gauges.set``) updates gauges that are rendered on every scrape, so a scrape
never touches the training stream. Names follow Prometheus conventions (``trainforge_*``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch

from trainforge.training import gpus
from trainforge.training.timeouts import format_eta

# Dense bf16 peak FLOP/s per GPU model: one table (gpus.py), shared with the planner.
PEAK_BF16_FLOPS = gpus.PEAK_BF16_FLOPS

HELP = {
    "step": "optimizer steps completed",
    "loss": "training loss averaged over all ranks since the previous log",
    "samples_per_second": "global training samples per second",
    "tokens_per_second": "global training tokens per second (models with tokens only)",
    "mfu": "model FLOPs utilisation (GPU only; 0 on CPU)",
    "world_size": "processes in the job",
    "checkpoint_step": "step of the last checkpoint",
    "checkpoint_seconds": "seconds until the last checkpoint was complete",
    "checkpoint_blocked_seconds": "seconds training waited for the last checkpoint",
    "checkpoint_async_failed": "1 once an async save failed: later saves are synchronous",
    "total_steps": "optimizer steps the run is configured for",
    "progress": "fraction of the run's steps completed (0..1)",
    "eta_seconds": "estimated seconds until the last step, at this run's average step time",
    "step_seconds": "seconds per optimizer step over the last log window",
    "window_steps": "optimizer steps in the last log window",
    "window_seconds": "seconds of the last log window",
    "startup_window": "1 when the last log window held one of the loop's first steps "
    "(compilation, warm-up): left out of the summary's steady rates",
    # reliability (docs/reliability.md)
    "goodput": "fraction of wall time since the first attempt spent in steps that were kept",
    "restarts": "restarts of this run so far (torchrun restarts and pod re-creations)",
    "productive_seconds": "seconds spent in training steps that were kept (goodput numerator)",
    "wall_seconds": "seconds since the first attempt of this run started (goodput denominator)",
    "lost_seconds": "seconds of steps run by failed attempts after their last checkpoint",
    "watchdog_bound_seconds": "seconds a step may run before the hang watchdog fires",
    "attempt_exits": "earlier attempts of this run that ended with each exit reason",
}


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    facts = gpus.match_gpu(torch.cuda.get_device_name(device))
    return facts.bf16_flops if facts is not None and facts.native_bf16 else None


class Gauges:
    """Thread-safe name -> value map; anything (the loop, checkpoints) may set a gauge."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, float] = {}

    def set(self, name: str, value: float) -> None:
        with self._lock:
            self._values[name] = float(value)

    def update(self, values: dict[str, float]) -> None:
        with self._lock:  # one lock for the lot: a scrape sees all of them or none
            for k, v in values.items():
                self._values[k] = float(v)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._values)

    def render(self, labels: dict[str, str] | None = None) -> str:
        """Prometheus text; a name may carry its own labels: ``attempt_exits{reason="hang"}``."""
        label = ""
        if labels:
            label = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
        lines = []
        helped: set[str] = set()
        for name, value in sorted(self.snapshot().items()):
            base, _, own = name.partition("{")
            own = own.rstrip("}")
            metric = f"trainforge_{base}"
            if metric not in helped:
                helped.add(metric)
                lines.append(f"# HELP {metric} {HELP.get(base, base.replace('_', ' '))}")
                lines.append(f"# TYPE {metric} gauge")
            inner = ",".join(x for x in (label, own) if x)
            lines.append(
                f"{metric}{{{inner}}} {_fmt(value)}" if inner else f"{metric} {_fmt(value)}"
            )
        return "\n".join(lines) + "\n"


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


class MetricsServer:
    """``GET /metrics`` -> Prometheus text format 0.0.4; runs until ``close``."""

    def __init__(self, gauges: Gauges, port: int, labels: dict[str, str] | None = None) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404, "try /metrics")
                    return
                body = gauges.render(outer.labels).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # scrapes must not flood the job log
                pass

        self.labels = labels or {}
        # 0.0.0.0: the PodMonitor scrapes the pod IP from inside the cluster network.
        self.httpd = ThreadingHTTPServer(("0.0.0.0", port), Handler)
        self.port = self.httpd.server_address[1]
        # poll every 20 ms: close() waits for one poll (0.5 s by default) before the rank may exit
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, args=(0.02,), name="trainforge-metrics", daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class MLflowLogger:
    """Params and metrics to MLflow when MLFLOW_TRACKING_URI is set and mlflow is installed."""

    def __init__(self, run_name: str, params: dict[str, Any], log: Any) -> None:
        self.mlflow: Any = None
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            return
        try:
            import mlflow
        except ImportError:
            log("metrics: MLFLOW_TRACKING_URI is set but mlflow is not installed; skipping MLflow")
            return
        try:
            mlflow.start_run(run_name=run_name)
            mlflow.log_params({k: v for k, v in params.items() if v is not None})
            self.mlflow = mlflow
        except Exception as e:  # noqa: BLE001 - tracking is best-effort, training goes on
            log(f"metrics: MLflow unavailable ({type(e).__name__}: {e}); continuing without it")

    def log(self, values: dict[str, float], step: int) -> None:
        if self.mlflow is not None:
            with contextlib.suppress(Exception):  # best-effort: never stop training
                self.mlflow.log_metrics(values, step=step)

    def close(self) -> None:
        if self.mlflow is not None:
            self.mlflow.end_run()


# A log window holding one of the first STARTUP_STEPS steps of a process's loop is start-up,
# not steady state: step 1 compiles (torch.compile traces forward and backward), allocates
# the optimizer state and the allocator's pools; DDP rebuilds its gradient buckets after step
# 1, so step 2 may differ too. Such windows are left out of the summary's headline rates.
STARTUP_STEPS = 2


def tokens_rate(samples_per_second: float, tokens_per_sample: int | None) -> float | None:
    """Tokens per second, or None for a model whose samples are not token sequences."""
    return None if tokens_per_sample is None else samples_per_second * tokens_per_sample


def window_rates(
    windows: list[dict[str, float]],
    samples_per_step: int,
    tokens_per_sample: int | None,
    flops_per_sample: float,
    peak_total: float | None,
) -> dict[str, Any]:
    """Rates over `windows` ({"from_step", "to_step", "steps", "seconds"}): their steps over
    their seconds (time-weighted, as a run's duration adds up), and the steps they span.
    tokens_per_second is None for a model without tokens (`tokens_per_sample` None)."""
    steps = sum(w["steps"] for w in windows)
    seconds = sum(w["seconds"] for w in windows)
    sps = steps * samples_per_step / seconds if seconds > 0 else 0.0
    return {
        "windows": len(windows),
        "from_step": int(windows[0]["from_step"]) if windows else None,
        "to_step": int(windows[-1]["to_step"]) if windows else None,
        "steps": int(steps),
        "seconds": seconds,
        "samples_per_second": sps,
        "tokens_per_second": tokens_rate(sps, tokens_per_sample),
        "steps_per_second": steps / seconds if seconds > 0 else 0.0,
        "mfu": sps * flops_per_sample / peak_total if peak_total else None,
    }


class Reporter:
    """What rank 0 tells the world. Other ranks get an instance that does nothing."""

    def __init__(
        self,
        *,
        enabled: bool,
        total_steps: int,
        samples_per_step: int,
        tokens_per_sample: int | None,
        flops_per_sample: float,
        world_size: int,
        peak: float | None,
        output_dir: Path | None,
        metrics_port: int,
        run_name: str,
        params: dict[str, Any],
    ) -> None:
        self.enabled = enabled
        self.total_steps = total_steps
        self.samples_per_step = samples_per_step
        self.tokens_per_sample = tokens_per_sample  # None: the model has no tokens (the MLP)
        self.flops_per_sample = flops_per_sample
        self.world_size = world_size
        self.peak = peak  # one device's, as the GPU catalog gives it (None: not known)
        self.gauges = Gauges()
        self.server: MetricsServer | None = None
        self.history: list[dict[str, float]] = []
        self.output_dir = output_dir
        self.tty = enabled and sys.stdout.isatty()
        self._jsonl = None
        self.mlflow: MLflowLogger | None = None
        self.first_step = 0  # the loop's first step in this process (> 0 after a resume)
        # every log window of this process: {"from_step", "to_step", "steps", "seconds",
        # "startup"} -- the summary's steady and start-up figures are sums over them
        self.windows: list[dict[str, float]] = []
        self.loop_start = time.perf_counter()
        self.last_loss: float | None = None
        if not enabled:
            return
        self.gauges.update(
            {"step": 0, "world_size": world_size, "total_steps": total_steps, "progress": 0.0}
        )
        from trainforge.training.config import ConfigError  # noqa: PLC0415

        if metrics_port:
            try:
                self.server = MetricsServer(self.gauges, metrics_port, labels={"run": run_name})
            except OSError as e:  # in use, or a privileged port
                raise ConfigError(
                    f"--metrics-port {metrics_port}: cannot serve metrics there ({e.strerror}); "
                    "pick a free port, or 0 to turn metrics off"
                ) from None
            self.log(f"metrics: serving Prometheus text on :{self.server.port}/metrics")
        if output_dir is not None:
            try:
                output_dir.mkdir(parents=True, exist_ok=True)
                self._jsonl = open(output_dir / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115
            except OSError as e:  # a file in the way, no permission
                if self.server is not None:
                    self.server.close()
                raise ConfigError(
                    f"--output-dir {output_dir}: cannot write there ({e.strerror}); "
                    "name a directory this user can create"
                ) from None
        self.mlflow = MLflowLogger(run_name, params, self.log)
        self._window_start = time.perf_counter()
        self._window_step = 0

    @property
    def peak_total(self) -> float | None:
        """The world's peak FLOP/s (every rank's device), what MFU divides by."""
        return self.peak * self.world_size if self.peak else None

    def log(self, msg: str) -> None:
        if self.enabled:
            if self.tty:
                print("\r\033[K", end="")
            print(msg, flush=True)

    def start_window(self, step: int) -> None:
        self._window_start = time.perf_counter()
        self._window_step = step

    def start_loop(self, step: int) -> None:
        self.first_step = step
        self.loop_start = time.perf_counter()
        self.start_window(step)

    def stepped(self, step: int) -> None:
        """Called after every optimizer step: the gauges TrainforgeJobStalled reads (step,
        progress) move with each step, not each log window; a 500-step window of 0.48 s steps
        left them still for 4 min and paged a healthy job. Rates stay per window (`record`)."""
        if self.enabled:
            self.gauges.update({"step": step, "progress": self.fraction(step)})

    def fraction(self, step: int) -> float:
        """The share of the run's steps done (0..1): trainforge_progress."""
        return done_share(step, self.total_steps)

    def record(self, step: int, loss: float, lr: float, extra: dict[str, float]) -> None:
        """Called every --log-every steps with the already-reduced loss (one host sync)."""
        if not self.enabled:
            return
        now = time.perf_counter()
        steps = step - self._window_step
        dt = max(now - self._window_start, 1e-9)
        self._window_start, self._window_step = now, step
        sps = steps * self.samples_per_step / dt
        first = step - steps + 1  # the window's first step (1-based)
        startup = first <= self.first_step + STARTUP_STEPS
        self.windows.append(
            {"from_step": first, "to_step": step, "steps": steps, "seconds": dt,
             "startup": startup}
        )  # fmt: skip
        values = {
            "step": float(step),
            "loss": loss,
            "lr": lr,
            "samples_per_second": sps,
            "step_seconds": dt / max(steps, 1),
            "window_steps": float(steps),
            "window_seconds": dt,
            "startup_window": 1.0 if startup else 0.0,
        }
        tps = tokens_rate(sps, self.tokens_per_sample)
        if tps is not None:  # only the units the model has: no tokens/s gauge for the MLP
            values["tokens_per_second"] = tps
        if self.peak_total:
            values["mfu"] = sps * self.flops_per_sample / self.peak_total
        values.update(self.progress(step, now))
        values.update(extra)
        self.last_loss = loss
        self.gauges.update(values)
        self.history.append(values)
        line = (
            f"step {step}/{self.total_steps} | loss {loss:.4f} | lr {lr:.2e} | {sps:,.1f} samples/s"
        )
        if tps is not None:
            line += f" | {tps:,.0f} tokens/s"
        if "mfu" in values:
            line += f" | MFU {100 * values['mfu']:.1f}%"
        line += f" | {100 * values['progress']:.1f}%"
        if "eta_seconds" in values:
            line += f" | ETA {format_eta(values['eta_seconds'])}"
        self.log(line)
        if self.tty:
            done = int(30 * step / self.total_steps)
            print(
                f"[{'#' * done}{'.' * (30 - done)}] {step}/{self.total_steps}", end="", flush=True
            )
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(values) + "\n")
            self._jsonl.flush()
        if self.mlflow is not None:
            self.mlflow.log(values, step)

    def rates(self, elapsed: float, steps_run: int) -> dict[str, Any]:
        """The summary's rate figures: the steady state (the windows after start-up) as the
        headline, the whole loop, and start-up on its own. Without a steady window (a run no
        longer than its start-up) the headline is the whole loop's, and says so."""
        steady = [w for w in self.windows if not w["startup"]]
        startup = [w for w in self.windows if w["startup"]]
        args = (self.samples_per_step, self.tokens_per_sample, self.flops_per_sample,
                self.peak_total)  # fmt: skip
        whole = window_rates(
            [{"from_step": self.first_step + 1, "to_step": self.first_step + steps_run,
              "steps": steps_run, "seconds": elapsed}] if steps_run else [],
            *args,
        )  # fmt: skip
        whole.pop("windows")
        steady_rates = window_rates(steady, *args)
        head = steady_rates if steady else whole
        return {
            "samples_per_second": head["samples_per_second"],
            "tokens_per_second": head["tokens_per_second"],
            "steps_per_second": head["steps_per_second"],
            "mfu": head["mfu"],
            "rates_basis": "steady" if steady else "whole_run",
            "steady": steady_rates,
            "whole_run": whole,
            "startup": {
                "steps": int(sum(w["steps"] for w in startup)),
                "seconds": sum(w["seconds"] for w in startup),
                "windows": [[int(w["from_step"]), int(w["to_step"])] for w in startup],
                "rule": f"log windows holding one of the loop's first {STARTUP_STEPS} steps",
            },
        }

    def progress(self, step: int, now: float) -> dict[str, float]:
        """Progress and ETA: the run's average step time since this process started its loop
        (a resumed run counts only its own steps, so restore time does not skew it)."""
        out = {"total_steps": float(self.total_steps), "progress": self.fraction(step)}
        done = step - self.first_step
        if done > 0:
            per_step = (now - self.loop_start) / done
            out["eta_seconds"] = max(self.total_steps - step, 0) * per_step
        return out

    def summary(self, summary: dict[str, Any]) -> None:
        if not self.enabled:
            return
        if self.tty:
            print()
        parts = [
            f"steps {summary['steps']}",
            f"final loss {summary['final_loss']:.4f}" if summary["final_loss"] is not None else "",
            f"{summary['samples_per_second']:,.1f} samples/s",
        ]
        if summary.get("tokens_per_second") is not None:
            parts.append(f"{summary['tokens_per_second']:,.0f} tokens/s")
        if summary.get("mfu") is not None:
            parts.append(f"MFU {100 * summary['mfu']:.1f}%")
        parts += _rate_parts(summary)
        parts.append(f"{summary['elapsed_seconds']:.1f}s")
        if summary.get("goodput"):
            gp = summary["goodput"]
            parts.append(f"goodput {100 * gp['goodput']:.1f}% ({gp['restarts']} restarts)")
        self.log("summary: " + " | ".join(p for p in parts if p))
        if self.output_dir is not None:
            path = self.output_dir / "summary.json"
            path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            self.log(f"summary: wrote {path}")

    def nothing_trained(self, step: int) -> None:
        """The summary of a run that trained no step (it resumed at --steps): said, not
        written. Its rates would be 0.0 samples/s and its losses empty; written, they replaced
        the summary.json of the run that trained those steps, which `trainforge report` then
        read as the run's (a second `run-local` of the docs' command lost the first's)."""
        if not self.enabled:
            return
        path = self.output_dir / "summary.json" if self.output_dir is not None else None
        if path is not None and path.is_file():
            kept = f"{path} is kept: it is the summary of the run that trained them"
        else:
            kept = "no summary.json written"
        self.log(f"summary: no step trained in this run (it began at step {step}); {kept}")

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None
        if self.mlflow is not None:
            self.mlflow.close()
        if self.server is not None:
            self.server.close()
            self.server = None


def _rate_parts(summary: dict[str, Any]) -> list[str]:
    """What the headline rates are, start-up on its own, and the whole loop's for comparison."""
    steady, whole, startup = summary.get("steady"), summary.get("whole_run"), summary.get("startup")
    if not steady or not whole or not startup:
        return []
    if summary.get("rates_basis") == "steady":
        basis = (
            f"steady: steps {steady['from_step']}-{steady['to_step']}, {steady['windows']} windows"
        )
    else:
        basis = "whole run: no steady window (the run is no longer than its start-up)"
    parts = [f"({basis})"]
    start = f"start-up: setup {summary['setup_seconds']:.1f}s"
    if startup["windows"]:
        first, last = startup["windows"][0][0], startup["windows"][-1][1]
        start += f", steps {first}-{last} {startup['seconds']:.1f}s"
    parts.append(start)
    if summary.get("rates_basis") == "steady":
        w = f"whole loop {whole['samples_per_second']:,.1f} samples/s"
        if whole.get("mfu") is not None:
            w += f", MFU {100 * whole['mfu']:.1f}%"
        parts.append(w)
    return parts


_METRIC_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class MetricsReporter:
    """Metrics for your own training code, as the runtime reports its own: on global rank 0, a
    Prometheus endpoint (``TRAINFORGE_METRICS_PORT``, scraped by the job's PodMonitor; 0 = off),
    ``metrics.jsonl`` in ``TRAINFORGE_OUTPUT_DIR``, and MLflow when ``MLFLOW_TRACKING_URI`` is set
    and mlflow is installed (run name ``TRAINFORGE_JOB_NAME``). On other ranks every call does
    nothing, so call it everywhere::

        metrics = MetricsReporter.from_env(params={"lr": lr})
        metrics.log(step, loss=loss.item(), lr=lr)   # gauges trainforge_loss, trainforge_lr
        metrics.close()
    """

    def __init__(
        self,
        *,
        enabled: bool,
        run_name: str,
        output_dir: Path | None,
        metrics_port: int = 0,
        params: dict[str, Any] | None = None,
        log: Any = print,
        total_steps: int | None = None,
    ) -> None:
        self.enabled = enabled
        self.total_steps = total_steps
        self.gauges = Gauges()
        self.server: MetricsServer | None = None
        self.mlflow: MLflowLogger | None = None
        self._jsonl = None
        self._log = log
        if not enabled:
            return
        if metrics_port:
            self.server = MetricsServer(self.gauges, metrics_port, labels={"run": run_name})
        if output_dir is not None:
            output_dir.mkdir(parents=True, exist_ok=True)
            self._jsonl = open(output_dir / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self.mlflow = MLflowLogger(run_name, params or {}, log)

    @classmethod
    def from_env(
        cls,
        *,
        params: dict[str, Any] | None = None,
        log: Any = print,
        total_steps: int | None = None,
    ) -> MetricsReporter:
        """Configured by the job contract; enabled on global rank 0 only. `total_steps` (the
        steps your run is configured for) makes `log` set ``trainforge_progress`` as the
        runtime does: TrainforgeJobStalled pages only a run whose progress is below 1, so
        without it your job has no stall alert (docs/troubleshooting.md)."""
        from trainforge.training.contract import job_env

        env = job_env()
        return cls(
            enabled=_global_rank() == 0,
            run_name=env.job_name,
            output_dir=env.output_path,
            metrics_port=env.metrics_port,
            params=params,
            log=log,
            total_steps=total_steps,
        )

    @property
    def port(self) -> int | None:
        return self.server.port if self.server is not None else None

    def log(self, step: int, **values: float) -> None:
        """Record ``values`` at ``step``: gauges ``trainforge_<name>``, a JSON line, MLflow;
        with `total_steps`, also ``trainforge_progress`` (the share done, 0..1) and
        ``trainforge_total_steps``, the gauges the runtime's own alerts read."""
        for name in values:
            if not _METRIC_NAME.match(name):
                raise ValueError(f"metric name {name!r}: use letters, digits and '_' only")
        if not self.enabled:
            return
        record = {"step": float(step), **{k: float(v) for k, v in values.items()}}
        gauges = dict(record)
        if self.total_steps is not None:
            total = float(self.total_steps)
            gauges.update(progress=done_share(step, self.total_steps), total_steps=total)
        self.gauges.update(gauges)
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(record) + "\n")
            self._jsonl.flush()
        if self.mlflow is not None:
            self.mlflow.log({k: float(v) for k, v in values.items()}, step)

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None
        if self.mlflow is not None:
            self.mlflow.close()
            self.mlflow = None
        if self.server is not None:
            self.server.close()
            self.server = None

    def __enter__(self) -> MetricsReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def done_share(step: int, total_steps: int) -> float:
    """trainforge_progress: the share of a run's `total_steps` done at `step` (0..1), for the
    runtime's Reporter and your code's MetricsReporter alike (the stall alert reads it)."""
    return min(step / max(total_steps, 1), 1.0)


def _global_rank() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    try:
        return int(os.environ.get("RANK", "0") or 0)
    except ValueError:
        return 0
