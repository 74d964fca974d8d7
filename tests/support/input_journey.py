"""One onboarding through a front-end that is not tinynas's own firmware (plain text on a pty, an OpenBCI Cyton read
by BrainFlow's driver, an LSL outlet): the service, the simulated person and the product's follower as in
test_service.py, the cable pulled once while the person records. Shared by tests/service/test_input_*.py (one file
per input, so that pytest-xdist runs them side by side: each is a minute or two of real time)."""

import json
from pathlib import Path

from firmware_bridge.session_format import window_crc
from tests.support.service_scenario import PLAN_CLASSES, Scenario
from tinynas.data.session import read_stream, read_window_records
from tinynas.service.runner import request

REPETITIONS = 3


def onboard_through(root: Path, wire: str, served: bool = True) -> dict:
    """Onboard through `wire` with one unplug mid-recording; what the tests check, once SERVING (`served`) or once
    every window is recorded and the search started (the input's own journeys: their subject is the input, and a
    client the product did not write goes on to SERVING in test_input_foreign.py)."""
    run = Scenario(root, wire)
    # What is checked is the input, not the search or the deploy gate (their own tests): three repetitions, a short
    # search on one worker with few epochs (two candidates: a time budget is a race against a busy machine, which
    # once finished none in 12 s), and a model served whatever its held-out accuracy.
    plan = run.root / "plan.json"
    plan.write_text(json.dumps({**json.loads(plan.read_text()), "repetitions": REPETITIONS}))
    text = run.config.read_text()
    run.config.write_text(text.replace("candidates = 3", "candidates = 2")
                          .replace("epochs = 40", "epochs = 10").replace("final_epochs = 60", "final_epochs = 20")
                          .replace("workers = 2", "workers = 1").replace("min_accuracy = 0.5", "min_accuracy = 0.0"))
    notes: dict = {"wire": wire, "served": served}
    try:
        run.start()
        run.wait(lambda: run.status().get("state") == "IDLE", 60, "the service to come up")
        if hasattr(run.simulator, "add_decoy"):  # another EMG device on the network once the armband is found
            run.wait(lambda: (run.status().get("device") or {}).get("connected"), 60, "the armband found")
            run.simulator.add_decoy()
        request(run.data, "onboard", user="ann", plan=str(run.root / "plan.json"))
        run.wait(lambda: len(run.windows_accepted()) >= 6, 300, "six windows recorded")
        run.simulator.unplug(1.0)  # the cable pulled; the device comes back restarted
        if served:
            run.wait(lambda: _served(run), 600, "the model to be served")
            run.wait(lambda: run.status().get("predictions"), 60, "live predictions")
        else:
            run.wait(lambda: run.state().get("state") in ("SEARCHING", "SERVING"), 300, "every window recorded")
        # The person's states are those the follower read from the page (it polls every 50 ms, but a step can be
        # busy for seconds: a reaction, an unanswered request on a loaded machine): the test goes on once it saw
        # the last state too, as a person who looks at the page would (CI once read the states before it had).
        last = "SERVING" if served else "SEARCHING"
        run.wait(lambda: last in run.seen_states, 60, f"the person to see {last}")
        status = run.status()
        session = run.session()
        manifest = json.loads((session / "manifest.json").read_text())
        stream = read_stream(session, manifest["channels"])
        records = read_window_records(session)
        notes.update(states=list(run.seen_states), status=status, manifest=manifest, records=records,
                     # each window's samples as written now, against the CRC taken when it was accepted (None:
                     # over a gap, or not on disk)
                     reread=[(stream.window(r["start"], r["length"]), r["crc32"]) for r in records],
                     follower_failed=run.follower_failed)
        return notes
    finally:
        run.close()


def _served(run: Scenario) -> bool:
    state = run.state()
    if state.get("state") == "IDLE" and "SEARCHING" in run.seen_states:  # the onboarding ended without a model
        raise AssertionError(f"the onboarding ended without a model: {state.get('error')}")
    return state.get("state") == "SERVING"


def check_journey(notes: dict, device_id: str, channels: int, rate: float) -> None:
    """What every input must give: the guide's states up to SEARCHING (SERVING where it was waited for), every
    planned window recorded, each read back as it was accepted and none over the gap or the restart the unplug
    left, the device as the input saw it."""
    assert not notes["follower_failed"], notes["follower_failed"]
    states = notes["states"]
    seen = [s for s in ("COLLECTING", "SEARCHING", "SERVING") if s in states]
    assert seen[:2] == ["COLLECTING", "SEARCHING"] and (not notes["served"] or seen[2:] == ["SERVING"]), states
    records = notes["records"]
    assert sorted({r["label"] for r in records}) == sorted(PLAN_CLASSES)
    assert len(records) == len(PLAN_CLASSES) * REPETITIONS
    for samples, crc in notes["reread"]:
        assert samples is not None and window_crc(samples) == crc
    assert max(r["epoch"] for r in records) >= 1, "no window after the device came back restarted"
    device = notes["status"]["device"]
    assert device["device_id"].startswith(device_id) and device["channels"] == channels
    assert device["sample_rate_hz"] == rate
    assert notes["manifest"]["sample_rate_hz"] == rate
    if notes["served"]:
        predictions = notes["status"]["predictions"]
        assert predictions and all(p["label"] in PLAN_CLASSES + ("unknown",) for p in predictions)
