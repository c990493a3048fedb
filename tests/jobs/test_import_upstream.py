"""`trainforge import` refuses what the API server, the Trainer or the training operator would
refuse or fail at once, in one line naming the field, the value and what is valid, and names
what it drops from a TrainJob's runtime patches (wave 17, importmore)."""

from __future__ import annotations

import pytest

from tests.jobs.test_importer import imp, write
from trainforge.jobs.importer import ImportProblem

TRAINJOB = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: tj}
spec:
  activeDeadlineSeconds: DEADLINE
  trainer:
    image: ghcr.io/acme/trainer:1.0
    command: [torchrun, /code/train.py]
    numNodes: 2
"""
PYTORCHJOB = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ptj}
spec:
  runPolicy: {activeDeadlineSeconds: DEADLINE}
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: pytorch
              image: ghcr.io/acme/trainer:1.0
              command: [torchrun, /code/train.py]
"""


@pytest.mark.parametrize(
    ("text", "where", "why"),
    [
        (TRAINJOB, "spec.activeDeadlineSeconds",
         "the pinned Trainer's TrainJob CRD has minimum: 1, so the API server refuses it"),
        (PYTORCHJOB, "spec.runPolicy.activeDeadlineSeconds",
         "at 0 the training operator fails the job as soon as it starts"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("value", ["0", "-5", "'60'"])
def test_a_deadline_under_one_second_is_refused(tmp_path, text, where, why, value):
    """Trainer v2.2.1's TrainJob CRD has `minimum: 1` (shared/tools/validate-manifests fails
    `activeDeadlineSeconds: 0` on its v2.3 CRD: "0 is less than the minimum of 1"); the
    training operator's CRD takes 0 and its controller fails the job on its first sync
    (PastActiveDeadline: active time >= 0). Import let 0 through, into an entry the stack then
    refused."""
    path = write(tmp_path, text.replace("DEADLINE", value))
    with pytest.raises(ImportProblem) as e:
        imp(path)
    assert str(e.value) == (
        f"{path}: {where}: got {value}; expected a whole number of seconds, 1 or more ({why})"
    )


@pytest.mark.parametrize("text", [TRAINJOB, PYTORCHJOB])
def test_a_deadline_of_one_second_or_more_is_kept(tmp_path, text):
    r = imp(write(tmp_path, text.replace("DEADLINE", "1")))
    assert r.entry["runPolicy"]["activeDeadlineSeconds"] == 1
