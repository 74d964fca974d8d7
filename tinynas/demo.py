"""`tinynas demo`: a small end-to-end job on synthetic bearing vibration.

Generate windows -> list every A(k, c) that fits the target by the analytic cost model ->
train a few of the largest feasible ones briefly -> export the best as int8 (.tflite, C
array, card) -> check it with LiteRT and TFLite Micro. The full two-level search replaces
the candidate pick once `tinynas search` lands.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from tinynas.cost import check_space_fits, estimate
from tinynas.data.synthetic import vibration
from tinynas.export import convert_int8, write_export
from tinynas.measure import measure_arena, run_int8, tflite_micro_available
from tinynas.space import Architecture, as_model_input, max_cells
from tinynas.targets import get_target, kib
from tinynas.train import Fidelity, fit

log = logging.getLogger(__name__)

MAX_K = 64


def stratified_split(labels: np.ndarray, fractions: tuple[float, float, float], seed: int):
    """Indices (train, val, test) with each class split in the given fractions."""
    rng = np.random.default_rng(seed)
    parts: list[list[int]] = [[], [], []]
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        n_val = max(1, round(fractions[1] * len(members)))
        n_test = max(1, round(fractions[2] * len(members)))
        parts[1] += members[:n_val].tolist()
        parts[2] += members[n_val:n_val + n_test].tolist()
        parts[0] += members[n_val + n_test:].tolist()
    return tuple(np.sort(np.array(part, dtype=int)) for part in parts)


def frontier(length: int, channels: int, classes: int, target) -> list[Architecture]:
    """For every feasible cell count c, the architecture with the most stem filters that fits."""
    found = []
    for cells in range(max_cells(length) + 1):
        best = None
        for k in range(1, MAX_K + 1):
            arch = Architecture(length, channels, classes, k, cells)
            if not estimate(arch).fits(target):
                break
            best = arch
        if best is not None:
            found.append(best)
    return found


def run_demo(out: Path, target_name: str = "STM32C011F6P6", epochs: int = 15, seed: int = 0) -> dict:
    """Run the demo into `out`; return the model card as a dict."""
    started = time.perf_counter()
    target = get_target(target_name)
    data = vibration(windows_per_class=60, seed=seed)
    length, channels = data.x.shape[1:]
    classes = len(data.class_names)
    check_space_fits(target, length, channels, classes)
    train, val, test = stratified_split(data.y, (0.6, 0.2, 0.2), seed)
    log.info("data: synthetic vibration, %d windows of %dx%d, %d classes (%s); split %d/%d/%d",
             len(data.y), length, channels, classes, ", ".join(data.class_names),
             len(train), len(val), len(test))
    log.info("target: %s (RAM %s, flash %s, %s MACs)", target.name, kib(target.ram_bytes),
             kib(target.flash_bytes), f"{target.mac_budget:,}")
    options = frontier(length, channels, classes, target)
    # Largest-k candidates at a low, middle and high cell count: a cheap spread of the frontier.
    picks = sorted({options[0], options[len(options) // 2], options[-1]}, key=lambda a: a.c)
    log.info("%d cell counts fit; training %s for %d epochs each",
             len(options), ", ".join(a.name() for a in picks), epochs)
    fidelity = Fidelity(epochs=epochs, batch_size=16, learning_rate=3e-3)
    results = []
    for number, arch in enumerate(picks, 1):
        tick = time.perf_counter()
        result = fit(arch, data.x[train], data.y[train], data.x[val], data.y[val], fidelity, seed=seed)
        log.info("[%d/%d] %s: min val loss %.3f, val acc %.2f (%.0f s)", number, len(picks), arch.name(),
                 result.best_val_loss, max(result.val_accuracy), time.perf_counter() - tick)
        results.append((result.best_val_loss, number, arch, result))
    _, _, winner, trained = min(results, key=lambda item: (item[0], item[1]))
    tflite = convert_int8(trained.model, data.x[train], seed=seed)
    float_logits = trained.model(as_model_input(data.x[test]), training=False).numpy()
    float_accuracy = float(np.mean(float_logits.argmax(axis=1) == data.y[test]))
    int8 = run_int8(tflite, data.x[test])
    int8_accuracy = float(np.mean(int8.predictions == data.y[test]))
    cost = estimate(winner)
    card = {
        "classes": list(data.class_names),
        "input": {"shape": [length, channels], "model_input_shape": list(winner.model_input_shape),
                  "sample_rate_hz": data.sample_rate_hz},
        "target": target.to_dict(),
        "cost_estimate": cost.to_dict(),
        "host64_estimate": estimate(winner, "lp64").to_dict(),
        "flash_bytes": len(tflite),
        "float_test_accuracy": float_accuracy,
        "int8_test_accuracy": int8_accuracy,
        "int8_seconds_per_window": int8.seconds_per_window,
        "data": {"source": "synthetic:vibration", "seed": seed, "windows": int(len(data.y))},
        "split": {"protocol": "stratified random 60/20/20 (synthetic windows are independent)",
                  "train": int(len(train)), "val": int(len(val)), "test": int(len(test))},
        "training": {"epochs": epochs, "batch_size": fidelity.batch_size,
                     "learning_rate": fidelity.learning_rate, "best_val_loss": trained.best_val_loss},
        "seconds": round(time.perf_counter() - started, 1),
    }
    if tflite_micro_available():
        arena = measure_arena(tflite)
        card["measured_arena_host64"] = {"arena_bytes": arena.arena_bytes,
                                         "arena_head_bytes": arena.arena_head_bytes,
                                         "arena_tail_bytes": arena.arena_tail_bytes}
    paths = write_export(out, winner, tflite, card)
    log.info("winner %s: float test acc %.3f, int8 test acc %.3f; flash %s, peak RAM %s (32-bit est.)",
             winner.name(), float_accuracy, int8_accuracy, kib(len(tflite)), kib(cost.peak_ram_bytes))
    log.info("wrote %s, %s, %s, %s in %.0f s", paths.tflite_path, paths.c_path, paths.header_path,
             paths.card_path, time.perf_counter() - started)
    return {"architecture": winner.to_dict(), "name": winner.name(), **card}
