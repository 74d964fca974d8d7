"""Commands about architectures and exported models: targets, cost, measure, evaluate, adapt, recalibrate."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from firmware_bridge.safe_read import SETTINGS_FILE_BYTES, read_regular_text
from tinynas.card import task_of
from tinynas.cli.common import add_runtime_flag, add_target_flags
from tinynas.cost.budget import Budget, tflm_fits
from tinynas.cost.c_runtime import estimate_c
from tinynas.cost.energy import InferenceOnChip, on_chip
from tinynas.cost.estimate import estimate, estimate_arena, macs, method_ram_bytes
from tinynas.cost.runtime import ACCOUNTING_NAMES, RUNTIME_NAMES, resolve_runtime
from tinynas.cost.targets import builtin_targets, resolve_target
from tinynas.errors import UsageError
from tinynas.modes import Accounting, Runtime, Task
from tinynas.options import (
    check_latency,
    check_range,
    check_seed,
)
from tinynas.progress import Progress  # logging only: no cost to `tinynas --help`
from tinynas.space import Architecture, SpecError
from tinynas.units import kib

log = logging.getLogger("tinynas")

NOT_ACCEPTED = 3
"""`recalibrate`'s exit code when the new model was checked and not accepted (nothing written): not an
error of the input (2) and not a bug (1), so a script can tell the three apart."""


def register(sub) -> None:
    """Add these commands to the `tinynas` parser's subcommands."""
    targets = sub.add_parser("targets", help="list built-in target microcontrollers")
    targets.add_argument("--json", action="store_true")
    targets.set_defaults(func=_cmd_targets)

    cost = sub.add_parser("cost", help="analytic MACs, params, flash and arena of an architecture")
    cost.add_argument("--arch", help="architecture JSON file (instead of the flags below)")
    cost.add_argument("--input", help="window shape, samples x channels, e.g. 400x8")
    cost.add_argument("--classes", type=int)
    cost.add_argument("--k", type=int, help="stem filters")
    cost.add_argument("--c", type=int, help="cells")
    cost.add_argument("--kernel", type=int, default=3)
    cost.add_argument("--growth", default="half", help="half (n + ceil(n/2)), double or none")
    cost.add_argument("--channel-multiple", type=int, default=1, help="round channels up to a multiple")
    cost.add_argument("--abi", default="ilp32", choices=["ilp32", "lp64"],
                      help="TFLM struct sizes: ilp32 = 32-bit MCU (default), lp64 = 64-bit host")
    add_runtime_flag(cost)
    add_target_flags(cost)
    cost.add_argument("--latency", metavar="TIME",
                      help="the most one inference may take at the target's clock, e.g. 250ms (the stream's hop): "
                           "said whether the estimate keeps it, and the share of it one inference takes")
    cost.add_argument("--json", action="store_true")
    cost.set_defaults(func=_cmd_cost)

    measure = sub.add_parser("measure", help="measure an exported .tflite (flash, TFLite Micro arena)")
    measure.add_argument("model", help="path to a .tflite file")
    measure.add_argument("--json", action="store_true")
    measure.set_defaults(func=_cmd_measure)

    evaluation = sub.add_parser("evaluate", help="run an exported int8 model on every window of a data set")
    evaluation.add_argument("model", help="export folder of a search (or its model.tflite, card.json beside it)")
    evaluation.add_argument("--data", required=True, help="data spec, e.g. folder:recordings/today?window=400")
    evaluation.add_argument("--stream", metavar="SESSION",
                            help="also judge it as serving answers it, on the stream of a recorded gesture session "
                                 "(a window every --hop over every sign and the idle arm between; signs recognised, "
                                 "sign and idle windows right, unknown share, latency)")
    evaluation.add_argument("--hop", default="250ms", metavar="TIME", help="serving's hop, with --stream (250ms)")
    evaluation.add_argument("--smoothing", type=int, default=3,
                            help="with --stream, for a card that chose none: majority over this many answers (3)")
    evaluation.add_argument("--json", action="store_true")
    evaluation.set_defaults(func=_cmd_evaluate)

    adapting = sub.add_parser("adapt", help="adapt a model to a new session or condition from unlabelled windows")
    adapting.add_argument("model", help="a model folder (a search's --out, or one adapt/recalibrate wrote)")
    adapting.add_argument("--data", required=True, help="windows of the new session/condition (labels not used)")
    adapting.add_argument("--out", required=True, help="new folder for the adapted model (the old one is kept)")
    adapting.add_argument("--only", help="batchnorm or normalization (default: both, where the model has them)")
    adapting.add_argument("--condition", help="a classical anomaly scorer: keep its earlier operating conditions "
                                              "and add this one under this name (e.g. \"1 hp\"); without it the "
                                              "new condition replaces them")
    adapting.add_argument("--json", action="store_true")
    adapting.set_defaults(func=_cmd_adapt)

    recal = sub.add_parser("recalibrate", help="fine-tune a model on a few labelled windows of a new session")
    recal.add_argument("model", help="a model folder (a search's --out, or one adapt/recalibrate wrote)")
    recal.add_argument("--data", required=True, help="labelled windows of the new session (e.g. one repetition "
                                                     "per class)")
    recal.add_argument("--out", required=True, help="new folder for the recalibrated model (the old one is kept)")
    recal.add_argument("--verify", help="labelled windows to check on (default: with two recordings per class or "
                                        "more, cross-validation over them chooses the recipe and checks it, and "
                                        "the model is trained on all; with one, nothing is held out)")
    recal.add_argument("--epochs", type=int, help="fine-tuning epochs (default 30)")
    recal.add_argument("--learning-rate", type=float, help="fine-tuning learning rate (default 0.001)")
    recal.add_argument("--seed", type=int, default=0)
    recal.add_argument("--allow-missing-classes", action="store_true",
                       help="accept data without some classes (replayed windows keep them)")
    recal.add_argument("--json", action="store_true")
    recal.set_defaults(func=_cmd_recalibrate)


