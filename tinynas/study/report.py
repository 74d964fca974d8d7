"""The human report of a study: report.md with every trial, and a PNG of accuracy vs RAM."""

from __future__ import annotations

from pathlib import Path

from tinynas.atomic import atomic_write_bytes, atomic_write_text
from tinynas.card import ModelCard
from tinynas.cost.budget import Budget
from tinynas.cost.estimate import Cost
from tinynas.cost.runtime import ACCOUNTING_NAMES, RUNTIME_NAMES
from tinynas.folders import REPORT, TRIALS_PLOT
from tinynas.study.time_cost import time_cost_words
from tinynas.trial import Trial, TrialState
from tinynas.units import kib

RAM_BASIS = {("tflm", "chip"): "TFLite Micro: 32-bit arena + interpreter + stack",
             ("tflm", "arena"): "32-bit TFLM arena alone", ("tflm", "method"): "the method's accounting",
             ("c", "chip"): "C runtime: arena + input/output + stack"}
"""What a trial's estimated RAM counts, per runtime and accounting (`--runtime`, `--accounting`)."""


def plot_trials(path: Path, trials: list[Trial], winner: Trial, budget: Budget) -> None:
    """Validation accuracy vs estimated peak RAM of every trial (as `budget` counts it); budget line; winner marked."""
    target = budget.target
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=110)
    trained = [t for t in trials if t.state is TrialState.COMPLETE]
    failed = [t for t in trials if t.state is TrialState.FAILED]
    infeasible = [t for t in trials if t.state is TrialState.INFEASIBLE]
    ram = lambda t: t.costs.get("peak_ram_bytes", 0) / 1024  # noqa: E731
    if trained:
        axes.scatter([ram(t) for t in trained], [t.best_val_accuracy or 0.0 for t in trained], s=28,
                     c=[t.architecture.c for t in trained], cmap="viridis", label="trained (colour = cells)")
    if failed:
        axes.scatter([ram(t) for t in failed], [0.0] * len(failed), marker="x", color="crimson", label="failed")
    if infeasible:
        axes.scatter([ram(t) for t in infeasible], [0.0] * len(infeasible), marker="|", color="grey",
                     label="infeasible (not trained)")
    axes.axvline(target.ram_bytes / 1024, color="black", linestyle="--", linewidth=1,
                 label=f"{target.name} RAM {kib(target.ram_bytes)}")
    if winner.best_val_accuracy is not None:
        axes.scatter([ram(winner)], [winner.best_val_accuracy], marker="*", s=260, color="orange",
                     edgecolor="black", zorder=5, label=f"winner {winner.architecture.name()}")
    axes.set_xlabel(f"estimated peak RAM, {RAM_BASIS[budget.runtime, budget.accounting]} (KiB)")
    axes.set_ylabel("best validation accuracy")
    axes.set_ylim(-0.05, 1.05)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, loc="lower right")
    axes.set_title(f"{len(trials)} candidates: {len(trained)} trained, {len(infeasible)} infeasible")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    atomic_write_bytes(path, buffer.getvalue())


def validation_line(split: dict) -> str:
    """Whether the search ranked candidates on a held-out session (what transfers) or not, and why."""
    if split.get("held_out"):
        said = split.get("held_out_reason") or f"validates on held-out session {split['held_out']}"
        return f"- validation: leave-one-session-out, {said}: candidates were ranked by what transfers to it"
    reason = split.get("held_out_reason") or "not recorded (an older card)"
    return f"- validation: not on a held-out session ({reason}): candidates were ranked on the training sessions"


def anomaly_line(anomaly: dict) -> str:
    """An anomaly scorer's threshold, how it was set, and what the synthetic test side says."""
    choice = anomaly.get("family_choice") or {}
    served = choice["classical"] if choice.get("family") == "classical" else anomaly  # the scorer the folder serves
    calibration, synthetic = served["calibration"], served["synthetic_test"]
    line = (f"- anomaly scorer: threshold **{served['threshold']:.4g}** for {anomaly['false_alarm_rate']:.2%} false "
            f"alarms, set ({calibration['method']}) on {calibration['calibration_windows']} held-out normal windows; "
            f"synthetic anomalies of the test side: AUROC {synthetic['auroc']:.3f}, "
            f"{synthetic['detected']['rate']:.1%} detected; selection: {anomaly['selection']}")
    if choice:
        cost = choice["classical"]["cost"]
        line += (f"\n- scorer family: **{choice['family']}** ({choice['why']}); the classical scorer: RAM "
                 f"{cost['peak_ram_bytes']:,} B, flash {cost['flash_bytes']:,} B, {cost['macs']:,} MACs "
                 f"({cost['note']})")
    evaluation = anomaly.get("evaluation")
    if evaluation and evaluation.get("all_anomalies"):
        every = evaluation["all_anomalies"]
        alarms = evaluation.get("false_alarms") or {}
        line += (f"\n- on the test data: AUROC {every['auroc']}, {every['detected']['flagged']} of "
                 f"{every['detected']['windows']} anomalous windows detected, "
                 f"{alarms.get('flagged', '-')} false alarms of {alarms.get('windows', 0)} normal windows")
    return line


