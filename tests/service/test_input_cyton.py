"""The service onboards through an OpenBCI Cyton read by BrainFlow's own driver (`port =
"brainflow:cyton?serial_port=PORT"`, firmware_bridge.cyton_wire on a pty): a simulated person, the dongle pulled once
while recording (BrainFlow's driver says nothing; the link prepares the board again), every window recorded (the
input is the subject: a client the product did not write goes on to SERVING in test_input_foreign.py)."""

import pytest

from tests.support.input_journey import check_journey, onboard_through


@pytest.mark.slow
def test_a_cyton_through_brainflow_is_onboarded_through(tmp_path):
    check_journey(onboard_through(tmp_path, "cyton", served=False), "brainflow:cyton", 8, 250.0)