def _parse_input(text: str) -> tuple[int, int]:
    try:
        length, channels = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise SpecError(f"--input must look like 400x8 (samples x channels), got {text!r}") from None
    return length, channels


REFERENCE = Architecture(400, 8, 4, k=17, c=3)
"""The network `targets` times each chip with: gestures4's first served winner (1.08 M MACs)."""
REFERENCE_HOP_SECONDS = 0.25
"""The service's hop: one prediction every 0.25 s."""


def _as_dict(chip: InferenceOnChip | None) -> dict:
    return chip.to_dict() if chip is not None else {}


def _cmd_targets(args: argparse.Namespace) -> int:
    targets = builtin_targets()
    choices = {key: resolve_runtime("auto", target) for key, target in targets.items()}
    tflm = {key: tflm_fits(target) for key, target in targets.items()}
    timed = {key: on_chip(estimate(REFERENCE, runtime="c", core=target.core).cycles, target, REFERENCE_HOP_SECONDS)
             for key, target in targets.items()}
    if args.json:
        print(json.dumps({key: {**t.to_dict(), "auto_runtime": choices[key].to_dict(),
                                "tflite_micro": {"fits": tflm[key] is None, "why_not": tflm[key]},
                                "reference_network": {"architecture": REFERENCE.to_dict(), "name": REFERENCE.name(),
                                                      **_as_dict(timed[key])}}
                          for key, t in targets.items()}, indent=2))
        return 0
    print(f"{'target':<22}{'RAM':>11}{'flash':>12}{'MAC budget':>14}  {'core':<12}{'MHz':>5}{'uA/MHz':>8}  "
          f"{'ref. ms':>8}{'ref. uJ':>9}  {'auto':<6}TFLite Micro")
    for key, target in targets.items():
        chip = timed[key]
        current = f"{target.run_ua_per_mhz:g}" if target.run_ua_per_mhz is not None else "?"
        ms = f"{1000 * chip.seconds:,.0f}" if chip else "?"
        uj = f"{chip.energy_uj:,.0f}" if chip and chip.energy_uj is not None else "?"
        print(f"{target.name:<22}{kib(target.ram_bytes):>11}{kib(target.flash_bytes):>12}"
              f"{target.mac_budget:>14,}  {target.core:<12}{target.clock_mhz or 0:>5g}{current:>8}  {ms:>8}{uj:>9}  "
              f"{choices[key].runtime:<6}{'fits' if tflm[key] is None else 'cannot: ' + str(tflm[key])}")
    print(f"\nMAC budget = CoreMark x 10^4. MHz, uA/MHz: the clock and the run current, each from the target's "
          f"datasheet (`tinynas targets --json`: datasheet; ? where none is published). ref. ms, ref. uJ: one "
          f"inference of {REFERENCE.name()} on 400x8 ({macs(REFERENCE) / 1e6:.2f} M MACs, the generated C runtime) "
          f"at that clock, estimated (`tinynas cost --target NAME` for yours). auto: what --runtime auto (the "
          f"default) runs, tinynas's C runtime wherever the target can run it (every built-in target can), since it "
          f"fits more network than TFLite Micro. TFLite Micro: whether the chip can hold its interpreter (code, "
          f"static RAM and stack, measured on Arm builds) beside a model at all. Add your own with --target "
          f"FILE.toml or --ram/--flash/--macs.")
    return 0


