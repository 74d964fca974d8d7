"""Long-lived worker processes that keep TensorFlow imported and train candidates.

The parent (the study) never imports TensorFlow. Workers are forked from a launcher, a process that has
imported it once (multiprocessing's forkserver with `tinynas.training.preload`): a worker started, recycled
or replaced mid-search is ready at once instead of after its own import (6.9 s of CPU here; an estimated
15-45 s on a Pi 4). The launcher only imports TensorFlow, never runs it, so the fork is safe: TensorFlow
starts its runtime and thread pools in each worker. Each worker sets its thread
counts once, and trains candidates sent over a pipe until it is recycled: after
`max_jobs` candidates or once its private memory passes `private_limit_bytes`: TensorFlow's XLA
keeps every compiled program for the life of the process (its compilation cache has no eviction),
~25-35 MB per candidate trained (measured: 239 MiB after the import, 331 after the first candidate,
623 after twelve). A worker that dies
(segfault, the kernel's OOM killer) fails only the candidate it was training. What a worker does
with a job is `tinynas.training.job`.
"""

from __future__ import annotations

import multiprocessing
import signal
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for
from multiprocessing.process import BaseProcess

from tinynas.errors import UsageError
from tinynas.training import scratch
from tinynas.training.job import Job, JobResult, serve

DEFAULT_MAX_JOBS = 10
DEFAULT_PRIVATE_LIMIT_BYTES = 600 << 20
"""About ten candidates' compiled programs; `tinynas.machine.auto_workers` lowers it where memory is short."""


_PRELOAD = "tinynas.training.preload"


