"""The service onboards through a sketch that prints numbers (`port = "csv:PORT?rate=200"`): a simulated person, the
cable pulled once while recording (the sketch starts again with its banner), every window recorded
(a client the product did not write goes on to SERVING: test_input_foreign.py)."""

import pytest

from tests.support.input_journey import check_journey, onboard_through


@pytest.mark.slow
def test_a_printing_sketch_is_onboarded_through(tmp_path):
    check_journey(onboard_through(tmp_path, "text", served=False), "text:", 4, 200.0)
