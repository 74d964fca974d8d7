"""Long-lived worker processes that keep TensorFlow imported and train candidates.

The parent (the study) never imports TensorFlow. Each worker imports it once, sets its thread
counts once, and trains candidates sent over a pipe until it is recycled: after
`max_jobs` candidates or once its private memory passes `private_limit_bytes` (Keras keeps
~20 MB of caches per model that `clear_session` does not return). A worker that dies
(segfault, the kernel's OOM killer) fails only the candidate it was training.
"""

from __future__ import annotations

import ctypes
import gc
import math
import multiprocessing
import signal
import time
from dataclasses import dataclass, field
from multiprocessing.connection import wait as wait_for
from typing import Any

from tinynas.errors import UsageError
from tinynas.modeldir import save_weights

DEFAULT_MAX_JOBS = 10
DEFAULT_PRIVATE_LIMIT_BYTES = 400 << 20
FAULTS = ("nan", "diverge", "lr_x100", "lr_div1000")
"""Faults a job can inject, for tests and fault studies: 'nan' poisons a weight with NaN at the
start of the second epoch (a numeric blow-up mid-training); 'diverge' multiplies the learning
rate by 1e7, 'lr_x100' by 100 (a run that thrashes without overflowing), 'lr_div1000' divides it
by 1000 (a run that stalls)."""
LEARNING_RATE_FAULTS = {"diverge": 1e7, "lr_x100": 100.0, "lr_div1000": 1e-3}
MIN_DIAGNOSIS_EPOCHS = 3
"""Epochs of health trace before the diagnoser may stop a candidate."""
STOP_PROBABILITY = 0.7
"""Probability of instability (diverging + stalled + non-finite) at which the diagnoser stops a
candidate. Healthy runs measured here stayed below 0.45 at lr 1e-3 and 1e-2; runs at lr 1.0 rose to
0.5-0.93 (`benchmarks/results/faults.md`)."""


def memory_bytes(pid: int | str = "self") -> dict[str, int]:
    """Resident memory of a process from /proc (Linux): rss, private (anonymous) and file-backed."""
    fields = {"VmRSS": "rss", "RssAnon": "private", "RssFile": "file"}
    found = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in fields:
                    found[fields[key]] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return found


@dataclass(frozen=True)
class Job:
    """A unit of work for a worker: train a candidate, train and export the winner, or export
    a candidate trained earlier from its saved weights.

    `test` on a "train" job only measures the trained model (benchmarks' anytime curves); no
    strategy sees it. `weights_path` is where a "train" job saves its best weights and where an
    "export" job reads them; `incumbent` is the score the curve-stop rule must beat.
    """

    job_id: int
    kind: str  # "train", "final" or "export"
    architecture: str  # canonical JSON
    fidelity: dict[str, Any]
    seed: int
    data_path: str
    train: tuple[int, ...]
    val: tuple[int, ...]
    test: tuple[int, ...] = ()
    fault: str | None = None
    incumbent: float | None = None
    weights_path: str | None = None
    incumbents_path: str | None = None
    """JSON file the study rewrites as results arrive: {fidelity key: best score} (live incumbent)."""
    fidelity_key: str = ""
    health: bool = True
    """Monitor training health and let the shipped diagnoser stop an unstable candidate."""
    preprocessing: dict | None = None
    """`tinynas.preprocess.Preprocessing` as a dict, applied to every window loaded (None: pass-through)."""
    test_data_path: str | None = None
    """Windows of a separate test set (measured instead of `test`), labels mapped by class name."""
    model_weights_path: str | None = None
    """Where a "final" or "export" job keeps the exported model's float weights (for `tinynas adapt`
    and `tinynas recalibrate`, which start from them)."""


