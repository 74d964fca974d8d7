"""The Case Western Reserve University bearing set from its original MATLAB files.

Keys are found by suffix (`_DE_time`, `_FE_time`, `_BA_time`, `RPM`): the prefix is not always the
file number (the 0.028 in files use X048..X059). The normal baselines (97-100.mat) are sampled at
48 kHz while the fault files are 12 kHz; by default they are resampled to 12 kHz (polyphase, 1:4) and
the choice is recorded in the provenance.

Every file belongs to a class (the fault, e.g. "IR007") and a load condition (0-3 hp). Labels are the
class alone, so a model made at 0 hp is evaluated on 1 hp files with the same class names; the load
is the window's session ("0hp", "1hp", ...), the condition a cross-condition split holds out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tinynas.data.signal_files import check_readable, read_mat
from tinynas.data.windows import DataError, Windows, check_size, shown

LOADS_HP = (0, 1, 2, 3)
NOMINAL_RPM = {0: 1797, 1: 1772, 2: 1750, 3: 1730}
FAULT_NAMES = {"IR": "inner_race", "B": "ball", "OR": "outer_race"}


def fault_of(label: str) -> str:
    """The fault a class names: normal, inner_race, ball or outer_race ("IR007" -> inner_race); KeyError for a
    label that is none of the catalogue's."""
    return "normal" if label == "normal" else FAULT_NAMES[label.split("@")[0].rstrip("0123456789")]


@dataclass(frozen=True)
class CwruFile:
    """What the Data Center publishes about one file of the 12 kHz drive-end set (+ normal baselines)."""

    number: int
    label: str  # the class, the same at every load: "normal", "IR007", "OR007@6", ...
    load_hp: int
    sample_rate_hz: float

    @property
    def fault(self) -> str:
        """normal, inner_race, ball or outer_race."""
        return fault_of(self.label)

    @property
    def diameter_in(self) -> float:
        """Fault diameter in inches (0 for normal)."""
        return 0.0 if self.label == "normal" else int(self.label.lstrip("IRBO")[:3]) / 1000

    @property
    def position(self) -> str | None:
        """Outer-race fault position relative to the load zone (@6 centred, @3 orthogonal, @12 opposite)."""
        return "@" + self.label.split("@")[1] if "@" in self.label else None

    @property
    def nominal_rpm(self) -> int:
        """Motor speed the catalogue gives for this file's load."""
        return NOMINAL_RPM[self.load_hp]


# File numbers at loads 0, 1, 2, 3 hp (the Data Center's 12k drive-end page; the normal baselines are
# its 48 kHz "Normal_0..3"). Checked against ../shared/data/cwru*/manifest.csv and a public copy.
_NUMBERS = {
    "normal": (97, 98, 99, 100),
    "IR007": (105, 106, 107, 108), "B007": (118, 119, 120, 121), "OR007@6": (130, 131, 132, 133),
    "OR007@3": (144, 145, 146, 147), "OR007@12": (156, 158, 159, 160),
    "IR014": (169, 170, 171, 172), "B014": (185, 186, 187, 188), "OR014@6": (197, 198, 199, 200),
    "IR021": (209, 210, 211, 212), "B021": (222, 223, 224, 225), "OR021@6": (234, 235, 236, 237),
    "OR021@3": (246, 247, 248, 249), "OR021@12": (258, 259, 260, 261),
    "IR028": (3001, 3002, 3003, 3004), "B028": (3005, 3006, 3007, 3008),
}
CATALOGUE = {number: CwruFile(number, label, load, 48_000.0 if label == "normal" else 12_000.0)
             for label, numbers in _NUMBERS.items() for load, number in zip(LOADS_HP, numbers)}
CLASSES = tuple(_NUMBERS)

FILE_SETS = {
    # The method's public BearingNAS code: 10 classes (97, 105, 118, 130, 144, 156, 169, 185, 209, 222 at 0 hp).
    "bearingnas10": ("normal", "IR007", "B007", "OR007@6", "OR007@3", "OR007@12", "IR014", "B014", "IR021", "B021"),
    # The widely used "12k DE 10-class" set (97, 105, 118, 130, 169, 185, 197, 209, 222, 234 at 0 hp).
    "std10": ("normal", "IR007", "B007", "OR007@6", "IR014", "B014", "OR014@6", "IR021", "B021", "OR021@6"),
}
CHANNELS = {"DE": "_DE_time", "FE": "_FE_time", "BA": "_BA_time"}
TARGET_RATE_HZ = 12_000.0


def number_of(label: str, load_hp: int) -> int:
    """The file number of class `label` at `load_hp`."""
    return _NUMBERS[label][LOADS_HP.index(load_hp)]


