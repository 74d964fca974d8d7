"""Search strategies side by side: same data, split, target, time budget and machine.

    python benchmarks/strategies.py --data cwru --target STM32F030F4P6 --budget 10m --seeds 0,1,2
    python benchmarks/strategies.py --data isl --target STM32C011F6P6 --budget 10m --seeds 0,1,2

Every run is a full search (search, then the winner's final stage: retraining or export, int8
conversion, LiteRT on the test split), timed from start to exported model: a cell of a sweep
(`tinynas.sweep`, one `tinynas search` per cell, resumable with `--work DIR`). paper and fast runs
are interleaved seed by seed so that the machine's state affects both alike; the baselines follow.
`--baseline-seeds` limits greedy / random / tpe to the first N seeds when time is short (they use
the whole budget); the table says how many seeds each row has.

Time-to-paper-accuracy: a strategy "reaches" the paper strategy when its mean int8 test accuracy is
within 0.5 points of the paper's mean; its ratio is then its mean wall time over the paper's.
The anytime curves show the incumbent's validation accuracy and the float test accuracy of its
search-trained weights (measured for the plot only: no strategy sees the test split) against
wall time. Writes benchmarks/results/strategies-<data>[-<suffix>].md, .json and .png.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from grid_runs import searched

from tinynas.card import read_card
from tinynas.cost.estimate import estimate
from tinynas.cost.targets import get_target
from tinynas.data.spec import load_windows
from tinynas.search import FINAL_FIDELITY, SearchSpace, final_recipe, make_strategy
from tinynas.search.tpe import optuna_available
from tinynas.study.journal import peek
from tinynas.trial import Fidelity, TrialState

RESULTS = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DATA = {
    "cwru": f"cwru:{SHARED / 'cwru'}?files=bearingnas10&channel=FE&windows_per_file=200&resample=0",
    "isl": f"isl:{SHARED / 'isl'}",
}
TOLERANCE = 0.005
"""Accuracy within which a strategy counts as reaching the paper strategy's (0.5 points)."""
PHASES = ("tensorflow_import", "build", "first_epoch", "later_epochs", "health", "convert")


def _anytime(trials, objective) -> list[dict]:
    """(seconds, incumbent) after every completed trial, in completion order."""
    done = sorted((t for t in trials if t.state is TrialState.COMPLETE and "finished_at" in t.details),
                  key=lambda t: t.details["finished_at"])
    points, best = [], None
    for trial in done:
        if best is None or objective(trial) <= objective(best):
            best = trial
        points.append({"seconds": trial.details["finished_at"], "incumbent": best.architecture.name(),
                       "val_accuracy": best.best_val_accuracy,
                       "test_accuracy": best.details.get("float_test_accuracy")})
    return points


def _phases(trials, card) -> dict[str, float]:
    """Worker-seconds per phase of the search and of the final stage."""
    totals = dict.fromkeys(PHASES, 0.0)
    for trial in trials:
        for key in PHASES:
            totals[key] += trial.details.get("timings", {}).get(key, 0.0)
    final = card["final_training"]
    for key in PHASES:
        totals[key] += final.get("timings", {}).get(key, 0.0)
    runs = [t.details.get("timings", {}).get("epochs_run", 0.0) for t in trials]
    runs.append(final.get("timings", {}).get("epochs_run", 0.0))  # the final stage's retraining, if any
    totals["epochs_run"] = sum(runs)
    totals["trainings"] = float(sum(1 for epochs in runs if epochs))
    for key in ("program_epochs", "xla_epochs"):
        totals[key] = sum(t.details.get("timings", {}).get(key, 0.0) for t in trials) + final.get(
            "timings", {}).get(key, 0.0)
    totals["candidate_seconds"] = sum(t.seconds for t in trials)
    return totals


def recipes(args) -> str:
    """The final recipes the run used, in words."""
    if args.final_epochs is None:
        fast = final_recipe("fast")
        return (f"each strategy's own (the method's {FINAL_FIDELITY.epochs} epochs at a constant lr "
                f"{FINAL_FIDELITY.learning_rate:g}; fast's {fast.epochs} epochs, lr {fast.learning_rate:g} falling "
                "along a cosine)")
    return f"{args.final_epochs} epochs of each strategy's own recipe (lr 0.01; fast's falling along a cosine)"