@dataclass
class JobResult:
    """What came back: curves and timing, or an error in one line; the export for a final job."""

    job_id: int
    ok: bool
    val_loss: list[float] = field(default_factory=list)
    val_accuracy: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    tflite: bytes | None = None
    float_test_accuracy: float | None = None
    memory: dict[str, int] = field(default_factory=dict)
    retiring: bool = False
    stopped: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    health: list[dict] = field(default_factory=list)
    diagnosis: str = ""
    """Fault type the diagnoser stopped the candidate for ("" if it ran its course)."""


def _die_with_parent() -> None:
    # Linux: if the study is killed (even with SIGKILL), the kernel kills its workers too.
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _release_memory() -> None:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _PoisonWeights(tf):
    """Keras callback that sets the stem's first weight to NaN when epoch 2 begins."""

    class PoisonWeights(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                kernel = self.model.get_layer("stem_conv").kernel
                values = kernel.numpy()
                values.flat[0] = float("nan")
                kernel.assign(values)

    return PoisonWeights()


def _training_indices(job: Job, fidelity, windows, cache: dict) -> list[int]:
    if fidelity.subset >= 1:
        return list(job.train)
    from tinynas.data.subset import representative_subset

    key = ("subset", fidelity.subset, job.seed, hash(job.train))
    if key not in cache:
        cache[key] = [int(i) for i in representative_subset(windows, job.train, fidelity.subset, seed=job.seed)]
    return cache[key]


def _health_monitor(windows, train: list[int], seed: int, learning_rate: float, cache: dict):
    """The health callback, and the dict it fills with the diagnosis when it stops training."""
    from tinynas.diagnose import shipped_diagnoser
    from tinynas.health import health_callback, probe_batch
    from tinynas.space import as_model_input

    if "diagnoser" not in cache:
        cache["diagnoser"] = shipped_diagnoser()
    diagnoser = cache["diagnoser"]
    verdict: dict = {}

    def judge(trace) -> bool:
        if diagnoser is None or len(trace) < MIN_DIAGNOSIS_EPOCHS:
            return False
        label, probability = diagnoser.instability(trace, learning_rate)
        if probability >= STOP_PROBABILITY:
            verdict["diagnosis"] = (label, probability)
            return True
        return False

    x_probe, y_probe = probe_batch(windows.x[train], windows.y[train], seed=seed)
    return health_callback(as_model_input(x_probe), y_probe, on_epoch=judge), verdict


def _live_incumbent(job: Job):
    import json

    def read() -> float | None:
        try:
            with open(job.incumbents_path, encoding="utf-8") as handle:
                value = json.load(handle).get(job.fidelity_key)
        except (OSError, ValueError):
            return None  # not written yet, or being replaced: keep the last verdict
        return float(value) if isinstance(value, (int, float)) else None

    return read



def _test_set(job: Job, windows, cache: dict):
    """The windows (model input) and labels this job measures test accuracy on."""
    if job.test_data_path is None:
        test = list(job.test)
        return windows.x[test], windows.y[test]
    if cache.get("test_path") != job.test_data_path:
        from tinynas.data.windows import Windows
        from tinynas.preprocess import Preprocessing

        test = Windows.load(job.test_data_path)
        pre = (Preprocessing.from_dict(job.preprocessing) if job.preprocessing
               else Preprocessing.fit(windows, list(job.train)))
        cache.update(test_path=job.test_data_path, test=(pre.apply(test.x), pre.labels_for(test)))
    return cache["test"]


def _float_accuracy(model, x, y) -> float:
    from tinynas.space import as_model_input

    logits = model(as_model_input(x), training=False).numpy()
    return float((logits.argmax(axis=1) == y).mean())


def _export(job: Job, model, windows, train: list[int], out: JobResult, cache: dict) -> None:
    from tinynas.export import convert_int8

    started = time.perf_counter()
    out.float_test_accuracy = _float_accuracy(model, *_test_set(job, windows, cache))
    out.tflite = convert_int8(model, windows.x[train], seed=job.seed)
    if job.model_weights_path:
        save_weights(model, job.model_weights_path)
    out.timings["convert"] = time.perf_counter() - started


def _run(job: Job, tf, cache: dict) -> JobResult:
    from tinynas.data.windows import Windows
    from tinynas.preprocess import Preprocessing
    from tinynas.space import Architecture
    from tinynas.train import Fidelity, fit

    started = time.perf_counter()
    if cache.get("path") != (job.data_path, repr(job.preprocessing)):
        cache.clear()
        windows = Windows.load(job.data_path)
        if job.preprocessing:
            windows = Preprocessing.from_dict(job.preprocessing).prepare(windows)
        cache.update(path=(job.data_path, repr(job.preprocessing)), windows=windows)
    windows = cache["windows"]
    arch = Architecture.from_json(job.architecture)
    fidelity = Fidelity(**job.fidelity)
    if job.kind == "export":
        model = arch.to_keras(seed=job.seed)
        model.load_weights(job.weights_path)
        out = JobResult(job.job_id, True)
        _export(job, model, windows, list(job.train), out, cache)
        del model
        tf.keras.backend.clear_session()
        out.seconds = time.perf_counter() - started
        return out
    if job.fault is not None and job.fault not in FAULTS:
        raise ValueError(f"unknown fault {job.fault!r}; known: {', '.join(FAULTS)}")
    if job.fault in LEARNING_RATE_FAULTS:
        fidelity = fidelity.with_learning_rate(fidelity.learning_rate * LEARNING_RATE_FAULTS[job.fault])
    callbacks = [_PoisonWeights(tf)] if job.fault == "nan" else []
    train, val = _training_indices(job, fidelity, windows, cache), list(job.val)
    monitor, verdict = (_health_monitor(windows, train, job.seed, fidelity.learning_rate, cache)
                        if job.health else (None, {}))
    if monitor is not None:
        callbacks.append(monitor)
    result = fit(arch, windows.x[train], windows.y[train], windows.x[val], windows.y[val], fidelity,
                 seed=job.seed, callbacks=callbacks, incumbent=job.incumbent,
                 live_incumbent=_live_incumbent(job) if job.incumbents_path else None)
    trace = monitor.trace if monitor is not None else []
    timings = dict(result.timings, **({"health": monitor.seconds} if monitor is not None else {}))
    curves = result.train_loss + result.val_loss
    bad = [i for i, value in enumerate(result.train_loss) if not math.isfinite(value)]
    if verdict or not result.train_loss or bad or not all(math.isfinite(v) for v in curves):
        tf.keras.backend.clear_session()  # a failed candidate's graphs must not pile up in the worker
    if verdict:
        label, probability = verdict["diagnosis"]
        return JobResult(job.job_id, False, result.val_loss, result.val_accuracy, result.train_loss,
                         time.perf_counter() - started,
                         f"stopped at epoch {len(trace)}: training {label} (diagnoser p={probability:.2f})",
                         timings=timings, health=trace, diagnosis=label)
    if not result.train_loss or bad or not all(math.isfinite(v) for v in curves):
        epoch = (bad[0] if bad else len(result.train_loss)) + 1
        return JobResult(job.job_id, False, result.val_loss, result.val_accuracy, result.train_loss,
                         time.perf_counter() - started, f"loss became NaN/inf at epoch {epoch}",
                         timings=timings, health=trace, diagnosis="nonfinite")
    out = JobResult(job.job_id, True, result.val_loss, result.val_accuracy, result.train_loss,
                    stopped=result.stopped, timings=timings, health=trace)
    if job.kind == "final":
        _export(job, result.model, windows, train, out, cache)
    elif job.test or job.test_data_path:
        out.float_test_accuracy = _float_accuracy(result.model, *_test_set(job, windows, cache))
    if job.weights_path:
        save_weights(result.model, job.weights_path)
    del result
    tf.keras.backend.clear_session()
    out.seconds = time.perf_counter() - started
    return out


def _serve(conn, threads: int, max_jobs: int, private_limit: int) -> None:
    """Worker process main loop."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the study handles Ctrl-C and stops us
    from tinynas.quiet import import_tensorflow

    started = time.perf_counter()
    tf = import_tensorflow()
    startup = time.perf_counter() - started
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    # Same seed, same scores: a resumed search must retrace the path of an uninterrupted one.
    tf.config.experimental.enable_op_determinism()
    cache: dict = {}
    done = 0
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        try:
            result = _run(job, tf, cache)
        except MemoryError:
            result = JobResult(job.job_id, False, error="out of memory while training")
        except Exception as exc:  # a failed candidate must not take the search down
            text = " ".join(str(exc).split()) or type(exc).__name__
            result = JobResult(job.job_id, False, error=f"{type(exc).__name__}: {text[:300]}")
        _release_memory()
        if done == 0:
            result.timings["tensorflow_import"] = startup
        done += 1
        result.memory = memory_bytes()
        result.retiring = done >= max_jobs or result.memory.get("private", 0) > private_limit
        try:
            conn.send(result)
        except (BrokenPipeError, OSError):
            return
        if result.retiring:
            return


class _Slot:
    def __init__(self) -> None:
        self.process = None
        self.conn = None
        self.job: Job | None = None
        self.started = 0.0


class WorkerPool:
    """`size` worker processes (spawned on demand, recycled, replaced when they die)."""

    def __init__(self, size: int = 1, threads: int = 1, max_jobs: int = DEFAULT_MAX_JOBS,
                 private_limit_bytes: int = DEFAULT_PRIVATE_LIMIT_BYTES) -> None:
        if size < 1 or threads < 1:
            raise UsageError(f"need at least one worker and one thread, got {size} worker(s) x {threads} thread(s)")
        self._context = multiprocessing.get_context("spawn")  # TensorFlow is not fork-safe
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
        return [slot.process.pid for slot in self._slots if slot.process is not None and slot.process.is_alive()]

    def submit(self, job: Job) -> None:
        """Give `job` to a free worker, starting one if needed."""
        slot = next((s for s in self._slots if s.job is None), None)
        if slot is None:
            raise RuntimeError("no idle worker")
        if slot.process is None or not slot.process.is_alive():
            self._start(slot)
        slot.conn.send(job)
        slot.job = job
        slot.started = time.monotonic()

    def _start(self, slot: _Slot) -> None:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=_serve, name="tinynas-worker", daemon=True,
                                        args=(child, self.threads, self.max_jobs, self.private_limit_bytes))
        process.start()
        child.close()
        slot.process, slot.conn = process, parent
        self.spawned += 1

    def wait(self, timeout: float) -> list[JobResult]:
        """Results that arrive within `timeout` seconds (a dead worker yields a failed result)."""
        busy = [slot for slot in self._slots if slot.job is not None]
        if not busy:
            time.sleep(max(0.0, min(timeout, 0.05)))
            return []
        handles = {}
        for slot in busy:
            handles[slot.conn] = slot
            handles[slot.process.sentinel] = slot
        ready = wait_for(list(handles), timeout=max(0.0, timeout))
        results = []
        for slot in {id(handles[h]): handles[h] for h in ready}.values():
            result = self._collect(slot)
            if result is not None:
                results.append(result)
        return results

    def _collect(self, slot: _Slot) -> JobResult | None:
        job = slot.job
        result = None
        try:
            if slot.conn.poll():
                result = slot.conn.recv()
        except (EOFError, OSError):
            result = None
        if result is None:
            if slot.process.is_alive():
                return None
            slot.process.join(1)
            code = slot.process.exitcode
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
                slot.process.join(5)
                self._discard(slot)
        slot.job = None
        return result

    def _discard(self, slot: _Slot) -> None:
        if slot.conn is not None:
            slot.conn.close()
        if slot.process is not None and slot.process.is_alive():
            slot.process.kill()
            slot.process.join(5)
        slot.process = slot.conn = None

    def close(self) -> None:
        """Stop every worker: idle ones politely, busy ones at once."""
        for slot in self._slots:
            if slot.process is None:
                continue
            if slot.job is None:
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
