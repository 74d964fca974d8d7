"""A training job and what it returns, and the worker process's main loop (`serve`).

A job crosses the process boundary as small picklable records (the architecture, the fidelity, indices
into a windows file the worker loads itself), so that the study never imports TensorFlow; everything
here that needs TensorFlow imports it lazily, inside the worker.
"""

from __future__ import annotations

import ctypes
import gc
import math
import shutil
import signal
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tinynas.augment import SIGN_SHARE
from tinynas.data.preprocess import Preprocessing
from tinynas.data.subset import representative_subset
from tinynas.data.windows import Windows
from tinynas.deploy.export import convert_int8
from tinynas.deploy.network import build_model
from tinynas.errors import is_disk_full
from tinynas.folders import save_weights
from tinynas.interrupts import die_with_parent
from tinynas.process_memory import memory_bytes
from tinynas.quiet import import_tensorflow
from tinynas.space import Architecture, as_model_input
from tinynas.training import scratch
from tinynas.training.diagnose import health_monitor
from tinynas.training.faults import INJECTED_FAULTS, LEARNING_RATE_FAULTS, poison_weights_callback
from tinynas.training.train import StreamContext, fit
from tinynas.trial import Fidelity


@dataclass(frozen=True)
class TrainJob:
    """Train one candidate with its fidelity: curves back, its best weights kept when `weights_path` is set.

    `test` only measures the trained model (benchmarks' anytime curves); no strategy sees it. `incumbent` is
    the score the curve-stop rule must beat; `incumbents_path` a JSON file the study rewrites as results arrive
    ({fidelity key: best score}), read live.
    """

    job_id: int
    architecture: Architecture
    fidelity: Fidelity
    seed: int
    data_path: str
    train: tuple[int, ...]
    val: tuple[int, ...]
    test: tuple[int, ...] = ()
    fault: str | None = None
    incumbent: float | None = None
    weights_path: str | None = None
    incumbents_path: str | None = None
    fidelity_key: str = ""
    health: bool = True
    """Monitor training health and let the shipped diagnoser stop an unstable candidate."""
    preprocessing: dict | None = None
    """`tinynas.data.preprocess.Preprocessing` as a dict, applied to every window loaded (None: pass-through)."""
    test_data_path: str | None = None
    """Windows of a separate test set (measured instead of `test`), labels mapped by class name."""
    folds: tuple[tuple[int, ...], ...] = ()
    """Cross-validation (`tinynas.study.crossval`): the validation windows of each fold, each fold trained on the
    rest of `train`; empty: validate on `val`."""
    incumbent_folds: tuple[float, ...] = ()
    """The best candidate's loss on each fold so far: what this one must beat, fold by fold (curve stop)."""
    fold_stops: tuple[int, ...] = ()
    """A replay's: the epoch each fold stopped at in the search (`fidelity.stop_after` fold by fold)."""


@dataclass(frozen=True)
class FinalJob(TrainJob):
    """The winner trained with the final recipe, then exported: int8 model, test accuracy, float weights."""

    model_weights_path: str | None = None
    """Where the exported model's float weights are kept (`tinynas adapt` and `recalibrate` start from them)."""


@dataclass(frozen=True)
class ExportJob:
    """A candidate trained with the final recipe during the search, exported from its saved weights (no training)."""

    job_id: int
    architecture: Architecture
    seed: int
    data_path: str
    train: tuple[int, ...]
    weights_path: str
    test: tuple[int, ...] = ()
    preprocessing: dict | None = None
    test_data_path: str | None = None
    model_weights_path: str | None = None


Job = TrainJob | FinalJob | ExportJob
"""What a worker is sent: one record per kind of work."""


DISK_FULL = "disk_full"
"""`JobResult.failure` when the disk, not the candidate, failed (a worker saves weights into the study's folder):
the study stops, the candidate stays to be trained again on --resume."""
_DISK_FULL_WORDS = ("No space left on device", "[Errno 28]", "errno = 28", "Disk quota exceeded", "disk is full")
"""How HDF5 and Keras, which wrap the OSError, still say it in their text."""


