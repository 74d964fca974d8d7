"""Target microcontrollers: RAM, flash and MAC budgets as data (built-in boards in `boards/*.toml`)."""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from firmware_bridge.safe_read import SETTINGS_FILE_BYTES, read_regular_text
from tinynas.arguments import text_or_path
from tinynas.errors import TinynasError
from tinynas.modes import Runtime
from tinynas.units import MAX_COUNT, MAX_SIZE_BYTES, UnitError, parse_count, parse_size

RUNTIMES = tuple(Runtime)
"""What can run a model on a chip: TFLite Micro's interpreter, or tinynas's generated C. A board file lists the
ones its chip runs; which one a search uses is decided in `tinynas.cost.runtime`."""
MACS_PER_COREMARK = 10_000
"""The method's convention: a target's MAC budget is its CoreMark score x 10^4."""


class TargetError(TinynasError, ValueError):
    """A target that does not exist or whose budget is impossible."""


@dataclass(frozen=True)
class Target:
    """A budget every candidate must fit: arena RAM, model flash and MACs per inference."""

    name: str
    ram_bytes: int
    flash_bytes: int
    mac_budget: int
    coremark: float | None = None
    core: str = ""
    clock_mhz: float | None = None
    source: str = ""
    runtimes: tuple[str, ...] = ()
    """The runtimes this chip can run (`RUNTIMES`); empty: every one."""

    def __post_init__(self) -> None:
        for field_name in ("ram_bytes", "flash_bytes", "mac_budget"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise TargetError(f"target {self.name!r}: {field_name} must be a positive integer, got {value!r}")
            if value > (MAX_COUNT if field_name == "mac_budget" else MAX_SIZE_BYTES):
                raise TargetError(f"target {self.name!r}: {field_name} {value:,} is out of range (a typo?)")

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return {"name": self.name, "ram_bytes": self.ram_bytes, "flash_bytes": self.flash_bytes,
                "mac_budget": self.mac_budget, "coremark": self.coremark, "core": self.core,
                "clock_mhz": self.clock_mhz, "source": self.source,
                **({"runtimes": list(self.runtimes)} if self.runtimes else {})}


def _from_mapping(data: dict, origin: str) -> Target:
    if "name" not in data:
        raise TargetError(f"{origin}: missing 'name'")
    known = {"name", "ram_bytes", "flash_bytes", "mac_budget", "coremark", "core", "clock_mhz", "source", "runtimes"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise TargetError(f"{origin}: unknown key(s) {', '.join(unknown)}")
    for key in ("ram_bytes", "flash_bytes"):
        if key not in data:
            raise TargetError(f"{origin}: missing '{key}'")
    for key in ("name", "core", "source"):
        if key in data and not isinstance(data[key], str):
            raise TargetError(f"{origin}: '{key}' must be a string, got {data[key]!r}")
    clock = data.get("clock_mhz")
    if clock is not None and (isinstance(clock, bool) or not isinstance(clock, (int, float)) or not clock > 0):
        raise TargetError(f"{origin}: 'clock_mhz' must be a positive number, got {clock!r}")
    runtimes = data.get("runtimes", [])
    if not isinstance(runtimes, list) or not all(isinstance(r, str) and r in RUNTIMES for r in runtimes) \
            or (data.get("runtimes") is not None and not runtimes):
        raise TargetError(f"{origin}: 'runtimes' must be a non-empty list of {', '.join(RUNTIMES)}, got {runtimes!r}")
    mac_budget = data.get("mac_budget")
    if mac_budget is None:
        if data.get("coremark") is None:
            raise TargetError(f"{origin}: give 'mac_budget' or 'coremark'")
        coremark = data["coremark"]
        if not isinstance(coremark, (int, float)) or isinstance(coremark, bool) or not 0 < coremark < 1e9:
            raise TargetError(f"{origin}: 'coremark' must be a positive number, got {coremark!r}")
        mac_budget = int(round(coremark * MACS_PER_COREMARK))
    return Target(name=str(data["name"]), ram_bytes=data["ram_bytes"], flash_bytes=data["flash_bytes"],
                  mac_budget=mac_budget, coremark=data.get("coremark"), core=data.get("core", ""),
                  clock_mhz=data.get("clock_mhz"), source=data.get("source", ""),
                  runtimes=tuple(dict.fromkeys(runtimes)))


def load_target_file(path: str | Path) -> Target:
    """Read a target from a TOML file (keys as in `tinynas/cost/boards/*.toml`)."""
    path = Path(path)
    try:
        data = tomllib.loads(read_regular_text(path, SETTINGS_FILE_BYTES, "target file"))
    except OSError as exc:
        raise TargetError(f"cannot read target file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise TargetError(f"target file {path} is not a TOML text file (not UTF-8)") from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise TargetError(f"target file {path} is not valid TOML: {exc}") from None
    return _from_mapping(data, str(path))


def builtin_targets() -> dict[str, Target]:
    """The boards shipped with tinynas, keyed by file stem (e.g. 'stm32f030f4p6')."""
    return dict(_shipped_boards())


@functools.cache
def _shipped_boards() -> tuple[tuple[str, Target], ...]:
    # Read once per process: the package's files do not change under it, and the service's status page resolves
    # its target on every request (parsing the nine files took most of a request's time while searching).
    boards = resources.files("tinynas.cost") / "boards"
    found = []
    for entry in sorted(boards.iterdir(), key=lambda item: item.name):
        if entry.name.endswith(".toml"):
            data = tomllib.loads(entry.read_text(encoding="utf-8"))
            found.append((entry.name[:-5], _from_mapping(data, f"built-in board {entry.name}")))
    return tuple(found)


def _normalise(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def get_target(name: str) -> Target:
    """A built-in target by name (case and punctuation ignored) or a path to a TOML file."""

    name = text_or_path(name, "the target", "a built-in target's name (see `tinynas targets`) or a .toml file")
    if name.endswith(".toml") or Path(name).is_file():
        return load_target_file(name)
    wanted = _normalise(name)
    for key, target in builtin_targets().items():
        if wanted in (_normalise(key), _normalise(target.name)):
            return target
    known = ", ".join(target.name for target in builtin_targets().values())
    raise TargetError(f"unknown target {name!r}; built-in targets: {known} (or give a .toml file)")


def _budget(text: str | int, what: str) -> int:
    """A RAM or flash size (binary multiples) or a MAC count (decimal) as written; a target's error if unreadable."""
    try:
        return parse_count(text, what) if what == "MAC budget" else parse_size(text, what)
    except UnitError as exc:
        raise TargetError(str(exc)) from None


def resolve_target(name: str | None = None, *, ram: str | int | None = None,
                   flash: str | int | None = None, macs: str | int | None = None) -> Target:
    """Target from a name/file, with any of RAM, flash or MAC budget overridden by flags."""
    if name is None:
        if ram is None or flash is None or macs is None:
            raise TargetError("give --target NAME, or all of --ram, --flash and --macs")
        return Target(name="custom", ram_bytes=_budget(ram, "RAM"), flash_bytes=_budget(flash, "flash"),
                      mac_budget=_budget(macs, "MAC budget"), source="command-line budget")
    base = get_target(name)
    return Target(
        name=base.name,
        ram_bytes=_budget(ram, "RAM") if ram is not None else base.ram_bytes,
        flash_bytes=_budget(flash, "flash") if flash is not None else base.flash_bytes,
        mac_budget=_budget(macs, "MAC budget") if macs is not None else base.mac_budget,
        coremark=base.coremark,
        core=base.core,
        clock_mhz=base.clock_mhz,
        runtimes=base.runtimes,
        source=base.source + (" (budget overridden on the command line)" if ram or flash or macs else ""),
    )
