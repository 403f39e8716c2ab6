"""Background releases: they finish whatever the page does, and report progress, result or error."""

from __future__ import annotations

import threading

from dpsynth import jobs
from dpsynth.errors import InputError


def test_a_job_runs_to_completion_after_its_starter_is_gone() -> None:
    gate = threading.Event()

    def run(progress):  # noqa: ANN001, ANN202
        progress(0.5, "half")
        gate.wait(5)
        return 42

    job = jobs.start(run, owner="s1")
    assert jobs.get(job.id, owner="s1") is job and job.status == "running"
    assert jobs.get(job.id, owner="someone else") is None
    assert job in jobs.running("s1")
    gate.set()
    jobs.wait(job, timeout=5)
    assert job.status == "done" and job.result == 42 and job.fraction == 1.0


def test_errors_are_recorded_on_the_job() -> None:
    def bad(progress):  # noqa: ANN001, ANN202
        raise InputError("over budget")

    def worse(progress):  # noqa: ANN001, ANN202
        raise RuntimeError("disk on fire")

    a = jobs.wait(jobs.start(bad, errors=(InputError,)), timeout=5)
    b = jobs.wait(jobs.start(worse, errors=(InputError,)), timeout=5)
    assert a.status == "failed" and a.error == "over budget"
    assert b.status == "failed" and "disk on fire" in b.error and b.ended is not None
