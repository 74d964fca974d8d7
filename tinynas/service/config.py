"""Service configuration: a TOML file whose every key has a documented default."""

from __future__ import annotations

import os
import shlex
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from firmware_bridge.safe_read import SETTINGS_FILE_BYTES, read_regular
from tinynas.anomaly.choice import SCORERS
from tinynas.cost.budget import Budget
from tinynas.cost.runtime import RUNTIME_CHOICES, resolve_runtime
from tinynas.cost.targets import resolve_target
from tinynas.data.preprocess import NORMALIZATIONS
from tinynas.errors import TinynasError
from tinynas.modes import Runtime
from tinynas.options import RANGES, check_budget
from tinynas.search import STRATEGIES
from tinynas.service.status_server import is_loopback
from tinynas.units import echoed, parse_duration, parse_latency

DEFAULT_CONFIG = '''# tinynas service configuration (TOML). Every key is optional; the values below are the defaults.

# Serial port or pySerial URL of the sensor front-end (/dev/ttyACM0, /dev/serial/by-id/..., socket://...).
port = "/dev/ttyACM0"
baudrate = 1000000
# Where profiles (sessions, studies, deployed models), the state file and logs live.
data_dir = "/var/lib/tinynas"
# Target microcontroller (tinynas targets) and search time budget per onboarding. "fast" is the default
# strategy: through the onboarding journey it served the better live model in half of "paper"'s search
# time (benchmarks/results/onboarding.md); the budget is a cap it did not reach there.
target = "STM32C011F6P6"
budget = "10m"
strategy = "fast"
# The most candidates a search trains (it ends at the budget or at this, whichever comes first); 0: no bound.
candidates = 0
# What runs the model on the chip, and so what the budget counts: "auto" (the default: tinynas's generated C
# runtime wherever the target can run it, which every built-in target can), "c" (its arena, input/output
# buffers and stack; its tables and code) or "tflm" (TFLite Micro: its arena, interpreter and stack; the
# .tflite and the interpreter's code), which holds smaller networks on the same chip.
runtime = "auto"
# The most one inference may take on the target at its clock, e.g. "250ms": the search refuses candidates estimated
# slower (with 25 % headroom), as it refuses those over the RAM. Empty (the default): the hop below, so the chip
# keeps up with serving; not budgeted where the target gives no clock or TFLite Micro runs the model.
latency = ""
# Epochs, learning rate (Adam) and batch size per candidate, and epochs of the winner's final training
# (lr 0.01); the method uses 100 epochs, lr 0.001, batch 16, and 100 final epochs.
epochs = 20
learning_rate = 0.001
batch_size = 16
final_epochs = 60
# Training processes: "auto" (from the cores and the free memory under the service's MemoryMax: a 1 GB Pi
# gets 1, a 4 GB Pi 3, leaving a core for recording and serving) or a number up to the cores.
workers = "auto"
# Input normalisation recorded in the model's card: none, channel (per-channel mean/std of training windows) or
# window (each window divided by its own RMS: steadier when the armband is worn again; not for the motor).
normalize = "none"
# Collection plan used when `tinynas onboard` names none (isl26, gestures4, bearing4, motor-normal or a file).
plan = "gestures4"
# Live inference: a prediction every hop_seconds over the last window; majority vote over `smoothing`.
hop_seconds = 0.25
smoothing = 3
# A deployed model must reach at least this int8 accuracy on its held-out windows to be served.
min_accuracy = 0.5
# Anomaly plans (motor-normal: a healthy machine's normal running only): the share of normal windows the
# threshold may flag, and the alarm: raised when alarm_k of the last alarm_n windows pass the threshold.
false_alarm_rate = 0.01
alarm_k = 3
alarm_n = 5
# Which scorer family is served: auto (the int8 network or the classical features + Gaussian, whichever flags more
# held-out synthetic anomalies at the false-alarm rate; a tie goes to the cheaper), network or classical.
scorer = "auto"
# A scorer is served only if it tells its held-out synthetic anomalies from normal running at this AUROC or above.
# The synthetic anomalies run from faint to strong, so a good scorer stays well under 1: those that then detected
# real or held-out faults reached 0.77-0.81 on CWRU (benchmarks/results/anomaly.md) and 0.68-0.69 on the synthetic
# motor, detecting 98.5-100 % of its faults (scorer-budget.md); 0.6 refuses a scorer that learnt little.
min_auroc = 0.6
# Re-wear / new condition (`tinynas onboard --user U --recalibrate`): repetitions per class of the short
# collection (with 2 or more, cross-validation over them chooses the recipe, adapt among them, and checks it; the
# model is then trained on all; with 1 only "nothing forgotten" can be checked),
# the fine-tuning's epochs and learning rate, and the seconds recorded for `--unlabelled` (adapt, no labels).
rewear_repetitions = 2
rewear_epochs = 30
rewear_learning_rate = 0.001
rewear_unlabelled_seconds = 10.0
# Status page. Binding anything but loopback requires a token.
http_host = "127.0.0.1"
http_port = 8765
http_token = ""
'''


