"""How many candidates the motor-normal plan's search tries in the service's budget, thinned or not (issue 54).

    nice python benchmarks/scorer_budget.py                 # both hops, about 20 minutes on 2 cores

The motor-normal plan records 3 blocks of 60 s of normal running. Cut into the service's 512-sample windows at half
a window's hop (12 kHz, STM32C011F6P6), that is 8,280 windows, and a scorer trains on them and as many synthetic
anomalies: a journey's search had time for one candidate. The service now thins the recording to at most
`tinynas.service.fit.SCORER_WINDOWS` windows (a larger hop). Here, on 3 minutes of the synthetic motor's normal
running (`synthetic:vibration`, normal class, 90 recordings of 2 s), the service's search (`fast`, its default budget,
workers auto, runtime auto, seed 0) runs on each cut; then each winner scores held-out synthetic faults (the
synthetic motor's inner-race, outer-race and ball faults, 20 s each, cut the same way) for its detection at the
threshold and AUROC. The Pi's figure is scaled from this machine's by the 3-6x a Pi 4 is slower than a desktop
core (docs/development.md).

Results: benchmarks/results/scorer-budget.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from firmware_bridge.plan import PRESETS  # noqa: E402
from tinynas.anomaly.evaluation import evaluate_scorer  # noqa: E402
from tinynas.cost.targets import resolve_target  # noqa: E402
from tinynas.data.synthetic import vibration  # noqa: E402
from tinynas.data.windows import Windows  # noqa: E402
from tinynas.progress import Progress  # noqa: E402
from tinynas.search import final_recipe  # noqa: E402
from tinynas.service.config import ServiceConfig  # noqa: E402
from tinynas.service.fit import check_plan_fits  # noqa: E402
from tinynas.study import Study  # noqa: E402
from tinynas.trial import Fidelity, TrialState  # noqa: E402
from tinynas.units import parse_duration  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
RATE = 12_000.0
SEGMENT = 24_000  # 2 s at 12 kHz: a motor-normal segment


def recordings(label: int, count: int, seed: int) -> np.ndarray:
    """`count` recordings of `SEGMENT` samples of the synthetic motor in state `label` (0: normal)."""
    data = vibration(windows_per_class=count, length=SEGMENT, windows_per_recording=1, seed=seed)
    return data.x[data.y == label][:, :, 0]


def pieces(signals: np.ndarray, window: int, hop: int, tag: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(windows of `window` samples every `hop` samples of each recording, their group, their start)."""
    xs, groups, starts = [], [], []
    for number, signal in enumerate(signals):
        for start in range(0, len(signal) - window + 1, hop):
            xs.append(signal[start:start + window])
            groups.append(f"{tag}{number}")
            starts.append(number * len(signal) + start)
    return np.asarray(xs, np.float32)[:, :, None], np.array(groups), np.array(starts)


def cut(signals: np.ndarray, window: int, hop: int) -> Windows:
    """The normal recordings as the service's session loader cuts them (a recording is one group)."""
    x, groups, starts = pieces(signals, window, hop, "n")
    return Windows(x, np.zeros(len(x), np.int64), groups, ("normal",), RATE, ("accelerometer",),
                   {"source": "session"}, None, starts)


