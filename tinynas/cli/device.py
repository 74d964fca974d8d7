"""Commands at the device: collect, the headless service and onboarding (`simulate` is simulate.py)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from tinynas.options import check_range

log = logging.getLogger("tinynas")


def register(sub) -> None:
    """Add these commands to the `tinynas` parser's subcommands."""
    collect = sub.add_parser("collect", help="guided collection of labelled windows from a device")
    collect.add_argument("--port", required=True, help="serial port or URL (/dev/ttyACM0, socket://..., a pty)")
    collect.add_argument("--plan", required=True,
                         help="isl26, gestures4, bearing4, motor-normal or a plan file (.json/.toml)")
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
                             ("config", _cmd_service_config, "print the default config, or check and print --config"),
                             ("models", _cmd_service_models, "every user's deployed models, and which is served")):
        command = service_sub.add_parser(name, help=text)
        command.add_argument("--config", help="service config (TOML); default values if omitted")
        command.set_defaults(func=func)
        if name in ("status", "models"):
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
                        help="continue the user's paused collection (after checking the sensor), or confirm that "
                             "the machine is in the state a machine plan asks for")
    answer.add_argument("--cancel", action="store_true",
                        help="stop the user's paused collection (its recordings stay on disk)")
    onboard.add_argument("--recalibrate", action="store_true",
                         help="re-wear / new condition: a short collection, then recalibrate the user's served model "
                              "(swapped only if at least as good on the new windows)")
    onboard.add_argument("--unlabelled", action="store_true",
                         help="with --recalibrate: record unlabelled data (rewear_unlabelled_seconds) and adapt")
    onboard.add_argument("--condition", metavar="NAME",
                         help="with --recalibrate, for a classical anomaly scorer: a new operating "
                              "condition (e.g. \"1 hp\"), kept beside the earlier ones instead of replacing them")
    answer.add_argument("--test", action="store_true",
                        help="test the user's served model live: signs prompted in random order, its answers counted")
    onboard.add_argument("--signs", type=int, help="with --test: how many signs to prompt (default 10)")
    answer.add_argument("--more", type=int, metavar="N",
                        help="record N more repetitions per class into the user's last session (its windows are "
                             "kept) and search again on all of them; the deploy gate says when that is needed")
    onboard.set_defaults(func=_cmd_onboard)

    serve = sub.add_parser("serve", help="ask the service to serve another deployed model (a user's, or a previous "
                                         "one)")
    serve.add_argument("--user", required=True)
    which = serve.add_mutually_exclusive_group()
    which.add_argument("--model", help="the model's id (tinynas service models); default: the user's newest")
    which.add_argument("--previous", action="store_true",
                       help="roll back to the model of this user served before the current one")
    which.add_argument("--condition", metavar="NAME",
                       help="the served classical anomaly scorer: read its windows under this kept operating "
                            "condition (the machine's load as the operator knows it), or 'live' (the one each window "
                            "looks most like, the default)")
    serve.add_argument("--config", help="service config (TOML)")
    serve.set_defaults(func=_cmd_serve)


def _cmd_collect(args: argparse.Namespace) -> int:
    from firmware_bridge.guide import GuidedCollection, Prompter, TerminalPrompter
    from firmware_bridge.link import link_for_url
    from firmware_bridge.plan import load_plan
    from firmware_bridge.recorder import Recorder, RecordingThread

    check_range("--baud", args.baud, 1, hint=" (e.g. 1000000)")
    plan = load_plan(args.plan)
    prompter = Prompter() if args.headless or not sys.stdout.isatty() else TerminalPrompter()
    with link_for_url(args.port, baudrate=args.baud).open() as link:
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
    from tinynas.service.paths import read_status, running_pid
    from tinynas.service.runner import ServicePaths
    from tinynas.service.state import load_state

    config = _service_config(args)
    paths = ServicePaths(config.data_dir)
    state = load_state(paths.state)
    running = running_pid(paths) is not None
    status = {"running": running, **state.to_dict()}
    if running and paths.status.exists():
        written = read_status(paths)
        if written:
            status.update(written, running=True)
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    for line in status_lines(status):
        print(line)
    return 0


def _part(status: dict, key: str) -> dict:
    """A section of the status, {} when absent or not a mapping (an older or damaged status.json)."""
    value = status.get(key)
    return value if isinstance(value, dict) else {}


def _figure(value, form: str, missing: str = "-") -> str:
    return format(value, form) if isinstance(value, (int, float)) and not isinstance(value, bool) else missing