def chip_time_line(card: ModelCard) -> str:
    """'- on the chip: 31.2 ms per inference at 48 MHz (12 % of the 0.25 s budget), ... ; basis' (one line)."""
    latency = card.latency_seconds()
    chip = card.on_chip(latency)
    cost = card.cost()
    if chip is None:
        why = "the target gives no clock" if cost.cycles else (cost.time_basis or "no time model for this runtime")
        return f"- on the chip: time not estimated ({why})"
    budget = (f"; searched to keep {1000 * latency:g} ms per inference (estimate + "
              f"{100 * ((card.time or {}).get('headroom', 1.0) - 1):.0f} % headroom)" if latency is not None
              else "; no time budget (give --latency)")
    spent = time_cost_words(card.time_cost(), latency)
    return (f"- on the chip: {chip.words()}; {cost.instructions:,} instructions, {cost.cycles:,} cycles (estimates: "
            f"{cost.time_basis}){budget}" + (f"; {spent}" if spent else ""))


def time_line(trials: list[Trial]) -> str:
    """Where the workers' time went, summed over the candidates: TensorFlow's import (once per worker
    process; next to nothing where workers fork from the launcher, which imported it), compiling each candidate's
    training, the training epochs, the health monitor."""
    totals: dict[str, float] = {}
    for trial in trials:
        for key, value in (trial.details.get("timings") or {}).items():
            if isinstance(value, (int, float)):
                totals[key] = totals.get(key, 0.0) + float(value)
    if not totals:
        return "- worker time: not recorded"
    epochs, later = totals.get("epochs_run", 0.0), totals.get("later_epochs", 0.0)
    # Epochs timed apart: each training's first, and the one that compiled XLA (older journals: the first).
    apart = sum((t.details.get("timings") or {}).get("program_epochs", 1.0) for t in trials
                if (t.details.get("timings") or {}).get("epochs_run"))
    rate = f", {(epochs - apart) / later:.1f} epochs/s in the others" if later > 0 and epochs > apart else ""
    xla = (f", {totals['xla_epochs']:.0f} of them under XLA" if "xla_epochs" in totals else "")
    return (f"- worker time: TensorFlow import {totals.get('tensorflow_import', 0.0):.1f} s, epochs that traced or "
            f"compiled {totals.get('first_epoch', 0.0):.1f} s, later epochs {later:.1f} s "
            f"({epochs:.0f} epochs{xla}{rate}), health monitor {totals.get('health', 0.0):.1f} s")


