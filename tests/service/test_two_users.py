"""Two users onboarded through the real service, one after the other, by the simulated person.

alice's plan has a second donning: the person takes the armband off and puts it on again halfway (each electrode's
gain changes), the search validates on the second donning, and her model is served. Then bob is onboarded with the
plain plan: his model is served, alice's stays on disk, `tinynas serve --user alice` brings hers back, and nothing of
either is deleted."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.service_scenario import Scenario
from tinynas.service.runner import request


class TwoUsers(Scenario):
    def __init__(self, root: Path):
        super().__init__(root)
        plan = json.loads((root / "plan.json").read_text())
        (root / "plan.json").write_text(json.dumps({**plan, "repetitions": 4, "donnings": 2}))
        (root / "plain.json").write_text(json.dumps({**plan, "repetitions": 3}))
        # The scenario's signs reach near full scale: a re-don that raised a channel's gain by half would clip it,
        # and the guide would rightly refuse every window until someone lowered the gain (no one here does).
        self.source.redon_spread = 0.1
        # The flow under test is the re-don, the split and the switch; the deploy gate (tested on its own) is opened,
        # and the searches are short: what is checked here holds for any model served (test_service.py checks a
        # served model's predictions), so the two searches need not find a good one.
        text = self.config.read_text()
        self.config.write_text(text.replace("min_accuracy = 0.5", "min_accuracy = 0.0")
                               # One candidate each: any model will do for what is checked.
                               .replace("candidates = 3", "candidates = 1")
                               .replace("epochs = 40\n", "epochs = 8\n")
                               .replace("final_epochs = 60", "final_epochs = 8"))


def _served(run, user: str) -> bool:
    # status.json, rewritten twice a second, follows the state
    return run.state().get("state") == "SERVING" and run.status().get("state") == "SERVING" and \
        run.status().get("deployed", {}).get("user") == user == run.state().get("deployed", {}).get("user")


@pytest.fixture(scope="module")
def donned(tmp_path_factory):
    run = TwoUsers(tmp_path_factory.mktemp("two-users"))
    notes = {}
    try:
        run.start()
        run.wait(lambda: run.status().get("state") == "IDLE", 60, "the service to come up")
        request(run.data, "onboard", user="alice", plan=str(run.root / "plan.json"))
        run.wait(lambda: (run.status().get("collection") or {}).get("redon"), 240, "the request to re-don")
        notes["asked"] = run.status()
        run.wait(lambda: _served(run, "alice"), 600, "alice's model to be served")
        notes["alice"] = run.state()["deployed"]
        notes["alice_windows"] = run.windows_accepted()
        request(run.data, "onboard", user="bob", plan=str(run.root / "plain.json"))
        run.wait(lambda: _served(run, "bob"), 600, "bob's model to be served")
        notes["bob"] = run.state()["deployed"]
        notes["files_before_switch"] = sorted(str(p.relative_to(run.data)) for p in (run.data / "profiles").rglob("*"))
        switched = subprocess.run([sys.executable, "-m", "tinynas.cli", "serve", "--user", "alice", "--config",
                                   str(run.config)], capture_output=True, text=True, timeout=120)
        notes["switch"] = (switched.returncode, switched.stderr)
        run.wait(lambda: _served(run, "alice"), 60, "alice's model to be served again")
        notes["alice_again"] = run.state()["deployed"]
        notes["files_after_switch"] = sorted(str(p.relative_to(run.data)) for p in (run.data / "profiles").rglob("*"))
        yield run, notes
    finally:
        run.close()


@pytest.mark.slow
def test_the_person_is_asked_to_re_don_once_halfway(donned):
    run, notes = donned
    collection = notes["asked"]["collection"]
    assert collection["phase"] == "confirm" and "put it on again" in collection["confirm"]
    assert "--continue" in collection["confirm"] and str(run.config) in collection["confirm"]
    assert collection["accepted"] == 2 * 4  # two rounds of the four classes, then the re-don
    redons = [e for e in map(json.loads, (run.root / "person.jsonl").read_text().splitlines()) if "redon" in e]
    assert len(redons) == 1 and run.source.donnings == 2


@pytest.mark.slow
def test_the_search_validates_on_the_second_donning_and_the_model_is_served(donned):
    _, notes = donned
    card = json.loads(Path(notes["alice"]["card"]).read_text())
    split = card["split"]
    assert split["held_out"] and split["held_out"].endswith("donning 2"), split
    assert [w.get("donning") for w in notes["alice_windows"]] == [1] * 8 + [2] * 8


@pytest.mark.slow
def test_a_second_user_never_displaces_the_first_and_either_can_be_served(donned):
    _, notes = donned
    alice, bob, again = notes["alice"], notes["bob"], notes["alice_again"]
    assert "/profiles/alice/" in alice["model"] and "/profiles/bob/" in bob["model"]
    assert Path(alice["model"]).exists() and Path(bob["model"]).exists()
    assert notes["switch"][0] == 0, notes["switch"]
    assert again["model"] == alice["model"]  # her model, served again without onboarding her again
    assert notes["files_after_switch"] == notes["files_before_switch"]  # a switch deletes and writes nothing there