MIN_TOKEN_LENGTH = 16
"""A status-page token shorter than this can be guessed by trying."""


class ConfigError(TinynasError, ValueError):
    """A configuration file that cannot be used."""


@dataclass(frozen=True)
class ServiceConfig:
    """Settings of one device service (see DEFAULT_CONFIG for what each means)."""

    port: str = "/dev/ttyACM0"
    baudrate: int = 1_000_000
    data_dir: str = "/var/lib/tinynas"
    target: str = "STM32C011F6P6"
    budget: str = "10m"
    strategy: str = "fast"
    candidates: int = 0
    runtime: str = "auto"
    latency: str = ""
    epochs: int = 20
    learning_rate: float = 0.001
    batch_size: int = 16
    final_epochs: int = 60
    workers: int | str = "auto"
    normalize: str = "none"
    plan: str = "gestures4"
    hop_seconds: float = 0.25
    smoothing: int = 3
    min_accuracy: float = 0.5
    false_alarm_rate: float = 0.01
    alarm_k: int = 3
    alarm_n: int = 5
    scorer: str = "auto"
    min_auroc: float = 0.6
    rewear_repetitions: int = 2
    rewear_epochs: int = 30
    rewear_learning_rate: float = 0.001
    rewear_unlabelled_seconds: float = 10.0
    http_host: str = "127.0.0.1"
    http_port: int = 8765
    http_token: str = ""
    source: str = field(default="", compare=False)
    """The file it was read from, absolute ("" for the defaults): not a key of the file. Commands the service or the
    CLI give back to the user name it (`--config`)."""

    def to_dict(self) -> dict:
        """JSON-ready dict (the keys of a config file)."""
        values = asdict(self)
        del values["source"]
        return values

    def chip_budget(self) -> Budget:
        """What a model must fit: `target`, counted for `runtime` (auto resolved against it) on the whole chip, in
        `latency` per inference (by default the hop, where the target's clock and the runtime let time be told)."""
        target = resolve_target(self.target)
        if self.latency:
            return Budget.resolve(target, self.runtime, latency_seconds=parse_latency(self.latency))
        timed = target.clock_mhz and resolve_runtime(self.runtime, target).runtime == Runtime.C
        return Budget.resolve(target, self.runtime, latency_seconds=self.hop_seconds if timed else None)


CONFIG_KEYS = tuple(f.name for f in fields(ServiceConfig) if f.name != "source")
"""The keys a config file may hold (every field but where it was read from)."""


# Allowed values of every key: (kind, check, what the message says is allowed). Checked when the file is read,
# so `service run` never starts (and systemd never restarts) on a value that would fail an hour later.
def _integer(low: int, high: int | None = None):
    def check(value):
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        return value >= low and (high is None or value <= high)
    return check, f"an integer from {low}" + (f" to {high}" if high is not None else " up")


def _number(low: float, high: float, low_open: bool = False):
    def check(value):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        return (value > low if low_open else value >= low) and value <= high
    return check, f"a number in {'(' if low_open else '['}{low:g}, {high:g}]"


def _ranged(name: str):
    """A key whose range the command line and the Python API share (`tinynas.options.RANGES`)."""
    allowed = RANGES[name]
    return allowed.allows, allowed.in_words()


def _text(nonempty: bool = True):
    return (lambda value: isinstance(value, str) and (bool(value.strip()) or not nonempty)
            and "\0" not in value), "a non-empty string" if nonempty else "a string"


def _max_workers() -> int:
    # More TensorFlow workers than cores only slows every candidate down (issue 16: 1000 workers on 2 cores).
    return max(2, os.cpu_count() or 1)


