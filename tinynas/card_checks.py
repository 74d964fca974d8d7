"""The checks of a card read back: every section's type and range, before anyone reads a key of it.

A model folder is input like any other: copied in, restored from a backup, edited by hand or written by a bug.
Every reader of a card (serving, the page, the firmware bundle, `evaluate`, `adapt`) goes through
`tinynas.card.read_card`, which calls `check_card` here: a section of the wrong type (a `cost_estimate` that is
a string), a number out of range (a false-alarm rate of -1, a threshold of 10^30) or a file name that leaves the
folder (`c_runtime.source = "../../etc/passwd"`) is one line naming the card and the key, and the folder is then
listed as damaged, never served, downloaded or bundled.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

from firmware_bridge.safe_read import plain_name
from tinynas.c_names import is_c_identifier, is_c_prefix
from tinynas.folders import FolderError

MAX_DEPTH = 12
"""Nesting a card never needs (its deepest section is four levels); deeper JSON is not a card."""
MAX_COUNT = 1 << 53
"""The largest whole number a card holds exactly as JSON (bytes, MACs, windows): anything above is damage."""
MAX_MAGNITUDE = 1e15
"""The largest magnitude of any number in a card (a score scale, a loss, a threshold, a time in seconds)."""


class DamagedCard(FolderError):
    """A card.json that cannot be trusted: not JSON, a section of the wrong type or range, a file name that is not
    a plain name in the folder."""


def _short(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**12:
        return f"a {len(str(abs(value)))}-digit number"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _fail(where: str, what: str, value: Any) -> DamagedCard:
    return DamagedCard(f"{where} must be {what}, got {type(value).__name__} {_short(value)}")


def walk_numbers(value: Any, where: str = "the card", depth: int = 0) -> None:
    """Every number anywhere in the card is finite and of sensible size, and nothing is nested beyond
    MAX_DEPTH: what any later reader may safely turn into a float or print."""
    if depth > MAX_DEPTH:
        raise DamagedCard(f"{where} is nested {MAX_DEPTH} levels deep or more: not a card tinynas wrote")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if abs(value) > MAX_COUNT:
            raise DamagedCard(f"{where} holds {_short(value)}, beyond any figure of a model")
        return
    if isinstance(value, float):
        if not (math.isfinite(value) and abs(value) <= MAX_MAGNITUDE):
            raise DamagedCard(f"{where} holds the number {value!r}, beyond any figure of a model")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{where}'s {key!r}" if depth == 0 else f"{where} {key!r}" if depth < 3 else where
            walk_numbers(item, inner, depth + 1)
        return
    if isinstance(value, list):
        for item in value:
            walk_numbers(item, where, depth + 1)
        return
    raise DamagedCard(f"{where} holds a {type(value).__name__}, which JSON does not")  # pragma: no cover


def is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _section(card: dict, key: str, kind: type, required: bool = False) -> Any:
    value = card.get(key)
    if value is None:
        if required:
            raise DamagedCard(f"the card has no {key!r}")
        return None
    if not isinstance(value, kind):
        raise _fail(f"the card's {key!r}", "a JSON object" if kind is dict else f"a {kind.__name__}", value)
    return value


def _unit(card: dict, key: str, where: str = "the card") -> None:
    value = card.get(key)
    if value is not None and not (is_number(value) and 0 <= value <= 1):
        raise _fail(f"{where}'s {key!r}", "a number from 0 to 1", value)


_COST_WORDS = ("abi", "accounting", "basis", "runtime", "time_basis")
"""The words of a cost section (`tinynas.cost.estimate.Cost`); every other value is a count."""


def check_costs(section: dict, where: str) -> None:
    """A cost section (`Cost.to_dict`, a TFLite Micro measurement): counts and words only."""
    for key, value in section.items():
        if key in _COST_WORDS:
            if not isinstance(value, str):
                raise _fail(f"{where} {key!r}", "a word", value)
            continue
        if not is_count(value):
            raise _fail(f"{where} {key!r}", "a whole number of bytes, MACs or parameters", value)


def check_held_out(section: dict, where: str) -> None:
    """An accuracy's count (`tinynas.verdict`): hits of windows (or of recordings, with the windows they hold), the
    interval, per class recall and support."""
    hits, windows = section.get("hits"), section.get("windows")
    if hits is not None or windows is not None:
        if not (is_count(hits) and is_count(windows) and hits <= windows):
            raise DamagedCard(f"{where} must count hits of windows (whole numbers, hits <= windows), got "
                              f"{_short(hits)} of {_short(windows)}")
    unit = section.get("unit")
    if unit is not None:  # a count over the recordings overlapping windows were cut from (tinynas.verdict)
        right, count = section.get("window_hits"), section.get("window_count")
        if unit != "recordings" or not (is_count(right) and is_count(count) and right <= count):
            raise DamagedCard(f"{where} counted over recordings must say so ('unit': 'recordings') with the windows "
                              f"right of those cut ('window_hits' <= 'window_count'), got {_short(unit)}, "
                              f"{_short(right)} of {_short(count)}")
    interval = section.get("interval")
    if interval is not None and not (isinstance(interval, list) and len(interval) == 2
                                     and all(is_number(v) and 0 <= v <= 1 for v in interval)
                                     and interval[0] <= interval[1]):
        raise _fail(f"{where} 'interval'", "[low, high] within 0 to 1", interval)
    _unit(section, "accuracy", where)
    recall = section.get("recall")  # None for a class with no held-out window: nothing was measured
    if recall is not None and not (isinstance(recall, list) and all(v is None or (is_number(v) and 0 <= v <= 1)
                                                                     for v in recall)):
        raise _fail(f"{where} 'recall'", "a list of numbers from 0 to 1 (or null)", recall)
    support = section.get("support")
    if support is not None and not (isinstance(support, list) and all(is_count(v) for v in support)):
        raise _fail(f"{where} 'support'", "a list of window counts", support)
    confusion = section.get("confusion")
    if confusion is not None and not (isinstance(confusion, list) and all(
            isinstance(row, list) and all(is_count(v) for v in row) for row in confusion)):
        raise _fail(f"{where} 'confusion'", "rows of window counts", confusion)


def check_anomaly(section: Any, where: str = "the card's 'anomaly'") -> None:
    """An anomaly scorer's section: a threshold that is a finite number of whole steps, a positive score scale,
    a false-alarm rate strictly between 0 and 1."""
    if not isinstance(section, dict):
        raise _fail(where, "a JSON object", section)
    steps = section.get("threshold_steps")
    if not (isinstance(steps, int) and not isinstance(steps, bool) and abs(steps) <= 1 << 31):
        raise _fail(f"{where} 'threshold_steps'", "a whole number of int8 output steps", steps)
    scale = section.get("score_scale")
    if not (is_number(scale) and 0 < scale <= 1e6):
        raise _fail(f"{where} 'score_scale'", "a positive number", scale)
    threshold = section.get("threshold")
    if threshold is not None and not is_number(threshold):
        raise _fail(f"{where} 'threshold'", "a finite number", threshold)
    rate = section.get("false_alarm_rate")
    if not (is_number(rate) and 0 < rate < 1):
        raise _fail(f"{where} 'false_alarm_rate'", "a rate above 0 and below 1 (0.01 is 1 %)", rate)


def check_c_runtime(section: dict, where: str = "the card's 'c_runtime'") -> None:
    """The generated C runtime's section: file names that are plain names in the model's own folder, C names that
    are C names, sizes that are counts."""
    if section.get("source") is None:
        if not isinstance(section.get("error", ""), str):
            raise _fail(f"{where} 'error'", "a sentence", section.get("error"))
        return
    for key in ("source", "header", "prepare_source"):
        name = section.get(key)
        if (key != "prepare_source" or name is not None) and not plain_name(name):
            raise _fail(f"{where} {key!r}", "a plain file name in the model's folder (no folder part, no '..')",
                        name)
    if not is_c_prefix(section.get("prefix", "tinynas")):
        raise _fail(f"{where} 'prefix'", "a C name", section.get("prefix"))
    for key in ("entry_point", "prepare_function", "score_function", "threshold_macro"):
        name = section.get(key)
        if (key == "entry_point" or name is not None) and not is_c_identifier(name):
            raise _fail(f"{where} {key!r}", "a C name", name)
    for key in ("arena_bytes", "input_bytes", "output_bytes"):
        if not is_count(section.get(key)):
            raise _fail(f"{where} {key!r}", "a whole number of bytes", section.get(key))


def check_hil(section: dict, where: str = "the card's 'hil'") -> None:
    """The last check on a chip (`tinynas hil`): window counts, the counts per inference, the stack, the board."""
    for key in ("windows", "checked", "hits", "identical_to_host", "stack_bytes", "clock_hz", "estimated"):
        value = section.get(key)
        if value is not None and not is_count(value):
            raise _fail(f"{where} {key!r}", "a whole number", value)
    for key in ("median", "p95", "seconds"):
        value = section.get(key)
        if value is not None and not (is_number(value) and value >= 0):
            raise _fail(f"{where} {key!r}", "a count of at least 0", value)
    if section.get("keeps_budget") not in (None, True, False):
        raise _fail(f"{where} 'keeps_budget'", "true, false or null", section.get("keeps_budget"))
    accuracy = section.get("accuracy")
    if accuracy is not None and not (isinstance(accuracy, dict) and accuracy == {} or isinstance(accuracy, dict)
                                     and all(is_count(accuracy.get(key)) for key in ("hits", "windows"))):
        raise _fail(f"{where} 'accuracy'", "a count of hits and windows (or recordings)", accuracy)
    for key in ("board", "counts", "model_hash", "stopped"):
        value = section.get(key, "")
        if not (isinstance(value, str) and len(value) <= 300):
            raise _fail(f"{where} {key!r}", "a short text", value)


def check_quantization(section: dict, where: str = "the card's 'quantization'") -> None:
    for side in ("input", "output"):
        part = section.get(side)
        if part is None:
            continue
        if not isinstance(part, dict):
            raise _fail(f"{where} {side!r}", "a JSON object", part)
        scale, zero = part.get("scale"), part.get("zero_point")
        if not (is_number(scale) and scale > 0):
            raise _fail(f"{where} {side!r} 'scale'", "a positive number", scale)
        if not (isinstance(zero, int) and not isinstance(zero, bool) and -128 <= zero <= 127):
            raise _fail(f"{where} {side!r} 'zero_point'", "an int8 value", zero)


_OBJECTS = ("data", "split", "search", "training_recipe", "final_training", "test_data", "target",
            "measured_arena_host64", "tools", "runtime_choice", "serving", "input", "preprocessing", "selection", "hil",
            "time", "stream")


def check_stream(section: dict, where: str = "the card's 'stream'") -> None:
    """The stream's verdict (`tinynas.deploy.stream.StreamVerdict.to_dict`): counts, shares, latencies."""
    for key in ("signs", "recognised", "sign_windows", "sign_right", "sign_unknown", "idle_windows", "idle_right"):
        if not is_count(section.get(key, 0)):
            raise _fail(f"{where} {key!r}", "a whole number", section.get(key))
    if section.get("recognised", 0) > section.get("signs", 0):
        raise _fail(f"{where} 'recognised'", "at most its signs", section.get("recognised"))
    latencies = section.get("latencies", [])
    if not (isinstance(latencies, list) and all(is_number(v) and v >= 0 for v in latencies)):
        raise _fail(f"{where} 'latencies'", "a list of seconds", latencies)
    if not isinstance(section.get("per_class", {}), dict):
        raise _fail(f"{where} 'per_class'", "an object", section.get("per_class"))


