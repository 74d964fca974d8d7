"""`tinynas simulate`: a virtual sensor front-end, alone or with a simulated person or machine in front of it.

Plain: replays a data set's recordings in order (a device to plug things into). `--person`: a person
wearing the armband follows the service's prompts on its status endpoint and performs each prompted
sign from the data set, as people do (firmware_bridge/person.py: reaction times, late starts, still
rests, wrong and missed signs; `--unplug-every` adds replugs). `--machine`: a machine that runs in the
state the service asks for, and confirms it (`tinynas onboard --continue`) when the plan wants that.
"""

from __future__ import annotations

import argparse
import contextlib
import time
import urllib.parse
from pathlib import Path

import numpy as np

from firmware_bridge.cyton_wire import CHANNELS as CYTON_CHANNELS
from firmware_bridge.cyton_wire import RATE_HZ as CYTON_RATE_HZ
from firmware_bridge.person import Behaviour, Machine, Person
from firmware_bridge.simulator import WIRES
from tinynas.errors import UsageError
from tinynas.hil.chip import EmulatedChip
from tinynas.options import check_positive, check_probability
from tinynas.service.follower import POLL_SECONDS, Follower

SIGNS_FOR_GESTURES = {"fist": "A", "open": "B", "point": "D"}
"""gestures4's signs as the Italian Sign Language letters that make them: A a fist, B a flat open hand, D the
index pointing. A prompted class that is a class of the data set is performed as itself."""
STATUS_PATH = "/status.json"


def register(sub) -> None:
    """Add `simulate` to the `tinynas` parser's subcommands."""
    simulate = sub.add_parser("simulate", help="a virtual sensor front-end on a pseudo-terminal (with --person or "
                                                "--machine: someone in front of it who follows the service)")
    simulate.add_argument("--source", default="synthetic:emg", help="data spec to replay (isl:, cwru:, synthetic:)")
    simulate.add_argument("--port", help="path of the port to create (a symlink to the pty; default: in a temp folder)")
    simulate.add_argument("--speed", type=float, default=1.0, help="multiple of the true sample rate")
    simulate.add_argument("--drop", type=float, default=0.0, help="probability of dropping each byte")
    simulate.add_argument("--flip", type=float, default=0.0, help="probability of flipping a bit in each byte")
    simulate.add_argument("--unplug-every", type=float, default=0.0,
                          help="seconds between simulated unplugs (the device restarts, its counter from 0)")
    simulate.add_argument("--keep-counter", action="store_true",
                          help="with --unplug-every: a self-powered device, whose counter runs on while unplugged")
    simulate.add_argument("--device-id", default="tinynas-sim")
    simulate.add_argument("--wire", choices=WIRES, default="frames",
                          help="frames: tinynas's framed protocol (default); text: a sketch printing one line of "
                               "numbers per sample (port csv:PORT?rate=HZ); cyton: an OpenBCI Cyton board, 8 "
                               "channels at 250 Hz (port brainflow:cyton?serial_port=PORT); lsl: an LSL outlet "
                               "instead of a port (port lsl:NAME, printed)")
    simulate.add_argument("--chip", metavar="FIRMWARE",
                          help="a front-end that also holds a model: the folder `tinynas firmware` built for an "
                               "emulated board, run by QEMU and answering the service's check on the sensor's link")
    who = simulate.add_mutually_exclusive_group()
    who.add_argument("--person", action="store_true",
                     help="a person who follows the service's prompts and performs each sign from --source")
    who.add_argument("--machine", action="store_true",
                     help="a machine that runs in the state the service prompts (states from --source)")
    simulate.add_argument("--follow", help="the service's status page the person or machine follows, its address "
                                            "or its /status.json (default: the --config's http_host and "
                                            "http_port, else http://127.0.0.1:8765/)")
    simulate.add_argument("--token", help="the status endpoint's token (default: the --config's http_token)")
    simulate.add_argument("--config", help="service config (TOML): where to confirm a machine's state and continue "
                                           "a paused collection (as `tinynas onboard --continue` does)")
    simulate.add_argument("--signs", default="",
                          help="prompted class = data-set class, comma-separated (default for ISL: "
                               + ",".join(f"{k}={v}" for k, v in SIGNS_FOR_GESTURES.items()) + ")")
    simulate.add_argument("--reaction", type=float, default=0.35, help="median reaction time to GO, seconds")
    simulate.add_argument("--late", type=float, default=0.1, help="probability of a late start (0.7-1.1 s)")
    simulate.add_argument("--wrong", type=float, default=0.02, help="probability of making another sign")
    simulate.add_argument("--miss", type=float, default=0.02, help="probability of making no sign")
    simulate.add_argument("--noise", type=float, default=1.5,
                          help="sensor noise of a still arm (standard deviation, in sample units)")
    simulate.add_argument("--serving-check", action="store_true",
                          help="with --person: once a model is served, go on making known signs (4 s) and resting "
                               "(4 s), logging each with the device's sample indices (to check live predictions)")
    simulate.add_argument("--serve-state", metavar="STATE",
                          help="with --machine: once a model is served, the machine runs in STATE (e.g. normal) "
                               "instead of being switched off")
    simulate.add_argument("--fault", metavar="STATE",
                          help="with --serve-state: switch to STATE (e.g. inner_race) --fault-after seconds into "
                               "serving: a healthy machine starting to fail")
    simulate.add_argument("--fault-after", type=float, default=60.0, metavar="SECONDS")
    simulate.add_argument("--seed", type=int, default=0)
    simulate.add_argument("--log", help="append what the person or machine did to this JSON-lines file")
    simulate.set_defaults(func=_cmd_simulate)