_CHECKS = {
    "port": _text(), "baudrate": _integer(1, 100_000_000), "data_dir": _text(),
    "target": _text(), "budget": _text(), "strategy": _text(), "runtime": _text(), "latency": _text(nonempty=False),
    # --candidates' range (tinynas.options.RANGES), and 0 for none: a config file has no "not given" but absence.
    "candidates": _integer(0, int(RANGES["candidates"].high or 0)),
    # The same ranges as the command line's (tinynas.options.RANGES): a config is the CLI's options in a file.
    "epochs": _ranged("epochs"), "learning_rate": _ranged("learning_rate"),
    "batch_size": _ranged("batch_size"), "final_epochs": _ranged("final_epochs"), "workers": None,
    "normalize": _text(), "plan": _text(), "scorer": _text(), "hop_seconds": _number(0.0, 60.0, low_open=True),
    "smoothing": _integer(1, 1000), "min_accuracy": _number(0.0, 1.0), "min_auroc": _number(0.5, 1.0),
    # The same ranges as `--false-alarm-rate` (tinynas.anomaly.threshold) and the alarm's (tinynas.anomaly.alarm).
    "false_alarm_rate": _number(1e-6, 0.5), "alarm_k": _integer(1, 100), "alarm_n": _integer(1, 100),
    # `recalibrate`'s own ranges (its Recipe checks the same table).
    "rewear_repetitions": _ranged("rewear_repetitions"), "rewear_epochs": _ranged("recalibrate_epochs"),
    "rewear_learning_rate": _ranged("recalibrate_learning_rate"),
    "rewear_unlabelled_seconds": _ranged("rewear_unlabelled_seconds"),
    "http_host": _text(),
    "http_port": _integer(0, 65_535), "http_token": _text(nonempty=False),
}


def _check_value(origin: str, key: str, value) -> None:
    if key == "workers" and value == "auto":
        return
    check, allowed = _CHECKS[key] if _CHECKS[key] is not None else _integer(1, _max_workers())
    if key == "workers":
        allowed = f'"auto" or {allowed}'
    if not check(value):
        raise ConfigError(f"{origin}: {key} must be {allowed}, not {echoed(value)}")


def _check_choices(origin: str, data: dict) -> None:
    """Values whose meaning lives in other modules: the same parsers as the search uses."""

    if "normalize" in data and data["normalize"] not in NORMALIZATIONS:
        raise ConfigError(f"{origin}: normalize must be one of {', '.join(NORMALIZATIONS)}, not {data['normalize']!r}")
    if "strategy" in data and data["strategy"] not in STRATEGIES:
        raise ConfigError(f"{origin}: strategy must be one of {', '.join(STRATEGIES)}, not {data['strategy']!r}")
    if "scorer" in data and data["scorer"] not in SCORERS:
        raise ConfigError(f"{origin}: scorer must be one of {', '.join(SCORERS)}, not {data['scorer']!r}")
    if "runtime" in data and data["runtime"] not in RUNTIME_CHOICES:
        raise ConfigError(f"{origin}: runtime must be one of {', '.join(RUNTIME_CHOICES)}, not {data['runtime']!r}")
    k, n = data.get("alarm_k", ServiceConfig.alarm_k), data.get("alarm_n", ServiceConfig.alarm_n)
    if k > n:
        raise ConfigError(f"{origin}: the alarm is raised when alarm_k of the last alarm_n windows pass: alarm_k "
                          f"({k}) must be at most alarm_n ({n})")
    if "budget" in data:
        try:
            parse_duration(data["budget"])
        except TinynasError:
            raise ConfigError(f"{origin}: budget must be a positive duration such as 90s, 30m or 1h30m, "
                              f"not {data['budget']!r}") from None
        try:
            check_budget(data["budget"])  # the CLI's range: a second to 30 days
        except TinynasError as exc:
            raise ConfigError(f"{origin}: {str(exc).lstrip('-')}") from None
    if "data_dir" in data:
        folder = Path(data["data_dir"]).expanduser()
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"{origin}: data_dir {data['data_dir']!r} is a file, not a folder (give the folder "
                              f"the service keeps its recordings and models in)")
    if "http_host" in data:
        _check_host(origin, data["http_host"])
    if "target" in data:
        try:
            resolve_target(data["target"])
        except TinynasError as exc:  # its message names the built-in targets
            raise ConfigError(f"{origin}: target: {exc}") from None
    if data.get("latency"):
        try:
            parse_latency(data["latency"])
            replace(ServiceConfig(), **{key: data[key] for key in ("target", "runtime", "latency") if key in data}
                    ).chip_budget()  # a target with no clock, or TFLite Micro: one line now, not at the search
        except TinynasError as exc:
            raise ConfigError(f"{origin}: latency: {exc}") from None
    token = data.get("http_token", "")
    if token and not (token.isascii() and token.isprintable() and token.strip() == token and " " not in token):
        raise ConfigError(f"{origin}: http_token must be printable ASCII without spaces (it travels in a URL and "
                          f"an Authorization header)")
    if token and len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(f"{origin}: http_token must be at least {MIN_TOKEN_LENGTH} characters (e.g. the output "
                          f"of `python -c \"import secrets; print(secrets.token_urlsafe(16))\"`)")
    if "http_host" in data and not data.get("http_token"):
        if not is_loopback(data["http_host"]):
            raise ConfigError(f"{origin}: http_host {data['http_host']!r} is beyond loopback: set http_token too "
                              f"(every request must then carry it), or keep http_host = \"127.0.0.1\"")
    if "port" in data:
        # A port URL that can never be opened (an unknown board, an option out of its range, a library missing) is
        # refused here in one line: the service would otherwise wait for ever, saying "plug it in".
        from firmware_bridge.link import LinkError, link_for_url

        try:
            link_for_url(data["port"])
        except LinkError as exc:
            raise ConfigError(f"{origin}: port: {exc}") from None
    if "plan" in data:
        from firmware_bridge.errors import BridgeError
        from firmware_bridge.plan import load_plan

        try:
            load_plan(data["plan"])
        except BridgeError as exc:
            raise ConfigError(f"{origin}: plan: {exc}") from None