def failure_of(exc: BaseException) -> str:
    """What failed, as a value the study reads (DISK_FULL, or "" for the candidate's own failure)."""

    seen: BaseException | None = exc
    while seen is not None:
        if is_disk_full(seen) or any(words in str(seen) for words in _DISK_FULL_WORDS):
            return DISK_FULL
        seen = seen.__cause__ or seen.__context__
    return ""


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
    failure: str = ""
    """Why a job failed when it was not the candidate's doing (`failure_of`: DISK_FULL), else ""."""
    cross_validation: dict = field(default_factory=dict)
    """A cross-validated candidate's folds: the loss and best epoch of each, the windows judged and how many
    right (each by the fold's model at its best epoch), and its score, the mean of the fold losses."""



def _release_memory() -> None:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


STREAM_HOP_SECONDS = 0.25
"""The out-of-fold stream answers are taken every serving hop (the service's default)."""


def _stream_answers(model, windows, fold: list[int], into: dict) -> None:
    """The fold model's answers at every hop across each held-out window's stream context, with what the stream's
    judge would count each one (`tinynas.deploy.stream`): the window's label (a sign window), -2 (idle: no sign in
    it), or -1 (an edge: neither). Serving's still rule measures the same crops itself (`idle.stream_rule`)."""
    length, margin = windows.window_length, windows.margin
    hop = max(1, int(round(STREAM_HOP_SECONDS * windows.sample_rate_hz)))
    for index in fold:
        first, end = windows.spans[index]
        starts = list(range(0, 2 * margin + 1, hop))
        crops = np.stack([windows.context[index, start:start + length] for start in starts])
        logits = model(as_model_input(crops), training=False).numpy()
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        confidence = shifted.max(axis=1) / shifted.sum(axis=1)
        for start, row, sure in zip(starts, logits, confidence):
            overlap = max(0, min(start + length, end) - max(start, first))
            truth = (int(windows.y[index]) if overlap >= SIGN_SHARE * min(length, end - first) else
                     -2 if overlap == 0 else -1)
            into["window"].append(int(index))
            into["offset"].append(int(start - margin))
            into["confidence"].append(round(float(sure), 4))
            into["predicted"].append(int(row.argmax()))
            into["truth"].append(truth)


def stream_of(windows, indices) -> StreamContext | None:
    """The stream around the windows at `indices` (a gesture session's: `Windows.context`), for the offset
    augmentation; None for windows without one."""
    if windows.context is None:
        return None
    still = windows.provenance.get("still_class")
    index = windows.class_names.index(still) if still in windows.class_names else None
    return StreamContext(windows.context[indices], windows.spans[indices], index)


def _training_indices(job: TrainJob, fidelity, windows, cache: dict) -> list[int]:
    if fidelity.subset >= 1:
        return list(job.train)

    key = ("subset", fidelity.subset, job.seed, hash(job.train))
    if key not in cache:
        cache[key] = [int(i) for i in representative_subset(windows, job.train, fidelity.subset, seed=job.seed)]
    return cache[key]


def _live_incumbent(incumbents_path: str, fidelity_key: str):
    import json

    def read() -> float | None:
        try:
            with open(incumbents_path, encoding="utf-8") as handle:
                value = json.load(handle).get(fidelity_key)
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
        from tinynas.data.preprocess import Preprocessing
        from tinynas.data.windows import Windows

        test_set = Windows.load(job.test_data_path)
        pre = (Preprocessing.from_dict(job.preprocessing) if job.preprocessing
               else Preprocessing.fit(windows, list(job.train)))
        cache.update(test_path=job.test_data_path, test=(pre.apply(test_set.x), pre.labels_for(test_set)))
    return cache["test"]


def _float_accuracy(model, x, y) -> float:
    logits = model(as_model_input(x), training=False).numpy()
    return float((logits.argmax(axis=1) == y).mean())


def _export(job: FinalJob | ExportJob, model, windows, train: list[int], out: JobResult, cache: dict) -> None:
    started = time.perf_counter()
    out.float_test_accuracy = _float_accuracy(model, *_test_set(job, windows, cache))
    out.tflite = convert_int8(model, windows.x[train], seed=job.seed)
    if job.model_weights_path:
        save_weights(model, job.model_weights_path)
    out.timings["convert"] = time.perf_counter() - started