def _sample_format(values) -> str:
    if np.all(np.mod(values, 1) == 0):
        if values.min() >= -128 and values.max() <= 127:
            return "int8"
        if values.min() >= -32768 and values.max() <= 32767:
            return "int16"
    return "float32"


DTYPES = {"int8": np.int8, "int16": np.int16, "float32": np.float32}


def _cmd_simulate(args: argparse.Namespace) -> int:
    from firmware_bridge.protocol import Hello
    from firmware_bridge.simulator import DEFAULT_PORT_NAME, ArraySource, Faults, Simulator
    from tinynas.data.spec import load_windows

    check_positive("--speed", args.speed, " (1 is the true sample rate)")
    check_probability("--drop", args.drop)
    check_probability("--flip", args.flip)
    for option in ("late", "wrong", "miss"):
        check_probability(f"--{option}", getattr(args, option))
    check_positive("--reaction", args.reaction, " (seconds)")
    if not 0 <= args.noise < 1e6:
        raise UsageError(f"--noise must be a standard deviation >= 0, got {args.noise:g}")
    if args.unplug_every:
        check_positive("--unplug-every", args.unplug_every, " (seconds; 0 never unplugs)")
    if (args.person or args.machine) and args.speed != 1:
        raise UsageError("--person and --machine act in real time: drop --speed")
    if (args.serve_state or args.fault) and not args.machine:
        raise UsageError("--serve-state and --fault go with --machine")
    if args.fault and not args.serve_state:
        raise UsageError("--fault needs --serve-state (the state the machine serves in before it fails)")
    check_positive("--fault-after", args.fault_after, " (seconds into serving)")
    port = Path(args.port) if args.port else None
    if port is not None and not port.parent.is_dir():  # a mistyped --port must not create folders
        from firmware_bridge.link import LinkError

        raise LinkError(f"cannot create the port {port}: {port.parent} is not a folder")
    data_dir = _data_dir(args.config) if args.config else None
    args.follow, args.token = _endpoint(args)
    windows = load_windows(args.source)
    fmt = _sample_format(windows.x)
    dtype = DTYPES[fmt]
    hello = Hello(args.device_id, "sim-1", windows.channels, windows.sample_rate_hz, fmt)
    source: Person | Machine | ArraySource
    if args.person:
        by_class = {name: windows.x[windows.y == i] for i, name in enumerate(windows.class_names)}
        source = Person(_signs(by_class, args.signs), windows.channels, windows.sample_rate_hz, dtype,
                        noise=args.noise, behaviour=Behaviour(reaction_median_seconds=args.reaction,
                                                              late_probability=args.late,
                                                              wrong_probability=args.wrong,
                                                              miss_probability=args.miss, seed=args.seed))
    elif args.machine:
        source = Machine(_states(windows), dtype)
        for state in filter(None, (args.serve_state, args.fault)):
            if state not in source.states:
                raise UsageError(f"the machine of {args.source} has no state {state!r} (it has "
                                 f"{', '.join(sorted(source.states))})")
    else:
        source = ArraySource(windows.x.reshape(-1, windows.channels).astype(dtype))
    if args.wire != "frames" and args.chip:
        raise UsageError(f"--chip needs --wire frames: a {args.wire} sensor has no way to carry the chip's tests")
    if args.wire != "frames" and args.speed != 1:
        raise UsageError(f"--wire {args.wire} streams at the true rate (the host takes it as the stated one): drop "
                         f"--speed")
    if args.wire == "cyton" and (windows.channels, windows.sample_rate_hz) != (CYTON_CHANNELS, CYTON_RATE_HZ):
        raise UsageError(f"--wire cyton: a Cyton streams {CYTON_CHANNELS} channels at {CYTON_RATE_HZ:g} Hz, and "
                         f"{args.source} has {windows.channels} at {windows.sample_rate_hz:g} Hz (e.g. --source "
                         f"'synthetic:emg?sample_rate_hz=250')")
    if args.wire == "lsl" and args.port:
        raise UsageError("--wire lsl makes a stream, not a port: drop --port (the stream's name is printed)")
    faults = Faults(drop_byte_probability=args.drop, flip_bit_probability=args.flip, seed=args.seed)
    with contextlib.ExitStack() as stack:
        chip = stack.enter_context(EmulatedChip(args.chip)) if args.chip else None
        simulator = stack.enter_context(Simulator(source, hello, faults=faults, speed=args.speed,
                                                  port_dir=port.parent if port else None, chip=chip,
                                                  wire=args.wire,
                                                  port_name=port.name if port else DEFAULT_PORT_NAME))
        _stream(args, simulator, source, windows, fmt, data_dir, chip)
    return 0  # (streams until interrupted)


