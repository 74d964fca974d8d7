"""The service onboards through a sketch that prints numbers (`port = "csv:PORT?rate=200"`): a simulated person, the
cable pulled once while recording (the sketch starts again with its banner), a model served."""

import pytest

from tests.support.input_journey import check_journey, onboard_through


@pytest.mark.slow
def test_a_printing_sketch_is_onboarded_through(tmp_path):
    check_journey(onboard_through(tmp_path, "text"), "text:", 4, 200.0)
