"""The final stage of a search: the winner retrained with the final recipe (or exported as trained),
converted to int8, measured on the held-out windows and written with its card and report."""

from __future__ import annotations

import errno
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from tinynas.anomaly.classical import ClassicalScorer
from tinynas.anomaly.classical_c import classical_c_card
from tinynas.anomaly.metrics import report_lines
from tinynas.card import ModelCard, read_card
from tinynas.cost.budget import Budget
from tinynas.cost.estimate import Cost, estimate
from tinynas.cost.runtime import RUNTIME_NAMES
from tinynas.data.windows import Windows
from tinynas.deploy.export import write_export
from tinynas.deploy.measure import measure_arena, run_int8, tflite_micro_available
from tinynas.errors import StorageError
from tinynas.folders import SPLIT, save_split, weights_path
from tinynas.study.anomaly_card import anomaly_section
from tinynas.study.final_inputs import FinalInputs
from tinynas.study.jobs import JobFactory
from tinynas.study.journal import Journal
from tinynas.study.outcomes import best_trial, is_final_recipe, trained_fidelity
from tinynas.study.pool import WorkerPool
from tinynas.study.settings import StudyError
from tinynas.study.time_cost import time_cost
from tinynas.training.job import JobResult
from tinynas.trial import Fidelity, Trial, TrialState
from tinynas.verdict import held_out, per_class


@dataclass
class StudyResult:
    """What a finished study produced."""

    winner: Trial
    card: ModelCard
    out_dir: Path
    trials: list[Trial]


def final_stage(study: FinalInputs, strategy, journal: Journal, jobs: JobFactory, pool: WorkerPool) -> StudyResult:
    """Train (or export) the winner of `journal`'s search and write every output file into the study's folder."""
    from tinynas.study.report import write_report  # study/__init__ imports this module: at module level, a circle

    trials = journal.trials()
    winner = best_trial(strategy, trials)
    if winner is None:
        raise StudyError("no candidate finished training within the budget: give a longer --budget")
    final = study.final_fidelity
    if jobs.folds is not None:
        study.progress.event(f"final training of {winner.architecture.name()} on all {len(jobs.folds.pool)} "
                             f"training and validation windows ({final.epochs} epochs, lr {final.learning_rate}; "
                             f"chosen by cross-validation)")
    elif is_final_recipe(winner.fidelity, final):
        study.progress.event(f"exporting {winner.architecture.name()}: it was trained with the final recipe")
    else:
        study.progress.event(f"final training of {winner.architecture.name()} "
                             f"({final.epochs} epochs, lr {final.learning_rate})")
    started = time.monotonic()
    result, fidelity, retrained = _final_training(study, winner, jobs, pool)
    tflite = result.tflite
    if tflite is None:  # a final or export job that succeeded always carries its model
        raise StudyError(f"the final stage of {winner.architecture.name()} returned no model")
    x_test, y_test = study.x_test, study.y_test
    int8 = run_int8(tflite, x_test)
    int8_accuracy = int8.accuracy(y_test)
    # Over the recordings the test windows come from when they share them (windows cut with a hop overlap).
    groups = study.test_groups
    int8_test = {**held_out(int8.predictions, y_test, groups).to_dict(),
                 **per_class(int8.predictions, y_test, len(study.windows.class_names), groups)}
    budget = study.budget
    cost = budget.estimate(winner.architecture)
    anomaly = None
    if study.anomaly is not None:
        anomaly = anomaly_section(study, tflite, winner.architecture.name(), cost)
    card = ModelCard(
        classes=list(study.windows.class_names),
        input={"shape": [study.windows.window_length, study.windows.channels],
               "model_input_shape": list(winner.architecture.model_input_shape),
               "sample_rate_hz": study.windows.sample_rate_hz,
               "channel_names": list(study.windows.channel_names)},
        target=study.target.to_dict(),
        cost_estimate=cost.to_dict(),
        host64_estimate=estimate(winner.architecture, "lp64").to_dict(),
        flash_bytes=len(tflite),
        float_test_accuracy=result.float_test_accuracy,
        int8_test_accuracy=int8_accuracy,
        int8_seconds_per_window=int8.seconds_per_window,
        data={"spec": study.settings.data_spec, "digest": study.windows.digest(), "windows": len(study.windows),
              "provenance": study.windows.provenance},
        split=study.split.describe(),
        preprocessing=study.preprocessing.to_dict(),
        test_data=_test_data(study.test_windows, study.settings.test_spec),
        data_findings=list(study.data_findings),
        search=_search_summary(study, journal, trials, winner),
        training_recipe={"augmentation": fidelity.augmentation.to_dict() if fidelity.augmentation else {},
                         "augmentation_text": fidelity.augmentation.describe() if fidelity.augmentation else "none",
                         "chosen": study.prepared.augmentation_note,
                         "kernel_sizes_searched": list(study.space.kernels),
                         "kernels_chosen": study.prepared.kernels_note},
        final_training={**fidelity.to_dict(), "seconds": round(time.monotonic() - started, 1),
                        "best_val_loss": min(result.val_loss) if result.val_loss else winner.score,
                        "retrained": retrained,
                        **({"on": f"all {len(jobs.folds.pool)} training and validation windows, the recipe's "
                                  f"{fidelity.epochs} epochs (no window left to choose another)"}
                           if jobs.folds is not None else {}),
                        "timings": {key: round(value, 3) for key, value in result.timings.items()}},
        measured_arena_host64=_measured_arena(tflite) if tflite_micro_available() else None,
        runtime=str(budget.runtime),
        runtime_choice=budget.choice().to_dict(),
        anomaly=anomaly,
        int8_test=int8_test,
        selection=_selection(jobs, winner),
        time=_time_section(budget, cost, study),
    )
    exported = write_export(study.out_dir, winner.architecture, tflite, card.to_dict(),
                            c_prefix=study.settings.c_prefix, scorer_c=_classical_c(study, anomaly))
    card = read_card(exported.card_path.parent)  # as every reader will read it: checked
    save_split(study.out_dir / SPLIT, study.split)
    journal.set_meta("finished", True)
    write_report(study.out_dir, trials, winner, card, budget)
    if anomaly is not None:
        _say_anomaly(study, anomaly)
    measured = ("int8 test accuracy" if anomaly is None else
                "int8 accuracy telling normal from synthetic anomalies")
    chosen = ((anomaly or {}).get("family_choice") or {}).get("family")
    said = "the network finalist" if chosen == "classical" else "winner"  # the classical scorer is served instead
    study.progress.event(f"{said} {winner.architecture.name()}: {measured} {int8_accuracy:.3f} "
                         f"(float {result.float_test_accuracy:.3f}) on {len(y_test)} held-out windows; "
                         f"{RUNTIME_NAMES[budget.runtime]}: {cost.summary(len(tflite))}")
    return StudyResult(winner, card, study.out_dir, trials)