def check_time(section: dict, where: str = "the card's 'time'") -> None:
    """The time budget a model was searched under (`tinynas.cost.budget.Budget.time_section`)."""
    for key in ("latency_seconds", "seconds"):
        value = section.get(key)
        if value is not None and not (is_number(value) and 0 < value <= 1e6):
            raise _fail(f"{where} {key!r}", "a number of seconds above 0", value)
    headroom = section.get("headroom", 1.0)
    if not (is_number(headroom) and 1 <= headroom <= 10):
        raise _fail(f"{where} 'headroom'", "a factor from 1 to 10", headroom)
    if not isinstance(section.get("basis", ""), str):
        raise _fail(f"{where} 'basis'", "a text", section.get("basis"))
    space = section.get("space")
    if space is not None:  # what the budget cost the search (tinynas.study.time_cost)
        if not isinstance(space, dict):
            raise _fail(f"{where} 'space'", "an object", space)
        for key in ("memory", "time"):
            if not is_count(space.get(key)):
                raise _fail(f"{where} 'space' {key!r}", "a whole number of architectures", space.get(key))
        if not (is_number(space.get("all_at_seconds")) and 0 < space["all_at_seconds"] <= 1e6):
            raise _fail(f"{where} 'space' 'all_at_seconds'", "a number of seconds above 0", space.get("all_at_seconds"))