def _stream(args: argparse.Namespace, simulator, source, windows, fmt: str, data_dir, chip) -> None:
    """Stream (and follow the service, with --person or --machine) until interrupted."""
    who = " with a person following " if args.person else " with a machine following " if args.machine else ""
    print(f"simulating {args.source}: {windows.channels} x {fmt} at {windows.sample_rate_hz:g} Hz "
          f"on {simulator.port}{who}{args.follow if who else ''} (Ctrl-C to stop)", flush=True)
    if chip is not None:
        print(f"  with model {chip.model_hash} on an emulated {chip.board.name} beside the sensor", flush=True)
    if args.wire == "text":
        print(f"  as plain text: read it as csv:{simulator.port}?rate={windows.sample_rate_hz:g}", flush=True)
    if args.wire == "cyton":
        print(f"  as an OpenBCI Cyton: read it as brainflow:cyton?serial_port={simulator.port}", flush=True)
    follower = Follower(args.follow, args.token, source, data_dir, Path(args.log) if args.log else None,
                        simulator=simulator, serving_check=args.serving_check,
                        serve_state=args.serve_state, fault=args.fault, fault_after=args.fault_after) \
        if args.person or args.machine else None
    next_unplug = time.monotonic() + args.unplug_every if args.unplug_every else None
    while True:
        if follower is not None:
            follower.step()
        time.sleep(POLL_SECONDS if follower is not None else 0.2)
        if next_unplug and time.monotonic() >= next_unplug:
            simulator.unplug(1.0, restart=not args.keep_counter)
            if follower is not None:
                follower.note({"unplugged": 1.0, "restart": not args.keep_counter})
            next_unplug = time.monotonic() + args.unplug_every


def _endpoint(args) -> tuple[str, str]:
    """The status endpoint to follow and its token: as given, else the service config's (the service the person
    stands beside), else the service's defaults."""
    from tinynas.service.config import ServiceConfig, load_config

    config = load_config(args.config) if args.config else ServiceConfig()
    host = "127.0.0.1" if config.http_host in ("0.0.0.0", "::", "") else config.http_host
    follow = _status_url(args.follow) if args.follow else f"http://{host}:{config.http_port}{STATUS_PATH}"
    return follow, args.token if args.token is not None else config.http_token


def _status_url(given: str) -> str:
    """The status endpoint of what the user gave: the page's own address (what a user sees and copies, with or
    without its trailing slash) means its /status.json beside it."""
    parts = urllib.parse.urlsplit(given)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--follow {given!r}: give the status page's address, e.g. http://127.0.0.1:8765/")
    if parts.path in ("", "/"):
        parts = parts._replace(path=STATUS_PATH)
    return urllib.parse.urlunsplit(parts)


def _data_dir(config: str) -> Path:
    from tinynas.service.config import load_config

    return Path(load_config(config).data_dir)


def _signs(by_class: dict[str, np.ndarray], spec: str) -> dict[str, np.ndarray]:
    """The signs the person knows: every class of the data set, and the prompted names mapped onto them."""
    signs = dict(by_class)
    aliases = dict(SIGNS_FOR_GESTURES)
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, known = item.partition("=")
        if not name or known not in by_class:
            raise UsageError(f"--signs {item!r}: give PROMPTED=CLASS with a class of the data set "
                             f"({', '.join(list(by_class)[:30])})")
        aliases[name] = known
    signs.update({name: by_class[known] for name, known in aliases.items() if known in by_class})
    return signs


def _states(windows) -> dict[str, np.ndarray]:
    """A machine's states from a data set: each class's recordings end to end, under the class name and, for
    CWRU's fault classes (IR007, B014, OR021@6, ...), under the fault they share (inner_race, ball, outer_race),
    so a plan that names bearing states finds them."""
    from tinynas.data.cwru import fault_of

    states: dict[str, list[np.ndarray]] = {}
    for i, name in enumerate(windows.class_names):
        stream = windows.x[windows.y == i].reshape(-1, windows.channels)
        states.setdefault(name, []).append(stream)
        try:
            fault = fault_of(name)
        except KeyError:  # not a CWRU class: the state is its own name only
            continue
        if fault != name:
            states.setdefault(fault, []).append(stream)
    return {name: np.concatenate(parts) for name, parts in states.items()}