def fixed_options(args) -> dict:
    """The search options every run shares: a sweep's [fixed] table."""
    fixed = {"data": DATA[args.data], "target": args.target, "split": args.split, "budget": args.budget,
             "epochs": args.epochs, "batch_size": 16, "learning_rate": 1e-3, "workers": args.workers,
             "augment": "none", "kernels": "3", "runtime": args.runtime, "accounting": args.accounting,
             "track_test": True}  # the anytime curves' float test accuracy: measured for the plot, seen by no strategy
    if args.final_epochs is not None:
        fixed["final_epochs"] = args.final_epochs
    return fixed


def run_from(folder: Path, args, windows, target, strategy: str, seed: int, wall: float) -> dict:
    """What one search (a sweep's cell folder) cost and found: from its card and journal."""
    card = read_card(folder).to_dict()
    trials, _meta = peek(folder / "journal.sqlite") or ([], {})
    fidelity = Fidelity(args.epochs, 16, 1e-3)
    final = final_recipe(strategy, args.final_epochs)  # the strategy's own (fast's is shorter, cosine)
    space = SearchSpace(windows.window_length, windows.channels, windows.classes)
    objective = make_strategy(strategy, space, seed=seed, fidelity=fidelity, final_fidelity=final,
                              is_feasible=lambda arch: estimate(arch, runtime=args.runtime, accounting=args.accounting,
                                                                core=target.core).fits(target)).objective
    memory = card["search"]["peak_worker_memory_bytes"]
    trained = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.FAILED)]
    return {"strategy": strategy, "seed": seed, "wall_seconds": round(wall, 1),
            "search_seconds": card["search"]["seconds"], "final_seconds": card["final_training"]["seconds"],
            "retrained": card["final_training"].get("retrained", True),
            "winner": card["name"], "int8_test_accuracy": card["int8_test_accuracy"],
            "float_test_accuracy": card["float_test_accuracy"], "trained": len(trained),
            "candidates": card["search"]["candidates"], "infeasible": card["search"]["infeasible"],
            "stopped_early": sum(1 for t in trained if t.details.get("stopped")),
            "peak_worker_rss_bytes": memory.get("rss", 0), "peak_worker_private_bytes": memory.get("private", 0),
            "phases": _phases(trained, card), "anytime": _anytime(trials, objective)}


def run_sweeps(args, order: list[tuple[int, str]], work: Path, progress) -> list[tuple[Path, str, int, float]]:
    """The runs of `order` as sweeps (`tinynas.sweep`): paper and fast interleaved seed by seed, then the baselines,
    each a search in its own folder under `work`, resumed there when the benchmark is run again with `--work`."""
    done = []
    for part, strategies in (("main", ("paper", "fast")), ("baselines", ("greedy", "random", "tpe"))):
        seeds = list(dict.fromkeys(seed for seed, strategy in order if strategy in strategies))
        mine = list(dict.fromkeys(strategy for _seed, strategy in order if strategy in strategies))
        if not seeds:
            continue
        table = {"grid": {"seed": seeds, "strategy": mine}, "fixed": fixed_options(args)}
        for cell, folder in searched(work / part, table, progress=progress):
            done.append((folder, cell.values["strategy"], cell.values["seed"], cell.seconds))
    return done


