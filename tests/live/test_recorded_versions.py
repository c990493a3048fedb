"""The recorded API responses say which controller versions they stand for; those are the
pinned ones (core/versions.py), not another release's (the docstring said "Trainer v2.3" while
TRAINER_VERSION pins 2.2.1)."""

from __future__ import annotations

import re

from tests.live import recorded
from trainforge.core import versions
from trainforge.jobs import trainjob


def test_the_recordings_name_the_pinned_trainer_and_its_served_api():
    doc = " ".join((recorded.__doc__ or "").split())
    assert re.findall(r"Trainer v([\d.]+)", doc) == [versions.TRAINER_VERSION]
    trainjobs = [
        v for k, v in vars(recorded).items() if isinstance(v, dict) and v.get("kind") == "TrainJob"
    ]
    assert trainjobs and all(j["apiVersion"] == trainjob.API_VERSION for j in trainjobs)
