"""Training jobs as Pulumi resources that emit a Kubeflow PyTorchJob, a Kubeflow Trainer v2
TrainJob or an indexed batch/v1 Job, by backend (`backends`).

The model (`spec`), the platform wiring (`wiring`), the pod builder (`pod`) and the emitters
(`pytorchjob`, `trainjob`, `indexed_job`) import no Pulumi; `component` and `declare` do, and are imported lazily here so that
`trainforge run-local --stack` (which only needs `local`) stays light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TrainingJob", "declare_jobs", "function_job", "local_argv_for_job", "run_local"]


def __getattr__(name: str) -> Any:
    if name == "TrainingJob":
        from trainforge.jobs.component import TrainingJob

        return TrainingJob
    if name == "declare_jobs":
        from trainforge.jobs.declare import declare_jobs

        return declare_jobs
    if name == "local_argv_for_job":
        from trainforge.jobs.local import local_argv_for_job

        return local_argv_for_job
    if name == "function_job":
        from trainforge.jobs.spec import function_job

        return function_job
    if name == "run_local":
        from trainforge.jobs.local import run_local

        return run_local
    raise AttributeError(name)