def summarise(runs: list[dict], strategies: list[str]) -> list[dict]:
    """Mean per strategy and its time-to-paper-accuracy ratio."""
    paper = [r for r in runs if r["strategy"] == "paper"]
    paper_accuracy = float(np.mean([r["int8_test_accuracy"] for r in paper])) if paper else None
    paper_wall = float(np.mean([r["wall_seconds"] for r in paper])) if paper else None
    rows = []
    for name in strategies:
        mine = [r for r in runs if r["strategy"] == name]
        if not mine:
            continue
        accuracy = float(np.mean([r["int8_test_accuracy"] for r in mine]))
        wall = float(np.mean([r["wall_seconds"] for r in mine]))
        reaches = paper_accuracy is not None and accuracy >= paper_accuracy - TOLERANCE
        rows.append({"strategy": name, "seeds": len(mine), "int8_test_accuracy": accuracy,
                     "int8_test_accuracy_sd": float(np.std([r["int8_test_accuracy"] for r in mine])),
                     "wall_seconds": wall, "trained": float(np.mean([r["trained"] for r in mine])),
                     "peak_worker_rss_mib": max(r["peak_worker_rss_bytes"] for r in mine) / 2 ** 20,
                     "peak_worker_private_mib": max(r["peak_worker_private_bytes"] for r in mine) / 2 ** 20,
                     "reaches_paper": reaches, "wall_ratio": wall / paper_wall if paper_wall else None,
                     "time_ratio": wall / paper_wall if reaches and paper_wall else None})
    return rows


def plot(runs: list[dict], path: Path, title: str) -> None:
    """Anytime curves: incumbent validation accuracy and test accuracy against wall time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"paper": "tab:blue", "fast": "tab:red", "greedy": "tab:green", "random": "tab:gray",
               "tpe": "tab:purple"}
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    labelled = set()
    for run in runs:
        colour = colours.get(run["strategy"], "black")
        label = run["strategy"] if run["strategy"] not in labelled else None
        labelled.add(run["strategy"])
        points = run["anytime"]
        seconds = [p["seconds"] for p in points]
        for axis, key in zip(axes, ("val_accuracy", "test_accuracy")):
            values = [p[key] if p[key] is not None else np.nan for p in points]
            axis.step(seconds, values, where="post", color=colour, alpha=0.7, label=label)
        axes[1].plot([run["wall_seconds"]], [run["int8_test_accuracy"]], marker="*", markersize=11,
                     color=colour, linestyle="none")
    axes[0].set_title("incumbent: best validation accuracy")
    axes[1].set_title("incumbent's test accuracy (float); star: exported int8")
    for axis in axes:
        axis.set_xscale("log")
        axis.set_xlabel("wall time (s)")
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy")
    axes[0].legend(loc="lower right")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def verdict(runs: list[dict], rows: list[dict]) -> list[str]:
    """The issue's goal for `fast`, met or not, and the floor any strategy pays on this target."""
    fast = next((row for row in rows if row["strategy"] == "fast"), None)
    paper = [run for run in runs if run["strategy"] == "paper"]
    if fast is None or not paper or fast["wall_ratio"] is None:
        return []
    met = fast["reaches_paper"] and fast["wall_ratio"] <= 0.1
    final = float(np.mean([run["final_seconds"] for run in paper]))
    share = float(np.mean([run["final_seconds"] / run["wall_seconds"] for run in paper]))
    return ["", f"Goal: `fast` within 0.5 points of `paper`'s int8 test accuracy in at most 1/10 of its wall time: "
                f"**{'met' if met else 'not met'}** (accuracy {'reached' if fast['reaches_paper'] else 'not reached'}; "
                f"{fast['wall_ratio']:.3f} of paper's wall time). For scale: paper's final stage alone (retraining "
                f"its winner with the final recipe) takes {final:.0f} s, {share:.0%} of its wall time; a strategy "
                f"that delivers a model trained with that recipe pays at least one such training."]


