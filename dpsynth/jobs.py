"""Releases that run to completion on the server, whatever happens to the page that started them.

A dashboard page runs inside a script thread that Streamlit stops when the curator navigates
away, reloads or closes the tab. A release started there would be cut off after its spend was
recorded. :func:`start` runs it on its own thread instead: the page keeps only the job's id
and polls :func:`get` (progress, then the result or the error), and a page of another session,
or the same page after a reload, finds the finished release in the release archive
(:mod:`dpsynth.archive`), where the pipeline records it.

The registry is per server process and holds no data beyond the job's own result; it knows
nothing of Streamlit.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Progress = Callable[[float, str], None]

#: Finished jobs are forgotten this long after they end (their releases stay in the archive).
KEEP_SECONDS = 6 * 3600


@dataclass
class Job:
    """One background release: status ``running``, ``done`` or ``failed``."""

    id: str
    owner: str
    started: float
    status: str = "running"
    fraction: float = 0.0
    message: str = "Starting"
    result: Any = None
    error: str | None = None
    ended: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def progress(self, fraction: float, message: str) -> None:
        with self._lock:
            self.fraction, self.message = float(min(1.0, max(0.0, fraction))), message


_JOBS: dict[str, Job] = {}
_REGISTRY_LOCK = threading.Lock()


def start(run: Callable[[Progress], Any], *, owner: str = "", errors: tuple[type[BaseException], ...] = (Exception,),
          describe_error: Callable[[BaseException], str] = str) -> Job:
    """Start ``run(progress)`` on a daemon thread and return its job at once.

    ``errors`` are reported on the job as ``failed`` with ``describe_error(exc)``; anything else
    too, with its type, so a job never stays ``running`` after its thread has ended.
    """
    job = Job(id=uuid.uuid4().hex, owner=owner, started=time.time())

    def body() -> None:
        try:
            result = run(job.progress)
        except errors as exc:
            job.error, job.status = describe_error(exc), "failed"
        except BaseException as exc:  # noqa: BLE001 - recorded on the job, never lost silently
            job.error, job.status = f"{type(exc).__name__}: {exc}", "failed"
        else:
            job.result, job.status = result, "done"
            job.progress(1.0, "Done")
        finally:
            job.ended = time.time()

    with _REGISTRY_LOCK:
        _forget_old()
        _JOBS[job.id] = job
    threading.Thread(target=body, name=f"dpsynth-release-{job.id[:8]}", daemon=True).start()
    return job


def get(job_id: str | None, *, owner: str = "") -> Job | None:
    """The job with this id started by ``owner`` (None if unknown, forgotten, or someone else's)."""
    if not job_id:
        return None
    with _REGISTRY_LOCK:
        job = _JOBS.get(job_id)
    return job if job is not None and job.owner == owner else None


def running(owner: str = "") -> list[Job]:
    """The owner's jobs still running."""
    with _REGISTRY_LOCK:
        return [j for j in _JOBS.values() if j.owner == owner and j.status == "running"]


def wait(job: Job, timeout: float | None = None) -> Job:
    """Block until the job ends (tests and the command line)."""
    deadline = None if timeout is None else time.time() + timeout
    while job.status == "running" and (deadline is None or time.time() < deadline):
        time.sleep(0.02)
    return job


def _forget_old() -> None:
    now = time.time()
    for key in [k for k, j in _JOBS.items() if j.ended is not None and now - j.ended > KEEP_SECONDS]:
        del _JOBS[key]