def check_card(card: Any) -> None:
    """Every section a reader uses, for type and range (DamagedCard in one line naming the first at fault)."""
    if not isinstance(card, dict):
        raise _fail("the card", "a JSON object", card)
    walk_numbers(card)
    for key in _OBJECTS:
        _section(card, key, dict)
    for key in ("cost_estimate", "host64_estimate", "measured_arena_host64"):
        if _section(card, key, dict) is not None:
            check_costs(card[key], f"the card's {key!r}")
    for key in ("flash_bytes",):
        if card.get(key) is not None and not is_count(card[key]):
            raise _fail(f"the card's {key!r}", "a whole number of bytes", card[key])
    _unit(card, "int8_test_accuracy")
    _unit(card, "float_test_accuracy")
    seconds = card.get("int8_seconds_per_window")
    if seconds is not None and not (is_number(seconds) and seconds >= 0):
        raise _fail("the card's 'int8_seconds_per_window'", "a number of seconds", seconds)
    if _section(card, "int8_test", dict) is not None:
        check_held_out(card["int8_test"], "the card's 'int8_test'")
    name = card.get("name")
    if name is not None and not (isinstance(name, str) and len(name) <= 200):
        raise _fail("the card's 'name'", "a short text", name)
    if card.get("runtime", "tflm") not in ("tflm", "c"):
        raise _fail("the card's 'runtime'", "tflm or c", card.get("runtime"))
    if card.get("anomaly") is not None:
        check_anomaly(card["anomaly"])
    if _section(card, "c_runtime", dict) is not None:
        check_c_runtime(card["c_runtime"])
    if _section(card, "quantization", dict) is not None:
        check_quantization(card["quantization"])
    history = card.get("history")
    if history is not None and not (isinstance(history, list) and all(isinstance(e, dict) for e in history)):
        raise _fail("the card's 'history'", "a list of changes", history)
    findings = card.get("data_findings")
    if findings is not None and not isinstance(findings, list):
        raise _fail("the card's 'data_findings'", "a list", findings)
    selection = card.get("selection")
    if isinstance(selection, dict):
        confidence, correct = selection.get("confidence", []), selection.get("correct", [])
        if not (isinstance(confidence, list) and isinstance(correct, list) and len(confidence) == len(correct)
                and all(is_number(v) and 0 <= v <= 1 for v in confidence) and all(v in (0, 1) for v in correct)):
            raise _fail("the card's 'selection' answers", "as many confidences (0 to 1) as 0/1 answers", correct)
    if isinstance(card.get("hil"), dict):
        check_hil(card["hil"])
    if isinstance(card.get("time"), dict):
        check_time(card["time"])
    if isinstance(card.get("stream"), dict):
        check_stream(card["stream"])
    serving = card.get("serving")
    if isinstance(serving, dict):
        for key in ("unknown_below", "still_rms"):
            value = serving.get(key)
            if value is not None and not (is_number(value) and value >= 0):
                raise _fail(f"the card's 'serving' {key!r}", "a number of at least 0", value)
        means = serving.get("rest_mean")
        if means is not None and not (isinstance(means, list) and all(is_number(v) for v in means)):
            raise _fail("the card's 'serving' 'rest_mean'", "a list of numbers (each channel's mean at rest)", means)
        if not isinstance(serving.get("still_label", ""), str):
            raise _fail("the card's 'serving' 'still_label'", "a class name", serving.get("still_label"))
        alarm = serving.get("alarm")
        if alarm is not None and not isinstance(alarm, dict):
            raise _fail("the card's 'serving' 'alarm'", "a JSON object", alarm)