def _check_host(origin: str, host: str) -> None:
    """An address the server can bind: an IPv4/IPv6 literal, or a host name (letters, digits, dots, hyphens)."""
    import ipaddress
    import re

    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    # Only digits and dots is meant as an IPv4 address (999.1.1.1 is not one, and no resolver should guess).
    named = re.fullmatch(r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                         r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*", host)
    if named is None or re.fullmatch(r"[0-9.]+", host):
        raise ConfigError(f"{origin}: http_host must be an IP address or a host name (e.g. \"127.0.0.1\", "
                          f"\"0.0.0.0\", \"::1\"), not {host!r}")


def check_config_data(data: dict, origin: str = "config") -> ServiceConfig:
    """A ServiceConfig from a mapping, every key's type and range checked (ConfigError in one line)."""
    known = list(CONFIG_KEYS)
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"{origin}: unknown key(s) {', '.join(unknown)} (known keys: {', '.join(known)})")
    for key, value in data.items():
        _check_value(origin, key, value)
    _check_choices(origin, data)
    return ServiceConfig(**data)


def read_config_text(path: str | Path) -> str:
    """The text of a config file, or ConfigError in one line (missing, a folder, unreadable, not text)."""
    path = Path(path)
    try:
        raw = read_regular(path, SETTINGS_FILE_BYTES, "config file")
    except FileNotFoundError:
        raise ConfigError(f"no config file at {path} (write one with `tinynas service config > {path}`)") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder, not a config file (give the TOML file, e.g. {path}/tinynas.toml)") \
            from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not a text file (a TOML config is expected; "
                          f"`tinynas service config` prints one)") from None
    if "\0" in text:
        raise ConfigError(f"{path} is not a text file (a TOML config is expected; "
                          f"`tinynas service config` prints one)")
    return text


def load_config(path: str | Path | None) -> ServiceConfig:
    """Read a TOML config; missing keys keep their defaults; unknown keys and bad values are a ConfigError."""
    if path is None:
        return ServiceConfig()
    text = read_config_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    return replace(check_config_data(data, str(path)), source=str(Path(path).resolve()))


def config_text(config: ServiceConfig) -> str:
    """`config` as TOML in the documented layout: DEFAULT_CONFIG's comments with this config's values."""
    import json

    values = config.to_dict()
    lines = []
    for line in DEFAULT_CONFIG.splitlines():
        key = line.split("=", 1)[0].strip() if "=" in line and not line.startswith("#") else None
        if key in values:
            value = values[key]
            # JSON strings and numbers are valid TOML basic strings and numbers.
            line = f"{key} = {json.dumps(value) if not isinstance(value, float) else repr(value)}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def config_hint(config: ServiceConfig) -> str:
    """' --config PATH' when the config was read from a file: a command given back to the user must reach the same
    service (on a Pi with /etc/tinynas.toml, a bare `tinynas service status` reads another data folder)."""
    return f" --config {shlex.quote(config.source)}" if config.source else ""


def page_plans(config: ServiceConfig) -> list[str]:
    """The plans the page offers: the config's, then the presets."""
    from firmware_bridge.plan import PRESETS

    return list(dict.fromkeys([config.plan, *PRESETS]))


def page_url(config: ServiceConfig) -> str:
    """The status page's address as a user opens it: with the token (`?token=`) when the page asks for one; without
    it the page answers only how to get in."""
    from urllib.parse import quote

    host = f"[{config.http_host}]" if ":" in config.http_host else config.http_host
    url = f"http://{host}:{config.http_port}/"
    return url + f"?token={quote(config.http_token, safe='')}" if config.http_token else url