def write(args, windows, target, runs: list[dict], command: str) -> str:
    """Markdown, JSON and PNG of the runs so far (rewritten after every run: a long benchmark
    interrupted still leaves its results)."""
    strategies = args.strategies.split(",")
    rows = summarise(runs, strategies)
    name = results_name(args)
    RESULTS.mkdir(exist_ok=True)
    commands = list(dict.fromkeys(run.get("command", command) for run in runs)) or [command]
    (RESULTS / f"{name}.json").write_text(json.dumps({"command": command, "commands": commands, "args": vars(args),
                                                      "summary": rows, "runs": runs}, indent=2) + "\n")
    if runs:
        plot(runs, RESULTS / f"{name}.png", f"{args.data} on {target.name}")
    lines = [f"# Search strategies side by side: {args.data}", "",
             "Command" + ("s (runs merged with `--merge`; each run records its own):" if len(commands) > 1 else ":"),
             *[f"`{c}`" for c in commands], "",
             f"Data `{DATA.get(args.data, args.data).replace(str(SHARED), '../shared/data')}`: {len(windows)} "
             f"windows of {windows.window_length}x{windows.channels}, {windows.classes} classes; split `{args.split}`. "
             f"Target {target.name}, budgeted for runtime `{getattr(args, 'runtime', 'tflm')}` counted by the "
             f"`{getattr(args, 'accounting', 'arena')}` accounting (`arena`: TFLite Micro's 32-bit arena and the "
             f".tflite, as runs before issue 37 were; `method`: the method's tool). Every strategy: budget "
             f"{args.budget}, {args.workers} workers, candidates "
             f"trained with the method's recipe ({args.epochs} epochs, Adam 1e-3, batch 16) unless the strategy "
             f"says otherwise, winner's final recipe {recipes(args)}; int8 accuracy by "
             f"LiteRT on the test split. Machine: {os.cpu_count()} cores x86_64 (not a Raspberry Pi). "
             f"Wall time: start of the study to the exported, verified model.", "",
             "| strategy | seeds | int8 test acc (mean +- sd) | wall time (mean) | candidates trained | "
             "peak worker RSS / private | reaches paper (+-0.5 pt) | time-to-paper-accuracy / paper's time |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        ratio = (f"**{row['time_ratio']:.3f}** (1/{1 / row['time_ratio']:.1f})" if row["time_ratio"] else
                 f"not reached (its wall time is {row['wall_ratio']:.2f}x paper's)" if row["wall_ratio"] else "-")
        lines.append(f"| {row['strategy']} | {row['seeds']} | {row['int8_test_accuracy']:.4f} +- "
                     f"{row['int8_test_accuracy_sd']:.4f} | {row['wall_seconds']:.0f} s | {row['trained']:.1f} | "
                     f"{row['peak_worker_rss_mib']:.0f} / {row['peak_worker_private_mib']:.0f} MiB | "
                     f"{'yes' if row['reaches_paper'] else 'no'} | {ratio} |")
    lines += verdict(runs, rows)
    lines += ["", "Per run:", "",
              "| strategy | seed | winner | int8 test acc | wall s (search + final) | trained (stopped early) "
              "| final stage |",
              "|---|---|---|---|---|---|---|"]
    for run in runs:
        lines.append(f"| {run['strategy']} | {run['seed']} | {run['winner']} | {run['int8_test_accuracy']:.4f} | "
                     f"{run['wall_seconds']:.0f} ({run['search_seconds']:.0f} + {run['final_seconds']:.0f}) | "
                     f"{run['trained']} ({run['stopped_early']}) | "
                     f"{'retrained' if run['retrained'] else 'exported as searched'} |")
    lines += ["", "Where the time goes (worker-seconds summed over every candidate and the final stage; "
              "with 2 workers these add up to about twice the wall time):", "",
              "| strategy | seed | TF import | build | epochs that traced or compiled | later epochs | "
              "health monitor | int8 conversion + test | epochs run (under XLA) | epochs/s per worker in the later |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        p = run["phases"]
        # Every training's first epoch, and the one that compiled XLA, are timed apart (older runs did not
        # count the trainings or the XLA switches).
        later = p["epochs_run"] - p.get("program_epochs", p.get("trainings", run["trained"]))
        lines.append(f"| {run['strategy']} | {run['seed']} | {p['tensorflow_import']:.1f} | {p['build']:.1f} | "
                     f"{p['first_epoch']:.1f} | {p['later_epochs']:.1f} | {p['health']:.1f} "
                     f"({p['health'] / max(1e-9, p['first_epoch'] + p['later_epochs']):.0%}) | {p['convert']:.1f} | "
                     f"{p['epochs_run']:.0f} ({p.get('xla_epochs', p['epochs_run']):.0f}) | "
                     f"{later / max(1e-9, p['later_epochs']):.1f} |")
    lines += ["", f"![anytime curves]({name}.png)", ""]
    text = "\n".join(lines) + "\n"
    (RESULTS / f"{name}.md").write_text(text)
    return text


def results_name(args) -> str:
    """Base name of this run's files in benchmarks/results/."""
    return f"strategies-{args.data}" + (f"-{args.suffix}" if args.suffix else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", choices=sorted(DATA), default="cwru")
    parser.add_argument("--target", default="STM32F030F4P6")
    parser.add_argument("--split", default="paper")
    parser.add_argument("--budget", default="10m", help="search budget of every strategy")
    parser.add_argument("--epochs", type=int, default=100, help="epochs per candidate (the method: 100)")
    parser.add_argument("--final-epochs", type=int,
                        help="final recipe epochs (default: each strategy's own recipe; the method's is 100)")
    parser.add_argument("--workers", default="2", help="workers per study, or auto")
    parser.add_argument("--seeds", default="0,1,2")
    # Compared with the method: budgeted as the method did, TFLite Micro counted by its tool (issue 37).
    parser.add_argument("--runtime", default="tflm", help="auto, c or tflm (default tflm, the method's)")
    parser.add_argument("--accounting", default="method", help="chip, arena or method (default method: the "
                                                               "method's tool, 64-bit arena rounded up to 512 B)")
    parser.add_argument("--baseline-seeds", type=int, help="run greedy/random/tpe on only the first N seeds")
    parser.add_argument("--strategies", default="paper,fast,greedy,random,tpe")
    parser.add_argument("--merge", action="store_true",
                        help="keep the runs of other strategies / seeds already in results/strategies-<data>.json")
    parser.add_argument("--rewrite", action="store_true",
                        help="only re-render the stored results (md, png) from results/strategies-<data>.json")
    parser.add_argument("--work", help="keep the searches (sweeps) in this folder, and resume them there when run "
                                       "again (default: a temporary folder)")
    parser.add_argument("--suffix", default="",
                        help="results go to strategies-<data>-<suffix>.* (e.g. another target)")
    args = parser.parse_args()
    path = DATA[args.data].partition(":")[2].partition("?")[0]
    if not Path(path).exists():
        print(f"{path} does not exist: nothing to benchmark")
        return 0
    strategies = [s for s in args.strategies.split(",") if s != "tpe" or optuna_available()]
    if "tpe" in args.strategies.split(",") and "tpe" not in strategies:
        print("optuna is not installed: skipping tpe (pip install 'tinynas[optuna]')", file=sys.stderr)
    args.strategies = ",".join(strategies)
    command = "python " + " ".join(shlex.quote(a) for a in ["benchmarks/strategies.py", *sys.argv[1:]])
    windows = load_windows(DATA[args.data])
    target = get_target(args.target)
    seeds = [int(s) for s in args.seeds.split(",")]
    runs: list[dict] = []
    # paper and fast interleaved seed by seed first (the comparison the acceptance rests on), then
    # the baselines, which use their whole budget whatever the machine's load.
    order = [(seed, s) for seed in seeds for s in strategies if s in ("paper", "fast")]
    baseline_seeds = seeds[:args.baseline_seeds] if args.baseline_seeds is not None else seeds
    order += [(seed, s) for seed in baseline_seeds for s in strategies if s not in ("paper", "fast")]
    if args.rewrite:
        args.merge, order = True, []
    previous = RESULTS / f"{results_name(args)}.json"
    if args.merge and previous.exists():
        stored = json.loads(previous.read_text())
        planned = {(strategy, seed) for seed, strategy in order}
        runs = [dict(run, command=run.get("command", stored["command"])) for run in stored["runs"]
                if (run["strategy"], run["seed"]) not in planned]
        args.strategies = ",".join(dict.fromkeys([*stored["args"]["strategies"].split(","), *strategies]))
        if args.rewrite:
            command = stored["command"]
            vars(args).update({key: value for key, value in stored["args"].items() if key not in ("merge", "rewrite")})
            target = get_target(args.target)
    def progress(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {args.data}: {line}", file=sys.stderr, flush=True)

    with contextlib.ExitStack() as stack:
        work = Path(args.work) if args.work else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for folder, strategy, seed, wall in run_sweeps(args, order, work, progress):
            runs.append(dict(run_from(folder, args, windows, target, strategy, seed, wall), command=command))
        write(args, windows, target, runs, command)
    print(write(args, windows, target, runs, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