def _run(job: Job, tf, cache: dict) -> JobResult:
    started = time.perf_counter()
    if cache.get("path") != (job.data_path, repr(job.preprocessing)):
        cache.clear()
        windows = Windows.load(job.data_path)
        if job.preprocessing:
            windows = Preprocessing.from_dict(job.preprocessing).prepare(windows)
        cache.update(path=(job.data_path, repr(job.preprocessing)), windows=windows)
    windows = cache["windows"]
    if isinstance(job, ExportJob):
        model = build_model(job.architecture, seed=job.seed)
        model.load_weights(job.weights_path)
        out = JobResult(job.job_id, True)
        _export(job, model, windows, list(job.train), out, cache)
        del model
        tf.keras.backend.clear_session()
        out.seconds = time.perf_counter() - started
        return out
    arch, fidelity = job.architecture, job.fidelity
    if job.fault is not None and job.fault not in INJECTED_FAULTS:
        raise ValueError(f"unknown fault {job.fault!r}; known: {', '.join(INJECTED_FAULTS)}")
    if job.fault in LEARNING_RATE_FAULTS:
        fidelity = fidelity.with_learning_rate(fidelity.learning_rate * LEARNING_RATE_FAULTS[job.fault])
    callbacks = [poison_weights_callback(tf)] if job.fault == "nan" else []
    if job.folds:
        return _cross_validate(job, fidelity, windows, callbacks, tf, cache, started)
    train, val = _training_indices(job, fidelity, windows, cache), list(job.val)
    monitor, verdict = (health_monitor(windows, train, job.seed, fidelity.learning_rate, cache)
                        if job.health else (None, {}))
    if monitor is not None:
        callbacks.append(monitor)
    result = fit(arch, windows.x[train], windows.y[train], windows.x[val], windows.y[val], fidelity,
                 seed=job.seed, callbacks=callbacks, incumbent=job.incumbent,
                 live_incumbent=(_live_incumbent(job.incumbents_path, job.fidelity_key)
                                 if job.incumbents_path else None), stream=stream_of(windows, train))
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
    if isinstance(job, FinalJob):
        _export(job, result.model, windows, train, out, cache)
    elif job.test or job.test_data_path:
        out.float_test_accuracy = _float_accuracy(result.model, *_test_set(job, windows, cache))
    if job.weights_path:
        save_weights(result.model, job.weights_path)
    del result
    tf.keras.backend.clear_session()
    out.seconds = time.perf_counter() - started
    return out


