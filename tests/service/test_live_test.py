"""The live test counts what the served model answers while each prompted sign is held (clock injected)."""

import random

from tinynas.service import live_test


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_hits_are_counted_from_the_live_smoothed_label_after_settling():
    clock = Clock()
    prompted = []
    lines = []

    def say(line):
        lines.append(line)
        if "perform " in line:
            prompted.append(line.split("perform ")[1].split()[0])

    def status():
        sign = prompted[-1]
        # Right on the first and third sign, wrong on the second; during the settle the label lags (ignored).
        wrong = len(prompted) == 2
        label = "rest" if wrong else sign
        return {"predictions": [{"smoothed": label}], "serving": {"stale": ""}}

    result = live_test.run(status, say, 3, ["fist", "open", "point"], rng=random.Random(0), clock=clock,
                           sleep=clock.sleep)
    assert [asked for asked, _ in result.trials] == prompted
    assert (result.held.hits, result.held.windows) == (2, 3)
    assert "2 of 3 signs" in lines[-1] and "95% interval" in lines[-1]


def test_a_stale_stream_answers_nothing():
    clock = Clock()
    result = live_test.run(lambda: {"predictions": [{"smoothed": "fist"}], "serving": {"stale": "no samples"}},
                           lambda line: None, 2, ["fist"], rng=random.Random(1), clock=clock, sleep=clock.sleep)
    assert result.trials == [("fist", None), ("fist", None)]