def _architecture_from_args(args: argparse.Namespace) -> Architecture:
    if args.arch:
        path = Path(args.arch)
        try:
            text = read_regular_text(path, SETTINGS_FILE_BYTES, "architecture file")
        except OSError as exc:
            raise SpecError(f"cannot read architecture file {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise SpecError(f"architecture file {path} is not text (expected JSON, as `tinynas cost --json` "
                            "prints under 'architecture')") from None
        try:
            return Architecture.from_json(text)
        except SpecError as exc:
            raise SpecError(f"architecture file {path}: {exc}") from None
    missing = [flag for flag, value in (("--input", args.input), ("--classes", args.classes),
                                        ("--k", args.k), ("--c", args.c)) if value is None]
    if missing:
        raise SpecError(f"give --arch FILE.json or all of --input, --classes, --k, --c (missing {', '.join(missing)})")
    length, channels = _parse_input(args.input)
    return Architecture(length, channels, args.classes, args.k, args.c, kernel_size=args.kernel,
                        growth=args.growth, channel_multiple=args.channel_multiple)


def _optional_target(args: argparse.Namespace):
    if args.target is None and args.ram is None and args.flash is None and args.macs is None:
        return None
    return resolve_target(args.target, ram=args.ram, flash=args.flash, macs=args.macs)


def _cmd_cost(args: argparse.Namespace) -> int:
    arch = _architecture_from_args(args)
    target = _optional_target(args)
    latency = check_latency(args.latency)
    if latency is not None and target is None:
        raise UsageError("--latency is time at a target's clock: give --target NAME too")
    choice = resolve_runtime(args.runtime, target, args.accounting)
    core = target.core if target is not None else ""
    if choice.runtime == Runtime.C and args.abi != "ilp32":
        raise UsageError(f"the C runtime is budgeted for 32-bit microcontrollers (abi ilp32) only, not {args.abi}"
                         + (" (--runtime auto picked it: give --runtime tflm for the host arena)"
                            if args.runtime == "auto" else ""))
    cost = estimate(arch, args.abi, runtime=choice.runtime, accounting=choice.accounting, core=core)
    host = estimate(arch, "lp64", accounting="arena")
    result = {"architecture": arch.to_dict(), "name": arch.name(), **cost.to_dict(),
              "runtime_choice": choice.to_dict(), "filters": list(arch.filters), "host64": {
                  "arena_head_bytes": host.arena_head_bytes, "arena_tail_bytes": host.arena_tail_bytes,
                  "arena_bytes": host.arena_bytes}, "method_ram_bytes": method_ram_bytes(arch)}
    if choice.runtime == Runtime.C:
        result["c_runtime"] = estimate_c(arch).to_dict()
    chip = None
    if target is not None:
        budget = Budget.resolve(target, choice.runtime, choice.accounting, latency)
        result["target"] = target.to_dict()
        result["violations"] = budget.check(cost)
        result["fits"] = not result["violations"]
        latency = budget.latency_seconds  # the target file's when --latency is not given
        chip = on_chip(cost.cycles, target, latency)
        result["on_chip"] = chip.to_dict() if chip is not None else None
        result["latency_seconds"] = latency
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{arch.name()} on {arch.input_length}x{arch.input_channels}, {arch.classes} classes, "
          f"filters {list(arch.filters)}")
    print(f"  runtime     {RUNTIME_NAMES[choice.runtime]} ({choice.reason}); counted as "
          f"{ACCOUNTING_NAMES[cost.accounting]}")
    print(f"  MACs        {cost.macs:,}")
    print(f"  params      {cost.params:,}")
    if choice.runtime == Runtime.C:
        c = estimate_c(arch)
        print(f"  flash       {cost.flash_bytes:,} B ({kib(cost.flash_bytes)}) C runtime: "
              f"tables {c.tables_bytes:,} + code {c.code_bytes:,}")
        print(f"  peak RAM    {cost.peak_ram_bytes:,} B ({kib(cost.peak_ram_bytes)}) C runtime on {cost.abi}: "
              f"arena {c.arena_bytes:,} + input/output {c.io_bytes:,} + stack {c.stack_bytes:,}")
        tflm = estimate(arch, args.abi, core=core)
        print(f"  (TFLite Micro for comparison, its whole footprint: RAM {tflm.peak_ram_bytes:,} B, "
              f"flash {tflm.flash_bytes:,} B)")
    else:
        print(f"  flash       {cost.flash_bytes:,} B ({kib(cost.flash_bytes)}) {cost.flash_words()}")
        where = "" if cost.accounting == Accounting.METHOD else f" on {cost.abi},"  # the method's figure is the host's
        print(f"  peak RAM    {cost.peak_ram_bytes:,} B ({kib(cost.peak_ram_bytes)}){where} "
              f"{ACCOUNTING_NAMES[cost.accounting]}")
        reserved = estimate_arena(arch).required_bytes if args.abi == "ilp32" else cost.arena_bytes
        print(f"    arena       {reserved:,} B: head {cost.arena_head_bytes:,} + tail {cost.arena_tail_bytes:,} "
              f"(TFLite Micro, {cost.abi})")
        if cost.accounting == Accounting.CHIP and cost.abi == "ilp32":
            print(f"    interpreter {cost.interpreter_ram_bytes:,} B of static RAM (.data + .bss: interpreter, "
                  f"resolver, kernels)")
            print(f"    stack       {cost.stack_bytes:,} B (AllocateTensors and Invoke); {cost.basis}")
        print(f"  (64-bit host arena, what `tinynas measure` sees: {host.arena_bytes:,} B; the method's accounting, "
              f"that rounded up to 512 B: {method_ram_bytes(arch):,} B)")
    if cost.cycles:
        print(f"  time        {cost.instructions:,} instructions, {cost.cycles:,} cycles per inference "
              f"(estimates: {cost.time_basis})")
    else:
        print(f"  time        not estimated: {cost.time_basis}")
    if target is not None:
        if chip is not None:
            print(f"  on {target.name}: {chip.words()}")
            print(f"    {target.energy_words()}")
        elif cost.cycles:
            print(f"  on {target.name}: no clock in its file, so no time (add clock_mhz = <MHz>)")
        verdict = "fits" if result["fits"] else "does NOT fit: " + "; ".join(result["violations"])
        print(f"  target {target.name}: {verdict}")
    return 0


