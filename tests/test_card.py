"""`ModelCard`: the runtime the model's budget was counted for, and `read_card`: every section checked."""

import ast
import json
import os
from pathlib import Path

import pytest

import tinynas
from tinynas.card import ModelCard, read_card, task_of
from tinynas.card_checks import DamagedCard
from tinynas.cost.estimate import estimate
from tinynas.modes import Task
from tinynas.space import Architecture
from tinynas.verdict import HeldOut

OLDER_CARD = {
    "classes": ["a", "b"], "input": {"shape": [64, 1]}, "target": {"name": "STM32F030F4P6"},
    "cost_estimate": {"peak_ram_bytes": 1536}, "host64_estimate": {}, "flash_bytes": 2000,
    "float_test_accuracy": 0.9, "int8_test_accuracy": 0.9, "int8_seconds_per_window": 0.001, "data": {},
    "split": {}, "preprocessing": {}, "test_data": None, "data_findings": [], "search": {},
    "training_recipe": {}, "final_training": {}, "c_runtime": {"arena_bytes": 12},
}


def test_a_card_written_before_runtime_reads_as_tflite_micro():
    card = ModelCard.from_dict(OLDER_CARD)
    assert card.runtime == "tflm"
    assert card.to_dict()["runtime"] == "tflm"
    assert card.c_runtime == {"arena_bytes": 12} and card.extra == {}
    assert card.to_dict()["c_runtime"] == {"arena_bytes": 12}  # the export's section is kept as it is


def test_the_card_records_the_c_runtime():
    card = ModelCard.from_dict({**OLDER_CARD, "runtime": "c"})
    assert card.runtime == "c"
    assert ModelCard.from_dict(card.to_dict()) == card


# ---- read_card: a model folder's card is untrusted input (issue 53) ----------------------------------------------

SOUND = {**OLDER_CARD, "card_schema": 1, "runtime": "c", "name": "A(3,2)", "preprocessing": None,
         "input": {"shape": [64, 1], "sample_rate_hz": 100.0},
         "c_runtime": {"source": "model_compiled.c", "header": "model_compiled.h", "prepare_source": "model_prepare.c",
                       "entry_point": "tinynas_infer", "prefix": "tinynas", "arena_bytes": 12, "input_bytes": 64,
                       "output_bytes": 2},
         "int8_test": {"hits": 9, "windows": 10, "interval": [0.6, 0.98], "recall": [1.0, None],
                       "support": [10, 0], "confusion": [[9, 1], [0, 0]]},
         "quantization": {"input": {"scale": 0.1, "zero_point": -3}, "output": {"scale": 0.2, "zero_point": 5}}}
SCORER = {"threshold": 1.5, "threshold_steps": 15, "score_scale": 0.1, "false_alarm_rate": 0.01}


def _folder(tmp_path, card=None, raw=None):
    (tmp_path / "card.json").write_bytes(raw if raw is not None else json.dumps(card).encode())
    return tmp_path


def test_a_sound_card_reads_back_typed(tmp_path):
    card = read_card(_folder(tmp_path, {**SOUND, "anomaly": SCORER}))
    assert card.c_runtime["source"] == "model_compiled.c" and card.anomaly["threshold_steps"] == 15
    assert card.int8_test["recall"] == [1.0, None]  # a class with no held-out window: nothing measured


def _set(path, value):
    def change(card):
        *parents, key = path.split(".")
        node = card
        for part in parents:
            node = node.setdefault(part, {})
        node[key] = value
    return change


DAMAGE = [
    ("c_runtime.source", "../../etc/passwd", "'source' must be a plain file name"),
    ("c_runtime.header", "/etc/hostname", "'header' must be a plain file name"),
    ("c_runtime.prepare_source", "sub/model_prepare.c", "'prepare_source' must be a plain file name"),
    ("c_runtime.prefix", "int", "'prefix' must be a C name"),
    ("c_runtime.entry_point", "x(); system", "'entry_point' must be a C name"),
    ("cost_estimate", "lots", "'cost_estimate' must be a JSON object, got str"),
    ("cost_estimate", [1, 2], "'cost_estimate' must be a JSON object, got list"),
    ("cost_estimate.peak_ram_bytes", "4096", "'peak_ram_bytes' must be a whole number"),
    ("cost_estimate.peak_ram_bytes", -1, "'peak_ram_bytes' must be a whole number"),
    ("flash_bytes", 10**400, "a 401-digit number, beyond any figure"),
    ("int8_test_accuracy", 1.5, "'int8_test_accuracy' must be a number from 0 to 1"),
    ("int8_test.hits", 11, "hits <= windows"),
    ("int8_test.interval", [0.9, 0.1], "'interval' must be [low, high]"),
    ("runtime", "gpu", "'runtime' must be tflm or c"),
    ("anomaly", [1, 2], "'anomaly' must be a JSON object, got list"),
    ("anomaly.false_alarm_rate", -1, "'false_alarm_rate' must be a rate above 0 and below 1"),
    ("anomaly.false_alarm_rate", 1, "'false_alarm_rate' must be a rate above 0 and below 1"),
    ("anomaly.threshold", 1e30, "beyond any figure of a model"),
    ("anomaly.threshold_steps", 2.5, "'threshold_steps' must be a whole number"),
    ("anomaly.score_scale", 0, "'score_scale' must be a positive number"),
    ("quantization.input.zero_point", 300, "'zero_point' must be an int8 value"),
    ("serving.unknown_below", -2, "'unknown_below' must be a number of at least 0"),
    ("serving.rest_mean", [512.0, "nan"], "'rest_mean' must be a list of numbers"),
    ("history", "yesterday", "'history' must be a list of changes"),
    ("classes", ["a"], "classes"),
    ("input.shape", [64], "'shape' must be [samples, channels]"),
]


