"""A Python function as a job (`TrainingJob.function`, the Kubeflow SDK's CustomTrainer): what
is shipped, what is refused and why, and that the generated program runs on its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.jobs import user_functions as uf
from tests.jobs.helpers import CODE, CPU_POOL, container, target, validate_pod_templates
from tests.jobs.schemas import crd_errors
from trainforge.core.errors import JobConfigError
from trainforge.jobs import entrypoint
from trainforge.jobs.backends import emit
from trainforge.jobs.pyfunction import ship_function
from trainforge.jobs.spec import function_job
from trainforge.jobs.wiring import resolve_job

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def in_project(monkeypatch):
    monkeypatch.chdir(ROOT)  # `tests.jobs.helpers` is a module of this project


def test_the_function_and_what_it_uses_are_shipped():
    name, source = ship_function(uf.train, {"steps": 2, "tag": "t"}, "fn")
    assert name == "train_fn.py"
    assert source.index("from __future__ import annotations") < source.index("import torch\n")
    for line in (
        "import os",
        "import torch",
        "import torch.distributed as dist",
        "from pathlib import Path",
        "HIDDEN = 16",
        "DEFAULT_STEPS = 5",
        "class TinyNet(torch.nn.Module):",
        "def _out_dir() -> Path:",
        'def train(steps: int = DEFAULT_STEPS, tag: str = "run") -> None:',
        """    _kwargs = _trainforge_json.loads('{"steps": 2, "tag": "t"}')""",
    ):
        assert line in source, line
    # only what it uses: not the other functions of its module, nor their globals
    assert "GLOBAL_TENSOR" not in source and "def make_closure" not in source
    assert "helpers" not in source
    # the class comes before the function that uses it at import time? (definition order)
    assert source.index("class TinyNet") < source.index("def train(")


def test_the_generated_program_runs_alone(tmp_path):
    """One process, the environment a pod of one process gets."""
    name, source = ship_function(uf.train, {"steps": 1, "tag": "alone"}, "fn")
    (tmp_path / name).write_text(source)
    env = {
        "PATH": "/usr/bin:/bin",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "0",
        "RANK": "0",
        "WORLD_SIZE": "1",
        "TRAINFORGE_OUTPUT_DIR": str(tmp_path / "out"),
    }
    subprocess.run([sys.executable, name], cwd=tmp_path, env=env, check=True, timeout=120)
    assert (tmp_path / "out" / "alone.txt").read_text() == "world=1 ranksum=0 steps=1\n"


def test_shipping_is_deterministic_wherever_it_runs(tmp_path, monkeypatch):
    a = ship_function(uf.train, None, "fn")
    monkeypatch.chdir(tmp_path)
    assert ship_function(uf.train, None, "fn") == a


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda: 1, "a lambda cannot be shipped"),
        (uf.make_closure(), "a closure over scale cannot be shipped"),
        (uf.uses_a_tensor, "uses the module-level 'GLOBAL_TENSOR', a Tensor built when"),
        (uf.uses_a_project_module, r"imports tests\.jobs\.helpers, a module of this project"),
        (uf.decorated, "a decorated function cannot be shipped"),
        (uf.asynchronous, "not async"),
        (uf.TinyNet, "expected a Python function defined with `def`"),
        (uf.TinyNet().forward, "a bound method cannot be shipped"),
        (print, "expected a Python function"),
    ],
)
def test_what_cannot_be_shipped_is_refused_with_the_reason(fn, match):
    with pytest.raises(JobConfigError, match=match):
        function_job("fn-job", fn, "research", CPU_POOL.name)


def test_function_args_must_travel_as_json():
    with pytest.raises(JobConfigError, match=r"function_args\.model: got .*expected a JSON value"):
        function_job(
            "fn-job", uf.train, "research", CPU_POOL.name, function_args={"model": uf.TinyNet()}
        )


def test_a_function_job_renders_like_a_script_job():
    job = function_job(
        "fn-job", uf.train, "research", CPU_POOL.name, workers=2, function_args={"steps": 3}
    )
    t = target(CPU_POOL)
    job = resolve_job(job, t, "fn-job")
    user = entrypoint.user_code(job, ".", "fn-job")
    out = emit(job, t, CODE, user)
    assert crd_errors(out.pytorchjob) == [] and validate_pod_templates(out.pytorchjob) == 2
    assert container(out.pytorchjob)["command"] == [
        "python",
        "-m",
        "trainforge.training.usercode",
        "/workspace/train_fn.py",
    ]
    assert out.user_configmap["data"]["train_fn.py"] == job.entrypoint.files[0][1]