def _time_section(budget: Budget, cost: Cost, study: FinalInputs) -> dict:
    """The card's time: the budget, the winner's estimate and, when time was budgeted, what it cost the search
    (`time_cost`: the page and the report say how much of the space the hop closed and what would open it)."""
    section = budget.time_section(cost)
    spent = time_cost(budget, study.space)
    return {**section, "space": spent} if spent else section


def _classical_c(study: FinalInputs, anomaly: dict | None) -> tuple[dict, tuple[str, str]] | None:
    """The classical scorer's C for the folder when the family rule chose it (else the network's is written)."""
    chosen = (anomaly or {}).get("family_choice") or {}
    if chosen.get("family") != "classical":
        return None
    held = chosen["classical"]
    return classical_c_card(ClassicalScorer.from_dict(held["scorer"]), float(held["threshold"]),
                            study.settings.c_prefix, title="classical anomaly scorer (features + Gaussian)")


def _selection(jobs: JobFactory, winner: Trial) -> dict | None:
    """The card's record of a cross-validated choice: the folds, the winner's out-of-fold count and answers."""
    if jobs.folds is None:
        return None
    folds = winner.details.get("cross_validation") or {}
    return {"rule": "cross-validation", **jobs.folds.describe(),
            **{key: folds[key] for key in ("hits", "fold_losses", "best_epochs", "confidence", "correct", "stream")
               if key in folds},
            "judged": folds.get("windows"),
            "why": "every training and validation window judged once by a model that never saw its recording; "
                   "the deploy gate decides on the test windows, which no candidate saw"}