def _read_signal(file: Path, channel: str) -> tuple[np.ndarray, str, float | None]:
    """The channel's samples, its key, and the file's own RPM (None when the file has none)."""
    suffix = CHANNELS[channel]
    check_readable(file, "a CWRU .mat file")
    contents = read_mat(file)
    keys = sorted(key for key in contents if key.endswith(suffix))
    if not keys:
        found = ", ".join(sorted(k for k in contents if not k.startswith("__"))) or "none"
        raise DataError(f"{shown(file)}: no channel {channel} (no key ending in {suffix}; keys: {found})")
    own = [key for key in keys if key.startswith(f"X{int(file.stem):03d}")] if file.stem.isdigit() else []
    key = (own or keys)[0]
    value = contents[key]
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iuf":
        raise DataError(f"{shown(file)}: {key} holds {type(value).__name__} {getattr(value, 'dtype', '')}, "
                        f"not numbers (damaged file?)")
    signal = value.astype(np.float64).ravel()
    if signal.size == 0 or not np.isfinite(signal).all():
        raise DataError(f"{shown(file)}: {key} is empty or holds NaN/inf")
    rpm = None
    for name in sorted(k for k in contents if k.endswith("RPM")):
        value = contents[name]
        # A damaged or odd RPM key is not worth refusing the signal for: the nominal speed stands in.
        if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "iuf" \
                and np.isfinite(value).all():
            rpm = float(value.ravel()[0])
            break
    return signal, key, rpm


def _loads(load) -> tuple[int, ...] | None:
    """`load` option -> loads in hp (None: detect from the folder)."""
    if load is None:
        return None
    if isinstance(load, str):
        if load.lower() == "all":
            return LOADS_HP
        raise DataError(f"load={load!r}: give loads in hp (0-3), e.g. load=1 or load=0,1, or load=all")
    loads = (load,) if isinstance(load, int) else tuple(load)
    if not loads or len(set(loads)) != len(loads) or not all(isinstance(v, int) and v in LOADS_HP for v in loads):
        raise DataError(f"load={','.join(map(str, loads))}: give distinct loads in hp among 0, 1, 2, 3 (or load=all)")
    return tuple(sorted(loads))


def _classes(files: str) -> tuple[str, tuple[str, ...]]:
    """A preset name or comma-separated class names -> (the set's name, its classes in order)."""
    if files in FILE_SETS:
        return files, FILE_SETS[files]
    names = tuple(part.strip() for part in files.split(","))
    if len(names) >= 2 and all(name in _NUMBERS for name in names) and len(set(names)) == len(names):
        return files, names
    raise DataError(f"unknown CWRU file set {files!r}; presets: {', '.join(FILE_SETS)} (or a list of numbers, "
                    f"or distinct class names among {', '.join(CLASSES)})")


def _plan(folder: Path, files, load) -> tuple[list[tuple[int, str, str]], tuple[str, ...], list[str]]:
    """Which files to read: [(number, class, session)], the class names in order, and what is missing."""
    if not isinstance(files, str):
        numbers = tuple(files)
        if len(set(numbers)) != len(numbers) or not all(isinstance(n, int) and n >= 0 for n in numbers):
            raise DataError(f"files={','.join(map(str, numbers))}: give distinct file numbers")
        if load is not None:
            raise DataError("give files=NUMBERS or load=..., not both: a file number already fixes its load")
        plan = [(n, CATALOGUE[n].label if n in CATALOGUE else str(n),
                 f"{CATALOGUE[n].load_hp}hp" if n in CATALOGUE else "unknown load") for n in numbers]
        # One class only is refused by Windows, after the files are read (a damaged file is the news).
        return plan, tuple(dict.fromkeys(label for _, label, _ in plan)), []
    set_name, classes = _classes(files)
    loads = _loads(load)
    if loads is None:
        present = [hp for hp in LOADS_HP if any((folder / f"{number_of(c, hp)}.mat").exists() for c in classes)]
        if not present:
            expected = ", ".join(f"{number_of(c, 0)}.mat" for c in classes)
            raise DataError(f"{shown(folder)} holds no file of the CWRU set {set_name} at any load: expected "
                            f"{expected} at 0 hp (or the same classes at 1-3 hp, e.g. {number_of(classes[1], 1)}.mat)")
        if len(present) > 1:
            found = " and ".join(f"{hp} hp" for hp in present)
            raise DataError(f"{shown(folder)} holds files of {set_name} at {found}: "
                            f"choose one with load={' or load='.join(map(str, present))}, or all of them with "
                            f"load={','.join(map(str, present))}")
        loads = tuple(present)
    plan, missing = [], []
    for label in classes:
        for hp in loads:
            number = number_of(label, hp)
            if (folder / f"{number}.mat").exists():
                plan.append((number, label, f"{hp}hp"))
            else:
                missing.append(f"{label} ({number}.mat)" if len(loads) == 1 else f"{label} at {hp} hp ({number}.mat)")
    names = tuple(label for label in classes if any(label == c for _, c, _ in plan))
    if len(names) < 2:
        raise DataError(f"{shown(folder)}: only {len(names)} class(es) of {set_name} at "
                        f"{','.join(map(str, loads))} hp found (missing {', '.join(missing)}); need at least 2")
    return plan, names, missing