@pytest.mark.parametrize("path, value, words", DAMAGE, ids=[f"{path}={value!r}"[:40] for path, value, _ in DAMAGE])
def test_every_section_is_checked_for_type_and_range(tmp_path, path, value, words):
    card = json.loads(json.dumps({**SOUND, "anomaly": SCORER}))
    _set(path, value)(card)
    with pytest.raises(DamagedCard) as info:
        read_card(_folder(tmp_path, card))
    message = str(info.value)
    assert words in message and str(tmp_path / "card.json") in message and "\n" not in message


@pytest.mark.parametrize("raw, words", [
    (b"[" * 100_000 + b"]" * 100_000, "nested far too deep"),
    (b'{"classes": NaN}', "NaN is not a number a card holds"),
    (b'{"classes": Infinity}', "Infinity is not a number"),
    (b'{"a": 1e400}', "beyond any figure"),
    (b"\xff\xfe\x00junk", "not UTF-8"),
    (json.dumps({"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": {"j": {"k": {"l": {"m": 1}}}}}}}}}}}}}).encode(),
     "nested 12 levels deep"),
])
def test_cards_that_are_not_json_a_card_holds_are_one_line(tmp_path, raw, words):
    with pytest.raises(DamagedCard, match=words):
        read_card(_folder(tmp_path, raw=raw))


def test_a_card_that_is_a_link_or_a_fifo_is_refused_without_reading_it(tmp_path):
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps(SOUND))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "card.json").symlink_to(outside)
    with pytest.raises(DamagedCard, match="a symbolic link, which is not followed here"):
        read_card(folder)
    (folder / "card.json").unlink()
    os.mkfifo(folder / "card.json")
    with pytest.raises(DamagedCard, match="a named pipe"):
        read_card(folder)


SECTION_OWNERS = {
    "cost_estimate": {"card.py"},
    "int8_test": {"card.py"},
    "anomaly": {"card.py", "anomaly/section.py", "anomaly/section_changes.py", "study/anomaly_card.py",
                "deploy/export.py"},  # export writes the scorer's threshold into the C runtime it writes
    "preprocessing": {"card.py", "data/preprocess.py", "deploy/export.py"},  # export writes model_prepare.c
    "serving": {"deploy/served.py"},
}
"""The card sections with a typed reader, and the modules that may read them by key (besides `card_checks.py`, which
checks them all): everyone else goes through `ModelCard.cost`, `ModelCard.held_out`, `task_of`, `read_section`,
`Preprocessing.from_card`, `IdleRule.from_card`."""


def _section_reads(source: str) -> list[tuple[int, str]]:
    """(line, key) of every read of a SECTION_OWNERS key from an expression naming a card: `card["key"]` (not as an
    assignment's target) or `card.get("key")`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            base, key = node.value, node.slice
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args):
            base, key = node.func.value, node.args[0]
        else:
            continue
        if isinstance(key, ast.Constant) and key.value in SECTION_OWNERS and "card" in ast.unparse(base).lower():
            found.append((node.lineno, key.value))
    return sorted(found)


def test_typed_card_sections_are_read_by_key_only_by_their_owners():
    package = Path(tinynas.__file__).parent
    found = [f"{path.relative_to(package)}:{line} {key}" for path in sorted(package.rglob("*.py"))
             for line, key in _section_reads(path.read_text())
             if str(path.relative_to(package)) not in SECTION_OWNERS[key] | {"card_checks.py"}]
    assert not found, found


def test_the_section_check_sees_a_read_by_key():
    assert _section_reads('x = model.card["anomaly"]["threshold"]\ncard["anomaly"] = {}\nc = card.get("serving")\n') \
        == [(1, "anomaly"), (3, "serving")]


def test_typed_readers_give_the_cost_the_count_and_the_task(tmp_path):
    cost = estimate(Architecture(64, 1, 2, k=3, c=1), runtime="c")
    card = read_card(_folder(tmp_path, {**SOUND, "cost_estimate": cost.to_dict()}))
    assert card.cost() == cost and card.held_out() == HeldOut(9, 10) and card.task == Task.CLASSIFY
    assert ModelCard.from_dict(OLDER_CARD).held_out() is None  # written before the count was recorded
    assert task_of({**SOUND, "anomaly": SCORER}) == Task.ANOMALY
