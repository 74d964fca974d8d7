"""Commands that search: search, demo, replay, and a look at the data first (data inspect)."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from tinynas.anomaly.choice import SCORERS
from tinynas.anomaly.section import read_section
from tinynas.anomaly.threshold import check_rate
from tinynas.cli.common import add_runtime_flag, add_target_flags
from tinynas.cost.budget import Budget
from tinynas.cost.runtime import RUNTIME_NAMES
from tinynas.cost.targets import resolve_target
from tinynas.data.preprocess import NORMALIZATIONS
from tinynas.data.splits import PROTOCOLS
from tinynas.errors import UsageError
from tinynas.folders import check_out_dir
from tinynas.modes import Task
from tinynas.options import (
    RANGES,
    check_budget,
    check_c_prefix,
    check_latency,
    check_range,
    check_seed,
    check_training,
    check_workers,
    parse_workers,
)
from tinynas.search import STRATEGIES, check_strategy
from tinynas.study.report import chip_time_line, time_line

log = logging.getLogger("tinynas")


def register(sub) -> None:
    """Add these commands to the `tinynas` parser's subcommands."""
    from tinynas.study.crossval import CV_BELOW_PER_CLASS, SELECTIONS  # the study package loads on use, not here

    search = sub.add_parser("search", help="search architectures for a data set and target, export the winner")
    search.add_argument("--data", required=True, help="data spec, e.g. synthetic:vibration or synthetic:emg")
    add_target_flags(search)
    add_runtime_flag(search)
    search.add_argument("--budget", default="30m", help="wall-time budget of the search, e.g. 90s, 30m, 2h")
    search.add_argument("--candidates", type=int, metavar="N",
                        help="end the search once N candidates have been trained (or at the budget, whichever "
                             "comes first): a bound a slow or busy machine cannot shorten, as it can a time budget")
    search.add_argument("--latency", metavar="TIME",
                        help="the most one inference may take on the target at its clock, e.g. 250ms (the "
                             "sensor's hop): candidates estimated slower (+25 %% headroom) are refused before "
                             "training (default: the target file's latency, else none)")
    search.add_argument("--strategy", default="paper", choices=list(STRATEGIES),
                        help="paper (the method), fast (budget frontier raced with the final recipe, no retraining), "
                             "greedy, random, or tpe (Optuna, optional extra)")
    search.add_argument("--out", required=True, help="output folder (journal, best.json, model, report)")
    search.add_argument("--resume", action="store_true", help="continue the search journaled in --out")
    search.add_argument("--seed", type=int, default=0, help="0 to 2^32-1")
    search.add_argument("--workers", default="auto",
                        help="candidates trained in parallel: auto (default: from the cores and the free memory, "
                             "said at the start) or a number up to this machine's cores")
    search.add_argument("--threads", type=int, default=1,
                        help="TensorFlow threads per worker (at most this machine's cores)")
    search.add_argument("--epochs", type=int, help="epochs per candidate (strategy default: paper 100)")
    search.add_argument("--batch-size", type=int)
    search.add_argument("--learning-rate", type=float)
    search.add_argument("--final-epochs", type=int,
                        help="epochs of the winner's final training (default: the strategy's recipe: 100 at a "
                             "constant lr 0.01, as the method; fast: 50 with the rate falling along a cosine)")
    search.add_argument("--ignore-data-checks", action="store_true",
                        help="search even if the data checks find a flat channel or mixed-up labels")
    search.add_argument("--split", default="auto", choices=PROTOCOLS,
                        help="train/val/test protocol (auto: segment for CWRU, session for ISL, group otherwise)")
    search.add_argument("--test-data", help="data spec of a separate test set (another day, person or machine) "
                                             "to measure the winner on, instead of a test split")
    search.add_argument("--augment", default="auto", metavar="HOW",
                        help="augmentation in the final recipe: auto (the data's sensor preset), none, armband, "
                             "vibration, or kinds such as gain=0.3,noise=0.1 (default: auto)")
    search.add_argument("--kernels", default="auto", metavar="SIZES",
                        help="kernel sizes the fast strategy races, e.g. 3,9 (default auto: the data's sensor preset)")
    search.add_argument("--normalize", default="none", choices=NORMALIZATIONS,
                        help="none (raw windows); channel: standardise each channel with the training "
                             "split's statistics; window: divide each window by its own RMS over all channels "
                             "(a re-worn armband's gain change; recorded in card.json, applied when serving and "
                             "by the generated model_prepare.c)")
    search.add_argument("--c-prefix", default="tinynas", metavar="NAME",
                        help="start of the generated C runtime's names (NAME_infer, NAME_INPUT_SIZE; default "
                             "tinynas): give each model of one firmware its own")
    search.add_argument("--task", default=str(Task.CLASSIFY), choices=[str(t) for t in Task],
                        help="classify (default: one class per state) or anomaly: a scorer learnt from normal "
                             "windows only, its threshold set for --false-alarm-rate (give fault windows only with "
                             "--test-data, to evaluate on)")
    search.add_argument("--false-alarm-rate", type=float, default=None, metavar="RATE",
                        help="with --task anomaly: the share of normal windows the threshold may flag (default 0.01)")
    search.add_argument("--scorer", default="auto", choices=SCORERS,
                        help="with --task anomaly: the family exported: auto (default: the int8 network or the "
                             "classical features + Gaussian, whichever flags more held-out synthetic anomalies at the "
                             "false-alarm rate; a tie goes to the cheaper), network or classical")
    search.add_argument("--selection", default="auto", choices=SELECTIONS,
                        help="how candidates are ranked: on the validation windows, by cross-validation over "
                             "recordings (each candidate trains once per fold), or auto (default: cross-validation "
                             f"when a class has fewer than {CV_BELOW_PER_CLASS} validation windows)")
    search.add_argument("--track-test", action="store_true",
                        help="also measure each trained candidate's float accuracy on the test windows, kept in the "
                             "journal for anytime plots (benchmarks); no strategy and no ranking sees it")
    search.add_argument("--json", action="store_true", help="print the model card as JSON on stdout")
    search.set_defaults(func=_cmd_search)

    demo = sub.add_parser("demo", help="a complete small search on built-in synthetic vibration data")
    demo.add_argument("--out", default="tinynas-demo", help="output folder (default: tinynas-demo)")
    demo.add_argument("--budget", default="5m")
    demo.add_argument("--candidates", type=int, metavar="N", help="end the search once N candidates have been trained")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--resume", action="store_true")
    demo.add_argument("--json", action="store_true")
    demo.set_defaults(func=_cmd_demo)

    replay = sub.add_parser("replay", help="retrain one recorded trial deterministically and compare it")
    replay.add_argument("out_dir", help="the search's output folder")
    replay.add_argument("--trial", type=int, required=True, help="trial number (see report.md)")
    replay.add_argument("--json", action="store_true")
    replay.set_defaults(func=_cmd_replay)

    data = sub.add_parser("data", help="look at a data set")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    inspect = data_sub.add_parser("inspect", help="classes, counts, shapes, rate, groups and split of a data spec")
    inspect.add_argument("spec", help="e.g. isl:/data/isl, cwru:/data/cwru?files=std10, synthetic:emg")
    inspect.add_argument("--split", default="auto", choices=PROTOCOLS)
    inspect.add_argument("--json", action="store_true")
    inspect.set_defaults(func=_cmd_data_inspect)


