"""A plan with a second donning, through the real service: the simulated person takes the armband off and puts it
on again halfway (each electrode's gain changes), the search validates on the second donning, and the model is
served."""

import json
from pathlib import Path

import pytest

from test_service import Scenario
from tinynas.service.runner import request


class DonningScenario(Scenario):
    def __init__(self, root: Path):
        super().__init__(root)
        plan = json.loads((root / "plan.json").read_text())
        (root / "plan.json").write_text(json.dumps({**plan, "repetitions": 4, "donnings": 2}))
        # The flow under test is the re-don and the split; the deploy gate (tested on its own) is opened.
        self.config.write_text(self.config.read_text().replace("min_accuracy = 0.5", "min_accuracy = 0.0"))


@pytest.fixture(scope="module")
def donned(tmp_path_factory):
    run = DonningScenario(tmp_path_factory.mktemp("donnings"))
    try:
        run.start()
        run.wait(lambda: run.status().get("state") == "IDLE", 60, "the service to come up")
        request(run.data, "onboard", user="alice", plan=str(run.root / "plan.json"))
        run.wait(lambda: (run.status().get("collection") or {}).get("redon"), 240, "the request to re-don")
        asked = run.status()
        run.wait(lambda: run.state().get("state") == "SERVING", 600, "the model to be served")
        # status.json, rewritten twice a second, follows the state
        run.wait(lambda: run.status().get("state") == "SERVING", 30, "the status to say so")
        yield run, asked
    finally:
        run.close()


@pytest.mark.slow
def test_the_person_is_asked_to_re_don_once_halfway(donned):
    run, asked = donned
    collection = asked["collection"]
    assert collection["phase"] == "confirm" and "put it on again" in collection["confirm"]
    assert "--continue" in collection["confirm"] and str(run.config) in collection["confirm"]
    assert collection["accepted"] == 2 * 4  # two rounds of the four classes, then the re-don
    redons = [e for e in map(json.loads, (run.root / "person.jsonl").read_text().splitlines()) if "redon" in e]
    assert len(redons) == 1 and run.source.donnings == 2


@pytest.mark.slow
def test_the_search_validates_on_the_second_donning_and_the_model_is_served(donned):
    run, _ = donned
    deployed = run.state()["deployed"]
    card = json.loads(Path(deployed["card"]).read_text())
    split = card["split"]
    assert split["held_out"] and split["held_out"].endswith("donning 2"), split
    windows = run.windows_accepted()
    assert [w.get("donning") for w in windows] == [1] * 8 + [2] * 8
    assert run.status().get("deployed", {}).get("model") == deployed["model"]