def write_report(out_dir: Path, trials: list[Trial], winner: Trial, card: ModelCard, budget: Budget) -> None:
    """Write report.md and trials.png into `out_dir`."""
    out_dir = Path(out_dir)
    target, runtime = budget.target, budget.runtime
    plot_trials(out_dir / TRIALS_PLOT, trials, winner, budget)
    cost = Cost.from_dict(card.cost_estimate)
    why = (card.runtime_choice or {}).get("reason")
    search = card.search
    test = card.test_data
    tested_on = (f"{test['windows']} windows of the separate test set `{test['spec']}`" if test
                 else f"{card.split['test']} held-out windows")
    final = card.final_training
    recipe = (f"{final['epochs']} epochs, lr {final['learning_rate']}"
              + (f" falling along a {final['schedule']}" if final.get("schedule", "constant") != "constant" else ""))
    lines = [
        f"# tinynas search: {winner.architecture.name()} for {target.name}",
        "",
        f"- data: `{card.data['spec'] or 'in-memory windows'}`, {card.data['windows']} windows "
        f"of {card.input['shape'][0]}x{card.input['shape'][1]}, {len(card.classes)} classes",
        f"- split: {card.split['protocol']} ({card.split['train']}/{card.split['val']}/"
        f"{card.split['test']} windows)",
        validation_line(card.split),
        f"- target: {target.name}: RAM {kib(target.ram_bytes)}, flash {kib(target.flash_bytes)}, "
        f"{target.mac_budget:,} MACs",
        f"- strategy `{search['strategy']}`, seed {search['seed']}: {search['candidates']} candidates, "
        f"{search['trained']} trained, {search['infeasible']} infeasible, {search['failed']} failed, "
        f"{search['interrupted']} interrupted; {search['seconds']:.0f} s of a {search['budget_seconds']:.0f} s budget"
        + (f", at most {search['max_candidates']} candidates" if search.get("max_candidates") else ""),
        f"- winner: trial {winner.number} {winner.architecture.name()} filters "
        f"{list(winner.architecture.filters)}, search val loss {winner.score:.4f}",
        (f"- final training: {recipe} ({card.final_training['seconds']:.0f} s)"
         if card.final_training.get("retrained", True) else
         f"- final training: none, the winner was searched with the final recipe ({recipe}); exported as "
         f"trained ({card.final_training['seconds']:.0f} s)"),
        (f"- test accuracy: float {card.float_test_accuracy:.3f}, **int8 {card.int8_test_accuracy:.3f}** "
         f"(LiteRT, {tested_on})" + _held_out_text(card) if card.anomaly is None else anomaly_line(card.anomaly)),
        f"- runtime: {RUNTIME_NAMES[runtime]}" + (f" ({why})" if why else "")
        + f"; budget counted as {ACCOUNTING_NAMES[card.accounting]}",
        f"- cost: {cost.macs:,} MACs, {cost.summary(card.flash_bytes)} (estimates; model.tflite is "
        f"{card.flash_bytes:,} B)",
    ]
    lines.append(chip_time_line(card))
    lines.append(time_line(trials))
    for finding in card.data_findings or []:
        lines.append(f"- data check ({finding['severity']}): {finding['message']}")
    diagnosed = [t for t in trials
                 if t.details.get("diagnosis") or (t.details.get("first_attempt") or {}).get("diagnosis")]
    if diagnosed:
        lines.append(f"- training faults diagnosed: {len(diagnosed)} candidate(s) stopped early "
                     f"(see the notes below; `tinynas replay {out_dir} --trial N` reproduces one)")
    if card.measured_arena_host64 is not None:
        measured = card.measured_arena_host64
        lines.append(f"- TFLite Micro arena on this 64-bit host: {measured['arena_bytes']:,} B "
                     f"(estimate {card.host64_estimate['arena_bytes']:,} B)")
    lines += ["", "![trials](trials.png)", "",
              "| # | architecture | state | val loss | val acc | RAM | flash | MACs | s | note |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for t in trials:
        loss = f"{t.score:.4f}" if t.score is not None else ""
        accuracy = f"{t.best_val_accuracy:.3f}" if t.best_val_accuracy is not None else ""
        note = "; ".join(t.violations) or t.error
        if not note and t.details.get("stopped"):
            note = {"patience": "stopped: no progress", "curve": "stopped: cannot beat the best"}.get(
                t.details["stopped"], t.details["stopped"])
        first = t.details.get("first_attempt")
        if first and first.get("diagnosis"):
            retry = (f"diagnosed {first['diagnosis']} after {len(first.get('health') or [])} epochs, "
                     f"retried at lr {t.details.get('retry_learning_rate', 0):g}")
            note = retry + (f"; {note}" if note else "")
        if t.fidelity.subset < 1:
            note = f"{t.fidelity.subset:.0%} subset" + (f"; {note}" if note else "")
        if t.number == winner.number:
            note = "winner"
        lines.append(f"| {t.number} | {t.architecture.name()} | {t.state.value} | {loss} | {accuracy} | "
                     f"{kib(t.costs.get('peak_ram_bytes', 0))} | {kib(t.costs.get('flash_bytes', 0))} | "
                     f"{t.costs.get('macs', 0):,} | {t.seconds:.1f} | {note} |")
    atomic_write_text(out_dir / REPORT, "\n".join(lines) + "\n")


def _held_out_text(card: ModelCard) -> str:
    """'; 30 of 40 windows right, 95 % interval 0.60-0.86; recall per class: ...' (empty for cards without the count);
    recall and support over recordings where the count is."""
    held = card.int8_test or {}
    try:
        low, high = held["interval"]
        # Over recordings when the test windows share them (cut with a hop): the interval counts those.
        counted = (f"{held['hits']} of {held['windows']} recordings right by most of their windows ("
                   f"{held.get('window_hits')} of {held.get('window_count')} windows)"
                   if held.get("unit") == "recordings" else f"{held['hits']} of {held['windows']} windows right")
        text = f"; {counted}, 95% interval {low:.3f}-{high:.3f}"
    except (KeyError, TypeError, ValueError):
        return ""
    recall = held.get("recall") or []
    if recall and len(recall) == len(card.classes):
        text += "; recall per class: " + ", ".join(
            f"{name} {'-' if value is None else format(value, '.2f')} ({support})"
            for name, value, support in zip(card.classes, recall, held.get("support") or [0] * len(recall)))
    return text