def _print_result(result, as_json: bool) -> None:
    card = result.card.to_dict()
    if as_json:
        print(json.dumps({"out_dir": str(result.out_dir), "winner": result.winner.architecture.to_dict(),
                          "name": result.winner.architecture.name(), **card}, indent=2))
        return
    # What the chip holds under the card's accounting, with the real .tflite's size where it is flashed.
    cost = result.card.cost()
    footprint = f"{RUNTIME_NAMES[cost.runtime]}: {cost.summary(result.card.flash_bytes)}"
    anomaly = read_section(card)
    if anomaly is not None:
        name = result.winner.architecture.name()
        if anomaly.classical is not None:  # the family rule chose the classical scorer: its own footprint
            held = anomaly.raw["family_choice"]["classical"]["cost"]
            footprint = (f"generated C: RAM {held['peak_ram_bytes'] / 1024:.1f} KiB, flash "
                         f"{held['flash_bytes'] / 1024:.1f} KiB, {held['macs']:,} MACs (the network finalist {name}: "
                         f"{footprint})")
            name = "features + Gaussian (classical)"
        print(f"{name}: anomaly scorer, threshold {anomaly.threshold:.3g} for "
              f"{anomaly.false_alarm_rate:.2%} false alarms ({anomaly.calibration_windows} "
              f"held-out normal windows); {footprint}; files in {result.out_dir}/")
        print(time_line(result.trials)[2:])
        return
    held = result.card.held_out()
    counted = ("" if held is None or held.unit != "recordings" else
               f" test recordings right by most of their {held.window_count} windows")
    interval = (f"({held.hits} of {held.windows}{counted}, 95% interval {held.interval[0]:.3f}-{held.interval[1]:.3f}; "
                if held is not None and held.windows else "(")
    print(f"{result.winner.architecture.name()}: int8 test accuracy {result.card.int8_test_accuracy:.3f} "
          + interval + f"float {card['float_test_accuracy']:.3f}); {footprint}; files in {result.out_dir}/")
    print(chip_time_line(result.card)[2:])
    print(time_line(result.trials)[2:])


