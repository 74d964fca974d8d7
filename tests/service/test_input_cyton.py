"""The service onboards through an OpenBCI Cyton read by BrainFlow's own driver (`port =
"brainflow:cyton?serial_port=PORT"`, firmware_bridge.cyton_wire on a pty): a simulated person, the dongle pulled once
while recording (BrainFlow's driver says nothing; the link prepares the board again), a model served."""

import pytest

from tests.support.input_journey import check_journey, onboard_through


@pytest.mark.slow
def test_a_cyton_through_brainflow_is_onboarded_through(tmp_path):
    check_journey(onboard_through(tmp_path, "cyton"), "brainflow:cyton", 8, 250.0)
