"""Target microcontrollers: RAM, flash and MAC budgets as data (built-in boards in `boards/*.toml`), with the clock
and run current that turn a model's cycles into time and energy (`tinynas.cost.latency`, `tinynas.cost.energy`)."""

from __future__ import annotations

import functools
import math
import re
import tomllib
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

from firmware_bridge.safe_read import SETTINGS_FILE_BYTES, read_regular_text
from tinynas.arguments import text_or_path
from tinynas.errors import TinynasError
from tinynas.modes import Runtime
from tinynas.units import MAX_COUNT, MAX_SIZE_BYTES, UnitError, parse_count, parse_latency, parse_size

RUNTIMES = tuple(Runtime)
"""What can run a model on a chip: TFLite Micro's interpreter, or tinynas's generated C. A board file lists the
ones its chip runs; which one a search uses is decided in `tinynas.cost.runtime`."""
MACS_PER_COREMARK = 10_000
"""The method's convention: a target's MAC budget is its CoreMark score x 10^4."""


MAX_CLOCK_MHZ = 10_000.0
"""Above any microcontroller's clock: larger values are typos (Hz written as MHz)."""
MAX_UA_PER_MHZ = 100_000.0
MAX_SUPPLY_V = 50.0


class TargetError(TinynasError, ValueError):
    """A target that does not exist or whose budget is impossible."""


def _positive(value: object, top: float) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
            and 0 < value <= top)


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
    run_ua_per_mhz: float | None = None
    """Supply current while the core runs code, per MHz of clock (None: not published)."""
    supply_v: float | None = None
    """The supply voltage that current was given at."""
    datasheet: str = ""
    """Where the clock and the run current come from (document, table, conditions), or why there is no current."""
    latency_seconds: float | None = None
    """A target file's default time budget per inference (`latency = "250ms"`); the search's --latency wins."""

    def __post_init__(self) -> None:
        for field_name in ("ram_bytes", "flash_bytes", "mac_budget"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise TargetError(f"target {self.name!r}: {field_name} must be a positive integer, got {value!r}")
            if value > (MAX_COUNT if field_name == "mac_budget" else MAX_SIZE_BYTES):
                raise TargetError(f"target {self.name!r}: {field_name} {value:,} is out of range (a typo?)")

    def to_dict(self) -> dict:
        """JSON-ready dict: the budget (`budget_dict`) and the figures that time and energy are counted with."""
        return {**self.budget_dict(), **{key: value for key, value in (
            ("run_ua_per_mhz", self.run_ua_per_mhz), ("supply_v", self.supply_v), ("datasheet", self.datasheet),
            ("latency_seconds", self.latency_seconds)) if value}}

    def budget_dict(self) -> dict:
        """What a search is budgeted with, as journals have always kept it (a resume compares it): the current and
        its source are information, and a search's time budget is its own setting."""
        return {"name": self.name, "ram_bytes": self.ram_bytes, "flash_bytes": self.flash_bytes,
                "mac_budget": self.mac_budget, "coremark": self.coremark, "core": self.core,
                "clock_mhz": self.clock_mhz, "source": self.source,
                **({"runtimes": list(self.runtimes)} if self.runtimes else {})}

    @classmethod
    def from_dict(cls, data: object) -> Target:
        """A target as `to_dict` wrote it (a card's, a journal's): TargetError in one line if it is not one."""
        if not isinstance(data, dict):
            raise TargetError(f"a target must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        if isinstance(values.get("runtimes"), list):
            values["runtimes"] = tuple(values["runtimes"])
        for key in ("name", "core", "source", "datasheet"):
            if key in values and not isinstance(values[key], str):
                raise TargetError(f"target {key} must be text, got {str(values[key])[:40]!r}")
        for key, top in (("clock_mhz", MAX_CLOCK_MHZ), ("run_ua_per_mhz", MAX_UA_PER_MHZ), ("supply_v", MAX_SUPPLY_V),
                         ("latency_seconds", 3600.0)):
            if values.get(key) is not None and not _positive(values[key], top):
                raise TargetError(f"target {key} must be a number above 0 and at most {top:g}, "
                                  f"got {str(values[key])[:40]!r}")
        try:
            return cls(**values)
        except TypeError as exc:
            raise TargetError(f"not a target ({exc})") from None

    def energy_words(self) -> str:
        """'51.6 uA/MHz at 3.0 V (source)' or why there is no figure."""
        if self.run_ua_per_mhz is None:
            return f"run current not known ({self.datasheet or 'the target file gives no run_ua_per_mhz'})"
        volts = f" at {self.supply_v:g} V" if self.supply_v else ""
        return f"run current {self.run_ua_per_mhz:g} uA/MHz{volts} ({self.datasheet or 'from the target file'})"


def _from_mapping(data: dict, origin: str) -> Target:
    if "name" not in data:
        raise TargetError(f"{origin}: missing 'name'")
    known = {"name", "ram_bytes", "flash_bytes", "mac_budget", "coremark", "core", "clock_mhz", "source", "runtimes",
             "run_ua_per_mhz", "supply_v", "datasheet", "latency"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise TargetError(f"{origin}: unknown key(s) {', '.join(unknown)}")
    for key in ("ram_bytes", "flash_bytes"):
        if key not in data:
            raise TargetError(f"{origin}: missing '{key}'")
    for key in ("name", "core", "source", "datasheet"):
        if key in data and not isinstance(data[key], str):
            raise TargetError(f"{origin}: '{key}' must be a string, got {data[key]!r}")
    clock = data.get("clock_mhz")
    if clock is not None and not _positive(clock, MAX_CLOCK_MHZ):
        raise TargetError(f"{origin}: 'clock_mhz' must be a number of MHz above 0 and at most {MAX_CLOCK_MHZ:g}, "
                          f"got {str(clock)[:40]!r}")
    for key, top in (("run_ua_per_mhz", MAX_UA_PER_MHZ), ("supply_v", MAX_SUPPLY_V)):
        if key in data and not _positive(data[key], top):
            raise TargetError(f"{origin}: '{key}' must be a number above 0 and at most {top:g}, "
                              f"got {str(data[key])[:40]!r}")
    latency = None
    if "latency" in data:
        try:
            latency = parse_latency(data["latency"])
        except UnitError as exc:
            raise TargetError(f"{origin}: 'latency': {exc}") from None
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
                  runtimes=tuple(dict.fromkeys(runtimes)), run_ua_per_mhz=data.get("run_ua_per_mhz"),
                  supply_v=data.get("supply_v"), datasheet=data.get("datasheet", ""), latency_seconds=latency)


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
        run_ua_per_mhz=base.run_ua_per_mhz,
        supply_v=base.supply_v,
        datasheet=base.datasheet,
        latency_seconds=base.latency_seconds,
        source=base.source + (" (budget overridden on the command line)" if ram or flash or macs else ""),
    )
