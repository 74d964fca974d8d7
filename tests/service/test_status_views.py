"""The status page's views, on real rings, journals and cards."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.protocol import Samples
from firmware_bridge.ring import SampleRing
from tinynas.card import record_section
from tinynas.service.state import Deployed
from tinynas.service.status_views import (
    TRACE_POINTS,
    TRACE_SECONDS,
    channel_levels,
    per_minute,
    served_model,
    trace,
    trials,
)
from tinynas.space import Architecture
from tinynas.study.journal import Journal
from tinynas.trial import Fidelity, Trial, TrialState


def _ring(signal: np.ndarray) -> SampleRing:
    ring = SampleRing(signal.shape[1], 10_000)
    ring.add(Samples(0, signal.astype(np.float32)))
    return ring


def test_the_trace_flags_a_flat_and_a_clipping_channel_as_the_guide_would():
    rng = np.random.default_rng(0)
    signal = np.stack([rng.normal(0, 20, 3000), np.full(3000, 7.0),
                       np.clip(rng.normal(0, 200, 3000), -128, 127)], axis=1)
    view = trace(_ring(signal), 500.0, "int8", rest=[5.0, 5.0, 5.0], channel_names=["flexor", "dead", "loud"])
    flags = {channel["name"]: channel["flag"] for channel in view["channels"]}
    assert flags == {"flexor": "", "dead": "flat", "loud": "clipping"}
    first = view["channels"][0]
    assert len(first["min"]) == len(first["max"]) == TRACE_POINTS
    assert all(low <= high for low, high in zip(first["min"], first["max"]))
    assert abs(first["level"] - 20.0) < 3.0 and first["rest"] == 5.0  # raw RMS of the last half second
    assert len(json.dumps(view)) < 3 * 4000  # small enough to send every second



@pytest.mark.parametrize("samples, scale", [(3000, 100.0), (121, 100.0), (7, 100.0), (1000, 0.3), (500, 30000.0)])
def test_the_trace_envelope_is_each_bucket_s_min_and_max_rounded_to_four_digits(samples, scale):
    # int8-like whole numbers (sent as they are), fractions and five-digit values (rounded to 4 significant digits)
    signal = np.random.default_rng(samples).normal(0, scale, (samples, 2))
    signal = np.round(signal) if scale == 100.0 else signal
    view = trace(_ring(signal), 100.0, "float32")
    kept = signal.astype(np.float32)[-int(TRACE_SECONDS * 100):]  # the last TRACE_SECONDS at 100 Hz
    buckets = np.array_split(kept, min(TRACE_POINTS, len(kept)))
    for c, channel in enumerate(view["channels"]):
        assert channel["min"] == [float(f"{b[:, c].min():.4g}") for b in buckets]
        assert channel["max"] == [float(f"{b[:, c].max():.4g}") for b in buckets]

def test_the_trace_of_an_empty_ring_is_empty_and_levels_wait_for_samples():
    ring = SampleRing(2, 1000)
    assert trace(ring, 100.0, "int16")["channels"] == []
    assert channel_levels(ring, 100.0, 1.0) is None
    ring.add(Samples(0, np.ones((200, 2), np.float32) * 3))
    assert channel_levels(ring, 100.0, 1.0) == [3.0, 3.0]


def test_a_ring_reports_its_recent_samples_with_the_holes_of_a_link_gap():
    ring = SampleRing(1, 100)
    ring.add(Samples(0, np.arange(10, dtype=np.float32)[:, None]))
    ring.add(Samples(15, np.arange(5, dtype=np.float32)[:, None]))  # samples 10-14 were lost
    latest, data, received = ring.recent(20)
    assert latest == 20 and data.shape == (20, 1)
    assert received.tolist() == [True] * 10 + [False] * 5 + [True] * 5
    assert data[received].ravel().tolist() == list(range(10)) + list(range(5))


def test_trials_come_from_the_journal_with_why_a_candidate_was_stopped(tmp_path):
    arch = Architecture(64, 1, 4, k=2, c=1)
    fidelity = Fidelity(epochs=2)
    with Journal(tmp_path / "journal.sqlite") as journal:
        journal.put(Trial(1, arch, fidelity, TrialState.COMPLETE, score=0.5, val_accuracy=(0.5, 0.75),
                          costs={"peak_ram_bytes": 2048}))
        journal.put(Trial(2, Architecture(64, 1, 4, k=2, c=2), fidelity, TrialState.FAILED, error="stopped",
                          costs={"peak_ram_bytes": 2600}, details={"diagnosis": "diverging"}))
        journal.put(Trial(3, Architecture(64, 1, 4, k=2, c=3), fidelity, TrialState.INFEASIBLE,
                          costs={"peak_ram_bytes": 9000}, violations=("RAM 8.8 KiB > 6.0 KiB",)))
    rows = trials(tmp_path)
    assert [(r["name"], r["state"], r["val_accuracy"], r["ram_bytes"]) for r in rows] == [
        ("A(2,1)", "complete", 0.75, 2048), ("A(2,2)", "failed", None, 2600), ("A(2,3)", "infeasible", None, 9000)]
    assert "health monitor" in rows[1]["note"] and "diverging" in rows[1]["note"]
    assert rows[2]["note"] == "RAM 8.8 KiB > 6.0 KiB"
    assert trials(tmp_path / "nowhere") == []
    assert rows[0]["measure"] == "validation"


def test_a_cross_validated_candidate_shows_its_out_of_fold_count(tmp_path):
    """Not the best epoch of its mean fold curve (1.000 on the page while the search said 45 of 48 right)."""
    with Journal(tmp_path / "journal.sqlite") as journal:
        journal.put(Trial(1, Architecture(64, 1, 4, k=2, c=1), Fidelity(epochs=2), TrialState.COMPLETE, score=0.3,
                          val_accuracy=(0.9, 1.0), costs={"peak_ram_bytes": 2048},
                          details={"cross_validation": {"hits": 45, "windows": 48, "folds": 4}}))
    (row,) = trials(tmp_path)
    assert row["val_accuracy"] == round(45 / 48, 4) and row["measure"] == "out-of-fold"


def test_the_served_model_is_read_from_its_card(tmp_path):
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"name": "A(3,2)", "cost_estimate": {"peak_ram_bytes": 4096}, "flash_bytes": 9000,
                                "int8_test_accuracy": 0.93, "classes": ["a", "b"],
                                "input": {"shape": [64, 1], "sample_rate_hz": 100.0}}))
    model = served_model(Deployed("alice", str(tmp_path / "model.tflite"), str(card)))
    assert (model["name"], model["ram_bytes"], model["flash_bytes"], model["classes"]) == ("A(3,2)", 4096, 9000,
                                                                                             ["a", "b"])
    gone = served_model(Deployed("alice", str(tmp_path / "model.tflite"), str(tmp_path / "gone" / "card.json")))
    assert "No such file" in gone["damaged"]
    # A card of the wrong shape is said, not a dead page: the reader checks every section it reads.
    card.write_text(card.read_text().replace('"peak_ram_bytes": 4096', '"peak_ram_bytes": "4096"'))
    os.utime(card, (1, 1))  # a new modification time: the page reads the card again
    damaged = served_model(Deployed("alice", str(tmp_path / "model.tflite"), str(card)))
    assert "'cost_estimate' 'peak_ram_bytes' must be a whole number" in damaged["damaged"]


def test_a_chip_check_recorded_in_the_card_is_shown_and_the_model_keeps_its_time(tmp_path):
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"name": "A(3,2)", "cost_estimate": {"peak_ram_bytes": 4096}, "flash_bytes": 9000,
                                "int8_test_accuracy": 0.93, "classes": ["a", "b"],
                                "input": {"shape": [64, 1], "sample_rate_hz": 100.0}}))
    os.utime(card, (1e9, 1e9))
    deployed = Deployed("alice", str(tmp_path / "model.tflite"), str(card), made=1.7e9)
    assert served_model(deployed)["chip"] is None and served_model(deployed)["made"] == 1.7e9
    record_section(tmp_path, "hil", {"board": "microbit", "checked": 12, "windows": 12, "identical_to_host": 12})
    after = served_model(deployed)  # the card changed: read again, the check shown, the model as old as it was
    assert after["chip"]["identical_to_host"] == 12 and after["made"] == 1.7e9


def test_predictions_per_minute_counts_the_last_sixty_seconds():
    assert per_minute([100.0, 130.0, 159.0, 161.0], now=160.0) == 4
    assert per_minute([100.0, 130.0, 159.0, 161.0], now=200.0) == 2
    # Serving for 39 s at 4 answers a second: 240 a minute, not the 156 of them made so far (a user's walk-through).
    assert per_minute([1000.0 + 0.25 * i for i in range(157)], now=1039.1) == 240


def _timed_card(tmp_path, target: str, latency: float | None) -> str:
    from tinynas.cost.budget import Budget
    from tinynas.cost.targets import get_target

    arch = Architecture(400, 8, 4, k=17, c=3)
    budget = Budget.resolve(get_target(target), "c", latency_seconds=latency)
    cost = budget.estimate(arch)
    card = tmp_path / target / "card.json"
    card.parent.mkdir()
    card.write_text(json.dumps({"name": arch.name(), "cost_estimate": cost.to_dict(), "flash_bytes": 9000,
                                "int8_test_accuracy": 0.93, "classes": ["a", "b", "c", "d"], "runtime": "c",
                                "target": budget.target.to_dict(), "time": budget.time_section(cost),
                                "input": {"shape": [400, 8], "sample_rate_hz": 200.0}}))
    return str(card)


def test_the_page_says_whether_the_served_model_keeps_the_hop_at_the_targets_clock(tmp_path):
    """One inference at the target's clock, its share of the hop and its energy, estimated: said beside the model,
    and said plainly when the chip would fall behind the stream."""
    fast = served_model(Deployed("alice", "m.tflite", _timed_card(tmp_path, "nRF52840", 0.25)), hop_seconds=0.25)
    assert fast["time"]["keeps_hop"] and "keeps the 0.25 s hop" in fast["time"]["words"]
    assert "ms per inference at 64 MHz" in fast["time"]["words"] and "uJ" in fast["time"]["words"]
    assert "searched to keep 250 ms per inference" in fast["time"]["words"]
    slow = served_model(Deployed("bob", "m.tflite", _timed_card(tmp_path, "LSM6DSO16IS", None)), hop_seconds=0.25)
    assert slow["time"]["keeps_hop"] is False and "does NOT keep the 0.25 s hop" in slow["time"]["words"]
    assert "searched without a time budget" in slow["time"]["words"] and "uJ" not in slow["time"]["words"]
    # A card without a target (written by hand) shows the model without a time, and the page lives.
    bare = tmp_path / "bare" / "card.json"
    bare.parent.mkdir()
    bare.write_text(json.dumps({"name": "A(3,2)", "cost_estimate": {"peak_ram_bytes": 4096}, "flash_bytes": 9000,
                                "int8_test_accuracy": 0.93, "classes": ["a", "b"],
                                "input": {"shape": [64, 1], "sample_rate_hz": 100.0}}))
    assert served_model(Deployed("carol", "m.tflite", str(bare)))["time"] is None


def test_the_page_says_what_keeping_the_hop_cost_the_search_and_what_would_open_it(tmp_path):
    from tinynas.cost.budget import Budget
    from tinynas.cost.targets import get_target
    from tinynas.search.base import SearchSpace
    from tinynas.study.time_cost import time_cost

    path = Path(_timed_card(tmp_path, "LSM6DSO16IS", 0.25))
    card = json.loads(path.read_text())
    budget = Budget.resolve(get_target("LSM6DSO16IS"), "c", latency_seconds=0.25)
    card["time"]["space"] = time_cost(budget, SearchSpace(400, 8, 4, max_k=32))
    path.write_text(json.dumps(card))
    words = served_model(Deployed("dan", "m.tflite", str(path)), hop_seconds=0.25)["time"]["words"]
    spent = card["time"]["space"]
    assert f"kept {spent['time']} of the {spent['memory']} architectures its RAM, flash and MAC budgets allow" in words
    assert "(a longer hop) or on a chip" in words
