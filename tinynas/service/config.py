"""Service configuration: a TOML file whose every key has a documented default."""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from tinynas.errors import TinynasError

DEFAULT_CONFIG = '''# tinynas service configuration (TOML). Every key is optional; the values below are the defaults.

# Serial port or pySerial URL of the sensor front-end (/dev/ttyACM0, /dev/serial/by-id/..., socket://...).
port = "/dev/ttyACM0"
baudrate = 1000000
# Where profiles (sessions, studies, deployed models), the state file and logs live.
data_dir = "/var/lib/tinynas"
# Target microcontroller (tinynas targets) and search time budget per onboarding.
target = "STM32C011F6P6"
budget = "30m"
strategy = "paper"
# Epochs, learning rate (Adam) and batch size per candidate, and epochs of the winner's final training
# (lr 0.01); the method uses 100 epochs, lr 0.001, batch 16, and 100 final epochs.
epochs = 20
learning_rate = 0.001
batch_size = 16
final_epochs = 60
workers = 2
# Input normalisation recorded in the model's card: none, or channel (per-channel mean/std of training windows).
normalize = "none"
# Collection plan used when `tinynas onboard` names none (isl26, gestures4, bearing4 or a file).
plan = "gestures4"
# Live inference: a prediction every hop_seconds over the last window; majority vote over `smoothing`.
hop_seconds = 0.25
smoothing = 3
# A deployed model must reach at least this int8 accuracy on its held-out windows to be served.
min_accuracy = 0.5
# Status page. Binding anything but loopback requires a token.
http_host = "127.0.0.1"
http_port = 8765
http_token = ""
'''


class ConfigError(TinynasError, ValueError):
    """A configuration file that cannot be used."""


@dataclass(frozen=True)
class ServiceConfig:
    """Settings of one device service (see DEFAULT_CONFIG for what each means)."""

    port: str = "/dev/ttyACM0"
    baudrate: int = 1_000_000
    data_dir: str = "/var/lib/tinynas"
    target: str = "STM32C011F6P6"
    budget: str = "30m"
    strategy: str = "paper"
    epochs: int = 20
    learning_rate: float = 0.001
    batch_size: int = 16
    final_epochs: int = 60
    workers: int = 2
    normalize: str = "none"
    plan: str = "gestures4"
    hop_seconds: float = 0.25
    smoothing: int = 3
    min_accuracy: float = 0.5
    http_host: str = "127.0.0.1"
    http_port: int = 8765
    http_token: str = ""

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return asdict(self)


def load_config(path: str | Path | None) -> ServiceConfig:
    """Read a TOML config; missing keys keep their defaults, unknown keys are an error."""
    if path is None:
        return ServiceConfig()
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no config file at {path} (write one with `tinynas service config > {path}`)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    known = {f.name: f.type for f in fields(ServiceConfig)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}")
    from tinynas.preprocess import NORMALIZATIONS

    if data.get("normalize", "none") not in NORMALIZATIONS:
        raise ConfigError(f"{path}: normalize must be one of {', '.join(NORMALIZATIONS)}, not {data['normalize']!r}")
    return ServiceConfig(**data)