def status_lines(status: dict) -> list[str]:
    """What `tinynas service status` prints: every field read defensively, since status.json is a file a
    power cut, an older tinynas or a hand edit can leave in any shape."""
    running = bool(status.get("running"))
    who = f", user {status['user']}" if status.get("user") else ""
    if running:
        lines = [f"service running; state {status.get('state', '?')}{who}"]
    else:  # the state file is what the service last saved, not what runs: said with when it was saved
        saved = status.get("updated")
        when = (time.strftime(" saved %Y-%m-%d %H:%M:%S", time.localtime(saved))
                if isinstance(saved, (int, float)) and not isinstance(saved, bool) and 0 < saved < 1e11 else "")
        lines = [f"service not running (stopped); its last known state{when}: {status.get('state', '?')}{who}"]
    # What is served only while the service runs; stopped, the model it serves again when started.
    serving = "serving" if running else "not serving (the service is stopped); serves again when started:"
    from tinynas.service.gate import GateOutcome

    gate = GateOutcome.from_dict(status.get("gate"))
    if status.get("paused"):
        lines.append(f"  {status['paused']}")
    elif status.get("error"):
        lines.append(f"  last error: {status['error']}")
    elif gate is not None:
        lines.append(f"  {gate.words()}")
    device, link = _part(status, "device"), _part(status, "link")
    if device.get("waiting"):
        lines.append(f"  {device['waiting']}")
    if link.get("problem"):
        lines.append(f"  {link['problem']}")
    elif link:
        lines.append(f"  link: {_figure(link.get('samples_per_second', 0), 'g')} samples/s, "
                     f"{link.get('lost_samples', 0)} lost, {link.get('resets', 0)} device restart(s), "
                     f"{link.get('reconnects', 0)} reconnect(s)")
    for name, health in _part(status, "threads").items():
        if isinstance(health, dict) and health.get("restarts"):
            lines.append(f"  {name} thread restarted {health['restarts']} time(s); last: "
                         f"{health.get('last_error', '')}")
    collection = _part(status, "collection")
    if collection.get("total"):
        lines.append(f"  collection: {collection.get('accepted', 0)} of {collection['total']} windows"
                     + (f", prompt {collection['prompt']}" if collection.get("prompt") else ""))
        if collection.get("phase") == "confirm" and collection.get("confirm"):
            lines.append(f"  waiting for you: {collection['confirm']}")
    search = _part(status, "search")
    if search:
        lines.append(f"  search: {search.get('trials', 0)} candidates, best {search.get('best', '-')}, "
                     f"{_figure(search.get('seconds_left', 0), '.0f')} s left")
    if _part(status, "rewear"):
        from tinynas.service.rewear import status_line

        lines.append(f"  {status_line(status['rewear'])}")
    deployed = _part(status, "deployed")
    alarm = _part(status, "alarm")
    if deployed and deployed.get("task") == "anomaly":
        anomaly = _part(deployed, "anomaly")
        lines.append(f"  {serving} the anomaly scorer {deployed.get('model', '?')} for {deployed.get('user', '?')} "
                     f"(threshold {_figure(anomaly.get('threshold'), '.3g')}, set for "
                     f"{_figure(anomaly.get('false_alarm_rate'), '.2%')} false alarms)")
    elif deployed:
        from tinynas.verdict import served_accuracy

        accuracy = deployed.get("accuracy")
        today = _part(deployed, "today")
        said_today = ""
        if isinstance(today.get("signs"), int) and today["signs"]:  # a rejected re-wear: today's, not onboarding's
            failing = [str(item) for item in today.get("failing") or []]
            said_today = (f"today (re-worn): {today.get('recognised')} of {today['signs']} signs recognised on the "
                          f"stream" + (f", fails {', '.join(failing)}" if failing else "") + "; at onboarding: ")
        lines.append(f"  {serving} {deployed.get('model', '?')} for {deployed.get('user', '?')} (" + said_today
                     + served_accuracy(_part(deployed, "held_out"),
                                       accuracy if isinstance(accuracy, (int, float)) else None) + ")")
    model = _part(status, "model")
    if deployed and model.get("runtime"):
        lines.append(f"  on the chip: {model['runtime']}, RAM {_figure(model.get('ram_bytes'), ',')} B, flash "
                     f"{_figure(model.get('flash_bytes'), ',')} B" + (f" ({model['runtime_reason']})"
                                                                     if model.get("runtime_reason") else ""))
    if _part(status, "serving").get("stale"):
        lines.append(f"  predictions stale: {status['serving']['stale']}")
    if alarm:
        since = alarm.get("since")
        when = time.strftime(" since %H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else ""
        lines.append(("  ALARM: the machine does not run normally" + when if alarm.get("raised") else
                      "  no alarm: the machine runs normally")
                     + f" (last score {_figure(alarm.get('score'), '.3g')}, threshold "
                       f"{_figure(alarm.get('threshold'), '.3g')}; alarm at {alarm.get('debounce', '?')})")
        return lines
    predictions = status.get("predictions")
    for prediction in (predictions if isinstance(predictions, list) else [])[-3:]:
        if isinstance(prediction, dict):
            lines.append(f"  prediction {prediction.get('smoothed', '?')} "
                         f"({_figure(prediction.get('confidence'), '.0%')})")
    return lines


def _cmd_service_stop(args: argparse.Namespace) -> int:
    from tinynas.service.paths import ServicePaths, running_pid
    from tinynas.service.runner import request

    data_dir = _service_config(args).data_dir
    pid = running_pid(ServicePaths(data_dir))
    if pid is None:  # a request left now would stop the next start instead
        print(f"no service runs on {data_dir}: nothing to stop")
        return 0
    request(data_dir, "stop", pid=pid)
    print(f"stop of the service (pid {pid}) requested")
    return 0


def _cmd_onboard(args: argparse.Namespace) -> int:
    from tinynas.errors import UsageError
    from tinynas.service import actions

    config = _service_config(args)
    if args.recalibrate and args.plan:
        raise UsageError("--recalibrate uses the plan the served model was collected with: drop --plan")
    if args.unlabelled and not args.recalibrate:
        raise UsageError("--unlabelled goes with --recalibrate (record unlabelled data and adapt the served model)")
    if args.condition is not None and not args.recalibrate:
        raise UsageError("--condition goes with --recalibrate (a new operating condition's normal running, recorded "
                         "without labels)")
    if args.test:
        return _live_test(config, args)
    if args.signs is not None:
        raise UsageError("--signs goes with --test (how many signs the live test prompts)")
    if args.more is not None:
        if args.plan or args.recalibrate or args.unlabelled:
            raise UsageError("--more adds to the user's last session with its own plan: drop --plan / --recalibrate")
        print(actions.more(config, args.user, args.more))
    elif args.resume or args.cancel:
        print(actions.answer(config, "continue" if args.resume else "cancel", args.user))
    elif args.recalibrate:
        print(actions.recalibrate(config, args.user, args.unlabelled, args.condition))
    else:
        print(actions.onboard(config, args.user, args.plan))
    return 0


def _live_test(config, args: argparse.Namespace) -> int:
    from tinynas.errors import UsageError
    from tinynas.service import live_test
    from tinynas.service.paths import ServicePaths, read_status, running_pid
    from tinynas.service.state import check_user_name

    check_user_name(args.user)
    signs = 10 if args.signs is None else args.signs
    check_range("--signs", signs, 1, 1000)
    paths = ServicePaths(config.data_dir)

    def status() -> dict:
        return read_status(paths)

    current = status()
    deployed = current.get("deployed") or {}
    if running_pid(paths) is None or current.get("state") != "SERVING":
        raise UsageError(f"no model is served on {paths.root} now (tinynas service status): a live test needs one")
    if deployed.get("user") != args.user:
        raise UsageError(f"the service serves {deployed.get('user')}'s model, not {args.user}'s: "
                         f"tinynas serve --user {args.user} first")
    if deployed.get("task") == "anomaly":
        raise UsageError("a live test prompts signs: an anomaly scorer is watched on the status page instead")
    classes = [str(c) for c in deployed.get("classes") or []]
    print(f"live test of {args.user}'s model: {signs} signs in random order, each held "
          f"{live_test.HOLD_SECONDS:g} s; Ctrl-C stops it")
    result = live_test.run(status, lambda line: print(line, flush=True), signs, classes)
    print(f"live: {result.held.describe().replace('held-out windows', 'signs')}")
    return 0


def _cmd_service_models(args: argparse.Namespace) -> int:
    from tinynas.service.models import by_user, stored_models
    from tinynas.service.paths import ServicePaths
    from tinynas.service.state import load_state
    from tinynas.verdict import describe

    paths = ServicePaths(_service_config(args).data_dir)
    served = load_state(paths.state).deployed
    rows = [model.summary(served) for model in by_user(stored_models(paths.root / "profiles"))]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no deployed model under {paths.root}: onboard a user first (tinynas onboard --user NAME)")
        return 0
    for row in rows:
        made = time.strftime("%Y-%m-%d %H:%M", time.localtime(row["made"]))
        if row.get("damaged"):
            print(f"! {row['user']:<12} {row['id']:<24} damaged, never served: {row['damaged']}")
            continue
        measure = row["held_out"].get("measure") if row["held_out"] else None
        # Every figure says what it measured: the onboarding's held-out windows, or a re-wear's new windows.
        quality = ("anomaly scorer" if row["task"] == "anomaly" else
                   describe(row["held_out"], f"{'signs' if 'stream' in measure else 'windows'} of today's wear, "
                                             f"{measure}" if measure else
                            "held-out windows of the onboarding") if row["held_out"] else
                   f"accuracy {_figure(row['accuracy'], '.0%', 'not measured')}")
        print(f"{'*' if row['served'] else ' '} {row['user']:<12} {row['id']:<24} made {made}  {quality}; "
              f"{row['architecture'] or '?'}, {row['runtime']}, RAM {_figure(row['ram_bytes'], ',')} B"
              + (f" ({row['changed_by']})" if row["changed_by"] else ""))
    print("* served now; another: tinynas serve --user USER --model ID" + (f" --config {args.config}" if args.config
                                                                          else "")
          + ("; ! damaged (move the folder away, or onboard again)" if any(row.get("damaged") for row in rows)
             else ""))
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from tinynas.service import actions

    if args.condition is not None:
        print(actions.condition(_service_config(args), args.user, args.condition))
        return 0
    print(actions.serve(_service_config(args), args.user, args.model, args.previous))
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