def one(hop: int, window: int, config: ServiceConfig, scratch: Path, normal: np.ndarray, held_back: np.ndarray,
        faults: dict) -> dict:
    windows = cut(normal, window, hop)
    started = time.monotonic()
    result = Study(scratch / f"hop{hop}", windows, resolve_target(config.target), strategy=config.strategy,
                   task="anomaly", false_alarm_rate=config.false_alarm_rate,
                   budget_seconds=parse_duration(config.budget), seed=0,
                   fidelity=Fidelity(config.epochs, config.batch_size, config.learning_rate),
                   final_fidelity=final_recipe(config.strategy, config.final_epochs), workers=config.workers,
                   runtime=config.runtime, progress=Progress(interactive=False)).run()
    seconds = time.monotonic() - started
    trained = [t for t in result.trials if t.state in (TrialState.COMPLETE, TrialState.FAILED)]
    names = ("normal", *faults)
    xs, ys = [], []
    for label, signals in enumerate([held_back, *faults.values()]):  # normal running the search never saw first
        x, _, _ = pieces(signals, window, window, f"e{label}")
        xs.append(x)
        ys.append(np.full(len(x), label))
    evaluation = Windows(np.concatenate(xs), np.concatenate(ys), np.arange(sum(map(len, ys))).astype(str),
                         names, RATE, ("accelerometer",), {"source": "session"})
    report = evaluate_scorer(result.out_dir / "model.tflite", result.card.to_dict(), evaluation).report
    section = result.card.anomaly or {}
    return {"hop": hop, "windows": len(windows), "candidates_trained": len(trained),
            "complete": sum(t.state is TrialState.COMPLETE for t in trained), "search_seconds": round(seconds, 1),
            "winner": result.winner.architecture.name(), "synthetic_auroc": section.get("synthetic_test", {}).get(
                "auroc"), "threshold_windows": section.get("calibration", {}).get("calibration_windows"),
            "false_alarms": report["false_alarms"],
            "faults": {name: {"auroc": v["auroc"], "detected": v["detected"]["rate"]}
                       for name, v in report["classes"].items()}}


def pi_candidates(run: dict, budget: float, slower: float) -> float:
    """Candidates a search `slower` times as slow trains in `budget` seconds (it stops at all it has)."""
    return min(float(run["candidates_trained"]), run["candidates_trained"] * budget / (run["search_seconds"] * slower))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default="nothing else ran", help="what shared the machine (for the results)")
    args = parser.parse_args()
    config = ServiceConfig()
    plan = PRESETS["motor-normal"]
    thinned = check_plan_fits(plan, config.chip_budget(), 1, RATE)
    window, default_hop = thinned.window, max(1, thinned.window // 2)
    segments = plan.repetitions * plan.segments
    normal = recordings(0, segments + 10, seed=1)  # the last 10 (20 s) are held back to evaluate on
    faults = {name: recordings(label, 10, seed=2) for label, name in ((1, "inner_race"), (2, "outer_race"),
                                                                      (3, "ball"))}
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        for hop in (default_hop, thinned.hop):
            run = one(hop, window, config, Path(scratch), normal[:segments], normal[segments:], faults)
            runs.append(run)
            print(json.dumps(run), flush=True)
            (RESULTS / "scorer-budget.json").write_text(json.dumps(runs, indent=1) + "\n")  # each kept as it ends
    lines = ["# The motor-normal search in the service's budget, thinned or not", "",
             f"Command: `python benchmarks/scorer_budget.py {shlex.join(sys.argv[1:])}`".rstrip(), "",
             __doc__.split("\n\n", 2)[2].split("\n\nResults:")[0].strip(), "",
             f"Machine: {platform.machine()}, 2 cores; {args.shared}. Budget {config.budget}, target {config.target}, "
             f"window {window} samples; the held-out evaluation: 20 s of normal running and 20 s of each fault, "
             f"non-overlapping windows.", "",
             "| hop | windows | candidates trained | search s | winner | synthetic AUROC | "
             "inner_race detected (AUROC) | outer_race | ball |", "|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        faults_text = " | ".join(f"{v['detected']:.3f} ({v['auroc']:.3f})" for v in run["faults"].values())
        lines.append(f"| {run['hop']} | {run['windows']:,} | {run['candidates_trained']} | {run['search_seconds']} | "
                     f"{run['winner']} | {run['synthetic_auroc']} | {faults_text} |")
    budget = parse_duration(config.budget)
    lines += ["", f"On a Pi 4 (3-6x slower than a desktop core, docs/development.md) the search that took S s here "
              f"takes 3-6 S; in the {config.budget} budget it then trains about candidates x budget / (3-6 S) of them, "
              f"at most all: " + "; ".join(f"hop {run['hop']}: {pi_candidates(run, budget, 6):.1f}-"
                                         f"{pi_candidates(run, budget, 3):.1f}" for run in runs)
              + " (scaled from this machine, not measured on a Pi)."]
    (RESULTS / "scorer-budget.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "scorer-budget.json").write_text(json.dumps(runs, indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