def _cmd_measure(args: argparse.Namespace) -> int:
    from tinynas.deploy.measure import measure_model

    result = measure_model(args.model)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(f"{args.model}")
    print(f"  flash  {result.flash_bytes:,} B ({kib(result.flash_bytes)})")
    if result.arena_bytes is None:
        print(f"  arena  {result.arena_source}")
    else:
        print(f"  arena  {result.arena_bytes:,} B ({kib(result.arena_bytes)}): head {result.arena_head_bytes:,}"
              f" + tail {result.arena_tail_bytes:,} (TFLite Micro, this 64-bit host)")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from tinynas.data.spec import load_windows
    from tinynas.deploy.evaluate import drew_it, evaluate, load_model, model_files, plot_confusion
    from tinynas.deploy.stream import judge_session

    tflite, card = model_files(args.model)  # a missing model, a bad card or a damaged .tflite is reported
    load_model(tflite)                      # before the data is loaded
    if task_of(card) == Task.ANOMALY:
        return _evaluate_scorer(args, tflite, card)
    hop = check_latency(args.hop, "--hop") if args.stream else None
    check_range("--smoothing", args.smoothing, 1, 100)
    result = evaluate(tflite, load_windows(args.data))
    stream = judge_session(tflite, card, args.stream, hop, args.smoothing) if args.stream else None
    picture = None
    png = tflite.parent / "confusion.png"
    if not drew_it(png):  # a file of the user's own by that name stays as it is
        print(f"tinynas: note: {png} is not a confusion matrix tinynas drew: left as it is, no picture written",
              file=sys.stderr)
    else:
        try:
            picture = str(plot_confusion(result, png))
        except OSError as exc:  # a read-only model folder (a deployed model) must not lose the figures
            print(f"tinynas: could not write {png}: {exc.strerror}", file=sys.stderr)
    if args.json:
        print(json.dumps({**result.to_dict(), "data": args.data, "confusion_png": picture,
                          **({"stream": stream.to_dict(), "stream_session": args.stream} if stream else {})},
                         indent=2))
        return 0
    print(result.text())
    if picture:
        print(f"  confusion matrix: {picture}")
    if stream is not None:
        print(f"  {stream.words()} ({args.stream}, a window every {1000 * (hop or 0):g} ms, {stream.smoothing})")
        for name, counts in stream.per_class.items():
            print(f"    {name}: {counts['recognised']} of {counts['signs']} signs recognised, {counts['right']} of "
                  f"{counts['windows']} sign windows right")
    return 0



