"""The pod simulation's retry after a rendezvous port clash starts on the file system as it
was: test_pod_kill_rehearsal.py::test_the_bundled_runtime_recovers flaked when a re-created
Master lost its port to another process (it is free while the pod is gone): the whole run
was retried on a new port over the void try's checkpoints through step 30, so worker-0's
first process, meant to be killed at step 17, resumed from step 30 and exited 0."""

from __future__ import annotations

from tests.jobs import podsim


def test_a_retry_after_a_clash_sees_none_of_the_void_tries_files(tmp_path, monkeypatch):
    (tmp_path / "kept").write_text("the test's own")
    seen: list[set[str]] = []

    def one_try(job, configmaps, root, port, *rest):
        seen.append({p.name for p in root.iterdir()})
        ckpt = root / "fsx" / "checkpoints"
        ckpt.mkdir(parents=True, exist_ok=True)
        (ckpt / "step_000030").mkdir()
        (root / "run.json").write_text("{}")
        said = "EADDRINUSE" if len(seen) == 1 else "done"  # the first try clashed
        return {"master-0": [(0, said)], "worker-0": [(0, "done")]}

    monkeypatch.setattr(podsim, "_run_exitcode_policy_on", one_try)
    history = podsim.run_exitcode_policy({}, [], tmp_path)
    assert history["master-0"] == [(0, "done")]
    assert seen == [{"kept"}, {"kept"}], seen  # the second try starts as the first did
    assert (tmp_path / "kept").read_text() == "the test's own"
