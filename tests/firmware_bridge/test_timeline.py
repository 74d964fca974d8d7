"""The forward-only sample timeline: a device restart never re-uses an index."""

from firmware_bridge.timeline import EPOCH_GAP, Timeline


def test_a_counter_that_runs_on_keeps_its_indices_and_gaps():
    timeline = Timeline()
    assert timeline.place(0, 16).first == 0
    assert timeline.place(16, 16).first == 16
    placed = timeline.place(100, 16)  # frames lost: a gap, not a reset
    assert (placed.first, placed.reset, placed.epoch) == (100, False, 0)


def test_a_counter_that_goes_back_starts_a_new_epoch_after_everything_placed():
    timeline = Timeline()
    timeline.place(0, 500)
    placed = timeline.place(0, 16)
    assert placed.reset and placed.epoch == 1 and placed.first == 500 + EPOCH_GAP
    assert timeline.place(16, 16).first == 500 + EPOCH_GAP + 16
    again = timeline.place(3, 10)  # a second restart (short-lived power-up)
    assert again.reset and again.epoch == 2 and again.first == 500 + EPOCH_GAP + 32 + EPOCH_GAP


def test_a_resumed_timeline_starts_after_its_end():
    assert Timeline(end=1000).place(0, 16).first == 1000 + EPOCH_GAP
    assert Timeline(end=1000).place(5000, 16).first == 5000  # the device's counter ran past it: kept
