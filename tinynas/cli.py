"""`tinynas ...`: a thin command-line face over the library."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from tinynas import __version__
from tinynas.cost.estimate import estimate
from tinynas.cost.targets import builtin_targets, kib, resolve_target
from tinynas.data.preprocess import NORMALIZATIONS
from tinynas.data.splits import PROTOCOLS
from tinynas.errors import crash_log, user_message
from tinynas.interrupts import sigterm_as_interrupt
from tinynas.options import (
    check_budget,
    check_out_dir,
    check_positive,
    check_probability,
    check_range,
    check_seed,
    check_strategy,
    check_training,
    check_workers,
)
from tinynas.space import Architecture, SpecError

log = logging.getLogger("tinynas")


class _Parser(argparse.ArgumentParser):
    """argparse with its own errors (unknown option, missing value, not a number) as one line too."""

    def error(self, message: str) -> None:  # argparse's default prints the whole usage block
        text = " ".join(message.split())
        self.exit(2, f"tinynas: error: {text} (see `{self.prog} --help`)\n")


def _parse_input(text: str) -> tuple[int, int]:
    try:
        length, channels = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise SpecError(f"--input must look like 400x8 (samples x channels), got {text!r}") from None
    return length, channels


def _cmd_targets(args: argparse.Namespace) -> int:
    targets = builtin_targets()
    if args.json:
        print(json.dumps({key: t.to_dict() for key, t in targets.items()}, indent=2))
        return 0
    print(f"{'target':<22}{'RAM':>11}{'flash':>12}{'MAC budget':>14}  core")
    for target in targets.values():
        print(f"{target.name:<22}{kib(target.ram_bytes):>11}{kib(target.flash_bytes):>12}"
              f"{target.mac_budget:>14,}  {target.core}")
    print("\nMAC budget = CoreMark x 10^4. Add your own with --target FILE.toml or --ram/--flash/--macs.")
    return 0


def _architecture_from_args(args: argparse.Namespace) -> Architecture:
    if args.arch:
        path = Path(args.arch)
        try:
            text = path.read_text(encoding="utf-8")
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
    cost = estimate(arch, args.abi)
    host = estimate(arch, "lp64")
    target = _optional_target(args)
    result = {"architecture": arch.to_dict(), "name": arch.name(), **cost.to_dict(),
              "filters": list(arch.filters), "host64": {
                  "arena_head_bytes": host.arena_head_bytes, "arena_tail_bytes": host.arena_tail_bytes,
                  "arena_bytes": host.arena_bytes}}
    if target is not None:
        result["target"] = target.to_dict()
        result["violations"] = cost.violations(target)
        result["fits"] = not result["violations"]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{arch.name()} on {arch.input_length}x{arch.input_channels}, {arch.classes} classes, "
          f"filters {list(arch.filters)}")
    print(f"  MACs        {cost.macs:,}")
    print(f"  params      {cost.params:,}")
    print(f"  flash       {cost.flash_bytes:,} B ({kib(cost.flash_bytes)}) int8 .tflite")
    print(f"  peak RAM    {cost.peak_ram_bytes:,} B ({kib(cost.peak_ram_bytes)}) TFLM arena on {cost.abi}: "
          f"head {cost.arena_head_bytes:,} + tail {cost.arena_tail_bytes:,}")
    print(f"  (64-bit host arena, what `tinynas measure` sees: {host.arena_bytes:,} B)")
    if target is not None:
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


def _print_result(result, as_json: bool) -> None:
    card = result.card.to_dict()
    if as_json:
        print(json.dumps({"out_dir": str(result.out_dir), "winner": result.winner.architecture.to_dict(),
                          "name": result.winner.architecture.name(), **card}, indent=2))
        return
    print(f"{result.winner.architecture.name()}: int8 test accuracy {card['int8_test_accuracy']:.3f} "
          f"(float {card['float_test_accuracy']:.3f}); flash {kib(card['flash_bytes'])}, "
          f"RAM {kib(card['cost_estimate']['peak_ram_bytes'])}; files in {result.out_dir}/")


def _cmd_search(args: argparse.Namespace) -> int:
    from tinynas.augment import parse_augmentation, parse_kernels
    from tinynas.data.spec import load_windows
    from tinynas.progress import Progress
    from tinynas.study import Study
    from tinynas.trial import Fidelity

    # Every option is checked before data is loaded or --out is touched: a typo leaves nothing behind.
    check_workers(args.workers, args.threads)
    check_seed(args.seed)
    check_training(args.epochs, args.batch_size, args.learning_rate, args.final_epochs)
    budget = check_budget(args.budget)
    check_strategy(args.strategy)
    parse_augmentation(args.augment)  # its syntax; which preset "auto" means needs the data
    parse_kernels(args.kernels)
    target = resolve_target(args.target, ram=args.ram, flash=args.flash, macs=args.macs)
    check_out_dir(args.out)
    windows = load_windows(args.data)
    fidelity = None
    if (args.epochs, args.batch_size, args.learning_rate) != (None, None, None):
        from tinynas.search import STRATEGIES

        base = STRATEGIES[args.strategy].default_fidelity
        fidelity = Fidelity(base.epochs if args.epochs is None else args.epochs,
                            base.batch_size if args.batch_size is None else args.batch_size,
                            base.learning_rate if args.learning_rate is None else args.learning_rate)
    final = Fidelity(args.final_epochs, 16, 0.01)
    test_windows = load_windows(args.test_data) if args.test_data else None
    study = Study(args.out, windows, target, strategy=args.strategy, budget_seconds=budget,
                  seed=args.seed, fidelity=fidelity, final_fidelity=final, workers=args.workers,
                  threads_per_worker=args.threads, resume=args.resume, data_spec=args.data, progress=Progress(),
                  split=args.split, check_data=not args.ignore_data_checks, normalize=args.normalize,
                  test_windows=test_windows, test_spec=args.test_data or "", augment=args.augment,
                  kernels=args.kernels)
    _print_result(study.run(), args.json)
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from tinynas.data.spec import load_windows
    from tinynas.deploy.evaluate import evaluate, load_model, model_files, plot_confusion

    tflite, _ = model_files(args.model)  # a missing model, a bad card or a damaged .tflite is reported
    load_model(tflite)                   # before the data is loaded
    result = evaluate(tflite, load_windows(args.data))
    try:
        picture = str(plot_confusion(result, tflite.parent / "confusion.png"))
    except OSError as exc:  # a read-only model folder (a deployed model) must not lose the figures
        print(f"tinynas: could not write {tflite.parent / 'confusion.png'}: {exc.strerror}", file=sys.stderr)
        picture = None
    if args.json:
        print(json.dumps({**result.to_dict(), "data": args.data, "confusion_png": picture}, indent=2))
        return 0
    print(result.text())
    if picture:
        print(f"  confusion matrix: {picture}")
    return 0


def _cmd_adapt(args: argparse.Namespace) -> int:
    from tinynas.adaptation.adapt import PARTS, adapt
    from tinynas.data.spec import load_windows
    from tinynas.deploy.modeldir import ModelDir, check_new_folder
    from tinynas.progress import Progress

    parts = tuple(part.strip() for part in args.only.split(",")) if args.only else PARTS
    source = ModelDir.open(args.model)  # a missing or old model is reported before the data is loaded
    check_new_folder(args.out, source.path)
    result = adapt(source.path, load_windows(args.data), args.out, spec=args.data, parts=parts,
                   progress=Progress().event)
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
    from tinynas.progress import Progress

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
    return 0 if result.accepted else 1


def _cmd_replay(args: argparse.Namespace) -> int:
    from tinynas.study.replay import replay_trial

    check_range("--trial", args.trial, 0)
    replay = replay_trial(args.out_dir, args.trial)
    if args.json:
        print(json.dumps({"trial": args.trial, "reproduced": replay.reproduced, "same_outcome": replay.same_outcome,
                          "max_val_loss_difference": replay.max_difference,
                          "recorded": {"state": replay.trial.state.value, "error": replay.trial.error,
                                       "val_loss": list(replay.trial.val_loss),
                                       "diagnosis": replay.trial.details.get("diagnosis", "")},
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


def _sample_format(values) -> str:
    import numpy as np

    if np.all(np.mod(values, 1) == 0):
        if values.min() >= -128 and values.max() <= 127:
            return "int8"
        if values.min() >= -32768 and values.max() <= 32767:
            return "int16"
    return "float32"


def _cmd_simulate(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from firmware_bridge.protocol import Hello
    from firmware_bridge.simulator import ArraySource, Faults, Simulator
    from tinynas.data.spec import load_windows

    check_positive("--speed", args.speed, " (1 is the true sample rate)")
    check_probability("--drop", args.drop)
    check_probability("--flip", args.flip)
    if args.unplug_every:
        check_positive("--unplug-every", args.unplug_every, " (seconds; 0 never unplugs)")
    windows = load_windows(args.source)
    fmt = _sample_format(windows.x)
    stream = windows.x.reshape(-1, windows.channels).astype({"int8": np.int8, "int16": np.int16,
                                                              "float32": np.float32}[fmt])
    hello = Hello(args.device_id, "sim-1", windows.channels, windows.sample_rate_hz, fmt)
    faults = Faults(drop_byte_probability=args.drop, flip_bit_probability=args.flip, seed=0)
    port = Path(args.port) if args.port else None
    if port is not None and not port.parent.is_dir():  # a mistyped --port must not create folders
        from firmware_bridge.link import LinkError

        raise LinkError(f"cannot create the port {port}: {port.parent} is not a folder")
    with Simulator(ArraySource(stream), hello, faults=faults, speed=args.speed,
                   port_dir=port.parent if port else None,
                   **({"port_name": port.name} if port else {})) as simulator:
        print(f"simulating {args.source}: {windows.channels} x {fmt} at {windows.sample_rate_hz:g} Hz "
              f"on {simulator.port} (Ctrl-C to stop)", flush=True)
        next_unplug = time.monotonic() + args.unplug_every if args.unplug_every else None
        while True:
            time.sleep(0.2)
            if next_unplug and time.monotonic() >= next_unplug:
                simulator.unplug(1.0)
                next_unplug = time.monotonic() + args.unplug_every


def _cmd_collect(args: argparse.Namespace) -> int:
    from firmware_bridge.guide import GuidedCollection, Prompter, TerminalPrompter, load_plan
    from firmware_bridge.link import Link
    from firmware_bridge.recorder import Recorder, RecordingThread

    check_range("--baud", args.baud, 1, hint=" (e.g. 1000000)")
    plan = load_plan(args.plan)
    prompter = Prompter() if args.headless or not sys.stdout.isatty() else TerminalPrompter()
    with Link(args.port, baudrate=args.baud).open() as link:
        hello = link.wait_hello(10)
        with Recorder(args.out, hello, user=args.user, labels=plan.classes, plan=plan.to_dict()) as recorder:
            thread = RecordingThread(link, recorder)
            thread.start()
            try:
                result = GuidedCollection(recorder, plan, prompter).run()
            finally:
                thread.stop()
    print(f"recorded {sum(result.accepted.values())} windows ({result.rejected} rejected, {result.redone} redone) "
          f"into {args.out}; link: {link.counters.to_dict()}")
    return 0


def _service_config(args: argparse.Namespace):
    from tinynas.service.config import load_config

    return load_config(args.config)


def _cmd_service_run(args: argparse.Namespace) -> int:
    from tinynas.service.runner import Service

    Service(_service_config(args)).run()
    return 0


def _cmd_service_status(args: argparse.Namespace) -> int:
    import os

    from tinynas.service.runner import ServicePaths
    from tinynas.service.state import load_state

    config = _service_config(args)
    paths = ServicePaths(config.data_dir)
    state = load_state(paths.state)
    running = False
    if paths.pid.exists():
        try:
            os.kill(int(paths.pid.read_text()), 0)
            running = True
        except (OSError, ValueError):
            running = False
    status = {"running": running, **state.to_dict()}
    if running and paths.status.exists():
        try:
            status.update(json.loads(paths.status.read_text()), running=True)
        except ValueError:
            pass
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    print(f"service {'running' if running else 'not running'}; state {status['state']}"
          + (f", user {status['user']}" if status.get("user") else ""))
    if status.get("paused"):
        print(f"  {status['paused']}")
    elif status.get("error"):
        print(f"  last error: {status['error']}")
    collection = status.get("collection") or {}
    if collection.get("total"):
        print(f"  collection: {collection.get('accepted', 0)} of {collection['total']} windows"
              + (f", prompt {collection['prompt']}" if collection.get("prompt") else ""))
    search = status.get("search") or {}
    if search:
        print(f"  search: {search.get('trials', 0)} candidates, best {search.get('best', '-')}, "
              f"{search.get('seconds_left', 0):.0f} s left")
    if status.get("rewear"):
        from tinynas.service.rewear import status_line

        print(f"  {status_line(status['rewear'])}")
    deployed = status.get("deployed") or {}
    if deployed:
        print(f"  serving {deployed['model']} for {deployed['user']} (int8 accuracy {deployed['accuracy']:.3f})")
    for prediction in (status.get("predictions") or [])[-3:]:
        print(f"  prediction {prediction['smoothed']} ({prediction['confidence']:.0%})")
    return 0


def _cmd_service_stop(args: argparse.Namespace) -> int:
    from tinynas.service.runner import request

    request(_service_config(args).data_dir, "stop")
    print("stop requested")
    return 0


def _cmd_onboard(args: argparse.Namespace) -> int:
    from firmware_bridge.guide import load_plan
    from tinynas.errors import UsageError
    from tinynas.service.runner import ServicePaths, request
    from tinynas.service.state import check_user_name

    config = _service_config(args)
    check_user_name(args.user)  # it names a folder under data_dir: refused here, before any request is left
    if args.recalibrate and args.plan:
        raise UsageError("--recalibrate uses the plan the served model was collected with: drop --plan")
    if args.unlabelled and not args.recalibrate:
        raise UsageError("--unlabelled goes with --recalibrate (record unlabelled data and adapt the served model)")
    if args.resume or args.cancel:
        kind = "continue" if args.resume else "cancel"
        request(config.data_dir, kind, user=args.user)
        print(f"{kind} of the paused collection (or running recalibration) of {args.user} requested; follow it "
              f"with `tinynas service status`")
        return 0
    if args.recalibrate:
        from tinynas.service.rewear import served_model_problem
        from tinynas.service.state import load_state

        problem = served_model_problem(load_state(ServicePaths(config.data_dir).state).deployed, args.user)
        if problem:  # the service would refuse it too; said here at once
            raise UsageError(f"cannot recalibrate: {problem}")
        request(config.data_dir, "recalibrate", user=args.user, unlabelled=args.unlabelled)
        print(f"{'adaptation to unlabelled data' if args.unlabelled else 'recalibration'} of {args.user}'s served "
              f"model requested (it keeps serving meanwhile); follow it with `tinynas service status`")
        return 0
    plan = load_plan(args.plan or config.plan)  # a bad plan is refused here, not later on the device
    try:  # the running service says which device it reads; without it the service checks the plan itself
        device = json.loads(ServicePaths(config.data_dir).status.read_text()).get("device") or {}
    except (OSError, ValueError, AttributeError):
        device = {}
    if device.get("channels") and device.get("sample_rate_hz"):
        from tinynas.cost.targets import resolve_target
        from tinynas.service.fit import check_plan_fits

        fit = check_plan_fits(plan, resolve_target(config.target), device["channels"], device["sample_rate_hz"])
        if fit.cut:
            print(f"plan {plan.name}: {fit.recorded}-sample windows do not fit {config.target}; the search will use "
                  f"{fit.window}-sample windows cut from the recordings")
    request(config.data_dir, "onboard", user=args.user, plan=args.plan or config.plan)
    print(f"onboarding of {args.user} requested (plan {args.plan or config.plan}); follow it with "
          f"`tinynas service status` or http://{config.http_host}:{config.http_port}/")
    return 0


def _cmd_service_install(args: argparse.Namespace) -> int:
    from tinynas.service.systemd import unit_text

    config = _service_config(args)
    text = unit_text(args.config, config.data_dir, user=args.user, memory_max=args.memory_max)
    path = Path(args.unit_dir) / "tinynas.service"
    path.write_text(text)
    print(f"wrote {path}; now: sudo systemctl daemon-reload && sudo systemctl enable --now tinynas")
    return 0


def _cmd_service_config(args: argparse.Namespace) -> int:
    from tinynas.service.config import DEFAULT_CONFIG, config_text

    # With --config: that file checked, printed with every default filled in; without: the defaults.
    print(config_text(_service_config(args)) if args.config else DEFAULT_CONFIG, end="")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from tinynas.demo import run_demo
    from tinynas.progress import Progress

    budget = check_budget(args.budget)
    check_seed(args.seed)
    check_out_dir(args.out)
    result = run_demo(Path(args.out), budget_seconds=budget, seed=args.seed,
                      resume=args.resume, progress=Progress())
    _print_result(result, args.json)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `tinynas` command."""
    parser = _Parser(prog="tinynas", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tinynas {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

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
    _add_target_flags(cost)
    cost.add_argument("--json", action="store_true")
    cost.set_defaults(func=_cmd_cost)

    measure = sub.add_parser("measure", help="measure an exported .tflite (flash, TFLite Micro arena)")
    measure.add_argument("model", help="path to a .tflite file")
    measure.add_argument("--json", action="store_true")
    measure.set_defaults(func=_cmd_measure)

    search = sub.add_parser("search", help="search architectures for a data set and target, export the winner")
    search.add_argument("--data", required=True, help="data spec, e.g. synthetic:vibration or synthetic:emg")
    _add_target_flags(search)
    search.add_argument("--budget", default="30m", help="wall-time budget of the search, e.g. 90s, 30m, 2h")
    search.add_argument("--strategy", default="paper", choices=["paper", "greedy", "random", "fast", "tpe"],
                        help="paper (the method), fast (budget frontier raced with the final recipe, no retraining), "
                             "greedy, random, or tpe (Optuna, optional extra)")
    search.add_argument("--out", required=True, help="output folder (journal, best.json, model, report)")
    search.add_argument("--resume", action="store_true", help="continue the search journaled in --out")
    search.add_argument("--seed", type=int, default=0, help="0 to 2^32-1")
    search.add_argument("--workers", type=int, default=1,
                        help="candidates trained in parallel (at most this machine's cores: more is refused)")
    search.add_argument("--threads", type=int, default=1,
                        help="TensorFlow threads per worker (at most this machine's cores)")
    search.add_argument("--epochs", type=int, help="epochs per candidate (strategy default: paper 100)")
    search.add_argument("--batch-size", type=int)
    search.add_argument("--learning-rate", type=float)
    search.add_argument("--final-epochs", type=int, default=100, help="epochs of the winner's final training")
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
                        help="none (raw windows), or channel: standardise each channel with the training "
                             "split's statistics (recorded in card.json, applied when serving)")
    search.add_argument("--json", action="store_true", help="print the model card as JSON on stdout")
    search.set_defaults(func=_cmd_search)

    evaluation = sub.add_parser("evaluate", help="run an exported int8 model on every window of a data set")
    evaluation.add_argument("model", help="export folder of a search (or its model.tflite, card.json beside it)")
    evaluation.add_argument("--data", required=True, help="data spec, e.g. folder:recordings/today?window=400")
    evaluation.add_argument("--json", action="store_true")
    evaluation.set_defaults(func=_cmd_evaluate)

    adapting = sub.add_parser("adapt", help="adapt a model to a new session or condition from unlabelled windows")
    adapting.add_argument("model", help="a model folder (a search's --out, or one adapt/recalibrate wrote)")
    adapting.add_argument("--data", required=True, help="windows of the new session/condition (labels not used)")
    adapting.add_argument("--out", required=True, help="new folder for the adapted model (the old one is kept)")
    adapting.add_argument("--only", help="batchnorm or normalization (default: both, where the model has them)")
    adapting.add_argument("--json", action="store_true")
    adapting.set_defaults(func=_cmd_adapt)

    recal = sub.add_parser("recalibrate", help="fine-tune a model on a few labelled windows of a new session")
    recal.add_argument("model", help="a model folder (a search's --out, or one adapt/recalibrate wrote)")
    recal.add_argument("--data", required=True, help="labelled windows of the new session (e.g. one repetition "
                                                     "per class)")
    recal.add_argument("--out", required=True, help="new folder for the recalibrated model (the old one is kept)")
    recal.add_argument("--verify", help="labelled windows to check on (default: the latest recording of each class "
                                        "recorded twice or more)")
    recal.add_argument("--epochs", type=int, help="fine-tuning epochs (default 30)")
    recal.add_argument("--learning-rate", type=float, help="fine-tuning learning rate (default 0.001)")
    recal.add_argument("--seed", type=int, default=0)
    recal.add_argument("--allow-missing-classes", action="store_true",
                       help="accept data without some classes (replayed windows keep them)")
    recal.add_argument("--json", action="store_true")
    recal.set_defaults(func=_cmd_recalibrate)

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

    simulate = sub.add_parser("simulate", help="a virtual sensor front-end on a pseudo-terminal")
    simulate.add_argument("--source", default="synthetic:emg", help="data spec to replay (isl:, cwru:, synthetic:)")
    simulate.add_argument("--port", help="path of the port to create (a symlink to the pty; default: in a temp folder)")
    simulate.add_argument("--speed", type=float, default=1.0, help="multiple of the true sample rate")
    simulate.add_argument("--drop", type=float, default=0.0, help="probability of dropping each byte")
    simulate.add_argument("--flip", type=float, default=0.0, help="probability of flipping a bit in each byte")
    simulate.add_argument("--unplug-every", type=float, default=0.0, help="seconds between simulated unplugs")
    simulate.add_argument("--device-id", default="tinynas-sim")
    simulate.set_defaults(func=_cmd_simulate)

    collect = sub.add_parser("collect", help="guided collection of labelled windows from a device")
    collect.add_argument("--port", required=True, help="serial port or URL (/dev/ttyACM0, socket://..., a pty)")
    collect.add_argument("--plan", required=True, help="isl26, gestures4, bearing4 or a plan file (.json/.toml)")
    collect.add_argument("--out", required=True, help="session folder (an existing one is resumed)")
    collect.add_argument("--user", default="")
    collect.add_argument("--baud", type=int, default=1_000_000)
    collect.add_argument("--headless", action="store_true", help="prompts as log lines")
    collect.set_defaults(func=_cmd_collect)

    service = sub.add_parser("service", help="the headless device service")
    service_sub = service.add_subparsers(dest="service_command", required=True)
    for name, func, text in (("run", _cmd_service_run, "run the service (systemd runs this)"),
                             ("status", _cmd_service_status, "state, collection, search and serving"),
                             ("stop", _cmd_service_stop, "ask a running service to stop cleanly"),
                             ("install", _cmd_service_install, "write a systemd unit"),
                             ("config", _cmd_service_config, "print the default config, or check and print --config")):
        command = service_sub.add_parser(name, help=text)
        command.add_argument("--config", help="service config (TOML); default values if omitted")
        command.set_defaults(func=func)
        if name == "status":
            command.add_argument("--json", action="store_true")
        if name == "install":
            command.add_argument("--user", default="tinynas", help="unprivileged user that runs the service")
            command.add_argument("--memory-max", default="1536M", help="systemd MemoryMax")
            command.add_argument("--unit-dir", default="/etc/systemd/system")

    onboard = sub.add_parser("onboard", help="ask the service to onboard a new user or machine")
    onboard.add_argument("--user", required=True)
    onboard.add_argument("--plan", help="collection plan (default: the config's)")
    onboard.add_argument("--config", help="service config (TOML)")
    answer = onboard.add_mutually_exclusive_group()
    answer.add_argument("--continue", dest="resume", action="store_true",
                        help="continue the user's paused collection (after checking the sensor)")
    answer.add_argument("--cancel", action="store_true",
                        help="stop the user's paused collection (its recordings stay on disk)")
    onboard.add_argument("--recalibrate", action="store_true",
                         help="re-wear / new condition: a short collection, then recalibrate the user's served model "
                              "(swapped only if at least as good on the new windows)")
    onboard.add_argument("--unlabelled", action="store_true",
                         help="with --recalibrate: record unlabelled data (rewear_unlabelled_seconds) and adapt")
    onboard.set_defaults(func=_cmd_onboard)

    demo = sub.add_parser("demo", help="a complete small search on built-in synthetic vibration data")
    demo.add_argument("--out", default="tinynas-demo", help="output folder (default: tinynas-demo)")
    demo.add_argument("--budget", default="5m")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--resume", action="store_true")
    demo.add_argument("--json", action="store_true")
    demo.set_defaults(func=_cmd_demo)
    return parser


def _add_target_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", help="built-in target name or a .toml file")
    parser.add_argument("--ram", help="RAM budget, e.g. 6KiB (overrides the target's)")
    parser.add_argument("--flash", help="flash budget, e.g. 32KiB")
    parser.add_argument("--macs", help="MAC budget, e.g. 1.14M")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tinynas` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(message)s", stream=sys.stderr)
    try:
        with sigterm_as_interrupt():  # systemd and kill stop like Ctrl-C, journal intact
            return args.func(args)
    except KeyboardInterrupt:
        journaled = args.command in ("search", "demo")  # only these keep a journal to resume from
        print("tinynas: interrupted" + ("; the journal is intact (continue with --resume)" if journaled else ""),
              file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place that turns any failure into one line
        message = user_message(exc)
        if message is not None:
            print(f"tinynas: error: {message}", file=sys.stderr)
            return 2
        log_path = crash_log(exc)
        where = f"; traceback in {log_path}" if log_path else ""
        print(f"tinynas: internal error: {type(exc).__name__}: {exc} (a bug: please report it{where})",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
