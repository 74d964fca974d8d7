"""The service onboards through a Lab Streaming Layer stream (`port = "lsl:NAME"`): the simulated armband's outlet,
stamped when pushed; a simulated person; the stream gone for a second while recording (a new epoch when it is
back), every window recorded (a client the product did not write goes on to SERVING: test_input_foreign.py)."""

import pytest

from tests.support.input_journey import check_journey, onboard_through


@pytest.mark.slow
def test_an_lsl_stream_is_onboarded_through(tmp_path):
    check_journey(onboard_through(tmp_path, "lsl", served=False), "lsl:", 4, 200.0)
