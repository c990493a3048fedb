"""The plan's TRAINFORGE_ENV_REFERENCE (plan/checks/env_refs.py) on containers as the kubelet
reads them: what it names, and the shell's own `$(...)` it leaves alone."""

from __future__ import annotations

from trainforge.plan.checks.env_refs import appended, container_problems


def _found(container, doc=None):
    ctl = appended(doc or {"kind": "PyTorchJob"})
    return [(u.name, u.ref, u.where) for u in container_problems(container, ctl)]


def test_later_controller_and_undefined_references_are_named():
    c = {
        "env": [
            {"name": "OUT_DIR", "value": "/tmp/$(RUN_ID)"},
            {"name": "RUN_ID", "value": "exp7"},
            {"name": "MYRANK", "value": "r$(RANK)"},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "TAG", "value": "$(POD)-$$(LIT)"},
        ],
        "args": ["--rank", "$(RANK)", "--data", "$(DATA_ROOT)/x"],
    }
    assert _found(c) == [
        ("OUT_DIR", "RUN_ID", "later"),
        ("MYRANK", "RANK", "controller"),
        ("args", "DATA_ROOT", "nowhere"),
    ]
    # an indexed Job's controller appends JOB_COMPLETION_INDEX only: RANK is the emitter's
    job = {"kind": "Job", "spec": {"completionMode": "Indexed"}}
    assert ("MYRANK", "RANK", "nowhere") in _found(c, job)


def test_shell_command_substitution_is_not_a_reference():
    c = {"command": ["bash", "-c", 'cd "$(dirname $0)" && echo $(hostname) $(echo sub)']}
    assert _found(c) == []
    # a container with envFrom: only what comes later in its own env is judged
    c = {"envFrom": [{"configMapRef": {"name": "x"}}], "env": [{"name": "A", "value": "$(B)"}]}
    assert _found(c) == []