def _say_anomaly(study: FinalInputs, anomaly: dict) -> None:
    choice = anomaly.get("family_choice") or {}
    served = choice["classical"] if choice.get("family") == "classical" else anomaly  # the scorer the folder serves
    calibration = served["calibration"]
    synthetic = served["synthetic_test"]
    study.progress.event(f"anomaly threshold {served['threshold']:.3g} for {anomaly['false_alarm_rate']:.2%} false "
                         f"alarms, set on {calibration['calibration_windows']} held-out normal windows; synthetic "
                         f"anomalies: AUROC {synthetic['auroc']:.3f}, {synthetic['detected']['rate']:.1%} detected")
    choice = anomaly.get("family_choice")
    if choice:
        held = choice["classical"]
        served = ("the classical scorer (features + Gaussian) is served and exported as model_compiled.c; the "
                  "network finalist stays in model.tflite" if choice["family"] == "classical" else
                  "the network is served")
        study.progress.event(f"scorer family: {served}: {choice['why']}; classical: threshold {held['threshold']:.4g}, "
                             f"RAM {held['cost']['peak_ram_bytes']:,} B, flash {held['cost']['flash_bytes']:,} B")
    if "evaluation" in anomaly:
        for line in report_lines(anomaly["evaluation"]):
            study.progress.event(f"test data: {line}")


def _measured_arena(tflite: bytes) -> dict:
    arena = measure_arena(tflite)
    return {"arena_bytes": arena.arena_bytes, "arena_head_bytes": arena.arena_head_bytes,
            "arena_tail_bytes": arena.arena_tail_bytes}


def _test_data(test_windows: Windows | None, spec: str) -> dict | None:
    if test_windows is None:
        return None
    return {"spec": spec, "digest": test_windows.digest(), "windows": len(test_windows),
            "classes": list(test_windows.class_names)}


def _search_summary(study: FinalInputs, journal: Journal, trials: list[Trial], winner: Trial) -> dict:
    counts = {state.value: sum(t.state is state for t in trials) for state in TrialState}
    return {"strategy": str(study.settings.strategy), "seed": study.settings.seed,
            "seconds": round(float(journal.get_meta("search_seconds") or 0.0), 1),
            "budget_seconds": study.settings.budget_seconds, "max_candidates": study.settings.max_candidates,
            "winner_trial": winner.number,
            "winner_val_loss": winner.score, "candidates": len(trials),
            "trained": counts["complete"] + counts["failed"], "infeasible": counts["infeasible"],
            "failed": counts["failed"], "interrupted": counts["interrupted"],
            "peak_worker_memory_bytes": journal.get_meta("peak_worker_memory") or {}}


def _final_training(study: FinalInputs, winner: Trial, jobs: JobFactory,
                    pool: WorkerPool) -> tuple[JobResult, Fidelity, bool]:
    """Retrain the winner with the final recipe; if that diverges, fall back to its search recipe, at the
    learning rate that worked for it (not the one the diagnoser found unstable). Returns the result, the recipe
    and whether it was retrained.

    A winner already trained with the final recipe (saved weights) is exported as it is.
    """
    if is_final_recipe(winner.fidelity, study.final_fidelity) and weights_path(study.out_dir, winner.number).exists():
        result = _run_one(pool, jobs.export(winner))
        if result.ok:
            return result, trained_fidelity(winner), False
        study.progress.event(f"exporting the trained winner failed ({result.error}); retraining it")
    for fidelity in final_recipes(study.final_fidelity, winner):
        result = _run_one(pool, jobs.final(winner, fidelity))
        if result.ok:
            return result, fidelity, True
        _say_a_full_disk(study.out_dir, f"final training of {winner.architecture.name()}")
        study.progress.event(f"final training failed ({result.error}); retrying with the search recipe")
    raise StudyError(f"final training of {winner.architecture.name()} failed: {result.error}")


DISK_FULL_BYTES = 1 << 20
"""Free bytes under which a worker that failed is taken to have failed for want of disk: h5py, writing the weights,
can die by a signal on ENOSPC instead of raising, and the worker's death then says nothing of the disk."""


def _say_a_full_disk(folder: Path, doing: str) -> None:
    """StorageError (ENOSPC: the run says 'free some space, then --resume') if `folder`'s disk is full."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < DISK_FULL_BYTES:
        raise StorageError(errno.ENOSPC, f"{doing} stopped: no space left on the device", str(folder))


def final_recipes(final: Fidelity, winner: Trial) -> tuple[Fidelity, Fidelity]:
    """The final recipe, then as a fallback the recipe the winner was searched with, at the learning
    rate that worked for it: not the one the diagnoser found unstable."""
    return final, trained_fidelity(winner)


def _run_one(pool: WorkerPool, job) -> JobResult:
    pool.submit(job)
    results: list[JobResult] = []
    while not results:
        results = pool.wait(timeout=5.0)
    return results[0]
