"""A worker pool whose results are scripted: the search loop's logic (budget, failures, resume, retries, a full disk,
Ctrl-C) checked without TensorFlow, in milliseconds, on any machine.

It keeps `tinynas.study.pool.WorkerPool`'s contract as the loop uses it: `idle`, `submit`, `wait` (the finished
jobs' results, or none), `close` and `peak_memory`. `outcome(job)` says how each job ends: a dict of `JobResult`
fields, or an exception that `wait` raises (KeyboardInterrupt is Ctrl-C arriving while the loop waits). The real
pool, workers and TensorFlow are tested end to end by tests/study/test_study.py and test_worker.py.
"""

from __future__ import annotations

from collections.abc import Callable

from tinynas.training.job import JobResult, TrainJob


class ScriptedPool:
    def __init__(self, outcome: Callable[[TrainJob], dict | BaseException], size: int = 2) -> None:
        self.outcome, self.size = outcome, size
        self.busy: list[TrainJob] = []
        self.submitted: list[TrainJob] = []
        self.peak_memory: dict[str, int] = {}
        self.closed = False

    def idle(self) -> int:
        return self.size - len(self.busy)

    def submit(self, job: TrainJob) -> None:
        assert self.idle() > 0, "a job submitted to a full pool"
        self.busy.append(job)
        self.submitted.append(job)

    def wait(self, timeout: float) -> list[JobResult]:
        """The oldest busy job's result (jobs end in the order they started)."""
        if not self.busy:
            return []
        job = self.busy.pop(0)
        ending = self.outcome(job)
        if isinstance(ending, BaseException):
            raise ending
        return [JobResult(job.job_id, **ending)]

    def close(self) -> None:
        self.closed = True
        self.busy.clear()
