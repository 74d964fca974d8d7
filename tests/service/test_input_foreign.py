"""Clients tinynas did not write (issue 68; tests/support/foreign_clients.py): a sketch printing raw analogRead()
values (0-1023 about an offset of 512) with a banner and a header at every start, the cable pulled once while
recording, goes on to SERVING (the served model reads the same link live); an LSL armband whose outlet is closed and
made again while recording with a second EMG device streaming beside it (`lsl:type=EMG` matches both) is recorded
whole (its subject is the input: the search and serving after it are the ones every input shares, issue 69).
BrainFlow's part: test_input_cyton.py, where BrainFlow's own driver reads a Cyton's 24-bit ADC packets."""

import pytest

from tests.support.foreign_clients import LslArmband
from tests.support.input_journey import check_journey, onboard_through


@pytest.mark.slow
def test_a_raw_adc_sketch_that_resets_with_a_banner_is_onboarded_through(tmp_path):
    notes = onboard_through(tmp_path, "adc")
    check_journey(notes, "text:", 4, 200.0)
    rest = [r for r in notes["records"] if r["label"] == "rest"]
    assert rest, "no rest window recorded"


@pytest.mark.slow
def test_an_lsl_armband_beside_another_emg_device_is_onboarded_through(tmp_path):
    notes = onboard_through(tmp_path, "lsl-foreign", served=False)
    check_journey(notes, "lsl:", 4, 200.0)
    # Every window came from the armband, never from the other device that matches `type=EMG` too.
    assert notes["status"]["device"]["device_id"] == f"lsl:{LslArmband.NAME}"
