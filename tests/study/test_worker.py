"""Worker processes: reuse, recycling, a death that fails only its own candidate, and nothing left behind."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tinynas.data.synthetic import vibration
from tinynas.process_memory import memory_bytes
from tinynas.space import Architecture
from tinynas.study.pool import WorkerPool
from tinynas.training import scratch
from tinynas.training.job import TrainJob
from tinynas.trial import Fidelity


@pytest.fixture(scope="module")
def data_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("worker") / "windows.npz"
    vibration(windows_per_class=4, length=64, windows_per_recording=2, seed=0).save(path)
    return path


def _job(number, data_path, k=1, fault=None, epochs=1):
    arch = Architecture(64, 1, 4, k=k, c=1)
    return TrainJob(number, arch, Fidelity(epochs=epochs, batch_size=8, learning_rate=0.01),
                    0, str(data_path), tuple(range(0, 16, 2)), tuple(range(1, 16, 2)), fault=fault)


def _result(pool, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        results = pool.wait(1.0)
        if results:
            return results[0]
    raise AssertionError("no result from the worker")


@pytest.mark.slow
def test_worker_is_reused_then_recycled(data_path):
    with WorkerPool(1, max_jobs=2) as pool:
        pids, imports = [], []
        for number in range(3):
            pool.submit(_job(number, data_path))
            pids.append(pool.worker_pids()[0])
            result = _result(pool)
            assert result.ok and result.job_id == number and len(result.val_loss) == 1
            assert result.memory["rss"] > 0
            imports.append(result.timings.get("tensorflow_import"))
            if number == 0:
                # What TensorFlow's AutoGraph writes while training lands in the worker's own folder...
                (own,) = scratch.folders_of(pids[0])
                assert list(own.glob("__autograph_generated_file*.py"))
        assert pids[0] == pids[1] != pids[2]
        assert not scratch.folders_of(pids[0])  # ...which goes with the worker when it is recycled
        # Forked from the launcher, which imported TensorFlow once: the new worker did not import it again (a
        # spawned one took 6.9 s here).
        assert imports[1] is None and imports[2] < 1.0
        assert pool.spawned == 2
        assert pool.peak_memory["private"] > 0
    assert not scratch.folders_of(pids[2])  # and when the pool closes


@pytest.mark.slow
def test_folders_of_workers_that_are_gone_are_removed(data_path):
    ended = subprocess.Popen(["true"])
    ended.wait()  # a process id that no longer runs: a worker killed with its study
    gone = Path(tempfile.gettempdir()) / f"{scratch.PREFIX}{ended.pid}-x"
    gone.mkdir()
    (gone / "__autograph_generated_file0.py").write_text("")
    running = Path(tempfile.mkdtemp(prefix=f"{scratch.PREFIX}{os.getpid()}-"))
    other = Path(tempfile.mkdtemp(prefix="tinynas-work-"))  # not a worker's: never touched
    try:
        with WorkerPool(1) as pool:
            pool.submit(_job(1, data_path))
            assert _result(pool).ok
        assert not gone.exists() and running.exists() and other.exists()
    finally:
        for folder in (gone, running, other):
            shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_a_dead_worker_fails_only_its_candidate(data_path):
    with WorkerPool(1) as pool:
        pool.submit(_job(1, data_path, epochs=200))
        killed = pool.worker_pids()[0]
        deadline = time.monotonic() + 120
        while not scratch.folders_of(killed):  # at work (its folder made once TensorFlow is in)
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.05)
        time.sleep(0.5)
        os.kill(killed, signal.SIGKILL)
        result = _result(pool)
        assert not result.ok and "worker died" in result.error and "SIGKILL" in result.error
        assert not scratch.folders_of(killed)  # it could not remove its folder: the pool did
        pool.submit(_job(2, data_path))
        assert _result(pool).ok


@pytest.mark.slow
def test_unknown_fault_is_a_failed_candidate(data_path):
    with WorkerPool(1) as pool:
        pool.submit(_job(1, data_path, fault="gremlins"))
        result = _result(pool)
        assert not result.ok and "unknown fault" in result.error


def test_memory_of_this_process_is_readable():
    memory = memory_bytes()
    assert memory["rss"] >= memory["private"] > 0


def test_a_full_disk_comes_back_as_a_value_not_words():
    import errno

    from tinynas.training.job import DISK_FULL, failure_of

    assert failure_of(OSError(errno.ENOSPC, "No space left on device")) == DISK_FULL
    # HDF5 (Keras's weights files) says it in its text only, and Keras may wrap it.
    hdf5 = OSError("Unable to synchronously create file (file write failed: errno = 28, error message = 'No space "
                   "left on device')")
    try:
        try:
            raise hdf5
        except OSError as inner:
            raise RuntimeError("saving the weights failed") from inner
    except RuntimeError as wrapped:
        assert failure_of(wrapped) == DISK_FULL
    assert failure_of(ValueError("shapes do not match")) == ""
    assert failure_of(MemoryError()) == ""
