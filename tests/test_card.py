"""`ModelCard`: the runtime the model's budget was counted for."""

from tinynas.card import ModelCard

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
    assert card.extra == {"c_runtime": {"arena_bytes": 12}}  # the export's section is kept as it is


def test_the_card_records_the_c_runtime():
    card = ModelCard.from_dict({**OLDER_CARD, "runtime": "c"})
    assert card.runtime == "c"
    assert ModelCard.from_dict(card.to_dict()) == card