def _evaluate_scorer(args: argparse.Namespace, tflite, card: dict) -> int:
    from tinynas.anomaly.evaluation import evaluate_scorer, plot_scores
    from tinynas.anomaly.section import read_section
    from tinynas.data.spec import load_windows
    from tinynas.deploy.evaluate import PNG_MAKER, drew_it

    read_section(card)  # a damaged anomaly section is reported before the data is loaded
    result = evaluate_scorer(tflite, card, load_windows(args.data))
    picture = None
    png = tflite.parent / "scores.png"
    if not drew_it(png):
        print(f"tinynas: note: {png} is not a score plot tinynas drew: left as it is, no picture written",
              file=sys.stderr)
    else:
        try:
            plot_scores(result, png, PNG_MAKER)
            picture = str(png)
        except OSError as exc:
            print(f"tinynas: could not write {png}: {exc.strerror}", file=sys.stderr)
    if args.json:
        print(json.dumps({**result.to_dict(), "data": args.data, "scores_png": picture}, indent=2))
        return 0
    print(result.text())
    if picture:
        print(f"  scores over time: {picture}")
    return 0


def _cmd_adapt(args: argparse.Namespace) -> int:
    from tinynas.adaptation.adapt import PARTS, adapt, check_condition_name
    from tinynas.data.spec import load_windows
    from tinynas.deploy.modeldir import ModelDir, check_new_folder

    parts = PARTS if args.only is None else tuple(part.strip() for part in args.only.split(",") if part.strip())
    if args.condition is not None:  # the cheap refusal first: an option, before any file is read
        check_condition_name(args.condition)
    source = ModelDir.open(args.model)  # a missing or old model is reported before the data is loaded
    check_new_folder(args.out, source.path)
    result = adapt(source.path, load_windows(args.data), args.out, spec=args.data, parts=parts,
                   progress=Progress().event, condition=args.condition)
    if args.json:
        entry = result.card["history"][-1]
        print(json.dumps({"out": str(result.out_dir), **entry}, indent=2))
    else:
        print(result.text())
    return 0


def _cmd_recalibrate(args: argparse.Namespace) -> int:
    from tinynas.adaptation.recalibrate import Recipe, recalibrate
    from tinynas.data.spec import load_windows
    from tinynas.deploy.modeldir import ModelDir, check_new_folder

    check_seed(args.seed)
    recipe = Recipe(**{key: value for key, value in (("epochs", args.epochs), ("learning_rate", args.learning_rate))
                       if value is not None})
    source = ModelDir.open(args.model)
    check_new_folder(args.out, source.path)
    verify = load_windows(args.verify) if args.verify else None
    result = recalibrate(source.path, load_windows(args.data), args.out, spec=args.data, verify=verify,
                         verify_spec=args.verify or "", recipe=recipe, seed=args.seed,
                         allow_missing=args.allow_missing_classes, progress=Progress().event)
    if args.json:
        print(json.dumps({"accepted": result.accepted, "reason": result.reason,
                          "out": str(result.out_dir) if result.out_dir else None, "seconds": round(result.seconds, 1),
                          "verify_int8_accuracy": {"before": result.verify_before, "after": result.verify_after},
                          "original_test_int8_accuracy": {"before": result.test_before, "after": result.test_after}},
                         indent=2))
    else:
        print(result.text())
    return 0 if result.accepted else NOT_ACCEPTED