CheckedSearch = tuple[int | str, float, Budget]
"""What `check_search_options` found: the workers, the time budget in seconds and the chip's budget (the target,
runtime, accounting and time per inference), built once and passed whole to the study."""


def check_search_options(args: argparse.Namespace, cores_here: bool = True) -> CheckedSearch:
    """Every option of a parsed `tinynas search` that can be checked without its data or its folder: the ranges of
    `tinynas.options`, the target (`resolve_target`), the time budget; one line (UsageError) at the first wrong one.

    `cores_here=False` (a sweep's cell that runs on another machine) checks the workers and threads as counts, not
    against this machine's cores. The search calls it before anything is read or written, and `tinynas sweep` for
    every cell before the first one runs."""
    from tinynas.augment import parse_augmentation, parse_kernels

    workers = parse_workers(args.workers)
    if cores_here:
        check_workers(workers, args.threads)
    else:
        check_range("--threads", args.threads, 1)
        if isinstance(workers, int):  # else "auto"
            check_range("--workers", workers, 1)
    check_seed(args.seed)
    check_training(args.epochs, args.batch_size, args.learning_rate, args.final_epochs)
    budget = check_budget(args.budget)
    RANGES["candidates"].check("--candidates", args.candidates)
    check_strategy(args.strategy)
    check_c_prefix(args.c_prefix)
    parse_augmentation(args.augment)  # its syntax; which preset "auto" means needs the data
    parse_kernels(args.kernels)
    if args.false_alarm_rate is not None:
        if args.task != Task.ANOMALY:
            raise UsageError("--false-alarm-rate sets an anomaly scorer's threshold: add --task anomaly (a classifier "
                             "has no threshold to set)")
        check_rate(args.false_alarm_rate)
    if args.scorer != "auto" and args.task != Task.ANOMALY:
        raise UsageError(f"--scorer {args.scorer} chooses an anomaly scorer's family: add --task anomaly")
    target = resolve_target(args.target, ram=args.ram, flash=args.flash, macs=args.macs)
    latency = check_latency(args.latency)
    # Built once, here at the door, and passed whole to the study; a target with no clock: one line, nothing read.
    return workers, budget, Budget.resolve(target, args.runtime, args.accounting, latency)


