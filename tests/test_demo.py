import json

import pytest

from tinynas.demo import run_demo
from tinynas.trial import Fidelity

EXPECTED_FILES = ("journal.sqlite", "best.json", "model.tflite", "model.c", "model.h", "card.json",
                  "report.md", "trials.png")


@pytest.mark.slow
def test_demo_runs_a_search_and_writes_every_file(tmp_path):
    # A few candidates, not the whole sweep (all 54 of the paper's grid took 55 s of two cores here): bounded by
    # candidates, as a busy machine cannot shorten (a time budget is a race it loses).
    result = run_demo(tmp_path, budget_seconds=7200, fidelity=Fidelity(2, 16, 3e-3),
                      final_fidelity=Fidelity(3, 16, 3e-3), max_candidates=3)
    for name in EXPECTED_FILES:
        assert (tmp_path / name).stat().st_size > 0, name
    card = json.loads((tmp_path / "card.json").read_text())
    assert card["int8_test_accuracy"] == result.card.int8_test_accuracy
    assert 0.0 <= card["int8_test_accuracy"] <= 1.0
    assert card["search"]["trained"] == 3 and card["search"]["max_candidates"] == 3
    assert card["flash_bytes"] == (tmp_path / "model.tflite").stat().st_size
    assert card["cost_estimate"]["peak_ram_bytes"] <= card["target"]["ram_bytes"]
    report = (tmp_path / "report.md").read_text()
    assert "int8" in report and "ms per inference at 48 MHz" in report  # the time on the chip, estimated