def _context() -> multiprocessing.context.ForkServerContext | multiprocessing.context.SpawnContext:
    """The launcher (forkserver) where the platform has one, else a fresh interpreter per worker (spawn). The
    forkserver is one per process: every pool of a process shares it, and so the one TensorFlow import."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([_PRELOAD])  # read when the launcher starts, i.e. by the first worker
    return context


def stop_launcher() -> None:
    """Stop the launcher, freeing the memory its TensorFlow import holds (about 240 MiB): the device service
    calls this once it serves, where the memory matters and no worker is needed. The next worker starts a
    new launcher. Blocks until it has exited (it finishes an import in progress first)."""
    from multiprocessing import forkserver

    # CPython's own way to stop its forkserver (what its tests use): there is no public one.
    stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
    if stop is not None:
        stop()


class _Slot:
    """One worker: its process and pipe (None until started, or after it retired or died) and its job."""

    def __init__(self) -> None:
        self.process: BaseProcess | None = None
        self.conn: Connection | None = None
        self.job: Job | None = None
        self.started = 0.0

    def busy(self) -> tuple[BaseProcess, Connection, Job]:
        """Process, pipe and job of a slot that was given a job (it has a started worker)."""
        assert self.process is not None and self.conn is not None and self.job is not None, "slot is not busy"
        return self.process, self.conn, self.job


class WorkerPool:
    """`size` worker processes (spawned on demand, recycled, replaced when they die)."""

    def __init__(self, size: int = 1, threads: int = 1, max_jobs: int = DEFAULT_MAX_JOBS,
                 private_limit_bytes: int = DEFAULT_PRIVATE_LIMIT_BYTES) -> None:
        if size < 1 or threads < 1:
            raise UsageError(f"need at least one worker and one thread, got {size} worker(s) x {threads} thread(s)")
        self._context = _context()
        self._warming: threading.Thread | None = None
        self._warm_error: BaseException | None = None
        self._slots = [_Slot() for _ in range(size)]
        self.threads = threads
        self.max_jobs = max_jobs
        self.private_limit_bytes = private_limit_bytes
        self.peak_memory: dict[str, int] = {}
        self.spawned = 0

    def idle(self) -> int:
        """Slots free for a job."""
        return sum(slot.job is None for slot in self._slots)

    def running(self) -> list[Job]:
        """Jobs being worked on."""
        return [slot.job for slot in self._slots if slot.job is not None]

    def worker_pids(self) -> list[int]:
        """PIDs of live worker processes."""
        self._settle()
        return [slot.process.pid for slot in self._slots
                if slot.process is not None and slot.process.pid is not None and slot.process.is_alive()]

    def warm(self) -> WorkerPool:
        """Start every worker now, so that TensorFlow's import (5-10 s here, more on a Pi) happens before the
        first job rather than in it: the device service warms its pool while the user is still recording.

        Returns at once: the workers start in a thread, since starting the first one waits for the launcher's
        import (the service's loop must go on prompting meanwhile). The pool's other methods wait for it."""
        self._settle()

        def start_all() -> None:
            try:
                for slot in self._slots:
                    if slot.process is None or not slot.process.is_alive():
                        self._start(slot)
            except BaseException as error:  # noqa: BLE001 - raised again by the next call that needs the workers
                self._warm_error = error

        self._warming = threading.Thread(target=start_all, name="tinynas-warm-workers", daemon=True)
        self._warming.start()
        return self

    def _settle(self) -> None:
        """Wait for workers being started by `warm`; raise what stopped it, if anything did."""
        if self._warming is not None:
            self._warming.join()
            self._warming = None
        if self._warm_error is not None:
            error, self._warm_error = self._warm_error, None
            raise error

    def submit(self, job: Job) -> None:
        """Give `job` to a free worker, starting one if needed."""
        self._settle()
        slot = next((s for s in self._slots if s.job is None), None)
        if slot is None:
            raise RuntimeError("no idle worker")
        if slot.process is None or slot.conn is None or not slot.process.is_alive():
            self._start(slot)
        assert slot.conn is not None  # started just above
        slot.conn.send(job)
        slot.job = job
        slot.started = time.monotonic()

    def _start(self, slot: _Slot) -> None:
        if not self.spawned:
            scratch.remove_orphans()  # left by workers killed with an earlier study
        parent, child = self._context.Pipe()
        process = self._context.Process(target=serve, name="tinynas-worker", daemon=True,
                                        args=(child, self.threads, self.max_jobs, self.private_limit_bytes))
        process.start()
        child.close()
        slot.process, slot.conn = process, parent
        self.spawned += 1

    def wait(self, timeout: float) -> list[JobResult]:
        """Results that arrive within `timeout` seconds (a dead worker yields a failed result)."""
        self._settle()
        busy = [slot for slot in self._slots if slot.job is not None]
        if not busy:
            time.sleep(max(0.0, min(timeout, 0.05)))
            return []
        handles: dict[object, _Slot] = {}
        for slot in busy:
            process, conn, _ = slot.busy()
            handles[conn] = slot
            handles[process.sentinel] = slot
        ready = wait_for(list(handles), timeout=max(0.0, timeout))  # type: ignore[arg-type]  # conns and sentinels
        results = []
        for slot in {id(handles[h]): handles[h] for h in ready}.values():
            result = self._collect(slot)
            if result is not None:
                results.append(result)
        return results

    def _collect(self, slot: _Slot) -> JobResult | None:
        process, conn, job = slot.busy()
        result = None
        try:
            if conn.poll():
                result = conn.recv()
        except (EOFError, OSError):
            result = None
        if result is None:
            if process.is_alive():
                return None
            process.join(1)
            code = process.exitcode
            reason = (f"killed by signal {signal.Signals(-code).name}" if code is not None and code < 0
                      else f"exit code {code}")
            hint = " (out of memory?)" if code == -signal.SIGKILL else ""
            result = JobResult(job.job_id, False, error=f"worker died while training: {reason}{hint}",
                               seconds=time.monotonic() - slot.started)
            self._discard(slot)
        else:
            for key, value in result.memory.items():
                self.peak_memory[key] = max(self.peak_memory.get(key, 0), value)
            if result.retiring:
                process.join(5)
                self._discard(slot)
        slot.job = None
        return result

    def _discard(self, slot: _Slot) -> None:
        if slot.conn is not None:
            slot.conn.close()
        if slot.process is not None and slot.process.is_alive():
            slot.process.kill()
            slot.process.join(5)
        if slot.process is not None and slot.process.exitcode is not None and slot.process.pid is not None:
            scratch.remove_of(slot.process.pid)  # a worker killed or dead: it could not remove its own
        slot.process = slot.conn = None

    def close(self) -> None:
        """Stop every worker: idle ones politely, busy ones at once."""
        try:
            self._settle()
        except Exception:  # noqa: BLE001 - a failed start leaves nothing to stop in its slot
            pass
        for slot in self._slots:
            if slot.process is None:
                continue
            if slot.job is None and slot.conn is not None:
                try:
                    slot.conn.send(None)
                except (BrokenPipeError, OSError):
                    pass
                slot.process.join(5)
            self._discard(slot)
            slot.job = None

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