def load_cwru(path: str | Path, files: str | tuple[int, ...] = "bearingnas10", channel: str = "FE",
              window: int = 512, hop: int | None = None, windows_per_file: int | None = None,
              resample_normal: bool = True, load: int | tuple[int, ...] | str | None = None) -> Windows:
    """Cut windows from each file of a set at the chosen load(s), labelled by class from the catalogue.

    `files`: a preset (bearingnas10, std10), class names ("IR007,B007") or file numbers (each looked
    up in the catalogue for its class and load). `load`: hp, several (0,1) or "all"; by default the one
    load of the set present in the folder. A preset class whose file is absent is skipped and listed
    in provenance["missing"]; an explicitly numbered file that is absent is an error.
    Class order is the set's, the same at every load. groups = the file; sessions = its load ("1hp");
    time_index = each window's first sample in its recording.
    """
    from scipy.signal import resample_poly

    folder = Path(path)
    if not folder.is_dir():
        raise DataError(f"{shown(folder)} is not a folder of CWRU .mat files")
    channel = channel.upper()
    if channel not in CHANNELS:
        raise DataError(f"unknown CWRU channel {channel!r}; choose DE, FE or BA")
    hop = window if hop is None else hop
    if window < 8 or hop < 1:
        raise DataError(f"window must be >= 8 samples and hop >= 1, got {window} and {hop}")
    if windows_per_file is not None and windows_per_file < 1:
        raise DataError(f"windows_per_file={windows_per_file}: give at least 1 (or leave it out for every window)")
    plan, names, missing = _plan(folder, files, load)
    # Each window keeps its file's number (group) and its load (session) as numpy text.
    texts = max((len(str(number)) + len(session) for number, _, session in plan), default=0)
    if windows_per_file is not None:
        check_size(windows_per_file * len(plan), window, 1, f"cwru:{shown(folder)}",
                   "lower windows_per_file or window", names=texts)
    planned = 0
    x, y, groups, sessions, starts, notes = [], [], [], [], [], {}
    for number, label, session in plan:
        file = folder / f"{number}.mat"
        signal, key, rpm = _read_signal(file, channel)
        known = CATALOGUE.get(number)
        rate = known.sample_rate_hz if known else TARGET_RATE_HZ
        note: dict[str, Any] = {"key": key, "sample_rate_hz": rate, "label": label,
                                "load_hp": known.load_hp if known else None,
                                "rpm": rpm if rpm is not None else (known.nominal_rpm if known else None),
                                "rpm_from": "file" if rpm is not None else ("nominal" if known else "unknown")}
        if rate != TARGET_RATE_HZ and resample_normal:
            factor = int(round(rate / TARGET_RATE_HZ))
            signal = resample_poly(signal, 1, factor)
            note["resampled_to_hz"] = TARGET_RATE_HZ
        count = (len(signal) - window) // hop + 1
        if count < 1:
            raise DataError(f"{shown(file)}: {len(signal)} samples, shorter than one {window}-sample window")
        planned += count if windows_per_file is None else min(count, windows_per_file)
        check_size(planned, window, 1, f"cwru:{shown(folder)}", "raise hop or set windows_per_file", names=texts)
        if windows_per_file is not None:
            if count < windows_per_file:
                hint = ("; it was resampled 48 -> 12 kHz: pass resample=0 to keep the method's 48 kHz samples"
                        if "resampled_to_hz" in note else "")
                raise DataError(f"{shown(file)}: only {count} windows of {window}, {windows_per_file} requested{hint}")
            count = windows_per_file
        begin = np.arange(count) * hop
        with np.errstate(over="ignore"):  # beyond float32: inf, refused by Windows in one line
            x.append(np.stack([signal[s:s + window] for s in begin]).astype(np.float32)[:, :, None])
        y += [names.index(label)] * count
        groups += [str(number)] * count
        sessions += [session] * count
        starts.append(begin)
        notes[str(number)] = note
    conditions: dict[str, dict[str, Any]] = {}
    for number, _, session in plan:
        rpm = notes[str(number)]["rpm"]
        entry = conditions.setdefault(session, {"load_hp": notes[str(number)]["load_hp"], "rpm": []})
        if rpm is not None and rpm not in entry["rpm"]:
            entry["rpm"].append(rpm)
    for entry in conditions.values():
        entry["rpm"].sort()
        if entry["load_hp"] is not None:
            entry["nominal_rpm"] = NOMINAL_RPM[entry["load_hp"]]
    provenance = {"source": "cwru", "path": str(folder), "files": [n for n, _, _ in plan], "channel": channel,
                  "window": window, "hop": hop, "windows_per_file": windows_per_file,
                  "load_hp": sorted({n["load_hp"] for n in notes.values() if n["load_hp"] is not None}),
                  "normal_baseline": ("resampled 48 kHz -> 12 kHz" if resample_normal
                                      else "kept at 48 kHz and treated as 12 kHz (as many papers do)"),
                  "missing": missing, "conditions": conditions, "per_file": notes}
    return Windows(np.concatenate(x), np.array(y), np.array(groups), names, TARGET_RATE_HZ, (channel,),
                   provenance, sessions=np.array(sessions), time_index=np.concatenate(starts))