def _cmd_search(args: argparse.Namespace) -> int:
    from tinynas.data.spec import load_windows
    from tinynas.progress import Progress
    from tinynas.search import final_recipe
    from tinynas.study import Study
    from tinynas.trial import Fidelity

    # Every option is checked before data is loaded or --out is touched: a typo leaves nothing behind.
    workers, budget, chip = check_search_options(args)
    rate = {} if args.false_alarm_rate is None else {"false_alarm_rate": args.false_alarm_rate}  # else Study's own
    check_out_dir(args.out)
    windows = load_windows(args.data)
    fidelity = None
    if (args.epochs, args.batch_size, args.learning_rate) != (None, None, None):
        from tinynas.search import STRATEGIES

        base = STRATEGIES[args.strategy].default_fidelity
        fidelity = Fidelity(base.epochs if args.epochs is None else args.epochs,
                            base.batch_size if args.batch_size is None else args.batch_size,
                            base.learning_rate if args.learning_rate is None else args.learning_rate)
    # Not given: the strategy's own recipe (and on --resume the journal's, should it be another).
    final = None if args.final_epochs is None else final_recipe(args.strategy, args.final_epochs)
    test_windows = load_windows(args.test_data) if args.test_data else None
    study = Study(args.out, windows, chip, strategy=args.strategy, budget_seconds=budget,
                  seed=args.seed, fidelity=fidelity, final_fidelity=final, workers=workers,
                  threads_per_worker=args.threads, resume=args.resume, data_spec=args.data, progress=Progress(),
                  split=args.split, check_data=not args.ignore_data_checks, normalize=args.normalize,
                  test_windows=test_windows, test_spec=args.test_data or "", augment=args.augment,
                  kernels=args.kernels, c_prefix=args.c_prefix,
                  task=args.task, selection=args.selection, track_test=args.track_test, scorer=args.scorer,
                  max_candidates=args.candidates, **rate)
    _print_result(study.run(), args.json)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from tinynas.demo import run_demo
    from tinynas.progress import Progress

    budget = check_budget(args.budget)
    RANGES["candidates"].check("--candidates", args.candidates)
    check_seed(args.seed)
    check_out_dir(args.out)
    result = run_demo(Path(args.out), budget_seconds=budget, seed=args.seed,
                      resume=args.resume, progress=Progress(), max_candidates=args.candidates)
    _print_result(result, args.json)
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    from tinynas.study.replay import replay_trial

    check_range("--trial", args.trial, 0)
    replay = replay_trial(args.out_dir, args.trial)
    if args.json:
        print(json.dumps({"trial": args.trial, "reproduced": replay.reproduced, "same_outcome": replay.same_outcome,
                          "max_val_loss_difference": replay.max_difference,
                          "recorded": {"state": replay.trial.state.value, "error": replay.trial.error,
                                       "val_loss": list(replay.trial.val_loss),
                                       "diagnosis": replay.trial.diagnosis},
                          "replayed": {"ok": replay.result.ok, "error": replay.result.error,
                                       "val_loss": replay.result.val_loss, "diagnosis": replay.result.diagnosis}},
                         indent=2))
    else:
        print(replay.summary())
    return 0 if replay.reproduced else 1


def _cmd_data_inspect(args: argparse.Namespace) -> int:
    from tinynas.data.checks import check_windows
    from tinynas.data.inspect import describe_windows, format_summary
    from tinynas.data.spec import load_windows
    from tinynas.data.splits import make_split
    from tinynas.data.windows import DataError

    windows = load_windows(args.spec)
    summary = describe_windows(windows)
    summary["findings"] = [{"kind": f.kind, "severity": f.severity, "message": f.message}
                           for f in check_windows(windows)]
    try:
        summary["split"] = make_split(windows, args.split).describe()
    except DataError as exc:  # inspecting must work even when the data cannot be split yet
        summary["split"] = {"error": str(exc)}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(format_summary(args.spec, summary))
    return 0