def _cross_validate(job: TrainJob, fidelity, windows, callbacks: list, tf, cache: dict, started: float) -> JobResult:
    """Train the candidate once per fold, each validated on its fold (`job.folds`), raced fold by fold against the
    best candidate's own loss on that fold; the score is the mean of the fold losses."""

    losses: list[float] = []
    epochs: list[int] = []
    curves: list[list[float]] = []
    accuracies: list[list[float]] = []
    train_curves: list[list[float]] = []
    hits = judged = 0
    confidence: list[float] = []
    stream: dict[str, list] = {key: [] for key in ("window", "offset", "confidence", "predicted", "truth")}
    correct: list[int] = []
    stopped = ""
    timings: dict[str, float] = {}
    trace: list[dict] = []
    for number, fold in enumerate(job.folds):
        if job.fold_stops:
            if number >= len(job.fold_stops):
                break  # a replay stops where the search's race stopped
            fidelity = replace(fidelity, stop_after=job.fold_stops[number])
        held = set(fold)
        train = [i for i in job.train if i not in held]
        extra = list(callbacks)
        monitor, verdict = (health_monitor(windows, train, job.seed, fidelity.learning_rate, cache)
                            if job.health and number == 0 else (None, {}))  # the recipe's health, once
        if monitor is not None:
            extra.append(monitor)
        incumbent = job.incumbent_folds[number] if number < len(job.incumbent_folds) else job.incumbent
        live = (_live_incumbent(job.incumbents_path, f"{job.fidelity_key}#fold{number}")
                if job.incumbents_path else None)
        result = fit(job.architecture, windows.x[train], windows.y[train], windows.x[list(fold)],
                     windows.y[list(fold)], fidelity, seed=job.seed, callbacks=extra, incumbent=incumbent,
                     live_incumbent=live, stream=stream_of(windows, train))
        if monitor is not None:
            trace = monitor.trace
            timings["health"] = monitor.seconds
        for key, value in result.timings.items():
            timings[key] = timings.get(key, 0.0) + value
        if verdict:
            tf.keras.backend.clear_session()
            label, probability = verdict["diagnosis"]
            return JobResult(job.job_id, False, result.val_loss, result.val_accuracy, result.train_loss,
                             time.perf_counter() - started,
                             f"stopped at epoch {len(trace)} of fold 1: training {label} (diagnoser "
                             f"p={probability:.2f})", timings=timings, health=trace, diagnosis=label)
        if not result.train_loss or not all(math.isfinite(v) for v in result.train_loss + result.val_loss):
            tf.keras.backend.clear_session()
            return JobResult(job.job_id, False, result.val_loss, result.val_accuracy, result.train_loss,
                             time.perf_counter() - started, f"loss became NaN/inf in fold {number + 1}",
                             timings=timings, health=trace, diagnosis="nonfinite")
        model: Any = result.model  # Keras, untyped
        if windows.context is not None:
            _stream_answers(model, windows, list(fold), stream)
        logits = model(as_model_input(windows.x[list(fold)]), training=False).numpy()
        right = logits.argmax(axis=1) == windows.y[list(fold)]
        hits += int(right.sum())
        judged += len(fold)
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        confidence += [round(float(v), 4) for v in (shifted.max(axis=1) / shifted.sum(axis=1))]
        correct += [int(v) for v in right]
        losses.append(result.best_val_loss)
        epochs.append(int(np.nanargmin(result.val_loss)) + 1)
        curves.append(result.val_loss)
        accuracies.append(result.val_accuracy)
        train_curves.append(result.train_loss)
        lost = result.stopped == "curve"
        del result
        tf.keras.backend.clear_session()
        if lost:  # it could not beat the best candidate on this fold: the other folds are not trained
            stopped = "curve"
            break
    score = float(np.mean(losses))
    if stopped:
        # Raced out on a fold: whatever its other folds would have given, it is not chosen over the incumbent (the
        # one at launch, or a better one found while it trained).
        live = _live_incumbent(job.incumbents_path, job.fidelity_key)() if job.incumbents_path else None
        bounds = [value for value in (job.incumbent, live) if value is not None]
        if bounds:
            score = max(score, float(np.nextafter(min(bounds), math.inf)))
    out = JobResult(job.job_id, True, _mean_curve(curves), _mean_curve(accuracies), _mean_curve(train_curves),
                    stopped=stopped, timings=timings, health=trace)
    out.cross_validation = {"folds": len(job.folds), "trained": len(losses), "fold_losses": losses,
                            "best_epochs": epochs, "epochs_run": [len(curve) for curve in curves],
                            "windows": judged, "hits": hits, "score": score,
                            # Every window's answer by the fold model that never saw it: serving's "unknown" threshold
                            # is calibrated on these (tinynas.service.idle).
                            "confidence": confidence, "correct": correct,
                            # On a gesture session: the fold models' answers along every held-out window's stream
                            # context (_stream_answers), which serving's rules are set on.
                            **({"stream": stream} if stream["window"] else {})}
    out.seconds = time.perf_counter() - started
    return out


def _mean_curve(curves: list[list[float]]) -> list[float]:
    """Per epoch, the mean over the folds that ran it."""
    longest = max((len(curve) for curve in curves), default=0)
    return [float(np.mean([curve[epoch] for curve in curves if len(curve) > epoch])) for epoch in range(longest)]


def serve(conn, threads: int, max_jobs: int, private_limit: int) -> None:
    """Worker process main loop."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the study handles Ctrl-C and stops us

    started = time.perf_counter()
    tf = import_tensorflow()
    startup = time.perf_counter() - started
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    # Same seed, same scores: a resumed search must retrace the path of an uninterrupted one.
    tf.config.experimental.enable_op_determinism()
    own = scratch.use_own()  # what TensorFlow leaves in the temporary folder goes with this worker
    try:
        _serve_jobs(conn, tf, startup, max_jobs, private_limit)
    finally:
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)


def _serve_jobs(conn, tf, startup: float, max_jobs: int, private_limit: int) -> None:
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
            result = JobResult(job.job_id, False, error=f"{type(exc).__name__}: {text[:300]}",
                               failure=failure_of(exc))
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
