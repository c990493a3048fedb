"""Training jobs as Pulumi resources that emit a Kubeflow PyTorchJob, a Kubeflow Trainer v2
TrainJob or an indexed batch/v1 Job, by backend (`backends`).

The model (`spec`), the platform wiring (`wiring`), the pod builder (`pod`) and the emitters
(`pytorchjob`, `trainjob`, `indexed_job`) import no Pulumi; `component` and `declare` do, and are imported lazily here so that
`trainforge run-local --stack` (which only needs `local`) stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the module that defines it (imported on first use)
_EXPORTS = {
    "TrainingJob": "trainforge.jobs.component",
    "declare_jobs": "trainforge.jobs.declare",
    "function_job": "trainforge.jobs.spec",
    "local_argv_for_job": "trainforge.jobs.local",
    "run_local": "trainforge.jobs.local",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(name)
    return getattr(importlib.import_module(_EXPORTS[name]), name)
